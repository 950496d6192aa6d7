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

use crate::support::cdc::{binary, capture_table, lsn_literal, wait_until_count};
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
    drop_x(&mut client).await;
    stream.run_once().await.expect("streams across the drop");
    assert_drop_followed(&mut client, &stream).await;
}

/// `v` widened to bigint and followed by the stream, with a row in it.
async fn widened_and_streamed(client: &mut Client, stream: &StreamFixture) {
    ddl(client, WIDENINGS[0]).await;
    change(
        client,
        "INSERT INTO dbo.orders VALUES (2, 5, N'n', 2, 2)",
        1,
    )
    .await;
    stream.run_once().await.expect("follows the widening");
}

/// `v` narrowed back to int, then a row. Returns whether the change
/// table's column narrowed too: the sandbox narrows it when every change
/// row fits, and keeps bigint otherwise. Whether SQL Server carries a
/// narrowing into the change table is the server's to decide, so the
/// tests read the change table rather than assume (on a real server
/// either outcome must lose nothing).
async fn narrow_v(client: &mut Client) -> bool {
    ddl(client, "ALTER TABLE dbo.orders ALTER COLUMN v int NULL").await;
    change(client, "INSERT INTO dbo.orders (id, v) VALUES (3, 3)", 1).await;
    let types = source_text(
        client,
        "SELECT t.name FROM sys.columns AS c \
         JOIN sys.types AS t ON t.user_type_id = c.user_type_id \
         WHERE c.object_id = OBJECT_ID(N'cdc.dbo_orders_CT') AND c.name = N'v'",
    )
    .await;
    match types.first().and_then(|row| row.first()).cloned().flatten() {
        Some(name) => name == "int",
        None => panic!("the change table cdc.dbo_orders_CT has no column v"),
    }
}

/// A narrowing the change table did not take: nothing changed for the
/// stream, which goes on in the wider type and loses nothing.
async fn assert_a_kept_type_streams_on(client: &mut Client, stream: &StreamFixture) {
    stream
        .run_once()
        .await
        .expect("the change table kept its type: the stream goes on");
    assert_bronze_is_the_change_table(client, stream).await;
    assert_silver_is_the_source(client, stream).await;
}

/// The remedy of a refused narrowing: a new stream into new tables, whose
/// snapshot creates them with the new types, holds the source table.
async fn assert_a_new_target_holds_the_table(
    server: &TestServer,
    client: &mut Client,
    stream: &StreamFixture,
) {
    let mut remedy = with_silver(StreamFixture::new(server, &db_of(stream), ""));
    remedy.manifest = remedy
        .manifest
        .replace("appId: it-orders", "appId: it-orders-v2");
    remedy.run_once().await.expect("the new target streams");
    assert_silver_is_the_source(client, &remedy).await;
    if let Some(bronze) = read_delta(&remedy.path("bronze"), None).await {
        assert_eq!(bronze.column_type("v"), "INTEGER");
    }
}

