//! The engine end to end against the sandbox (or `MSSQL_CDC_TEST_URL`):
//! bootstrap, every operation, every supported type, empty batches, batch
//! splitting, data loss and fencing.

use std::ffi::OsStr;
use std::time::Duration;

use mssql_cdc::engine::EngineError;
use mssql_cdc::lake::StorageLocation;
use mssql_cdc::lake::lease::{CheckpointLease, DEFAULT_LEASE_TTL};

use crate::support::cdc::{capture_table, lsn_literal, max_lsn, min_lsn, wait_for_capture};
use crate::support::server::{TestServer, run};
use crate::support::stream::{PASSWORD_ENV, StreamFixture};
use crate::support::tools::run_mssql_cdc;

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)";

async fn orders_stream(
    server: &TestServer,
    extra: &str,
    seed_rows: i32,
) -> (crate::support::server::Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    for id in 1..=seed_rows {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'seed {id}', {id})"),
        )
        .await
        .expect("seed row");
    }
    capture_table(&mut client, "orders").await;
    let fixture = StreamFixture::new(server, &db, extra);
    (client, fixture)
}

fn count(rows: &[Vec<String>]) -> i64 {
    rows.first()
        .and_then(|r| r.first())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

#[tokio::test]
async fn bootstrap_then_changes_of_every_operation_land_exactly_once() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders_stream(&server, "", 3).await;

    let first = stream.run_once().await.expect("first run");
    assert_eq!(first.snapshot_rows, 3);
    let snapshot = stream
        .bronze_query("SELECT id, note, qty, _operation, _batch_id FROM t ORDER BY id")
        .await;
    assert_eq!(
        snapshot,
        vec![
            vec!["1", "seed 1", "1", "snapshot", "0"],
            vec!["2", "seed 2", "2", "snapshot", "0"],
            vec!["3", "seed 3", "3", "snapshot", "0"],
        ]
    );

    let before = max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (4, N'new', 4)")
        .await
        .expect("insert");
    run(&mut client, "UPDATE dbo.orders SET qty = 20 WHERE id = 2")
        .await
        .expect("update");
    run(&mut client, "DELETE FROM dbo.orders WHERE id = 3")
        .await
        .expect("delete");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 4).await;

    let second = stream.run_once().await.expect("second run");
    assert_eq!(second.rows, 4, "{second:?}");
    let changes = stream
        .bronze_query(
            "SELECT id, qty, _operation FROM t WHERE _operation <> 'snapshot' ORDER BY _lsn, _seqval, _operation DESC",
        )
        .await;
    assert_eq!(
        changes,
        vec![
            vec!["4", "4", "insert"],
            vec!["2", "2", "update_before"],
            vec!["2", "20", "update_after"],
            vec!["3", "3", "delete"],
        ]
    );

    // A third run has nothing to do and writes nothing.
    let third = stream.run_once().await.expect("third run");
    assert_eq!((third.batches, third.rows), (0, 0));
    assert_eq!(
        count(&stream.bronze_query("SELECT COUNT(*) FROM t").await),
        7
    );

    let facts = stream
        .facts_query(
            "SELECT coalesce(event, 'batch'), rows, end_lsn IS NOT NULL, retention_headroom_hours IS NOT NULL, \
             capture_instance FROM t ORDER BY written_at",
        )
        .await;
    assert_eq!(
        facts[0],
        vec!["bootstrap", "3", "true", "false", "dbo_orders"]
    );
    let batch_rows: i64 = facts[1..]
        .iter()
        .map(|f| {
            assert_eq!(f[0], "batch");
            assert_eq!(f[2..], ["true", "true", "dbo_orders"]);
            f[1].parse::<i64>().expect("rows")
        })
        .sum();
    assert_eq!(batch_rows, 4);
    let ids = stream
        .facts_query("SELECT COUNT(*), COUNT(DISTINCT batch_id) FROM t WHERE event IS NULL")
        .await;
    assert_eq!(ids[0][0], ids[0][1], "one facts row per batch id");
}

/// A stream of `dbo.orders`, created by `create` and captured before
/// `inserts` ran (one change each), that reads changes only: no snapshot.
async fn changes_only_stream(server: &TestServer, create: &str, inserts: &[&str]) -> StreamFixture {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, create).await.expect("create table");
    capture_table(&mut client, "orders").await;
    let before = max_lsn(&mut client).await.expect("an LSN");
    for insert in inserts {
        run(&mut client, insert).await.expect("insert");
    }
    let count = i32::try_from(inserts.len()).expect("a few inserts");
    wait_for_capture(&mut client, "dbo_orders", Some(&before), count).await;
    StreamFixture::new(server, &db, "  snapshot: {mode: never}\n")
}

