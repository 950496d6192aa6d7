//! Type changes of captured columns (`ALTER TABLE ... ALTER COLUMN`) and
//! dropped columns, against the sandbox (or `MSSQL_CDC_TEST_URL`): bronze
//! and silver follow a widening without losing a value, a narrowing stops
//! the stream before anything of the new type is written, and a crash at
//! any point of it loses or repeats nothing. Every table is read back
//! through DuckDB's delta extension and compared with
//! `cdc.fn_cdc_get_all_changes_*` and the source table read through
//! tiberius.

use serde_json::Value;
use tiberius::ColumnData;

use crate::support::cdc::{capture_table, wait_until_count};
use crate::support::duckdb::read_delta;
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::StreamFixture;

const TABLE: &str = "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, v int NULL, \
                     d nvarchar(10) NULL, amount decimal(10,2) NULL, x int NULL)";

/// The compared columns.
const COLUMNS: &str = "id, v, d, amount, x";

/// The widening DDL of the acceptance table, one statement each.
const WIDENINGS: [&str; 3] = [
    "ALTER TABLE dbo.orders ALTER COLUMN v bigint NULL",
    "ALTER TABLE dbo.orders ALTER COLUMN d nvarchar(100) NULL",
    "ALTER TABLE dbo.orders ALTER COLUMN amount decimal(18,2) NULL",
];

/// Values only the widened types hold: above 2^31, 60 characters, 16
/// digits before the point.
fn wide_row(id: i32) -> String {
    format!(
        "INSERT INTO dbo.orders (id, v, d, amount, x) VALUES ({id}, 1099511627776, \
         REPLICATE(N'w', 60), 1234567890123456.78, {id})"
    )
}

/// `dbo.orders` with one row and CDC on, and a stream of it with a silver
/// table; bootstrapped.
async fn streamed(server: &TestServer) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, TABLE).await.expect("create table");
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (1, 7, N'seed', 12345678.90, 1)",
    )
    .await
    .expect("seed row");
    capture_table(&mut client, "orders").await;
    let stream = with_silver(StreamFixture::new(server, &db, ""));
    stream.run_once().await.expect("bootstrap");
    (client, stream)
}

fn with_silver(mut stream: StreamFixture) -> StreamFixture {
    let silver = stream.path("silver").display().to_string();
    stream.manifest.push_str(&format!(
        "  silver: {{name: silver.orders, location: \"{silver}\"}}\n"
    ));
    stream
}

/// Runs `sql`, then waits until capture has `rows` more change rows.
async fn change(client: &mut Client, sql: &str, rows: i32) {
    crate::engine_source_changes::change(client, "dbo_orders", sql, rows).await;
}

/// Runs DDL, then waits until capture has recorded it in
/// `cdc.ddl_history` (it does so as its log scan reaches the statement).
async fn ddl(client: &mut Client, sql: &str) {
    const COUNT: &str = "SELECT COUNT(*) FROM cdc.ddl_history \
                         WHERE source_object_id = OBJECT_ID(N'dbo.orders')";
    let before = wait_until_count(client, COUNT, "ddl_history", |_| true).await;
    run(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    wait_until_count(client, COUNT, sql, |n| n > before).await;
}

/// A tiberius value as text (NULL as `None`), the way DuckDB casts it.
fn text(cell: ColumnData<'_>) -> Option<String> {
    match cell {
        ColumnData::U8(v) => v.map(|v| v.to_string()),
        ColumnData::I16(v) => v.map(|v| v.to_string()),
        ColumnData::I32(v) => v.map(|v| v.to_string()),
        ColumnData::I64(v) => v.map(|v| v.to_string()),
        ColumnData::Numeric(v) => v.map(|v| v.to_string()),
        ColumnData::String(v) => v.map(|v| v.to_string()),
        other => panic!("no text for {other:?} in this test"),
    }
}

async fn source_text(client: &mut Client, sql: &str) -> Vec<Vec<Option<String>>> {
    run(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .flatten()
        .map(|row| row.into_iter().map(text).collect())
        .collect()
}

/// The rows of `sql` on the Delta table `dir` as DuckDB reads them, every
/// value cast to text; `None` when DuckDB is not installed here.
async fn duckdb_text(dir: &std::path::Path, sql: &str) -> Option<Vec<Vec<Option<String>>>> {
    let read = read_delta(dir, Some(sql)).await?;
    Some(
        read.query
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|v| match v {
                        Value::Null => None,
                        Value::String(s) => Some(s),
                        other => Some(other.to_string()),
                    })
                    .collect()
            })
            .collect(),
    )
}

