//! What the engine records for monitoring: the read metrics of every
//! micro-batch (round trip, network wait, lags, headroom), the warning when
//! the login may not read its session's waits, the finalization control
//! table, and the Prometheus endpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::TryStreamExt;
use mssql_cdc::domain::FactRow;
use mssql_cdc::engine::{Observer, SnapshotProgress};
use mssql_cdc::metrics::{Metrics, MetricsServer};

use crate::support::cdc::{advance_clock, capture_table, max_lsn, wait_for_capture};
use crate::support::http::http_get;
use crate::support::proxy::CuttableProxy;
use crate::support::server::{Client, Endpoint, TestServer, run, scalar};
use crate::support::stream::{StreamFixture, query_table};

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(4000) NULL)";

/// Inserts `ids` in one transaction and waits until capture has it.
async fn insert(client: &mut Client, ids: std::ops::Range<i32>, note_chars: usize) {
    let before = max_lsn(client).await;
    let values: Vec<String> = ids
        .map(|id| format!("({id}, REPLICATE(N'x', {note_chars}))"))
        .collect();
    run(
        client,
        &format!(
            "INSERT INTO dbo.orders (id, note) VALUES {}",
            values.join(", ")
        ),
    )
    .await
    .expect("insert");
    wait_for_capture(client, "dbo_orders", before.as_deref(), 1).await;
}

async fn captured_orders(server: &TestServer) -> (Client, String) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    capture_table(&mut client, "orders").await;
    (client, db)
}

const METRIC_COLUMNS: [&str; 7] = [
    "read_seconds",
    "read_mb",
    "source_rtt_ms",
    "network_wait_ms",
    "retention_headroom_hours",
    "ingestion_lag_seconds",
    "capture_lag_seconds",
];

#[tokio::test]
async fn every_metric_column_is_set_when_the_login_may_read_its_waits() {
    let server = TestServer::start().await;
    let (mut client, db) = captured_orders(&server).await;
    let stream = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    insert(&mut client, 1..4, 10).await;
    stream.run_once().await.expect("run");

    let nulls: Vec<String> = METRIC_COLUMNS
        .iter()
        .map(|c| format!("CAST(count({c}) AS VARCHAR)"))
        .collect();
    let counts = stream
        .facts_query(&format!(
            "SELECT CAST(count(*) AS VARCHAR), {} FROM t WHERE event IS NULL AND rows > 0",
            nulls.join(", ")
        ))
        .await;
    let total = &counts[0][0];
    assert_ne!(total, "0", "a batch read rows");
    for (column, count) in METRIC_COLUMNS.iter().zip(&counts[0][1..]) {
        assert_eq!(count, total, "{column} is set on every batch row");
    }
    let sane = stream
        .facts_query(
            "SELECT source_rtt_ms > 0, network_wait_ms >= 0, read_mb > 0, \
             retention_headroom_hours >= 0, ingestion_lag_seconds >= 0, detail IS NULL \
             FROM t WHERE event IS NULL AND rows > 0",
        )
        .await;
    for row in sane {
        assert_eq!(row, ["true"; 6], "plausible values, no warning");
    }

    // The bronze commit carries the same facts, metrics included.
    let table = crate::support::stream::open_table(&stream.path("bronze")).await;
    let history: Vec<_> = table
        .history(None)
        .try_collect()
        .await
        .expect("bronze history");
    let carried: Vec<FactRow> = history
        .iter()
        .filter_map(|commit| commit.info.get("mssql_cdc.facts"))
        .filter_map(FactRow::from_json)
        .collect();
    let facts_rows = stream
        .facts_query("SELECT batch_id, network_wait_ms, source_rtt_ms FROM t WHERE rows > 0 AND event IS NULL")
        .await;
    assert_eq!(carried.len(), facts_rows.len(), "{carried:?}");
    for row in &carried {
        assert!(
            row.source_rtt_ms.is_some() && row.network_wait_ms.is_some(),
            "{row:?}"
        );
    }
}

/// A login with what the stream needs (as the demo's `cdc_reader`) and
/// nothing on the server.
async fn least_privilege_reader(server: &TestServer, admin: &mut Client, db: &str) -> Endpoint {
    let login = format!("reader_{}", &db[3..15]);
    let password = "Reader-Pa55word!";
    run(
        admin,
        &format!(
            "CREATE LOGIN [{login}] WITH PASSWORD = '{password}'; \
             CREATE USER [{login}] FOR LOGIN [{login}]; \
             GRANT SELECT ON SCHEMA::dbo TO [{login}]; \
             GRANT SELECT ON SCHEMA::cdc TO [{login}]; \
             GRANT VIEW DATABASE STATE TO [{login}];"
        ),
    )
    .await
    .expect("least-privilege login");
    let mut endpoint = server.endpoint();
    endpoint.user = login;
    endpoint.password = password.into();
    endpoint
}

