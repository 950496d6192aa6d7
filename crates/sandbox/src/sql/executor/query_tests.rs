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

#[test]
fn order_by_sorts_input_that_is_not_in_order_and_keeps_input_that_is() {
    let (_e, mut s) = shop();
    // A heap keeps insertion order, so the scan's order is the order below.
    ok(
        &mut s,
        "CREATE TABLE h (a int NULL, b varchar(5), c int);
         INSERT INTO h VALUES (3, 'x', 1), (1, 'y', 2), (NULL, 'z', 3), (2, 'w', 4), (1, 'v', 5);
         CREATE TABLE sorted (a int, b int);
         INSERT INTO sorted VALUES (1, 10), (1, 20), (2, 30), (3, 40);",
    );
    let col = |r: Vec<Vec<Value>>, i: usize| -> Vec<Value> {
        r.into_iter().map(|row| row[i].clone()).collect()
    };
    // Key bound to an output column, qualified, and shown twice.
    let r = rows(
        &mut s,
        "SELECT h.a, h.c, h.a AS again FROM h ORDER BY h.a, h.c",
    );
    assert_eq!(
        col(r.clone(), 1),
        vec![int(3), int(2), int(5), int(4), int(1)]
    );
    assert_eq!(col(r, 2), vec![Value::Null, int(1), int(1), int(2), int(3)]);
    // Key bound to a source column that is not shown, descending.
    let r = rows(&mut s, "SELECT c FROM h ORDER BY h.b DESC");
    assert_eq!(col(r, 0), vec![int(3), int(2), int(1), int(4), int(5)]);
    // Rows already in order stay as they are (stable), unsorted ones sort.
    let r = rows(&mut s, "SELECT b FROM sorted ORDER BY a");
    assert_eq!(col(r, 0), vec![int(10), int(20), int(30), int(40)]);
    let r = rows(&mut s, "SELECT b FROM sorted ORDER BY sorted.a DESC");
    assert_eq!(col(r, 0), vec![int(40), int(30), int(10), int(20)]);
    // Expressions and an outer reference still evaluate per row.
    let r = rows(
        &mut s,
        "SELECT c, a * 2 AS d FROM h WHERE a IS NOT NULL ORDER BY -c",
    );
    assert_eq!(col(r, 0), vec![int(5), int(4), int(2), int(1)]);
    let r = rows(
        &mut s,
        "SELECT (SELECT TOP (1) x.c FROM h AS x WHERE x.a = h.a ORDER BY x.c DESC) FROM h WHERE h.a = 1",
    );
    assert_eq!(col(r, 0), vec![int(5), int(5)]);
}

#[test]
fn unknown_and_ambiguous_columns_still_fail_with_their_errors() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE p (k int, v int); CREATE TABLE q (k int, w int);
         INSERT INTO p VALUES (1, 2); INSERT INTO q VALUES (1, 3);",
    );
    let numbers = |s: &mut crate::sql::Session, sql: &str| {
        crate::sql::test_support::error_numbers(&crate::sql::test_support::run(s, sql))
    };
    assert_eq!(
        numbers(&mut s, "SELECT k FROM p JOIN q ON p.k = q.k"),
        vec![209]
    );
    assert_eq!(numbers(&mut s, "SELECT nope FROM p"), vec![207]);
    assert_eq!(numbers(&mut s, "SELECT v FROM p ORDER BY q.k"), vec![4104]);
    // The same through a join that hashes on the key.
    let r = rows(
        &mut s,
        "SELECT p.v, q.w FROM p JOIN q ON p.k = q.k ORDER BY q.w",
    );
    assert_eq!(r, vec![vec![int(2), int(3)]]);
}

#[test]
fn columns_named_only_in_order_by_on_or_subqueries_are_still_read() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE jl (k int, tag int);
         CREATE TABLE jr (k int, extra varchar(10), rank_ int);
         INSERT INTO jl VALUES (1, 10), (2, 20), (3, 30);
         INSERT INTO jr VALUES (1, 'one', 3), (2, 'two', 1), (3, 'three', 2);",
    );
    let r = rows(
        &mut s,
        "SELECT jl.tag FROM jl JOIN jr ON jl.k = jr.k ORDER BY jr.rank_",
    );
    assert_eq!(r, vec![vec![int(20)], vec![int(30)], vec![int(10)]]);
    let r = rows(
        &mut s,
        "SELECT jl.tag FROM jl JOIN jr ON jl.k = jr.k \
         WHERE EXISTS (SELECT 1 FROM jr AS x WHERE x.extra = jr.EXTRA AND x.k > 1) ORDER BY 1",
    );
    assert_eq!(r, vec![vec![int(20)], vec![int(30)]]);
    let r = rows(
        &mut s,
        "SELECT tag FROM jl WHERE k IN (SELECT k FROM jr WHERE extra LIKE 't%') ORDER BY tag DESC",
    );
    assert_eq!(r, vec![vec![int(30)], vec![int(20)]]);
    let r = rows(
        &mut s,
        "SELECT jr.extra, jl.tag FROM jl JOIN jr ON jl.k = jr.k WHERE jl.tag > 15 ORDER BY jl.tag",
    );
    assert_eq!(
        r,
        vec![vec![text("two"), int(20)], vec![text("three"), int(30)]]
    );
}

#[test]
fn a_join_reports_the_leftmost_missing_object_first() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE here (x int); INSERT INTO here VALUES (1);",
    );
    let first_error = |s: &mut crate::sql::Session, sql: &str| {
        crate::sql::test_support::errors(&crate::sql::test_support::run(s, sql))
            .first()
            .map(|e| (e.number, e.message.clone()))
    };
    let (n, msg) = first_error(
        &mut s,
        "SELECT a.x FROM nope_left AS a JOIN nope_right AS b ON a.x = b.x",
    )
    .unwrap();
    assert_eq!(n, 208);
    assert!(msg.contains("nope_left"), "{msg}");
    let (n, msg) = first_error(
        &mut s,
        "SELECT a.x FROM here AS a JOIN here AS b ON a.x = b.x JOIN nope_third AS c ON c.x = a.x",
    )
    .unwrap();
    assert_eq!(n, 208);
    assert!(msg.contains("nope_third"), "{msg}");
    // Joined relations built first still join in order.
    let r = rows(
        &mut s,
        "SELECT a.x, b.x, c.x FROM here AS a JOIN here AS b ON a.x = b.x LEFT JOIN here AS c ON c.x = b.x + 1",
    );
    assert_eq!(r, vec![vec![int(1), int(1), Value::Null]]);
}