#[tokio::test]
async fn a_narrowed_column_stops_the_stream_and_a_new_target_loses_nothing() {
    let server = TestServer::start().await;
    let (mut client, stream) = streamed(&server).await;
    widened_and_streamed(&mut client, &stream).await;
    change(&mut client, "DELETE FROM dbo.orders WHERE id = 2", 1).await;
    let bronze_before = stream.bronze().await;

    if !narrow_v(&mut client).await {
        return assert_a_kept_type_streams_on(&mut client, &stream).await;
    }
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
    assert_a_new_target_holds_the_table(&server, &mut client, &stream).await;
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

/// The columns compared across a rename of `v` to `w`.
const RENAMED_COLUMNS: &str = "id, v, w, d, amount, x";

/// `cdc.fn_cdc_get_all_changes_<instance>` as bronze spells its rows: the
/// operation and `columns` (which may name NULL for a column the instance
/// lacks), in change order.
async fn all_changes(
    client: &mut Client,
    instance: &str,
    columns: &str,
) -> Vec<Vec<Option<String>>> {
    source_text(
        client,
        &format!(
            "DECLARE @from binary(10) = sys.fn_cdc_get_min_lsn('{instance}'), \
             @to binary(10) = sys.fn_cdc_get_max_lsn(); \
             SELECT CASE __$operation WHEN 1 THEN N'delete' WHEN 2 THEN N'insert' \
             WHEN 3 THEN N'update_before' ELSE N'update_after' END, {columns} \
             FROM cdc.fn_cdc_get_all_changes_{instance}(@from, @to, N'all update old') \
             ORDER BY __$start_lsn, __$seqval, __$operation"
        ),
    )
    .await
}

/// Bronze's change rows across a rename, through DuckDB, in change order.
async fn bronze_renamed(stream: &StreamFixture) -> Option<Vec<Vec<Option<String>>>> {
    let columns: Vec<String> = RENAMED_COLUMNS
        .split(", ")
        .map(|c| format!("CAST({c} AS VARCHAR)"))
        .collect();
    duckdb_text(
        &stream.path("bronze"),
        &format!(
            "SELECT _operation, {} FROM t WHERE _operation <> 'snapshot' \
             ORDER BY _lsn, _seqval, _operation = 'update_after'",
            columns.join(", ")
        ),
    )
    .await
}

/// What a DBA does to rename a captured column `v` of `dbo.orders` to `w`:
/// SQL Server refuses `sp_rename` while a capture instance captures it
/// (error 4928), so the instance is disabled, the column renamed, and a
/// new instance enabled; `while_off` runs while no instance captures the
/// table. Returns the new instance's start LSN.
async fn rename_v_to_w(client: &mut Client, while_off: &[&str]) -> Vec<u8> {
    let refused = run(client, "EXEC sp_rename N'dbo.orders.v', N'w', N'COLUMN'")
        .await
        .expect_err("a captured column cannot be renamed");
    assert!(refused.to_string().contains("REPLICATED"), "{refused}");
    let disable = "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', \
                   @source_name = N'orders', @capture_instance = N'dbo_orders'";
    let rename = "EXEC sp_rename N'dbo.orders.v', N'w', N'COLUMN'";
    let enable = "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', \
                  @source_name = N'orders', @role_name = NULL, @capture_instance = N'dbo_orders_v2'";
    let steps = [disable, rename]
        .into_iter()
        .chain(while_off.iter().copied());
    for sql in steps.chain([enable]) {
        run(client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    binary(
        client,
        "SELECT start_lsn FROM cdc.change_tables WHERE capture_instance = N'dbo_orders_v2'",
    )
    .await
    .expect("the new instance's start_lsn")
}

/// A streamed `dbo.orders` whose column `v` is renamed to `w` through a
/// new capture instance (`rename_v_to_w`) after the stream read the old
/// instance to its end, with changes on both sides of it. Returns the
/// old instance's changes (read before its change table went) and the
/// new instance's start LSN.
async fn renamed(stream: &StreamFixture, client: &mut Client) -> (Changes, Vec<u8>) {
    change(
        client,
        "INSERT INTO dbo.orders VALUES (2, 20, N'b', 2, 2)",
        1,
    )
    .await;
    change(client, "UPDATE dbo.orders SET v = 21 WHERE id = 2", 2).await;
    stream.run_once().await.expect("reads the first instance");
    let old_changes = all_changes(
        client,
        "dbo_orders",
        "id, v, CAST(NULL AS int), d, amount, x",
    )
    .await;
    let v2_start = rename_v_to_w(client, &[]).await;
    for (sql, rows) in [
        (
            "INSERT INTO dbo.orders (id, w, d, amount, x) VALUES (3, 30, N'c', 3, 3)",
            1,
        ),
        ("UPDATE dbo.orders SET w = 22 WHERE id = 2", 2),
    ] {
        crate::engine_source_changes::change(client, "dbo_orders_v2", sql, rows).await;
    }
    (old_changes, v2_start)
}

/// Rows of text, as both sides of a comparison are read.
type Changes = Vec<Vec<Option<String>>>;

/// After the rename: bronze holds both instances' change rows once each
/// (`v` up to the switch, `w` from it on), and silver every row of the
/// source with its value under the new name, `w`, whether or not it
/// changed since; `v` keeps the value of rows unchanged since the switch.
async fn assert_rename_followed(client: &mut Client, stream: &StreamFixture, old: Changes) {
    let Some(bronze) = bronze_renamed(stream).await else {
        return;
    };
    let mut changes = old;
    changes.extend(
        all_changes(
            client,
            "dbo_orders_v2",
            "id, CAST(NULL AS int), w, d, amount, x",
        )
        .await,
    );
    assert_eq!(bronze, changes, "bronze (DuckDB) = both change tables");

    let silver = duckdb_text(
        &stream.path("silver"),
        "SELECT CAST(id AS VARCHAR), CAST(w AS VARCHAR), CAST(d AS VARCHAR), \
         CAST(amount AS VARCHAR), CAST(x AS VARCHAR) FROM t ORDER BY id",
    )
    .await
    .expect("DuckDB read bronze, so it reads silver");
    let source = source_text(
        client,
        "SELECT id, w, d, amount, x FROM dbo.orders ORDER BY id",
    )
    .await;
    assert_eq!(silver, source, "silver (DuckDB) = the source table");
    // A row unchanged since the rename has its value in both; one written
    // after it in w only, v NULL.
    let names = duckdb_text(
        &stream.path("silver"),
        "SELECT CAST(v AS VARCHAR), CAST(w AS VARCHAR) FROM t ORDER BY id",
    )
    .await
    .expect("DuckDB reads silver");
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        names,
        [
            vec![some("7"), some("7")],
            vec![None, some("22")],
            vec![None, some("30")],
        ]
    );
}

/// The `capture_instance_switched` and `data_skipped` rows (event,
/// min_lsn, capture_instance, detail), in that order.
async fn switch_rows(stream: &StreamFixture) -> Vec<Vec<String>> {
    stream
        .facts_query(
            "SELECT event, min_lsn, capture_instance, detail FROM t \
             WHERE event IN ('capture_instance_switched', 'data_skipped') ORDER BY event",
        )
        .await
}

/// The rename row of issue 32: the stream reads the old instance to its
/// end, the DBA renames `v` to `w` through a new capture instance, and the
/// stream moves to it at its start LSN. The gap between the instances is
/// reported through `onDataLoss` (`fail` stops, naming the disabled
/// instance; `skip` records it), `w` is added to bronze and silver, `v`
/// stays (NULL from then on), and the switch row's detail names the rename
/// by `column_id`. Nothing read from either instance is lost or repeated.
#[tokio::test]
async fn a_column_renamed_through_a_new_capture_instance_is_followed_at_its_start() {
    let server = TestServer::start().await;
    let (mut client, mut stream) = streamed(&server).await;
    let (old_changes, v2_start) = renamed(&stream, &mut client).await;
    const ROWS: &str = "SELECT _lsn, _seqval, _operation FROM t ORDER BY _lsn, _seqval, _operation";
    let bronze_before = stream.bronze_query(ROWS).await;

    // onDataLoss: fail (the default) stops: the stream cannot tell that
    // nothing changed while no instance captured the table.
    let error = stream
        .run_once()
        .await
        .expect_err("the gap between the instances is data loss under fail");
    assert_eq!(error.kind(), "data_loss");
    let message = error.to_string();
    for needle in [
        "dbo_orders was disabled",
        "dbo_orders_v2",
        "onDataLoss: skip",
    ] {
        assert!(message.contains(needle), "{needle} in: {message}");
    }
    // A run opens with the table's newest instance, so bronze may have
    // gained its columns; no row was written.
    assert_eq!(
        stream.bronze_query(ROWS).await,
        bronze_before,
        "nothing was written"
    );

    // The DBA knows nothing changed in between: skip records the gap.
    stream.manifest.push_str("  onDataLoss: skip\n");
    stream.run_once().await.expect("moves to the new instance");

    let events = switch_rows(&stream).await;
    assert_eq!(events.len(), 2, "{events:?}");
    let (switch, skipped) = (&events[0], &events[1]);
    assert_eq!(switch[0], "capture_instance_switched");
    assert_eq!(
        switch[1],
        lsn_literal(&v2_start),
        "switched at the exact LSN"
    );
    assert_eq!(switch[2], "dbo_orders_v2");
    let column_id = source_text(
        &mut client,
        "SELECT column_id FROM sys.columns WHERE object_id = OBJECT_ID(N'dbo.orders') \
         AND name = N'w'",
    )
    .await[0][0]
        .clone()
        .expect("w has a column_id");
    let detail: Value = serde_json::from_str(&switch[3]).expect("detail is JSON");
    assert_eq!(detail["from_capture_instance"], "dbo_orders");
    assert_eq!(
        detail["from_columns"],
        serde_json::json!(["id", "v", "d", "amount", "x"])
    );
    assert_eq!(
        detail["to_columns"],
        serde_json::json!(["id", "w", "d", "amount", "x"])
    );
    assert_eq!(
        detail["renamed_columns"],
        serde_json::json!([{"from": "v", "to": "w",
            "column_id": column_id.parse::<i64>().expect("an int")}])
    );
    assert_eq!(detail["from_disabled"], true);
    assert_eq!(skipped[0], "data_skipped");
    let gap: Value = serde_json::from_str(&skipped[3]).expect("detail is JSON");
    assert_eq!(gap["resumed_at_lsn"], lsn_literal(&v2_start));

    assert_rename_followed(&mut client, &stream, old_changes).await;
}

/// DROP COLUMN x between two inserts, each waited for.
async fn drop_x(client: &mut Client) {
    change(
        client,
        "INSERT INTO dbo.orders VALUES (2, 2, N'b', 2, 22)",
        1,
    )
    .await;
    ddl(client, "ALTER TABLE dbo.orders DROP COLUMN x").await;
    change(
        client,
        "INSERT INTO dbo.orders (id, v, d, amount) VALUES (3, 3, N'c', 3)",
        1,
    )
    .await;
}

/// After `drop_x`: x keeps its values before the drop and is NULL after it,
/// in bronze and silver, and one `schema_change` row lists it.
async fn assert_drop_followed(client: &mut Client, stream: &StreamFixture) {
    assert_bronze_is_the_change_table(client, stream).await;
    let details = schema_changes(stream).await;
    assert_eq!(details.len(), 1, "{details:?}");
    assert_eq!(
        details[0]["columns_dropped"],
        serde_json::json!([{"column": "x", "captured": true}])
    );
    let some = |s: &str| Some(s.to_string());
    let expected = [
        vec![some("1"), some("1")],
        vec![some("2"), some("22")],
        vec![some("3"), None],
    ];
    let Some(rows) = duckdb_text(
        &stream.path("bronze"),
        "SELECT CAST(id AS VARCHAR), CAST(x AS VARCHAR) FROM t ORDER BY _lsn, _seqval",
    )
    .await
    else {
        return;
    };
    assert_eq!(
        rows, expected,
        "x keeps its values before the drop and is NULL after it"
    );
    let silver = duckdb_text(
        &stream.path("silver"),
        "SELECT CAST(id AS VARCHAR), CAST(x AS VARCHAR) FROM t ORDER BY id",
    )
    .await
    .expect("DuckDB read bronze, so it reads silver");
    assert_eq!(silver, expected);
}

/// Each crash point of the batch that reads past a DROP COLUMN: the
/// stream is SIGKILLed there, then run to the end; bronze and silver are
/// as if it never crashed.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_crash_at_a_dropped_columns_batch_loses_and_repeats_nothing() {
    let server = TestServer::start().await;
    for point in [
        "after_offsets_of_schema_change",
        "after_bronze_commit_of_schema_change",
    ] {
        let (mut client, stream) = streamed(&server).await;
        drop_x(&mut client).await;
        crate::engine_crash::run_until_killed(&stream, point).await;
        stream.run_once().await.expect("resumes after the crash");
        assert_drop_followed(&mut client, &stream).await;
    }
}

/// A batch planned before a narrowing and killed before it was written is
/// refused on replay like any batch after it: nothing of the narrowed type
/// is written, and the remedy (a new target) still holds the table.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_batch_killed_before_a_narrowing_is_not_written_in_the_narrowed_type() {
    let server = TestServer::start().await;
    let (mut client, stream) = streamed(&server).await;
    widened_and_streamed(&mut client, &stream).await;
    let bronze_before = stream.bronze().await;
    change(&mut client, "DELETE FROM dbo.orders WHERE id = 2", 1).await;
    crate::engine_crash::run_until_killed(&stream, "after_offsets").await;

    if !narrow_v(&mut client).await {
        return assert_a_kept_type_streams_on(&mut client, &stream).await;
    }
    let error = stream
        .run_once()
        .await
        .expect_err("the replayed batch is refused too");
    assert_eq!(error.kind(), "schema_change", "{error}");
    assert_eq!(stream.bronze().await, bronze_before, "nothing was written");
    assert_a_new_target_holds_the_table(&server, &mut client, &stream).await;
}