#[tokio::test]
async fn without_permission_network_wait_is_null_with_exactly_one_warning() {
    let server = TestServer::start().await;
    let (mut client, db) = captured_orders(&server).await;
    let major: Option<i32> = scalar(
        &mut client,
        "SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS int)",
    )
    .await;
    if major.unwrap_or(0) < 16 {
        // Up to SQL Server 2019 every login reads its own session's waits.
        return;
    }
    let reader = least_privilege_reader(&server, &mut client, &db).await;
    let stream = StreamFixture::with_endpoint(
        reader,
        &db,
        "  snapshot: {mode: never}\n  maxCommitsPerBatch: 1\n",
    );
    insert(&mut client, 1..2, 10).await;
    insert(&mut client, 2..3, 10).await;
    let summary = stream.run_once().await.expect("run");
    assert!(summary.batches >= 2, "{summary:?}");

    let rows = stream
        .facts_query(
            "SELECT network_wait_ms IS NULL, source_rtt_ms IS NOT NULL, coalesce(detail, '') \
             FROM t WHERE event IS NULL ORDER BY batch_id",
        )
        .await;
    let mut warnings = Vec::new();
    for row in &rows {
        assert_eq!(row[..2], ["true", "true"], "{rows:?}");
        if !row[2].is_empty() {
            let detail: serde_json::Value = serde_json::from_str(&row[2]).expect("JSON detail");
            warnings.extend(
                detail["warnings"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|w| w.as_str().unwrap_or_default().to_string()),
            );
        }
    }
    assert_eq!(warnings.len(), 1, "one warning per run: {warnings:?}");
    assert!(
        warnings[0].contains("network_wait_ms")
            && warnings[0].contains("VIEW SERVER PERFORMANCE STATE"),
        "{}",
        warnings[0]
    );
    assert!(
        !rows[0][2].is_empty(),
        "the warning is in the first batch's row"
    );
}

#[tokio::test]
async fn network_wait_grows_when_the_reader_is_slowed() {
    const ROWS: i32 = 1000; // about 8 MB of change data per batch
    let server = TestServer::start().await;
    let (mut client, db) = captured_orders(&server).await;
    let mut endpoint = server.endpoint();
    let target = format!("{}:{}", endpoint.host, endpoint.port)
        .parse()
        .expect("server address");
    let proxy = CuttableProxy::start(target).await;
    endpoint.host = proxy.addr.ip().to_string();
    endpoint.port = proxy.addr.port();
    let stream = StreamFixture::with_endpoint(endpoint, &db, "  snapshot: {mode: never}\n");

    insert(&mut client, 0..ROWS, 4000).await;
    stream.run_once().await.expect("a fast run");
    proxy.throttle(Some(1_500_000));
    insert(&mut client, ROWS..2 * ROWS, 4000).await;
    stream.run_once().await.expect("a slow run");

    let waits = stream
        .facts_query(
            "SELECT network_wait_ms, read_seconds FROM t WHERE event IS NULL AND rows > 0 \
             ORDER BY batch_id",
        )
        .await;
    assert_eq!(waits.len(), 2, "{waits:?}");
    let fast: i64 = waits[0][0].parse().expect("fast wait");
    let slow: i64 = waits[1][0].parse().expect("slow wait");
    eprintln!("network_wait_ms: fast {fast}, slow {slow}");
    assert!(
        slow >= 2000 && slow > fast + 1000,
        "the throttled batch waited on the network: fast {fast} ms, slow {slow} ms ({waits:?})"
    );
}

