//! The catalog views describe the tables a session may see.

use crate::sql::test_support::{int, rows, shop, text};
use crate::sql::types::Value;

#[test]
fn catalog_views_describe_tables() {
    let (_e, mut s) = shop();
    let r = rows(
        &mut s,
        "SELECT c.name, c.column_id, c.system_type_id, c.max_length, c.precision, c.scale, c.is_nullable, c.is_identity, c.is_computed
         FROM sys.columns c JOIN sys.tables t ON t.object_id = c.object_id
         WHERE t.name = 'orders' ORDER BY c.column_id",
    );
    assert_eq!(r.len(), 5);
    assert_eq!(r[0][0], text("id"));
    assert_eq!(r[0][2], Value::TinyInt(56));
    assert_eq!(r[0][7], Value::Bit(true));
    assert_eq!(r[2][2], Value::TinyInt(106));
    assert_eq!(r[2][4], Value::TinyInt(10));
    assert_eq!(r[2][5], Value::TinyInt(2));
    assert_eq!(r[4][8], Value::Bit(true));
    let r = rows(
        &mut s,
        "SELECT i.name, i.is_primary_key, ic.key_ordinal, col.name FROM sys.indexes i
         JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id
         JOIN sys.columns col ON col.object_id = ic.object_id AND col.column_id = ic.column_id
         WHERE i.object_id = OBJECT_ID('dbo.orders')",
    );
    assert_eq!(
        r,
        vec![vec![
            text("PK_orders"),
            Value::Bit(true),
            Value::TinyInt(1),
            text("id")
        ]]
    );
    let r = rows(
        &mut s,
        "SELECT definition FROM sys.computed_columns WHERE name = 'doubled'",
    );
    assert_eq!(r.len(), 1);
    let r = rows(
        &mut s,
        "SELECT DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, IS_NULLABLE, ORDINAL_POSITION
         FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'customers' ORDER BY ORDINAL_POSITION",
    );
    assert_eq!(
        r[1],
        vec![text("nvarchar"), int(50), Value::Null, text("NO"), int(2)]
    );
    assert_eq!(r[0][2], Value::TinyInt(10));
    let r = rows(
        &mut s,
        "SELECT name, is_cdc_enabled FROM sys.databases WHERE name = 'shop'",
    );
    assert_eq!(r, vec![vec![text("shop"), Value::Bit(false)]]);
    let r = rows(
        &mut s,
        "SELECT COUNT(*) FROM sys.types WHERE name IN ('int', 'sysname', 'datetime2')",
    );
    assert_eq!(r, vec![vec![int(3)]]);
    let r = rows(
        &mut s,
        "SELECT s.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id WHERE t.name = 'orders'",
    );
    assert_eq!(r, vec![vec![text("dbo")]]);
}
