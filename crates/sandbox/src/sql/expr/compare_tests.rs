//! Comparisons, logic and the ordering keys of values.

use crate::sql::expr::test_scope::{check, check_errors, typed};

#[test]
fn comparisons_and_logic() {
    check(&[
        ("1 = 1", "1", "bit"),
        ("1 <> 1", "0", "bit"),
        ("1 != 2", "1", "bit"),
        ("1 < 2", "1", "bit"),
        ("2 <= 2", "1", "bit"),
        ("3 > 2", "1", "bit"),
        ("2 >= 3", "0", "bit"),
        ("1 = NULL", "NULL", "bit"),
        ("n = n", "NULL", "bit"),
        ("'abc' = 'ABC'", "1", "bit"),
        ("'abc' = 'abc   '", "1", "bit"),
        ("' abc' = 'abc'", "0", "bit"),
        ("c = 'AB'", "1", "bit"),
        ("'a' < 'B'", "1", "bit"),
        ("N'É' = 'é'", "1", "bit"),
        ("1.0 = 1", "1", "bit"),
        ("1.50 = 1.5", "1", "bit"),
        ("'10' = 10", "1", "bit"),
        ("'2024-01-02' = CAST('2024-01-02' AS date)", "1", "bit"),
        (
            "CAST('2024-01-02' AS date) < CAST('2024-01-02 00:00:01' AS datetime2)",
            "1",
            "bit",
        ),
        ("0x01 < 0x02", "1", "bit"),
        ("0x0100 > 0x01", "1", "bit"),
        ("1e0 = 1", "1", "bit"),
        ("CAST(0.1 AS float) = 0.1", "1", "bit"),
        ("1 = 1 AND 2 = 2", "1", "bit"),
        ("1 = 1 AND 1 = 2", "0", "bit"),
        ("1 = 1 AND n = 1", "NULL", "bit"),
        ("1 = 2 AND n = 1", "0", "bit"),
        ("n = 1 AND 1 = 2", "0", "bit"),
        ("1 = 1 OR n = 1", "1", "bit"),
        ("n = 1 OR 1 = 1", "1", "bit"),
        ("1 = 2 OR n = 1", "NULL", "bit"),
        ("1 = 2 OR 1 = 2", "0", "bit"),
        ("NOT 1 = 1", "0", "bit"),
        ("NOT n = 1", "NULL", "bit"),
        ("NOT (1 = 2 OR n = 1)", "NULL", "bit"),
        ("n IS NULL", "1", "bit"),
        ("n IS DISTINCT FROM NULL", "0", "bit"),
        ("n IS NOT DISTINCT FROM NULL", "1", "bit"),
        ("i IS DISTINCT FROM NULL", "1", "bit"),
        ("i IS DISTINCT FROM 7", "0", "bit"),
        ("n IS NOT NULL", "0", "bit"),
        ("i IS NULL", "0", "bit"),
        ("i IN (1, 7)", "1", "bit"),
        ("i IN (1, 2)", "0", "bit"),
        ("i IN (1, NULL)", "NULL", "bit"),
        ("i IN (7, NULL)", "1", "bit"),
        ("i NOT IN (1, NULL)", "NULL", "bit"),
        ("i NOT IN (1, 2)", "1", "bit"),
        ("n IN (1, 2)", "NULL", "bit"),
        ("'B' IN ('a', 'b')", "1", "bit"),
        ("i IN (SELECT x FROM t)", "1", "bit"),
        ("3 IN (SELECT x FROM t)", "0", "bit"),
        ("3 NOT IN (SELECT x FROM t)", "1", "bit"),
        ("i BETWEEN 1 AND 7", "1", "bit"),
        ("i BETWEEN 8 AND 9", "0", "bit"),
        ("i NOT BETWEEN 8 AND 9", "1", "bit"),
        ("i BETWEEN 1 AND NULL", "NULL", "bit"),
        ("i BETWEEN 8 AND NULL", "0", "bit"),
        ("EXISTS (SELECT 1)", "1", "bit"),
        ("NOT EXISTS (SELECT 1)", "0", "bit"),
        ("(SELECT 1) + 1", "43", "int"),
    ]);
    check_errors(&[
        ("'abc' = 1", 245),
        ("CAST('2024-01-01' AS date) = 1", 206),
        ("'x' = CAST('2024-01-01' AS date)", 241),
        ("1 AND 1", 4145),
    ]);
}

#[test]
fn compare_and_keys() {
    use crate::sql::expr::{Key, compare, key};
    use std::cmp::Ordering;
    use std::collections::HashSet;
    let cases = [
        ("'abc'", "'ABC  '", Some(Ordering::Equal)),
        ("'a'", "'b'", Some(Ordering::Less)),
        ("1.50", "1.5", Some(Ordering::Equal)),
        ("2", "1.5", Some(Ordering::Greater)),
        ("NULL", "1", None),
        (
            "CAST('2024-01-01 10:00 +02:00' AS datetimeoffset)",
            "CAST('2024-01-01 08:00 +00:00' AS datetimeoffset)",
            Some(Ordering::Equal),
        ),
        ("0x01", "0x0100", Some(Ordering::Less)),
        (
            "CAST('00000000-0000-0000-0000-000000000001' AS uniqueidentifier)",
            "CAST('01000000-0000-0000-0000-000000000000' AS uniqueidentifier)",
            Some(Ordering::Greater),
        ),
    ];
    for (a, b, want) in cases {
        assert_eq!(compare(&typed(a), &typed(b)), Ok(want), "{a} vs {b}");
        if let Some(o) = want {
            assert_eq!(key(&typed(a)).cmp(&key(&typed(b))), o, "key {a} vs {b}");
        }
    }
    let keys: HashSet<Key> = ["'abc'", "'ABC'", "'abc '", "'abd'"]
        .iter()
        .map(|s| key(&typed(s)))
        .collect();
    assert_eq!(keys.len(), 2);
    let nums: HashSet<Key> = ["1", "1.0", "1.00", "CAST(1 AS money)", "2"]
        .iter()
        .map(|s| key(&typed(s)))
        .collect();
    assert_eq!(nums.len(), 2);
    assert!(key(&typed("NULL")) < key(&typed("-5")));
    assert!(key(&typed("-2.5")) < key(&typed("-2")));
    assert_eq!(key(&typed("0e0")), key(&typed("-0e0")));
}