#[tokio::test]
async fn headroom_falls_by_the_hours_the_stream_lags() {
    let server = TestServer::start().await;
    if !server.is_sandbox() {
        return; // needs the sandbox's movable clock
    }
    let (mut client, db) = captured_orders(&server).await;
    let stream = StreamFixture::new(
        &server,
        &db,
        "  snapshot: {mode: never}\n  maxCommitsPerBatch: 1\n",
    );
    insert(&mut client, 1..2, 10).await;
    advance_clock(&mut client, 3 * 3600).await;
    insert(&mut client, 2..3, 10).await;
    advance_clock(&mut client, 3 * 3600).await;
    insert(&mut client, 3..4, 10).await;
    stream.run_once().await.expect("run");

    let rows = stream
        .facts_query(
            "SELECT retention_headroom_hours, ingestion_lag_seconds / 3600.0 FROM t \
             WHERE event IS NULL ORDER BY batch_id",
        )
        .await;
    let hours: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r[0].parse().expect("headroom"), r[1].parse().expect("lag")))
        .collect();
    let (first, last) = (hours[0], hours[hours.len() - 1]);
    // The first batch ended 6 hours behind the newest change: its headroom
    // is 6 hours less than that of the batch that caught up.
    assert!(
        (last.0 - first.0 - 6.0).abs() < 0.05,
        "headroom {:.3} h lagging, {:.3} h caught up",
        first.0,
        last.0
    );
    for (headroom, lag) in &hours {
        assert!(
            (headroom + lag - (last.0 + last.1)).abs() < 0.01,
            "headroom + lag is the same for every batch of the run: {hours:?}"
        );
    }
}

/// Copies a Delta table's directory as it is now, to read that state later.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Keeps a copy of the control table as it was at the first event seen.
struct ControlAt {
    control: PathBuf,
    copy: PathBuf,
    on_batch: bool,
}

impl ControlAt {
    fn take(&self) {
        if !self.copy.exists() {
            copy_dir(&self.control, &self.copy);
        }
    }
}

impl Observer for ControlAt {
    fn snapshot_progress(&self, _progress: &SnapshotProgress) {
        if !self.on_batch {
            self.take();
        }
    }
    fn batch_done(&self, _row: &FactRow) {
        if self.on_batch {
            self.take();
        }
    }
}

/// Runs `stream` once, copying the control table at its first snapshot
/// chunk (or first batch, with `on_batch`); returns where the copy is.
async fn run_copying_control(stream: &StreamFixture, control: &Path, on_batch: bool) -> PathBuf {
    let copy = stream.path("control-copy");
    let mut options = stream.options();
    options.observer = Arc::new(ControlAt {
        control: control.to_path_buf(),
        copy: copy.clone(),
        on_batch,
    });
    mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("run");
    copy
}

async fn verdicts(dir: &Path) -> Vec<Vec<String>> {
    query_table(
        dir,
        "SELECT table_name, CAST(finalized_until AS VARCHAR), coalesce(open_snapshot_lsn, '-'), \
         app_id, granularity FROM t ORDER BY table_name",
    )
    .await
}

/// The verdict the latest facts row of `stream` supports (hour granularity).
async fn expected_verdict(stream: &StreamFixture) -> String {
    let rows = stream
        .facts_query(
            "SELECT CAST(date_trunc('hour', max(end_commit_ts)) AS VARCHAR) FROM t \
             WHERE event IS NULL OR event = 'bootstrap'",
        )
        .await;
    rows[0][0].clone()
}

#[tokio::test]
async fn finalization_holds_during_a_snapshot_advances_per_period_and_never_goes_back() {
    let server = TestServer::start().await;
    if !server.is_sandbox() {
        return; // needs the sandbox's movable clock
    }
    let (mut client, db) = captured_orders(&server).await;
    insert(&mut client, 1..4, 10).await;
    let control = tempfile::tempdir().expect("control dir");
    let control_path = control.path().join("control");
    let finalization = format!(
        "  finalization: {{name: ops.table_finalization, location: \"{}\"}}\n",
        control_path.display()
    );
    let stream = StreamFixture::new(
        &server,
        &db,
        &format!("  snapshot: {{chunkRows: 1}}\n{finalization}"),
    );

    let mid_snapshot = run_copying_control(&stream, &control_path, false).await;
    let snapshot_lsn = stream
        .facts_query("SELECT min_lsn FROM t WHERE event = 'bootstrap'")
        .await;
    assert_eq!(
        verdicts(&mid_snapshot).await,
        [[
            "bronze.orders",
            "",
            snapshot_lsn[0][0].as_str(),
            "it-orders",
            "hour"
        ]],
        "while the snapshot is open the row names it and holds the verdict"
    );
    let after_snapshot = verdicts(&control_path).await;
    assert_eq!(after_snapshot[0][2], "-", "no snapshot open any more");
    assert_eq!(after_snapshot[0][1], expected_verdict(&stream).await);

    // Two hours later the verdict has moved two periods on.
    advance_clock(&mut client, 2 * 3600).await;
    insert(&mut client, 10..11, 10).await;
    stream.run_once().await.expect("second run");
    let advanced = verdicts(&control_path).await;
    assert_eq!(advanced[0][1], expected_verdict(&stream).await);
    let hours = |text: &str| {
        chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
            .expect("a timestamp")
            .and_utc()
            .timestamp()
            / 3600
    };
    assert!(
        hours(&advanced[0][1]) >= hours(&after_snapshot[0][1]) + 2,
        "{after_snapshot:?} -> {advanced:?}"
    );

    // A new stream of the same target (a new appId into the same table)
    // starting from the oldest change ends its first batch before the
    // verdict: the verdict stays.
    let mut replay = StreamFixture::new(
        &server,
        &db,
        &format!("  snapshot: {{mode: never}}\n  maxCommitsPerBatch: 1\n{finalization}"),
    );
    replay.manifest = replay
        .manifest
        .replace(
            &replay.path("bronze").display().to_string(),
            &stream.path("bronze").display().to_string(),
        )
        .replace("appId: it-orders", "appId: it-orders-replay");
    let first_batch = run_copying_control(&replay, &control_path, true).await;
    let first_end = replay
        .facts_query(
            "SELECT CAST(end_commit_ts AS VARCHAR) FROM t WHERE event IS NULL \
             ORDER BY batch_id LIMIT 1",
        )
        .await;
    assert!(
        hours(&first_end[0][0][..19]) < hours(&advanced[0][1]),
        "the replay's first batch ends before the verdict: {first_end:?}"
    );
    assert_eq!(
        verdicts(&first_batch).await[0][1],
        advanced[0][1],
        "never back"
    );
}