/// Each crash point of the batch that moves to the renamed column's new
/// instance: after the restart, both instances' rows are in bronze once
/// each, and the switch and the gap are recorded once.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_crash_at_the_switch_after_a_rename_loses_and_repeats_nothing() {
    let server = TestServer::start().await;
    // before_silver_commit: after silver took the renamed values, before
    // the switch batch's MERGE.
    for point in [
        "after_offsets_of_switch",
        "after_bronze_commit_of_switch",
        "before_silver_commit",
    ] {
        let (mut client, mut stream) = streamed(&server).await;
        stream.manifest.push_str("  onDataLoss: skip\n");
        let (old_changes, v2_start) = renamed(&stream, &mut client).await;
        crate::engine_crash::run_until_killed(&stream, point).await;
        stream.run_once().await.expect("resumes after the crash");
        let events = switch_rows(&stream).await;
        assert_eq!(events.len(), 2, "crash at {point}: {events:?}");
        assert_eq!(events[0][1], lsn_literal(&v2_start), "crash at {point}");
        assert_rename_followed(&mut client, &stream, old_changes).await;
    }
}

/// Bronze committed a batch in the old type and the worker died before
/// silver applied it; the column is widened before the restart. The replay
/// widens both tables first, then silver applies that older bronze commit
/// (its files still in the old type) into the widened table.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn silver_applies_a_bronze_commit_written_before_a_widening() {
    let server = TestServer::start().await;
    let (mut client, stream) = streamed(&server).await;
    change(
        &mut client,
        "INSERT INTO dbo.orders VALUES (2, 2147483647, N'before', 99999999.99, 2)",
        1,
    )
    .await;
    crate::engine_crash::run_until_killed(&stream, "after_bronze_commit").await;
    for sql in WIDENINGS {
        ddl(&mut client, sql).await;
    }
    change(&mut client, &wide_row(3), 1).await;

    stream
        .run_once()
        .await
        .expect("replays, widens, streams on");

    if let Some(silver) = read_delta(&stream.path("silver"), None).await {
        assert_eq!(silver.column_type("v"), "BIGINT");
        assert_eq!(silver.column_type("amount"), "DECIMAL(18,2)");
    }
    assert_bronze_is_the_change_table(&mut client, &stream).await;
    assert_silver_is_the_source(&mut client, &stream).await;
}

