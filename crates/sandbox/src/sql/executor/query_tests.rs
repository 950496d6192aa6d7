//! Queries: joins, grouping, ordering, TOP, DISTINCT and subqueries.

use crate::sql::test_support::{int, int_of, ok, rows, shop, text};
use crate::sql::types::Value;

#[test]
fn equality_joins_on_key_columns_match_the_nested_loop_results() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE l (k bigint NULL, b varbinary(10) NULL, tag int);
         CREATE TABLE r (k int NULL, b binary(2) NULL, tag int);
         INSERT INTO l VALUES (1, 0x0001, 1), (2, 0x0002, 2), (2, NULL, 3), (NULL, 0x0003, 4), (9, 0x0009, 5);
         INSERT INTO r VALUES (2, 0x0002, 10), (2, 0x0001, 11), (1, NULL, 12), (NULL, 0x0003, 13), (7, 0x0007, 14);",
    );
    // Each join on one column equality (hash join) must give what the same
    // join written as `x + 0 = y` (a nested loop) gives.
    for (kind, hashed, looped) in [
        ("INNER", "l.k = r.k", "l.k + 0 = r.k"),
        ("LEFT", "r.k = l.k", "l.k + 0 = r.k"),
        ("RIGHT", "l.k = r.k", "l.k + 0 = r.k"),
        ("FULL", "l.k = r.k", "l.k + 0 = r.k"),
        ("INNER", "l.b = r.b", "l.b + 0x = r.b"),
        ("LEFT", "(l.b = r.b)", "l.b + 0x = r.b"),
    ] {
        let sql = |on: &str| {
            format!("SELECT l.tag, r.tag FROM l {kind} JOIN r ON {on} ORDER BY l.tag, r.tag")
        };
        let expected = rows(&mut s, &sql(looped));
        assert!(!expected.is_empty(), "{kind} {looped}");
        assert_eq!(
            rows(&mut s, &sql(hashed)),
            expected,
            "{kind} JOIN ON {hashed}"
        );
    }
    // NULL keys never match: 1-1, and 2-2 twice for each of the two 2s.
    let r = rows(&mut s, "SELECT COUNT(*) FROM l JOIN r ON l.k = r.k");
    assert_eq!(r, vec![vec![int(5)]]);
    // A binary(2) value pads to its length, so 0x0001 matches only 0x0001.
    let r = rows(
        &mut s,
        "SELECT l.tag, r.tag FROM l JOIN r ON l.b = r.b ORDER BY 1",
    );
    assert_eq!(
        r,
        vec![
            vec![int(1), int(11)],
            vec![int(2), int(10)],
            vec![int(4), int(13)]
        ]
    );
}

#[test]
fn queries_join_group_order_top_distinct_subqueries() {
    let (_e, mut s) = shop();
    let r = rows(
        &mut s,
        "SELECT c.name, COUNT(*) AS n, SUM(o.amount) AS total
         FROM customers c INNER JOIN orders o ON o.customer_id = c.id
         GROUP BY c.name HAVING COUNT(*) >= 1 ORDER BY total DESC",
    );
    assert_eq!(r.len(), 3);
    assert_eq!(r[0][0], text("Ann"));
    assert_eq!(int_of(&r[0][1]), 2);
    let r = rows(
        &mut s,
        "SELECT c.id, o.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.amount > 8 ORDER BY c.id, 2",
    );
    assert_eq!(r.len(), 4);
    assert_eq!(r[2], vec![int(2), Value::Null]);
    let r = rows(&mut s, "SELECT TOP (2) id FROM customers ORDER BY id DESC");
    assert_eq!(r, vec![vec![int(3)], vec![int(2)]]);
    let r = rows(
        &mut s,
        "SELECT DISTINCT customer_id FROM orders ORDER BY customer_id",
    );
    assert_eq!(r.len(), 3);
    let r = rows(
        &mut s,
        "SELECT name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.amount > 6) ORDER BY name",
    );
    assert_eq!(r, vec![vec![text("Ann")], vec![text("Cid")]]);
    let r = rows(
        &mut s,
        "SELECT name, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS cnt FROM customers c ORDER BY cnt DESC, name",
    );
    assert_eq!(r[0], vec![text("Ann"), int(2)]);
    let r = rows(
        &mut s,
        "SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE amount < 8) ORDER BY 1",
    );
    assert_eq!(r, vec![vec![int(2)], vec![int(3)]]);
    let r = rows(
        &mut s,
        "SELECT x.n FROM (SELECT name AS n, city FROM customers) AS x WHERE x.city IS NULL",
    );
    assert_eq!(r, vec![vec![text("Bob")]]);
    let r = rows(&mut s, "SELECT c.* FROM customers c WHERE c.name = 'ann'");
    assert_eq!(r, vec![vec![int(1), text("Ann"), text("Oslo")]]);
    let r = rows(
        &mut s,
        "SELECT COUNT(*), MIN(id), MAX(name) FROM customers WHERE 1 = 0",
    );
    assert_eq!(r[0][0], int(0));
    assert_eq!(r[0][1], Value::Null);
    let r = rows(
        &mut s,
        "SELECT id FROM customers UNION ALL SELECT id FROM customers WHERE id = 1 ORDER BY 1",
    );
    assert_eq!(r.len(), 4);
    let r = rows(
        &mut s,
        "SELECT a.id, b.id FROM customers a CROSS JOIN customers b WHERE a.id = 1",
    );
    assert_eq!(r.len(), 3);
}