#[tokio::test]
async fn two_streams_share_one_control_table() {
    let server = TestServer::start().await;
    let control = tempfile::tempdir().expect("control dir");
    let control_path = control.path().join("control");
    let mut streams = Vec::new();
    for name in ["bronze.orders", "bronze.orders_eu"] {
        let (mut client, db) = captured_orders(&server).await;
        insert(&mut client, 1..3, 10).await;
        let mut stream = StreamFixture::new(
            &server,
            &db,
            &format!(
                "  finalization: {{name: ops.table_finalization, location: \"{}\", granularity: minute}}\n",
                control_path.display()
            ),
        );
        stream.manifest = stream
            .manifest
            .replace("name: bronze.orders,", &format!("name: {name},"));
        streams.push(stream);
    }
    let (a, b) = tokio::join!(streams[0].run_once(), streams[1].run_once());
    a.expect("first stream");
    b.expect("second stream");

    let rows = verdicts(&control_path).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, (stream, name)) in rows
        .iter()
        .zip(streams.iter().zip(["bronze.orders", "bronze.orders_eu"]))
    {
        let expected = stream
            .facts_query("SELECT CAST(date_trunc('minute', max(end_commit_ts)) AS VARCHAR) FROM t")
            .await;
        assert_eq!(row[0], name);
        assert_eq!(row[1], expected[0][0], "{name}");
        assert_eq!(row[4], "minute");
    }
}

#[tokio::test]
async fn the_metrics_endpoint_shows_the_stream_after_a_batch() {
    let server = TestServer::start().await;
    let (mut client, db) = captured_orders(&server).await;
    let stream = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    insert(&mut client, 1..4, 10).await;

    let metrics = Arc::new(Metrics::new());
    let endpoint = MetricsServer::start(([127, 0, 0, 1], 0).into(), metrics.clone())
        .await
        .expect("metrics endpoint");
    let mut options = stream.options();
    options.observer = Arc::new(metrics.observer("bronze.orders", "it-orders"));
    let summary = mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("run");

    let (status, body) = http_get(endpoint.local_addr(), "/metrics").await;
    assert!(status.contains("200"), "{status}");
    let labels = r#"{target="bronze.orders",app_id="it-orders"}"#;
    for line in [
        format!("mssql_cdc_batches_total{labels} {}", summary.batches),
        format!("mssql_cdc_rows_total{labels} 3"),
        format!("mssql_cdc_up{labels} 1"),
    ] {
        assert!(body.contains(&line), "{line} missing from\n{body}");
    }
    for series in [
        "mssql_cdc_read_bytes_total",
        "mssql_cdc_last_batch_timestamp_seconds",
        "mssql_cdc_retention_headroom_seconds",
        "mssql_cdc_live_capture_lag_seconds",
        "mssql_cdc_ingestion_lag_seconds",
        "mssql_cdc_capture_lag_seconds",
    ] {
        assert!(
            body.contains(&format!("{series}{labels} ")),
            "{series} missing from\n{body}"
        );
    }
    let (status, body) = http_get(endpoint.local_addr(), "/healthz").await;
    assert!(status.contains("200"), "{status} {body}");
}