#[tokio::test]
async fn every_supported_type_round_trips_into_bronze() {
    let server = TestServer::start().await;
    let stream = changes_only_stream(
        &server,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, \
         c_bit bit, c_tiny tinyint, c_small smallint, c_big bigint, c_real real, c_float float, \
         c_dec decimal(18,4), c_wide decimal(38,10), c_money money, c_smallmoney smallmoney, \
         c_char char(5), c_varchar varchar(50), c_nchar nchar(3), c_nvarchar nvarchar(50), c_max nvarchar(max), \
         c_guid uniqueidentifier, c_bin binary(4), c_varbin varbinary(50), \
         c_date date, c_time time(7), c_dt datetime, c_sdt smalldatetime, c_dt2 datetime2(7), c_dto datetimeoffset(7))",
        &[
            "INSERT INTO dbo.orders VALUES (1, 1, 255, -32768, 9223372036854775807, 1.5, -2.25, \
         12345678901234.5678, 1234567890123456789012345678.0123456789, 922337203685477.5807, -214748.3648, \
         'ab', 'varchar', N'äöü', N'nvarchar ✓', REPLICATE(CAST(N'x' AS nvarchar(max)), 5000), \
         '6F9619FF-8B86-D011-B42D-00C04FC964FF', 0x01020304, 0xDEADBEEF, \
         '2024-02-29', '23:59:59.1234567', '2024-01-02 03:04:05.997', '2024-01-02 03:04:00', \
         '2024-01-02 03:04:05.1234567', '2024-01-02 03:04:05.1234567 +02:00')",
            "INSERT INTO dbo.orders (id) VALUES (2)",
        ],
    )
    .await;
    let summary = stream.run_once().await.expect("run");
    assert_eq!(summary.rows, 2);

    let types = stream
        .bronze_query(
            "SELECT arrow_typeof(c_bit), arrow_typeof(c_tiny), arrow_typeof(c_big), arrow_typeof(c_real), \
             arrow_typeof(c_dec), arrow_typeof(c_wide), arrow_typeof(c_money), arrow_typeof(c_guid), \
             arrow_typeof(c_bin), arrow_typeof(c_date), arrow_typeof(c_time), arrow_typeof(c_dt2), \
             arrow_typeof(c_dto), arrow_typeof(_commit_ts) FROM t LIMIT 1",
        )
        .await;
    // DataFusion reads Delta strings and binaries as view arrays.
    let types: Vec<String> = types[0].iter().map(|t| t.replace("View", "")).collect();
    assert_eq!(
        types,
        vec![
            "Boolean",
            "Int16",
            "Int64",
            "Float32",
            "Decimal128(18, 4)",
            "Decimal128(38, 10)",
            "Decimal128(19, 4)",
            "Utf8",
            "Binary",
            "Date32",
            "Utf8",
            "Timestamp(µs)",
            "Timestamp(µs, \"UTC\")",
            "Timestamp(µs)",
        ]
    );
    let values = stream
        .bronze_query(
            "SELECT c_bit, c_tiny, c_small, c_big, c_real, c_float, c_dec, c_wide, c_money, c_smallmoney, \
             c_char, c_varchar, c_nchar, c_nvarchar, length(c_max), c_guid, c_bin, c_varbin, \
             c_date, c_time, c_dt, c_sdt, c_dt2, c_dto FROM t WHERE id = 1",
        )
        .await;
    assert_eq!(
        values[0],
        vec![
            "true",
            "255",
            "-32768",
            "9223372036854775807",
            "1.5",
            "-2.25",
            "12345678901234.5678",
            "1234567890123456789012345678.0123456789",
            "922337203685477.5807",
            "-214748.3648",
            "ab   ",
            "varchar",
            "äöü",
            "nvarchar ✓",
            "5000",
            "6F9619FF-8B86-D011-B42D-00C04FC964FF",
            "01020304",
            "deadbeef",
            "2024-02-29",
            "23:59:59.1234567",
            "2024-01-02T03:04:05.996666",
            "2024-01-02T03:04:00",
            "2024-01-02T03:04:05.123456",
            "2024-01-02T01:04:05.123456Z",
        ]
    );
    let nulls = stream
        .bronze_query("SELECT COUNT(*) FROM t WHERE id = 2 AND c_bit IS NULL AND c_dto IS NULL AND c_max IS NULL")
        .await;
    assert_eq!(count(&nulls), 1);
}

