//! INSERT and UPDATE: defaults, identity and computed columns.

use crate::sql::request::{Output, TransactionEvent};
use crate::sql::test_support::{errors, int_of, ok, rows, run, shop};
use crate::sql::types::{DataType, Value};

#[test]
fn defaults_identity_and_computed_columns() {
    let (_e, mut s) = shop();
    ok(&mut s, "INSERT INTO orders (customer_id) VALUES (3)");
    let r = rows(
        &mut s,
        "SELECT id, amount, doubled FROM orders WHERE customer_id = 3 ORDER BY id",
    );
    assert_eq!(r.len(), 2);
    assert_eq!(int_of(&r[1][0]), 5);
    assert_eq!(
        r[1][1],
        Value::Decimal(crate::sql::types::Decimal::new(0, 2))
    );
    let r = rows(&mut s, "SELECT doubled FROM orders WHERE id = 1");
    let d = crate::sql::expr::convert(
        &crate::sql::expr::Typed::new(
            r[0][0].clone(),
            DataType::Decimal {
                precision: 38,
                scale: 2,
            },
        ),
        DataType::Float,
    );
    assert_eq!(d.ok(), Some(Value::Float(21.0)));
}

#[test]
fn identity_values_are_not_reused_after_rollback() {
    let (_e, mut s) = shop();
    let out = run(
        &mut s,
        "BEGIN TRAN INSERT INTO orders (customer_id) VALUES (1) ROLLBACK",
    );
    assert!(errors(&out).is_empty());
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Transaction(TransactionEvent::Begin { .. })))
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Transaction(TransactionEvent::Rollback { .. })))
    );
    ok(&mut s, "INSERT INTO orders (customer_id) VALUES (1)");
    let r = rows(&mut s, "SELECT MAX(id), COUNT(*) FROM orders");
    assert_eq!(int_of(&r[0][0]), 6);
    assert_eq!(int_of(&r[0][1]), 5);
}
