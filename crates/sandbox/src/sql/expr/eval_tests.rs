//! The evaluator through the public API: literals, names, LIKE, and
//! result types that do not depend on NULLs.

use crate::sql::expr::test_scope::{check, check_errors, run};

#[test]
fn literals() {
    check(&[
        ("1", "1", "int"),
        ("2147483647", "2147483647", "int"),
        ("2147483648", "2147483648", "decimal(10,0)"),
        ("1.5", "1.5", "decimal(2,1)"),
        ("0.05", "0.05", "decimal(2,2)"),
        ("123.450", "123.450", "decimal(6,3)"),
        ("1e3", "1000", "float"),
        ("'abc'", "abc", "varchar(3)"),
        ("''", "", "varchar(1)"),
        ("'it''s'", "it's", "varchar(4)"),
        ("N'abc'", "abc", "nvarchar(3)"),
        ("0x0A0B", "\n\u{b}", "varbinary(2)"),
        ("CONVERT(varchar(10), 0x0A0B, 1)", "0x0A0B", "varchar(10)"),
        ("NULL", "NULL", "int"),
        ("-1", "-1", "int"),
        ("-1.5", "-1.5", "decimal(2,1)"),
        ("~5", "-6", "int"),
    ]);
    check_errors(&[("123456789012345678901234567890123456789", 1007)]);
}

#[test]
fn names_and_variables() {
    check(&[
        ("i", "7", "int"),
        ("t.i", "7", "int"),
        ("[s]", "Hello", "varchar(10)"),
        ("@v", "x", "nvarchar(20)"),
        ("@@ROWCOUNT", "3", "int"),
        ("@@rowcount + 1", "4", "int"),
    ]);
    check_errors(&[("@nope", 137), ("@@NOPE", 137), ("nope", 207)]);
}

#[test]
fn like_predicate() {
    check(&[
        ("'Hello' LIKE 'h%'", "1", "bit"),
        ("s LIKE '%LL%'", "1", "bit"),
        ("s LIKE 'H_llo'", "1", "bit"),
        ("s LIKE '[gh]ello'", "1", "bit"),
        ("s LIKE '[^h]ello'", "0", "bit"),
        ("s LIKE '[a-z]%'", "1", "bit"),
        ("s NOT LIKE 'x%'", "1", "bit"),
        ("'10%' LIKE '10!%' ESCAPE '!'", "1", "bit"),
        ("'10x' LIKE '10!%' ESCAPE '!'", "0", "bit"),
        ("c LIKE 'ab'", "1", "bit"),
        ("n LIKE '%'", "NULL", "bit"),
        ("i LIKE '7'", "1", "bit"),
    ]);
    check_errors(&[("'a' LIKE 'a' ESCAPE 'xy'", 506)]);
}

#[test]
fn types_do_not_depend_on_nulls() {
    // Each expression evaluated with a NULL operand has the type it has
    // with a value.
    let pairs = [
        ("i + 1", "n + 1"),
        ("i / 2.0", "n / 2.0"),
        ("CAST(i AS varchar(5))", "CAST(n AS varchar(5))"),
        (
            "CASE WHEN i = 7 THEN 1.5 ELSE i END",
            "CASE WHEN n = 7 THEN 1.5 ELSE n END",
        ),
        ("COALESCE(i, 1.5)", "COALESCE(n, 1.5)"),
        ("DATEADD(day, i, dt)", "DATEADD(day, n, dt)"),
        ("LEFT(s, i)", "LEFT(s, n)"),
        ("ROUND(d, i)", "ROUND(d, n)"),
        ("i = 7", "n = 7"),
    ];
    for (a, b) in pairs {
        let (ta, tb) = (run(a).map(|t| t.ty), run(b).map(|t| t.ty));
        assert!(ta.is_ok(), "{a}: {ta:?}");
        assert_eq!(ta, tb, "{a} vs {b}");
    }
}