/// A plain run's log holds no warning about what is expected (deltalake
/// keeps no min/max for binary columns and says so for every column of
/// every file it writes) and, read from a pipe, no colour codes.
#[tokio::test]
async fn a_run_of_a_binary_column_logs_no_warning() {
    let server = TestServer::start().await;
    let stream = changes_only_stream(
        &server,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, c_varbin varbinary(50), c_bin binary(4))",
        &["INSERT INTO dbo.orders VALUES (1, 0xDEADBEEF, 0x01020304)"],
    )
    .await;

    let manifest = stream.manifest_file();
    let output = run_mssql_cdc(
        [
            OsStr::new("run"),
            OsStr::new("--once"),
            OsStr::new("-f"),
            manifest.as_os_str(),
        ],
        &[(PASSWORD_ENV, &stream.password)],
        Duration::from_secs(120),
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}\n{stderr}", output.status);
    // The one warning that stays is wanted: the fixture's manifest trusts
    // the sandbox's self-signed certificate.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && !l.contains("Trusting the server certificate"))
        .collect();
    assert!(
        warnings.is_empty(),
        "warnings in a plain run: {warnings:#?}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "a log that is not a terminal has no colour codes: {stderr}"
    );
    assert_eq!(
        stream.bronze_query("SELECT c_varbin, c_bin FROM t").await,
        [["deadbeef", "01020304"]],
        "the run wrote the row"
    );
}

#[tokio::test]
async fn batches_past_other_tables_commits_have_no_rows_but_a_fact_row() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders_stream(&server, "", 1).await;
    stream.run_once().await.expect("bootstrap");
    run(
        &mut client,
        "CREATE TABLE dbo.other (id int NOT NULL PRIMARY KEY)",
    )
    .await
    .expect("other table");
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'other', @role_name = NULL",
    )
    .await
    .expect("enable other");
    let before = max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.other VALUES (1)")
        .await
        .expect("insert other");
    wait_for_capture(&mut client, "dbo_other", before.as_deref(), 1).await;
    let bronze_before = stream.bronze().await;

    let summary = stream.run_once().await.expect("run");
    assert!(summary.batches >= 1, "{summary:?}");
    assert_eq!(summary.rows, 0);
    assert_eq!(stream.bronze().await, bronze_before, "bronze untouched");
    let facts = stream
        .facts_query("SELECT rows, end_lsn FROM t WHERE event IS NULL ORDER BY batch_id")
        .await;
    assert!(!facts.is_empty());
    assert!(facts.iter().all(|f| f[0] == "0"), "{facts:?}");
}

#[tokio::test]
async fn max_commits_per_batch_splits_the_work() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders_stream(&server, "  maxCommitsPerBatch: 2\n", 0).await;
    stream.run_once().await.expect("bootstrap");
    let before = max_lsn(&mut client).await;
    for id in 1..=5 {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, NULL, {id})"),
        )
        .await
        .expect("insert");
    }
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 5).await;
    let summary = stream.run_once().await.expect("run");
    assert_eq!(summary.rows, 5);
    assert!(
        summary.batches >= 3,
        "5 commits at 2 per batch: {summary:?}"
    );
    let per_batch = stream
        .bronze_query("SELECT _batch_id, COUNT(*) FROM t GROUP BY _batch_id ORDER BY _batch_id")
        .await;
    assert!(
        per_batch
            .iter()
            .all(|r| r[1].parse::<i64>().unwrap_or(9) <= 2),
        "{per_batch:?}"
    );
    assert_eq!(
        count(
            &stream
                .bronze_query("SELECT COUNT(DISTINCT id) FROM t")
                .await
        ),
        5
    );
}