/// Bronze's change rows (operation and compared columns) through DuckDB,
/// and the change table's through `fn_cdc_get_all_changes`, in change
/// order: they must be equal.
async fn assert_bronze_is_the_change_table(client: &mut Client, stream: &StreamFixture) {
    let cast = |c: &str| format!("CAST({c} AS VARCHAR)");
    let columns: Vec<String> = COLUMNS.split(", ").map(cast).collect();
    let Some(bronze) = duckdb_text(
        &stream.path("bronze"),
        &format!(
            "SELECT _operation, {} FROM t WHERE _operation <> 'snapshot' \
             ORDER BY _lsn, _seqval, _operation = 'update_after'",
            columns.join(", ")
        ),
    )
    .await
    else {
        return;
    };
    let changes = source_text(
        client,
        &format!(
            "DECLARE @from binary(10) = sys.fn_cdc_get_min_lsn('dbo_orders'), \
             @to binary(10) = sys.fn_cdc_get_max_lsn(); \
             SELECT CASE __$operation WHEN 1 THEN N'delete' WHEN 2 THEN N'insert' \
             WHEN 3 THEN N'update_before' ELSE N'update_after' END, {COLUMNS} \
             FROM cdc.fn_cdc_get_all_changes_dbo_orders(@from, @to, N'all update old') \
             ORDER BY __$start_lsn, __$seqval, __$operation"
        ),
    )
    .await;
    assert_eq!(bronze, changes, "bronze (DuckDB) = the change table");
}

/// Silver through DuckDB equals the source table through tiberius.
async fn assert_silver_is_the_source(client: &mut Client, stream: &StreamFixture) {
    let columns: Vec<String> = COLUMNS
        .split(", ")
        .map(|c| format!("CAST({c} AS VARCHAR)"))
        .collect();
    let Some(silver) = duckdb_text(
        &stream.path("silver"),
        &format!("SELECT {} FROM t ORDER BY id", columns.join(", ")),
    )
    .await
    else {
        return;
    };
    let source = source_text(
        client,
        &format!("SELECT {COLUMNS} FROM dbo.orders ORDER BY id"),
    )
    .await;
    assert_eq!(silver, source, "silver (DuckDB) = the source table");
}

/// The `schema_change` rows' details, oldest first.
async fn schema_changes(stream: &StreamFixture) -> Vec<Value> {
    stream
        .facts_query("SELECT detail FROM t WHERE event = 'schema_change' ORDER BY min_lsn")
        .await
        .into_iter()
        .map(|row| serde_json::from_str(&row[0]).expect("detail is JSON"))
        .collect()
}

async fn widen_everything(client: &mut Client) {
    change(
        client,
        "INSERT INTO dbo.orders VALUES (2, 2147483647, N'before', 99999999.99, 2)",
        1,
    )
    .await;
    for sql in WIDENINGS {
        ddl(client, sql).await;
    }
    change(client, &wide_row(3), 1).await;
    change(
        client,
        "UPDATE dbo.orders SET v = 8589934592, d = REPLICATE(N'u', 100) WHERE id = 2",
        2,
    )
    .await;
}

#[tokio::test]
async fn widened_columns_hold_every_value_in_bronze_and_silver() {
    let server = TestServer::start().await;
    let (mut client, stream) = streamed(&server).await;
    widen_everything(&mut client).await;

    stream
        .run_once()
        .await
        .expect("streams across the widenings");

    if let Some(bronze) = read_delta(&stream.path("bronze"), None).await {
        assert_eq!(bronze.column_type("v"), "BIGINT");
        assert_eq!(bronze.column_type("d"), "VARCHAR");
        assert_eq!(bronze.column_type("amount"), "DECIMAL(18,2)");
        assert_eq!(bronze.column_type("x"), "INTEGER", "untouched");
    }
    if let Some(silver) = read_delta(&stream.path("silver"), None).await {
        assert_eq!(silver.column_type("v"), "BIGINT");
        assert_eq!(silver.column_type("amount"), "DECIMAL(18,2)");
    }
    assert_bronze_is_the_change_table(&mut client, &stream).await;
    assert_silver_is_the_source(&mut client, &stream).await;

    let details = schema_changes(&stream).await;
    let altered: Vec<&Value> = details.iter().map(|d| &d["columns_altered"][0]).collect();
    assert_eq!(
        altered,
        [
            &serde_json::json!({"column": "v", "captured": true, "source_type": "bigint",
                "target_type": "long", "widened_from": "integer"}),
            &serde_json::json!({"column": "d", "captured": true, "source_type": "nvarchar(100)",
                "target_type": "string"}),
            &serde_json::json!({"column": "amount", "captured": true,
                "source_type": "decimal(18,2)", "target_type": "decimal(18,2)",
                "widened_from": "decimal(10,2)"}),
        ],
        "one row per statement, with the types and what the stream did: {details:?}"
    );

    // Streaming on after the widening needs nothing more.
    change(&mut client, &wide_row(4), 1).await;
    stream.run_once().await.expect("streams on");
    assert_bronze_is_the_change_table(&mut client, &stream).await;
    assert_silver_is_the_source(&mut client, &stream).await;
}

