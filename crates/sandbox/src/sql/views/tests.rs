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

#[test]
fn sys_indexes_says_which_indexes_are_unique_and_enforced() {
    let (_e, mut s) = shop();
    crate::sql::test_support::ok(
        &mut s,
        "CREATE TABLE dbo.heap (a int NULL, b int NULL)
         CREATE TABLE dbo.nc (a int NOT NULL, b int NOT NULL,
             CONSTRAINT PK_nc PRIMARY KEY NONCLUSTERED (b, a))",
    );
    // Every index of these tables, as SQL Server describes them: a heap is
    // index 0 and never unique; none is disabled, hypothetical or filtered.
    let r = rows(
        &mut s,
        "SELECT t.name, i.index_id, i.type_desc, i.is_unique, i.is_primary_key,
                i.is_unique_constraint, i.is_disabled, i.is_hypothetical, i.has_filter,
                i.filter_definition
         FROM sys.indexes AS i JOIN sys.tables AS t ON t.object_id = i.object_id
         WHERE t.name IN ('heap', 'nc') ORDER BY t.name, i.index_id",
    );
    let f = Value::Bit(false);
    let t = Value::Bit(true);
    let index = |table: &str, id: i32, desc: &str, unique: bool| {
        let mut row = vec![text(table), int(id), text(desc)];
        row.extend([Value::Bit(unique), Value::Bit(unique)]);
        row.extend(std::iter::repeat_n(Value::Bit(false), 4));
        row.push(Value::Null);
        row
    };
    assert_eq!(
        r,
        vec![
            index("heap", 0, "HEAP", false),
            index("nc", 0, "HEAP", false),
            index("nc", 2, "NONCLUSTERED", true),
        ]
    );
    // The engine's query of a table's unique keys (src/source/unique_keys.rs).
    let unique_keys = |table: &str| {
        format!(
            "SELECT i.index_id, i.name, i.is_primary_key, i.is_unique_constraint, c.name
             FROM sys.indexes AS i
             JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id
             JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
             WHERE i.object_id = OBJECT_ID(N'{table}') AND i.is_unique = 1 AND i.has_filter = 0
               AND i.is_disabled = 0 AND i.is_hypothetical = 0 AND ic.is_included_column = 0
             ORDER BY i.index_id, ic.key_ordinal"
        )
    };
    assert_eq!(
        rows(&mut s, &unique_keys("[dbo].[nc]")),
        vec![
            vec![int(2), text("PK_nc"), t.clone(), f.clone(), text("b")],
            vec![int(2), text("PK_nc"), t.clone(), f.clone(), text("a")],
        ],
        "in key order"
    );
    assert_eq!(
        rows(&mut s, &unique_keys("[dbo].[orders]")),
        vec![vec![int(1), text("PK_orders"), t, f, text("id")]]
    );
    assert!(rows(&mut s, &unique_keys("[dbo].[heap]")).is_empty());
}

#[test]
fn performance_counters_count_the_requests_and_logins_clients_send() {
    use crate::sql::request::{CancelToken, LoginRequest, Request};
    use crate::sql::test_support::{engine, result_sets};
    use crate::tds::{Backend, BackendSession};

    let e = engine();
    let request = LoginRequest {
        user: "sa".into(),
        password: "Sa_pass1".into(),
        database: None,
        app_name: "test".into(),
        host_name: "host".into(),
        encrypted: false,
        client_addr: None,
    };
    let mut client = Backend::login(&e, &request).expect("sa logs in");
    let counters =
        "SELECT counter_name, cntr_value FROM sys.dm_os_performance_counters ORDER BY counter_name";
    let read = |client: &mut crate::sql::Session| {
        let out = BackendSession::execute(
            client,
            Request::Batch {
                sql: counters.into(),
            },
            &CancelToken::default(),
        );
        result_sets(&out).remove(0).1
    };
    // The read is itself a request, counted before it runs.
    assert_eq!(
        read(&mut client),
        vec![
            vec![text("Batch Requests/sec"), Value::BigInt(1)],
            vec![text("Logins/sec"), Value::BigInt(1)],
        ]
    );
    // A script's session is not a client's: its batches are not counted.
    let mut script = e.sa_session();
    rows(&mut script, "SELECT 1");
    assert_eq!(read(&mut client)[0][1], Value::BigInt(2));
}