#[tokio::test]
async fn purged_changes_stop_the_stream_with_the_lost_window() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders_stream(&server, "", 1).await;
    stream.run_once().await.expect("bootstrap");
    let before = max_lsn(&mut client).await;
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (10, N'lost', 1)",
    )
    .await
    .expect("insert");
    let lost = wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (11, N'kept', 1)",
    )
    .await
    .expect("insert");
    let kept = wait_for_capture(&mut client, "dbo_orders", Some(&lost), 1).await;
    run(
        &mut client,
        &format!(
            "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', @low_water_mark = {}, @threshold = 5000",
            lsn_literal(&kept)
        ),
    )
    .await
    .expect("cleanup");
    let low = min_lsn(&mut client, "dbo_orders")
        .await
        .expect("low water mark");
    let bronze_before = stream.bronze().await;
    let facts_before = stream.facts_query("SELECT COUNT(*) FROM t").await;

    let error = stream
        .run_once()
        .await
        .expect_err("data loss stops the stream");
    let EngineError::DataLoss(loss) = &error else {
        panic!("expected DataLossError, got {error}");
    };
    assert_eq!(lsn_literal(&loss.to_lsn.to_bytes()), lsn_literal(&low));
    assert!(loss.from_lsn.to_bytes().as_slice() <= lost.as_slice());
    assert!(loss.from_ts.is_some() && loss.to_ts.is_some());
    let message = error.to_string();
    assert!(
        message.contains("DataLossError") && message.contains("dbo_orders"),
        "{message}"
    );
    assert_eq!(stream.bronze().await, bronze_before, "bronze untouched");
    assert_eq!(
        stream.facts_query("SELECT COUNT(*) FROM t").await,
        facts_before,
        "facts untouched"
    );
}

#[tokio::test]
async fn a_second_process_on_the_checkpoint_fails_fast_and_writes_nothing() {
    let server = TestServer::start().await;
    let (_client, stream) = orders_stream(&server, "", 2).await;
    let location = StorageLocation::parse(stream.path("checkpoint").to_str().expect("utf-8"))
        .expect("checkpoint location");
    let _held = CheckpointLease::acquire(&location, &Default::default(), DEFAULT_LEASE_TTL)
        .await
        .expect("first holder");
    let error = stream
        .run_once()
        .await
        .expect_err("second holder is refused");
    assert!(matches!(error, EngineError::Lease(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("in use by another mssql-cdc process"),
        "{error}"
    );
    assert!(!stream.path("bronze").exists(), "nothing written to bronze");
    assert!(!stream.path("facts").exists(), "nothing written to facts");
}

/// Records what the engine reports, for tests that wait on it.
struct Events(tokio::sync::mpsc::UnboundedSender<String>);

impl mssql_cdc::engine::Observer for Events {
    fn batch_done(&self, row: &mssql_cdc::domain::FactRow) {
        let _ = self.0.send(format!("batch {}", row.rows.unwrap_or(0)));
    }
    fn retrying(&self, error: &EngineError, _attempt: u32, _delay: std::time::Duration) {
        let _ = self.0.send(format!("retry {error}"));
    }
}

/// Waits for an event starting with `prefix` (and, for batches, with rows).
async fn wait_event(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    want: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Duration::from_secs(60);
    loop {
        let event = tokio::time::timeout(deadline, events.recv())
            .await
            .expect("the engine reports within a minute")
            .expect("the engine is running");
        if want(&event) {
            return event;
        }
    }
}

#[tokio::test]
async fn a_cut_connection_is_retried_and_the_stream_resumes_where_it_was() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    capture_table(&mut client, "orders").await;
    let mut endpoint = server.endpoint();
    let target: std::net::SocketAddr = format!("{}:{}", endpoint.host, endpoint.port)
        .parse()
        .expect("server address");
    let proxy = crate::support::proxy::CuttableProxy::start(target).await;
    endpoint.host = proxy.addr.ip().to_string();
    endpoint.port = proxy.addr.port();
    // No snapshot: rows inserted while a snapshot runs may show up both as
    // snapshot rows and as changes (docs/user-guide.md), which is not what
    // this test is about.
    let stream = StreamFixture::with_endpoint(endpoint, &db, "  snapshot: {mode: never}\n");
    let mut manifest = stream.config();
    manifest.trigger =
        mssql_cdc::spec::Trigger::ProcessingTime(std::time::Duration::from_millis(100));

    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let mut options = stream.options();
    options.once = false;
    options.observer = std::sync::Arc::new(Events(sender));
    options.backoff = mssql_cdc::engine::Backoff::new(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(1),
    );
    let stop = options.stop.clone();
    let running = tokio::spawn(mssql_cdc::engine::run(manifest, options));

    let before = max_lsn(&mut client).await;
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (1, N'before the cut', 1)",
    )
    .await
    .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    wait_event(&mut events, |e| e == "batch 1").await;

    proxy.cut();
    let before = max_lsn(&mut client).await;
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (2, N'after the cut', 2)",
    )
    .await
    .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    let retry = wait_event(&mut events, |e| e.starts_with("retry")).await;
    assert!(retry.contains("SQL Server"), "{retry}");
    wait_event(&mut events, |e| e == "batch 1").await;

    stop.cancel();
    running
        .await
        .expect("engine task")
        .expect("the stream stops cleanly");
    let rows = stream
        .bronze_query("SELECT id, _operation FROM t ORDER BY id")
        .await;
    assert_eq!(rows, vec![vec!["1", "insert"], vec!["2", "insert"]]);
}