#[tokio::test]
async fn a_dropped_column_stays_in_bronze_null_from_then_on() {
    let server = TestServer::start().await;
    let (mut client, stream) = streamed(&server).await;
    change(
        &mut client,
        "INSERT INTO dbo.orders VALUES (2, 2, N'b', 2, 22)",
        1,
    )
    .await;
    ddl(&mut client, "ALTER TABLE dbo.orders DROP COLUMN x").await;
    change(
        &mut client,
        "INSERT INTO dbo.orders (id, v, d, amount) VALUES (3, 3, N'c', 3)",
        1,
    )
    .await;

    stream.run_once().await.expect("streams across the drop");

    let Some(rows) = duckdb_text(
        &stream.path("bronze"),
        "SELECT CAST(id AS VARCHAR), CAST(x AS VARCHAR) FROM t ORDER BY _lsn, _seqval",
    )
    .await
    else {
        return;
    };
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        rows,
        [
            vec![some("1"), some("1")],
            vec![some("2"), some("22")],
            vec![some("3"), None],
        ],
        "x keeps its values before the drop and is NULL after it"
    );
    let details = schema_changes(&stream).await;
    assert_eq!(details.len(), 1, "{details:?}");
    assert_eq!(
        details[0]["columns_dropped"],
        serde_json::json!([{"column": "x", "captured": true}])
    );
    let silver = duckdb_text(
        &stream.path("silver"),
        "SELECT CAST(id AS VARCHAR), CAST(x AS VARCHAR) FROM t ORDER BY id",
    )
    .await
    .expect("DuckDB read bronze, so it reads silver");
    assert_eq!(
        silver,
        [
            vec![some("1"), some("1")],
            vec![some("2"), some("22")],
            vec![some("3"), None],
        ]
    );
}

#[tokio::test]
async fn a_narrowed_column_stops_the_stream_and_a_new_target_loses_nothing() {
    let server = TestServer::start().await;
    let (mut client, stream) = streamed(&server).await;
    ddl(&mut client, WIDENINGS[0]).await;
    change(
        &mut client,
        "INSERT INTO dbo.orders VALUES (2, 5, N'n', 2, 2)",
        1,
    )
    .await;
    stream.run_once().await.expect("follows the widening");
    change(&mut client, "DELETE FROM dbo.orders WHERE id = 2", 1).await;
    let bronze_before = stream.bronze().await;

    // Every change row fits in int, so the change table's column narrows
    // too (one that does not fit would keep bigint, and the stream would
    // go on losing nothing).
    ddl(
        &mut client,
        "ALTER TABLE dbo.orders ALTER COLUMN v int NULL",
    )
    .await;
    change(
        &mut client,
        "INSERT INTO dbo.orders (id, v) VALUES (3, 3)",
        1,
    )
    .await;
    let error = stream.run_once().await.expect_err("a narrowing is refused");
    let message = error.to_string();
    for needle in [
        "column v",
        "int",
        "long",
        "new target",
        "SchemaChangeRefused",
    ] {
        assert!(message.contains(needle), "{needle} in: {message}");
    }
    assert_eq!(error.kind(), "schema_change");
    assert_eq!(
        stream.bronze().await,
        bronze_before,
        "nothing of the new type was written"
    );
    assert!(
        schema_changes(&stream).await.len() == 1,
        "no event row for the refused statement"
    );

    // The remedy: a new stream into new tables, whose snapshot creates
    // them with the new types.
    let mut remedy = with_silver(StreamFixture::new(&server, &db_of(&stream), ""));
    remedy.manifest = remedy
        .manifest
        .replace("appId: it-orders", "appId: it-orders-v2");
    remedy.run_once().await.expect("the new target streams");
    assert_silver_is_the_source(&mut client, &remedy).await;
    if let Some(bronze) = read_delta(&remedy.path("bronze"), None).await {
        assert_eq!(bronze.column_type("v"), "INTEGER");
    }
}

/// The database a fixture's manifest names.
fn db_of(stream: &StreamFixture) -> String {
    stream
        .manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("database: "))
        .expect("the manifest names its database")
        .to_string()
}

/// Each crash point of a widening: the stream is SIGKILLed there, then
/// run to the end; bronze and silver are as if it never crashed.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_crash_anywhere_in_a_widening_loses_and_repeats_nothing() {
    let server = TestServer::start().await;
    for point in [
        "after_widening",
        "after_offsets_of_schema_change",
        "after_bronze_commit_of_schema_change",
    ] {
        let (mut client, stream) = streamed(&server).await;
        widen_everything(&mut client).await;
        crate::engine_crash::run_until_killed(&stream, point).await;
        stream.run_once().await.expect("resumes after the crash");
        assert_bronze_is_the_change_table(&mut client, &stream).await;
        assert_silver_is_the_source(&mut client, &stream).await;
        assert_eq!(schema_changes(&stream).await.len(), 3, "crash at {point}");
    }
}
