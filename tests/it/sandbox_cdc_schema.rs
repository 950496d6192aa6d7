//! Change Data Capture metadata and schema changes.
//!
//! - cdc.change_tables, cdc.captured_columns, cdc.index_columns:
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-change-tables-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-captured-columns-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-index-columns-transact-sql>
//! - sys.databases.is_cdc_enabled, sys.tables.is_tracked_by_cdc:
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/enable-and-disable-change-data-capture-sql-server>
//! - cdc.ddl_history and "Handling changes to source tables" (a new column
//!   is not captured by an existing capture instance):
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-ddl-history-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/about-change-data-capture-sql-server>

use crate::support::cdc::{enable_db, lsn_literal, wait_for_capture, wait_until_count};
use crate::support::{TestServer, run, scalar};

#[tokio::test]
async fn enabling_cdc_fills_the_cdc_catalog() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, status nvarchar(20) NOT NULL, amount int NULL)",
    )
    .await
    .expect("create table");
    enable_db(&mut client).await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
         @role_name = NULL, @supports_net_changes = 1",
    )
    .await
    .expect("enable table");

    let db_enabled: Option<bool> = scalar(
        &mut client,
        &format!("SELECT is_cdc_enabled FROM sys.databases WHERE name = N'{db}'"),
    )
    .await;
    assert_eq!(db_enabled, Some(true));
    let tracked: Option<bool> = scalar(
        &mut client,
        "SELECT is_tracked_by_cdc FROM sys.tables WHERE object_id = OBJECT_ID(N'dbo.orders')",
    )
    .await;
    assert_eq!(tracked, Some(true));

    let rows = run(
        &mut client,
        "SELECT capture_instance, supports_net_changes, role_name, index_name \
         FROM cdc.change_tables WHERE source_object_id = OBJECT_ID(N'dbo.orders')",
    )
    .await
    .expect("cdc.change_tables");
    let rows: Vec<_> = rows.into_iter().flatten().collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].get::<&str, _>("capture_instance"),
        Some("dbo_orders"),
        "the default capture instance name is schema_table"
    );
    assert_eq!(rows[0].get::<bool, _>("supports_net_changes"), Some(true));
    assert_eq!(rows[0].get::<&str, _>("role_name"), None);
    assert!(
        rows[0].get::<&str, _>("index_name").is_some(),
        "the primary key"
    );

    let captured = run(
        &mut client,
        "SELECT cc.column_name FROM cdc.captured_columns AS cc \
         JOIN cdc.change_tables AS ct ON ct.object_id = cc.object_id \
         WHERE ct.capture_instance = N'dbo_orders' ORDER BY cc.column_ordinal",
    )
    .await
    .expect("cdc.captured_columns");
    let captured: Vec<String> = captured
        .into_iter()
        .flatten()
        .filter_map(|r| r.get::<&str, _>(0).map(str::to_string))
        .collect();
    assert_eq!(captured, ["id", "status", "amount"]);

    let key: Option<String> = scalar(
        &mut client,
        "SELECT ic.column_name FROM cdc.index_columns AS ic \
         JOIN cdc.change_tables AS ct ON ct.object_id = ic.object_id \
         WHERE ct.capture_instance = N'dbo_orders'",
    )
    .await;
    assert_eq!(key.as_deref(), Some("id"));
}

/// ALTER TABLE on a tracked table lands in cdc.ddl_history once the
/// capture job has read past it; the existing capture instance keeps its
/// column set.
#[tokio::test]
async fn alter_table_on_a_tracked_table_is_recorded_in_ddl_history() {
    let server = TestServer::start().await;
    let mut client = tracked(
        &server,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, status nvarchar(20) NOT NULL)",
        "orders",
    )
    .await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'new')")
        .await
        .expect("insert");
    let before = wait_for_capture(&mut client, "dbo_orders", None, 1).await;

    run(
        &mut client,
        "ALTER TABLE dbo.orders ADD note nvarchar(50) NULL",
    )
    .await
    .expect("alter table");
    run(
        &mut client,
        "INSERT INTO dbo.orders (id, status, note) VALUES (2, N'new', N'hello')",
    )
    .await
    .expect("insert after the DDL");
    let after = wait_for_capture(&mut client, "dbo_orders", Some(&before), 1).await;

    wait_until_count(
        &mut client,
        "SELECT COUNT(*) FROM cdc.ddl_history WHERE source_object_id = OBJECT_ID(N'dbo.orders')",
        "cdc.ddl_history rows for dbo.orders",
        |n| n >= 1,
    )
    .await;
    let rows = run(
        &mut client,
        "SELECT ddl_command, ddl_lsn, ddl_time, required_column_update \
         FROM cdc.ddl_history WHERE source_object_id = OBJECT_ID(N'dbo.orders')",
    )
    .await
    .expect("cdc.ddl_history");
    let rows: Vec<_> = rows.into_iter().flatten().collect();
    assert_eq!(rows.len(), 1, "one DDL statement");
    let command = rows[0].get::<&str, _>("ddl_command").unwrap_or_default();
    assert!(
        command.to_ascii_lowercase().contains("alter table") && command.contains("note"),
        "the statement's text: {command}"
    );
    let ddl_lsn = rows[0]
        .get::<&[u8], _>("ddl_lsn")
        .expect("ddl_lsn")
        .to_vec();
    assert!(
        ddl_lsn > before && ddl_lsn < after,
        "the DDL sits between the changes around it: {} < {} < {}",
        lsn_literal(&before),
        lsn_literal(&ddl_lsn),
        lsn_literal(&after)
    );
    assert!(
        rows[0]
            .get::<chrono::NaiveDateTime, _>("ddl_time")
            .is_some()
    );
    assert_eq!(
        rows[0].get::<bool, _>("required_column_update"),
        Some(false),
        "adding a column changes no captured column's type"
    );

    let captured: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM cdc.captured_columns AS cc \
         JOIN cdc.change_tables AS ct ON ct.object_id = cc.object_id \
         WHERE ct.capture_instance = N'dbo_orders' AND cc.column_name = N'note'",
    )
    .await;
    assert_eq!(captured, Some(0), "the new column is not captured");
    let result = run(
        &mut client,
        &format!(
            "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders({at}, {at}, N'all')",
            at = lsn_literal(&after)
        ),
    )
    .await
    .expect("changes after the DDL");
    let row = result.into_iter().flatten().next().expect("the insert");
    assert!(
        row.columns().iter().all(|c| c.name() != "note"),
        "the capture instance keeps its columns"
    );
    assert_eq!(row.get::<i32, _>("id"), Some(2));
}