#[tokio::test]
async fn manifest_warnings_are_recorded_in_the_first_batch_row_of_a_run() {
    const WARNING: &str = "spec.source.trustServerCertificate: true has no effect with encrypt: off \
                           (the connection uses no TLS at all)";
    let server = TestServer::start().await;
    let (mut client, stream) = orders_stream(&server, "  snapshot: {mode: never}\n", 0).await;
    let before = max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'x', 1)")
        .await
        .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    let mut options = stream.options();
    options.warnings = vec![WARNING.into()];
    mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("run");
    let details = stream
        .facts_query("SELECT detail FROM t WHERE detail IS NOT NULL")
        .await;
    assert_eq!(details.len(), 1, "{details:?}");
    let detail: serde_json::Value = serde_json::from_str(&details[0][0]).expect("detail is JSON");
    assert_eq!(detail["warnings"][0], WARNING);
}

/// A misspelt field is refused before anything runs: `colums:` would
/// otherwise stream every column, PII included.
#[tokio::test]
async fn run_refuses_a_manifest_with_a_misspelt_field_and_names_the_field() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let manifest = dir.path().join("stream.yaml");
    let lake = dir.path().join("lake");
    let text = include_str!("../fixtures/manifests/orders.yaml")
        .replace("./lake", &lake.display().to_string())
        .replace("    columns: [id", "    colums: [id");
    std::fs::write(&manifest, text).expect("write manifest");
    let output = run_mssql_cdc(
        [
            OsStr::new("run"),
            OsStr::new("--once"),
            OsStr::new("-f"),
            manifest.as_os_str(),
        ],
        &[("MSSQL_PASSWORD", "not-used")],
        Duration::from_secs(60),
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "a misspelt manifest ran: {stderr}"
    );
    assert!(
        stderr.contains("unknown field spec.source.colums (did you mean columns?)"),
        "{stderr}"
    );
    assert!(!lake.exists(), "nothing is written: {stderr}");
}

/// A value larger than `maxValueBytes` is measured by SQL Server and never
/// sent: the snapshot and then a batch stop with ValueTooLarge naming the
/// column, the size and the row (never the value), nothing of that row or
/// after it is written, and values up to the limit stream as usual.
#[tokio::test]
async fn a_value_over_max_value_bytes_stops_the_table_before_it_is_sent() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.docs (id int NOT NULL PRIMARY KEY, body nvarchar(max) NULL, \
         blob varbinary(max) NULL, tag nvarchar(20) NULL)",
    )
    .await
    .expect("create table");
    // 500 characters of nvarchar are 1,000 bytes: at the limit, not over.
    run(
        &mut client,
        "INSERT INTO dbo.docs VALUES (1, REPLICATE(N'a', 500), 0x0102, N'small')",
    )
    .await
    .expect("seed");
    capture_table(&mut client, "docs").await;
    let mut stream = StreamFixture::new(&server, &db, "  maxValueBytes: 1000\n");
    stream.manifest = stream.manifest.replace("dbo.orders", "dbo.docs");
    let first = stream.run_once().await.expect("values at the limit pass");
    assert_eq!(first.snapshot_rows, 1);
    let body = stream.bronze_query("SELECT LENGTH(body), tag FROM t").await;
    assert_eq!(body, [["500", "small"]]);

    run(
        &mut client,
        "INSERT INTO dbo.docs VALUES (2, N'fits', CAST(REPLICATE(CAST(0x41 AS varbinary(max)), 5000) AS varbinary(max)), N'big')",
    )
    .await
    .expect("a large value");
    wait_for_capture(&mut client, "dbo_docs", None, 1).await;
    let error = stream
        .run_once()
        .await
        .expect_err("the table stops at the large value");
    let message = error.to_string();
    assert!(
        matches!(
            &error,
            EngineError::Source(mssql_cdc::source::SourceError::ValueTooLarge {
                column,
                bytes: 5000,
                limit: 1000,
                ..
            }) if column == "blob"
        ),
        "{error:?}"
    );
    assert!(
        message.contains("__$start_lsn"),
        "the row is named: {message}"
    );
    assert!(!message.contains("AAAA"), "never the value: {message}");
    let rows = stream
        .bronze_query("SELECT COUNT(*) FROM t WHERE id = 2")
        .await;
    assert_eq!(rows, [["0"]], "nothing of the row was written");

    // A fresh stream of the same table stops in its snapshot the same way.
    let again = StreamFixture::new(&server, &db, "  maxValueBytes: 1000\n");
    let mut again = again;
    again.manifest = again.manifest.replace("dbo.orders", "dbo.docs");
    let error = again
        .run_once()
        .await
        .expect_err("the snapshot stops at the large value");
    assert!(
        error
            .to_string()
            .contains("column blob: a value of 5000 bytes"),
        "{error}"
    );
    assert!(error.to_string().contains("snapshot"), "{error}");
}

