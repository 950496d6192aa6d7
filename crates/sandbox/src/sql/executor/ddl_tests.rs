//! Table DDL: ALTER TABLE and DROP TABLE.

use crate::sql::test_support::{error_numbers, int, ok, rows, run, shop, text};
use crate::sql::types::Value;

#[test]
fn ddl_alter_and_drop() {
    let (_e, mut s) = shop();
    ok(&mut s, "CREATE SCHEMA sales");
    ok(
        &mut s,
        "CREATE TABLE sales.t (a int NOT NULL PRIMARY KEY CLUSTERED, b varchar(5))",
    );
    ok(
        &mut s,
        "INSERT INTO shop.sales.t (a, b) VALUES (1, 'x'), (2, NULL)",
    );
    ok(
        &mut s,
        "ALTER TABLE sales.t ADD c int NOT NULL DEFAULT 7, d AS a + 1",
    );
    let r = rows(&mut s, "SELECT a, b, c, d FROM sales.t ORDER BY a");
    assert_eq!(r[1], vec![int(2), Value::Null, int(7), int(3)]);
    ok(
        &mut s,
        "ALTER TABLE sales.t ALTER COLUMN b nvarchar(10) NULL",
    );
    ok(&mut s, "ALTER TABLE sales.t DROP COLUMN c");
    let r = rows(
        &mut s,
        "SELECT name FROM sys.columns WHERE object_id = OBJECT_ID('sales.t') ORDER BY column_id",
    );
    assert_eq!(r, vec![vec![text("a")], vec![text("b")], vec![text("d")]]);
    ok(&mut s, "BEGIN TRAN DROP TABLE sales.t ROLLBACK");
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM sales.t"),
        vec![vec![int(2)]]
    );
    ok(&mut s, "DROP TABLE sales.t");
    assert_eq!(
        error_numbers(&run(&mut s, "SELECT * FROM sales.t")),
        vec![208]
    );
    assert_eq!(
        error_numbers(&run(&mut s, "CREATE TABLE customers (x int)")),
        vec![2714]
    );
}