/// "Handling changes to source tables": a captured column's data type
/// change is propagated to the change table, so capture loses no data;
/// the change rows from before and after read back with their values.
#[tokio::test]
async fn a_widened_column_reaches_the_change_table_with_every_value() {
    let server = TestServer::start().await;
    let mut client = tracked(
        &server,
        "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL, d nvarchar(10) NULL)",
        "t",
    )
    .await;
    run(&mut client, "INSERT INTO dbo.t VALUES (1, 7, N'a')")
        .await
        .expect("insert");
    let before = wait_for_capture(&mut client, "dbo_t", None, 1).await;
    run(&mut client, "ALTER TABLE dbo.t ALTER COLUMN v bigint NULL")
        .await
        .expect("widen v");
    run(
        &mut client,
        "ALTER TABLE dbo.t ALTER COLUMN d nvarchar(100) NULL",
    )
    .await
    .expect("widen d");
    run(
        &mut client,
        "INSERT INTO dbo.t VALUES (2, 1099511627776, REPLICATE(N'x', 60))",
    )
    .await
    .expect("a value only the new types hold");
    wait_for_capture(&mut client, "dbo_t", Some(&before), 1).await;

    let rows = run(
        &mut client,
        "DECLARE @from binary(10) = sys.fn_cdc_get_min_lsn('dbo_t'), @to binary(10) = sys.fn_cdc_get_max_lsn(); \
         SELECT id, v, d FROM cdc.fn_cdc_get_all_changes_dbo_t(@from, @to, N'all') ORDER BY __$start_lsn",
    )
    .await
    .expect("both change rows read back");
    let rows: Vec<_> = rows.into_iter().flatten().collect();
    let values: Vec<(Option<i32>, Option<i64>, Option<String>)> = rows
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>("id"),
                r.get::<i64, _>("v"),
                r.get::<&str, _>("d").map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        values,
        [
            (Some(1), Some(7), Some("a".to_string())),
            (Some(2), Some(1_099_511_627_776), Some("x".repeat(60))),
        ],
        "the row from before with its value, the new one whole"
    );
    let retyped: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM cdc.ddl_history WHERE source_object_id = OBJECT_ID(N'dbo.t') \
         AND required_column_update = 1",
    )
    .await;
    assert_eq!(retyped, Some(2), "each type change is recorded as one");
}

/// `sp_rename` of a captured column is refused (error 4928: CDC marks it
/// replicated); once no instance captures it, the rename goes through.
#[tokio::test]
async fn a_captured_column_cannot_be_renamed_until_no_instance_captures_it() {
    let server = TestServer::start().await;
    let mut client = tracked(
        &server,
        "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL)",
        "t",
    )
    .await;

    let refused = run(&mut client, "EXEC sp_rename 'dbo.t.v', 'w', 'COLUMN'")
        .await
        .expect_err("a captured column cannot be renamed");
    assert_eq!(
        crate::support::server::server_error(&refused).map(|(code, ..)| code),
        Some(4928),
        "{refused}"
    );

    run(
        &mut client,
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N't', \
         @capture_instance = N'dbo_t'",
    )
    .await
    .expect("disable the instance");
    run(&mut client, "EXEC sp_rename 'dbo.t.v', 'w', 'COLUMN'")
        .await
        .expect("no instance captures it now");
    run(&mut client, "INSERT INTO dbo.t (id, w) VALUES (1, 5)")
        .await
        .expect("the column goes by its new name");
    let renamed: Option<i32> = scalar(&mut client, "SELECT w FROM dbo.t WHERE id = 1").await;
    assert_eq!(renamed, Some(5));
}

/// A scratch database with the table `create` makes (`dbo.<table>`), and
/// that table captured by CDC (no gating role).
async fn tracked(server: &TestServer, create: &str, table: &str) -> crate::support::server::Client {
    let (mut client, _db) = server.scratch_database().await;
    run(&mut client, create).await.expect("create table");
    enable_db(&mut client).await;
    run(
        &mut client,
        &format!(
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', \
             @role_name = NULL"
        ),
    )
    .await
    .expect("enable table");
    client
}