/// A 300 MB value in one table of a source of three, with the default
/// `maxValueBytes` (64 MiB): the real binary (`run --once -f`) stops that
/// table alone, the other two copy their rows, and its peak RSS (the
/// kernel's `VmHWM`, sampled until it exits) stays below the value, since
/// SQL Server never sent it.
#[tokio::test]
async fn a_300_mb_value_never_reaches_the_workers_memory() {
    use crate::engine_source::{seeded_capture, source_doc, stream_doc};
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for (table, rows) in [("orders", 5), ("items", 3)] {
        seeded_capture(&mut client, table, rows).await;
    }
    run(
        &mut client,
        "CREATE TABLE dbo.docs (id int NOT NULL PRIMARY KEY, blob varbinary(max) NULL)",
    )
    .await
    .expect("create table");
    run(
        &mut client,
        "INSERT INTO dbo.docs VALUES (1, 0x01), \
         (2, REPLICATE(CAST(0x41 AS varbinary(max)), 300000000))",
    )
    .await
    .expect("a 300 MB value");
    capture_table(&mut client, "docs").await;
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let mut file = source_doc(&server, &db, lake, "{availableNow: true}", "5m");
    for table in ["orders", "items", "docs"] {
        file.push_str(&stream_doc(table, &format!("dbo.{table}"), lake));
    }
    let manifest = lake.join("source.yaml");
    std::fs::write(&manifest, file).expect("write the source file");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["run", "--once", "-f"])
        .arg(&manifest)
        .env(PASSWORD_ENV, &fixture.password)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary runs");
    let status_file = format!("/proc/{}/status", child.id().expect("a pid"));
    let mut peak_kib = 0u64;
    let ended = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            if let Ok(text) = std::fs::read_to_string(&status_file)
                && let Some(kib) = text
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak_kib = peak_kib.max(kib);
            }
            // Sampling the kernel's own peak, not waiting for an event.
            tokio::select! {
                status = child.wait() => return status,
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    })
    .await
    .expect("the run ends")
    .expect("its status");
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = pipe.read_to_string(&mut stderr).await;
    }
    assert!(!ended.success(), "the docs table stops: {stderr}");
    assert!(
        stderr.contains("bronze.docs: failed:")
            && stderr.contains("column blob: a value of 300000000 bytes"),
        "{stderr}"
    );
    for (name, rows) in [("orders", "5"), ("items", "3")] {
        let count = crate::support::stream::query_table(
            &lake.join(format!("bronze/{name}")),
            "SELECT count(DISTINCT id) FROM t",
        )
        .await;
        assert_eq!(count, [[rows.to_string()]], "bronze.{name} holds its table");
    }
    println!("peak RSS of the worker: {} MiB", peak_kib / 1024);
    assert!(peak_kib > 0, "the peak was sampled");
    assert!(
        peak_kib < 300 * 1024,
        "the worker's peak RSS {} MiB reached the value's size",
        peak_kib / 1024
    );
}