/// Under `onDataLoss: resnapshot` a change made while no instance captured
/// the table is not lost: the stream copies the table again from the new
/// instance, so silver holds the source exactly, `w` in every row; the
/// resnapshot's facts row records the move and the rename.
#[tokio::test]
async fn a_change_made_while_a_rename_had_capture_off_is_recovered_by_resnapshot() {
    let server = TestServer::start().await;
    let (mut client, mut stream) = streamed(&server).await;
    stream.manifest.push_str("  onDataLoss: resnapshot\n");
    rename_v_to_w(&mut client, &["UPDATE dbo.orders SET w = 8 WHERE id = 1"]).await;
    crate::engine_source_changes::change(
        &mut client,
        "dbo_orders_v2",
        "INSERT INTO dbo.orders (id, w, d, amount, x) VALUES (3, 30, N'c', 3, 3)",
        1,
    )
    .await;

    stream
        .run_once()
        .await
        .expect("takes a new snapshot of the new instance");

    let details = stream
        .facts_query("SELECT detail FROM t WHERE event = 'resnapshot'")
        .await;
    let [row] = details.as_slice() else {
        panic!("one resnapshot row: {details:?}");
    };
    let detail = row.first().expect("the detail column");
    let detail: Value = serde_json::from_str(detail).expect("the detail is JSON");
    assert_eq!(detail["from_capture_instance"], "dbo_orders", "{detail}");
    assert_eq!(detail["to_capture_instance"], "dbo_orders_v2", "{detail}");
    assert_eq!(detail["from_disabled"], true, "{detail}");
    assert_eq!(
        (
            &detail["renamed_columns"][0]["from"],
            &detail["renamed_columns"][0]["to"]
        ),
        (&Value::from("v"), &Value::from("w")),
        "{detail}"
    );
    let Some(silver) = duckdb_text(
        &stream.path("silver"),
        "SELECT CAST(id AS VARCHAR), CAST(w AS VARCHAR), CAST(d AS VARCHAR), \
         CAST(amount AS VARCHAR), CAST(x AS VARCHAR) FROM t ORDER BY id",
    )
    .await
    else {
        return;
    };
    let source = source_text(
        &mut client,
        "SELECT id, w, d, amount, x FROM dbo.orders ORDER BY id",
    )
    .await;
    assert_eq!(silver, source, "silver (DuckDB) = the source table");
}
