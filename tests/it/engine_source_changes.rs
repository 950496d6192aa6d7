//! Source changes and purged changes as durable facts, against the sandbox
//! (or `MSSQL_CDC_TEST_URL`): schema changes, the move to a newer capture
//! instance, each `onDataLoss` policy, and the run's warnings.

use std::sync::{Arc, Mutex};

use mssql_cdc::domain::BatchId;
use mssql_cdc::engine::Observer;

use crate::support::cdc::{binary, capture_table, lsn_literal, max_lsn, min_lsn, wait_for_capture};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::StreamFixture;

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)";

/// `dbo.orders` with `seed` rows and CDC on, and a stream of it with
/// `extra` in its spec.
async fn orders(server: &TestServer, extra: &str, seed: i32) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    for id in 1..=seed {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'seed', {id})"),
        )
        .await
        .expect("seed row");
    }
    capture_table(&mut client, "orders").await;
    (client, StreamFixture::new(server, &db, extra))
}

/// Runs `sql` and waits until the capture job has `rows` more change rows
/// of `instance`; returns their commit LSN.
pub(crate) async fn change(client: &mut Client, instance: &str, sql: &str, rows: i32) -> Vec<u8> {
    let before = max_lsn(client).await;
    run(client, sql).await.expect("change");
    wait_for_capture(client, instance, before.as_deref(), rows).await
}

/// Purges every change of `dbo_orders` below `low_water_mark`.
async fn cleanup(client: &mut Client, low_water_mark: &[u8]) {
    run(
        client,
        &format!(
            "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', \
             @low_water_mark = {}, @threshold = 5000",
            lsn_literal(low_water_mark)
        ),
    )
    .await
    .expect("cleanup");
}

/// `end_lsn` and `capture_instance` of micro-batch `id` (none: no such batch).
async fn batch(stream: &StreamFixture, id: &str) -> Vec<Vec<String>> {
    stream
        .facts_query(&format!(
            "SELECT end_lsn, capture_instance FROM t WHERE event IS NULL AND batch_id = {id}"
        ))
        .await
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("detail is JSON")
}

#[tokio::test]
async fn skip_continues_from_the_oldest_kept_change_and_records_the_window() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "  onDataLoss: skip\n", 1).await;
    stream.run_once().await.expect("bootstrap");
    let lost = change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (10, N'lost', 1)",
        1,
    )
    .await;
    let kept = change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (11, N'kept', 1)",
        1,
    )
    .await;
    cleanup(&mut client, &kept).await;
    let low = min_lsn(&mut client, "dbo_orders").await.expect("min LSN");

    let summary = stream.run_once().await.expect("skip goes on");
    assert_eq!(summary.rows, 1, "{summary:?}");
    let ids = stream
        .bronze_query("SELECT id, _operation FROM t ORDER BY _lsn")
        .await;
    assert_eq!(ids, vec![vec!["1", "snapshot"], vec!["11", "insert"]]);

    let skipped = stream
        .facts_query(
            "SELECT batch_id, rows, min_lsn, end_lsn, CAST(lost_from_ts AS STRING), \
             CAST(lost_to_ts AS STRING), detail FROM t WHERE event = 'data_skipped'",
        )
        .await;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    let row = &skipped[0];
    let batch = stream
        .facts_query("SELECT batch_id FROM t WHERE event IS NULL AND rows = 1")
        .await;
    assert_eq!(row[0], batch[0][0], "the batch that skipped");
    assert_eq!(row[1], "0");
    assert_eq!(row[2], lsn_literal(&low));
    assert_eq!(row[3], lsn_literal(&low));
    let bootstrap = stream
        .facts_query("SELECT CAST(end_commit_ts AS STRING) FROM t WHERE event = 'bootstrap'")
        .await;
    assert_eq!(row[4], bootstrap[0][0], "lost from the last change read");
    let read = stream
        .facts_query("SELECT CAST(min_commit_ts AS STRING) FROM t WHERE event IS NULL AND rows = 1")
        .await;
    assert_eq!(row[5], read[0][0], "lost up to the oldest change kept");
    let detail = json(&row[6]);
    assert_eq!(detail["certain"], true);
    assert_eq!(detail["resumed_at_lsn"], lsn_literal(&low));
    let from = detail["skipped_from_lsn"].as_str().expect("from");
    let to = detail["skipped_to_lsn"].as_str().expect("to");
    assert!(from <= lsn_literal(&lost).as_str() && lsn_literal(&lost).as_str() <= to);
}

/// Runs cleanup up to a fixed LSN the first time a batch has read rows,
/// while the read is still going on (the engine waits for it).
struct CleanupWhileReading {
    client: Mutex<Option<Client>>,
    low_water_mark: Vec<u8>,
    done: Mutex<Vec<BatchId>>,
}

impl Observer for CleanupWhileReading {
    fn batch_reading(&self, batch_id: BatchId, _rows: u64) {
        let Some(mut client) = self.client.lock().expect("lock").take() else {
            return;
        };
        let mark = self.low_water_mark.clone();
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(cleanup(&mut client, &mark));
        });
        self.done.lock().expect("lock").push(batch_id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn skip_marks_the_gap_uncertain_when_cleanup_runs_during_the_read() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "  onDataLoss: skip\n", 1).await;
    stream.run_once().await.expect("bootstrap");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (10, N'a', 1)",
        1,
    )
    .await;
    let second = change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (11, N'b', 1)",
        1,
    )
    .await;

    let observer = Arc::new(CleanupWhileReading {
        client: Mutex::new(Some(
            server.connect_to(&stream.config().source.database).await,
        )),
        low_water_mark: second.clone(),
        done: Mutex::new(Vec::new()),
    });
    let mut options = stream.options();
    options.observer = observer.clone();
    mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("the run goes on");
    let cleaned_in = observer.done.lock().expect("lock").clone();
    assert_eq!(cleaned_in.len(), 1, "cleanup ran during one read");

    let skipped = stream
        .facts_query("SELECT batch_id, rows, detail FROM t WHERE event = 'data_skipped'")
        .await;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0][0], cleaned_in[0].get().to_string());
    assert_eq!(skipped[0][1], "0");
    assert_eq!(json(&skipped[0][2])["certain"], false);
}

/// Runs cleanup up to a fixed LSN when the first batch is about to read:
/// after the engine checked the range, before the change function runs,
/// so SQL Server answers the read with error 313.
struct CleanupBeforeRead(CleanupWhileReading);

impl Observer for CleanupBeforeRead {
    fn batch_started(&self, batch_id: BatchId) {
        self.0.batch_reading(batch_id, 0);
    }
}

/// A stream with two changes after its bootstrap, whose first batch meets
/// cleanup racing its read; returns the run's outcome and the batch.
async fn cleanup_races_the_read(
    policy: &str,
) -> (
    Result<mssql_cdc::engine::RunSummary, mssql_cdc::engine::EngineError>,
    Vec<BatchId>,
    StreamFixture,
) {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, policy, 1).await;
    stream.run_once().await.expect("bootstrap");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (10, N'a', 1)",
        1,
    )
    .await;
    let second = change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (11, N'b', 1)",
        1,
    )
    .await;
    let observer = Arc::new(CleanupBeforeRead(CleanupWhileReading {
        client: Mutex::new(Some(
            server.connect_to(&stream.config().source.database).await,
        )),
        low_water_mark: second,
        done: Mutex::new(Vec::new()),
    }));
    let mut options = stream.options();
    options.observer = observer.clone();
    let outcome = mssql_cdc::engine::run(stream.config(), options).await;
    let cleaned_in = observer.0.done.lock().expect("lock").clone();
    (outcome, cleaned_in, stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cleanup_racing_the_read_goes_through_skip() {
    let (outcome, cleaned_in, stream) = cleanup_races_the_read("  onDataLoss: skip\n").await;
    outcome.expect("error 313 is a purged range, and skip reads on");
    assert_eq!(cleaned_in.len(), 1, "cleanup ran before one read");
    let skipped = stream
        .facts_query("SELECT batch_id, detail FROM t WHERE event = 'data_skipped'")
        .await;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0][0], cleaned_in[0].get().to_string());
    assert_eq!(json(&skipped[0][1])["certain"], false);
    let changes = stream
        .bronze_query("SELECT id FROM t WHERE _operation = 'insert' ORDER BY id")
        .await;
    assert_eq!(
        changes,
        vec![vec!["11"]],
        "the change still kept is read once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cleanup_racing_the_read_stops_with_data_loss_under_fail() {
    let (outcome, _, stream) = cleanup_races_the_read("").await;
    match outcome {
        Err(mssql_cdc::engine::EngineError::DataLoss(_)) => {}
        other => panic!("expected DataLossError, got {other:?}"),
    }
    let changes = stream
        .bronze_query("SELECT COUNT(*) FROM t WHERE _operation <> 'snapshot'")
        .await;
    assert_eq!(changes, vec![vec!["0"]], "nothing of the batch was written");
}

#[tokio::test]
async fn resnapshot_takes_a_new_snapshot_and_streams_on() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "  onDataLoss: resnapshot\n", 2).await;
    stream.run_once().await.expect("bootstrap");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (10, N'lost', 1)",
        1,
    )
    .await;
    change(
        &mut client,
        "dbo_orders",
        "DELETE FROM dbo.orders WHERE id = 1",
        1,
    )
    .await;
    let kept = change(
        &mut client,
        "dbo_orders",
        "UPDATE dbo.orders SET qty = 7 WHERE id = 2",
        2,
    )
    .await;
    cleanup(&mut client, &kept).await;

    let summary = stream.run_once().await.expect("resnapshot");
    assert_eq!(summary.snapshot_rows, 2, "{summary:?}");
    let resnapshots = stream
        .facts_query(
            "SELECT batch_id IS NULL, rows, lost_from_ts IS NOT NULL, lost_to_ts IS NOT NULL, \
             lost_from_ts < lost_to_ts, min_lsn FROM t WHERE event = 'resnapshot'",
        )
        .await;
    assert_eq!(resnapshots.len(), 1, "one resnapshot row: {resnapshots:?}");
    assert_eq!(resnapshots[0][..5], ["true", "2", "true", "true", "true"]);
    let snapshot_lsn = resnapshots[0][5].clone();

    // The newest snapshot is the table as it is; nothing purged was read.
    let current = stream
        .bronze_query(&format!(
            "SELECT id, qty FROM t WHERE _operation = 'snapshot' AND _lsn = '{snapshot_lsn}' ORDER BY id"
        ))
        .await;
    assert_eq!(current, vec![vec!["2", "7"], vec!["10", "1"]]);
    assert_eq!(
        stream
            .bronze_query("SELECT COUNT(*) FROM t WHERE _operation <> 'snapshot'")
            .await,
        vec![vec!["0"]]
    );

    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (12, N'after', 1)",
        1,
    )
    .await;
    let after = stream.run_once().await.expect("streams on");
    assert_eq!((after.rows, after.snapshot_rows), (1, 0), "{after:?}");
    let changes = stream
        .bronze_query("SELECT id FROM t WHERE _operation <> 'snapshot'")
        .await;
    assert_eq!(changes, vec![vec!["12"]]);
}

#[tokio::test]
async fn a_schema_change_then_a_new_capture_instance_are_recorded_and_followed() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "  maxCommitsPerBatch: 1\n", 1).await;
    stream.run_once().await.expect("bootstrap");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (2, N'old', 2)",
        1,
    )
    .await;
    run(
        &mut client,
        "ALTER TABLE dbo.orders ADD extra nvarchar(20) NULL",
    )
    .await
    .expect("alter table");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (3, N'old', 3, N'not captured')",
        1,
    )
    .await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
         @role_name = NULL, @capture_instance = N'dbo_orders_v2'",
    )
    .await
    .expect("second capture instance");
    let v2_start = binary(
        &mut client,
        "SELECT start_lsn FROM cdc.change_tables WHERE capture_instance = N'dbo_orders_v2'",
    )
    .await
    .expect("start_lsn");
    change(
        &mut client,
        "dbo_orders_v2",
        "INSERT INTO dbo.orders VALUES (4, N'new', 4, N'captured')",
        1,
    )
    .await;
    change(
        &mut client,
        "dbo_orders_v2",
        "UPDATE dbo.orders SET extra = N'set' WHERE id = 2",
        2,
    )
    .await;
    let ddl_lsn = binary(
        &mut client,
        "SELECT ddl_lsn FROM cdc.ddl_history WHERE object_id = OBJECT_ID(N'cdc.dbo_orders_CT')",
    )
    .await
    .expect("ddl_lsn");

    stream.run_once().await.expect("stream across the switch");

    let events = stream
        .facts_query(
            "SELECT event, batch_id, rows, min_lsn, max_lsn, end_lsn, capture_instance, detail \
             FROM t WHERE event IN ('schema_change', 'capture_instance_switched') ORDER BY min_lsn",
        )
        .await;
    assert_eq!(events.len(), 2, "{events:?}");
    let (ddl, switch) = (&events[0], &events[1]);
    assert_eq!(ddl[0], "schema_change");
    assert_eq!(ddl[2], "0");
    assert_eq!(
        ddl[3..6],
        [
            lsn_literal(&ddl_lsn),
            lsn_literal(&ddl_lsn),
            lsn_literal(&ddl_lsn)
        ]
    );
    assert_eq!(ddl[6], "dbo_orders");
    let detail = json(&ddl[7]);
    assert!(
        detail["command"]
            .as_str()
            .is_some_and(|c| c.contains("extra"))
    );
    assert_eq!(
        detail["columns_added"],
        serde_json::json!([{"column": "extra", "captured": false}])
    );
    assert_eq!(switch[0], "capture_instance_switched");
    assert_eq!(switch[2], "0");
    assert_eq!(switch[3], lsn_literal(&v2_start));
    assert_eq!(switch[6], "dbo_orders_v2");
    let detail = json(&switch[7]);
    assert_eq!(detail["from_capture_instance"], "dbo_orders");
    assert_eq!(detail["to_capture_instance"], "dbo_orders_v2");
    assert_eq!(
        detail["from_columns"],
        serde_json::json!(["id", "note", "qty"])
    );
    assert_eq!(
        detail["to_columns"],
        serde_json::json!(["id", "note", "qty", "extra"])
    );

    // Each event carries the batch that read past it.
    let ddl_batch = batch(&stream, &ddl[1]).await;
    assert!(ddl_batch[0][0] >= lsn_literal(&ddl_lsn), "{ddl_batch:?}");
    assert_eq!(ddl_batch[0][1], "dbo_orders");
    let previous: i64 = ddl[1].parse::<i64>().expect("batch id") - 1;
    let before = batch(&stream, &previous.to_string()).await;
    assert!(before.is_empty() || before[0][0] < lsn_literal(&ddl_lsn));
    let switch_batch = batch(&stream, &switch[1]).await;
    assert_eq!(switch_batch[0][1], "dbo_orders_v2");
    let previous: i64 = switch[1].parse::<i64>().expect("batch id") - 1;
    assert_eq!(
        batch(&stream, &previous.to_string()).await[0][1],
        "dbo_orders"
    );

    // Bronze gained the column from the switch on; nothing lost or doubled.
    let rows = stream
        .bronze_query(
            "SELECT id, extra, _operation FROM t WHERE _operation <> 'update_before' \
             ORDER BY _lsn, _seqval",
        )
        .await;
    assert_eq!(
        rows,
        vec![
            vec!["1", "", "snapshot"],
            vec!["2", "", "insert"],
            vec!["3", "", "insert"],
            vec!["4", "captured", "insert"],
            vec!["2", "set", "update_after"],
        ]
    );
}

#[tokio::test]
async fn warnings_are_recorded_once_per_run_in_the_first_batch_row() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "", 1).await;
    let manifest = stream.manifest.replace(
        "    table: dbo.orders\n",
        "    table: dbo.orders\n    columns: [id, note]\n",
    );
    let stream = StreamFixture { manifest, ..stream };
    stream.run_once().await.expect("bootstrap");
    assert_eq!(
        stream
            .facts_query("SELECT COUNT(*) FROM t WHERE detail IS NOT NULL")
            .await,
        vec![vec!["0"]],
        "a snapshot row carries no warnings"
    );
    for id in [10, 11] {
        change(
            &mut client,
            "dbo_orders",
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'x', 1)"),
            1,
        )
        .await;
        // The first of these runs also has a manifest warning.
        let mut options = stream.options();
        if id == 10 {
            options.warnings = vec!["unknown field spec.sourec (ignored)".into()];
        }
        mssql_cdc::engine::run(stream.config(), options)
            .await
            .expect("a run");
    }
    let details = stream
        .facts_query("SELECT batch_id, detail FROM t WHERE event IS NULL ORDER BY batch_id")
        .await;
    assert_eq!(details.len(), 2, "{details:?}");
    // Each run records its warnings in its first batch, once.
    for row in &details {
        let warnings = json(&row[1])["warnings"].clone();
        let texts: Vec<&str> = warnings
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|w| w.as_str())
            .collect();
        assert!(
            texts.iter().any(|w| w.contains("leaves out: qty")),
            "{texts:?}"
        );
    }
    let first = json(&details[0][1]);
    assert_eq!(first["warnings"][0], "unknown field spec.sourec (ignored)");
    assert_eq!(first["warnings"].as_array().map(Vec::len), Some(2));
    let second = json(&details[1][1]);
    assert_eq!(second["warnings"].as_array().map(Vec::len), Some(1));
}

/// One insert into `dbo.orders` on a sandbox emulating SQL Server 2019 in
/// Europe/Oslo, streamed with `source_field` added to `spec.source`;
/// returns the stream after its run and the commit time CDC mapped
/// (server-local). `None` against a real server.
async fn oslo_2019(source_field: &str) -> Option<(StreamFixture, chrono::NaiveDateTime)> {
    let server = TestServer::sandbox_with(|options| {
        options.sql_version = mssql_cdc_sandbox::SqlVersion::Sql2019;
        options.time_zone = "Europe/Oslo".into();
    })
    .await?;
    let (mut client, stream) = orders(&server, "  snapshot: {mode: never}\n", 0).await;
    let manifest = stream.manifest.replace(
        "    table: dbo.orders\n",
        &format!("    table: dbo.orders\n{source_field}"),
    );
    let stream = StreamFixture { manifest, ..stream };
    let lsn = change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (1, N'x', 1)",
        1,
    )
    .await;
    let rows = run(
        &mut client,
        &format!(
            "SELECT tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn = {}",
            lsn_literal(&lsn)
        ),
    )
    .await
    .expect("lsn_time_mapping");
    let local = rows
        .into_iter()
        .flatten()
        .next()
        .and_then(|r| r.get::<chrono::NaiveDateTime, _>(0))
        .expect("a commit time");
    stream.run_once().await.expect("run");
    Some((stream, local))
}

async fn bronze_commit_ts(stream: &StreamFixture) -> chrono::NaiveDateTime {
    let ts = stream
        .bronze_query("SELECT CAST(_commit_ts AS STRING) FROM t")
        .await;
    chrono::NaiveDateTime::parse_from_str(&ts[0][0], "%Y-%m-%dT%H:%M:%S%.f").expect("a timestamp")
}

async fn details(stream: &StreamFixture) -> Vec<Vec<String>> {
    stream
        .facts_query("SELECT detail FROM t WHERE detail IS NOT NULL")
        .await
}

#[tokio::test]
async fn commit_times_use_the_server_offset_before_2022_with_a_warning() {
    use chrono::{Offset, TimeZone};
    let Some((stream, local)) = oslo_2019("").await else {
        return;
    };
    let offset = chrono_tz::Europe::Oslo
        .offset_from_utc_datetime(&chrono::Utc::now().naive_utc())
        .fix()
        .local_minus_utc();
    let expected = local - chrono::Duration::seconds(i64::from(offset));
    let got = bronze_commit_ts(&stream).await;
    assert!(
        (got - expected).num_milliseconds().abs() < 5,
        "{got} vs {expected}"
    );
    let details = details(&stream).await;
    assert_eq!(details.len(), 1, "{details:?}");
    let taken = format!(
        "server's offset +0{}:00, taken from the server at",
        offset / 3600
    );
    assert!(details[0][0].contains(&taken), "{details:?}");
}

#[tokio::test]
async fn an_explicit_source_time_zone_overrides_the_server() {
    let Some((stream, local)) = oslo_2019("    sourceTimeZone: UTC\n").await else {
        return;
    };
    let got = bronze_commit_ts(&stream).await;
    assert!(
        (got - local).num_milliseconds().abs() < 5,
        "{got} vs {local}"
    );
    assert_eq!(
        details(&stream).await,
        Vec::<Vec<String>>::new(),
        "no offset warning"
    );
}

/// Hands every batch's facts row to the test.
struct Rows(tokio::sync::mpsc::UnboundedSender<mssql_cdc::domain::FactRow>);

impl Observer for Rows {
    fn batch_done(&self, row: &mssql_cdc::domain::FactRow) {
        let _ = self.0.send(row.clone());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_a_quiet_stream_current() {
    let Some(server) = TestServer::sandbox_with(|o| o.cdc_idle_interval_secs = 3600).await else {
        return;
    };
    let (mut client, stream) = orders(&server, "", 0).await;
    run(
        &mut client,
        "CREATE TABLE dbo.mssql_cdc_heartbeat (app_id nvarchar(200) NOT NULL PRIMARY KEY, \
         beat_at datetime2 NOT NULL)",
    )
    .await
    .expect("heartbeat table");
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', \
         @source_name = N'mssql_cdc_heartbeat', @role_name = NULL",
    )
    .await
    .expect("capture the heartbeat table");
    let manifest = format!(
        "{}  heartbeat: {{table: dbo.mssql_cdc_heartbeat, interval: 100ms}}\n",
        stream.manifest
    );
    let stream = StreamFixture { manifest, ..stream };
    let mut config = stream.config();
    config.trigger =
        mssql_cdc::spec::Trigger::ProcessingTime(std::time::Duration::from_millis(100));
    let (sender, mut rows) = tokio::sync::mpsc::unbounded_channel();
    let mut options = stream.options();
    options.once = false;
    options.observer = Arc::new(Rows(sender));
    let stop = options.stop.clone();
    let running = tokio::spawn(mssql_cdc::engine::run(config, options));

    // Ten quiet minutes of server time, in capture-job steps: without the
    // heartbeat the max LSN would move only with the idle entries (every
    // five minutes); with it, it stays a few seconds behind the clock.
    for _ in 0..120 {
        crate::support::cdc::advance_clock(&mut client, 5).await;
    }
    let now = crate::support::server::scalar::<chrono::NaiveDateTime>(
        &mut client,
        "SELECT SYSUTCDATETIME()",
    )
    .await
    .expect("server time");
    let current = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            let row = rows.recv().await.expect("the engine runs");
            if row
                .end_commit_ts
                .is_some_and(|ts| (now - ts.naive_utc()).num_seconds() <= 10)
            {
                return row;
            }
        }
    })
    .await
    .expect("a batch reads up to the last seconds of server time");
    stop.cancel();
    running
        .await
        .expect("engine task")
        .expect("the stream stops cleanly");
    assert_eq!(current.rows, Some(0), "the table stayed quiet");
    let lag = current
        .ingestion_lag_seconds
        .expect("ingestion lag measured");
    assert!(lag < 10.0, "ingestion lag {lag} s");
    let beats = crate::support::server::scalar::<i32>(
        &mut client,
        "SELECT COUNT(*) FROM cdc.dbo_mssql_cdc_heartbeat_CT",
    )
    .await
    .unwrap_or(0);
    assert!(
        beats > 1,
        "the worker wrote the heartbeat table ({beats} changes)"
    );
}

/// A column `spec.source.columns` names only after the first run: bronze
/// was created without it, and before, its values never reached bronze.
#[tokio::test]
async fn a_column_added_to_spec_source_columns_reaches_bronze_from_the_next_run() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "", 1).await;
    let narrow = stream.manifest.replace(
        "    table: dbo.orders\n",
        "    table: dbo.orders\n    columns: [id, note]\n",
    );
    let stream = StreamFixture {
        manifest: narrow,
        ..stream
    };
    stream.run_once().await.expect("bootstrap without qty");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (10, N'before', 7)",
        1,
    )
    .await;
    stream.run_once().await.expect("a batch without qty");

    let widened = stream
        .manifest
        .replace("columns: [id, note]", "columns: [id, note, qty]");
    let stream = StreamFixture {
        manifest: widened,
        ..stream
    };
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (11, N'after', 8)",
        1,
    )
    .await;
    stream.run_once().await.expect("a run with qty");
    let rows = stream
        .bronze_query("SELECT CAST(id AS STRING) AS k, CAST(qty AS STRING) FROM t WHERE _operation = 'insert' ORDER BY k")
        .await;
    assert_eq!(
        rows,
        vec![vec!["10", ""], vec!["11", "8"]],
        "the row read before the edit has no qty; the one after has its value"
    );
    let warned = stream
        .facts_query(
            "SELECT detail FROM t WHERE event IS NULL AND detail LIKE '%gained the column%'",
        )
        .await;
    assert_eq!(
        warned.len(),
        1,
        "the run says once what it added: {warned:?}"
    );
    assert!(warned[0][0].contains("qty"), "{warned:?}");
}

/// The capture instance is disabled and enabled again under its name, with
/// a column more: the stream reads the new instance with that column, and
/// the changes made while CDC was off go through `onDataLoss`.
#[tokio::test]
async fn an_instance_enabled_again_under_its_name_brings_its_new_columns() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "  onDataLoss: skip\n", 1).await;
    stream.run_once().await.expect("bootstrap");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (10, N'first', 1)",
        1,
    )
    .await;
    stream
        .run_once()
        .await
        .expect("a batch of the first instance");

    run(
        &mut client,
        "ALTER TABLE dbo.orders ADD extra nvarchar(20) NULL",
    )
    .await
    .expect("alter table");
    run(
        &mut client,
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', \
         @capture_instance = N'dbo_orders'",
    )
    .await
    .expect("disable the instance");
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (11, N'while off', 2, N'lost')",
    )
    .await
    .expect("a change CDC never sees");
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
         @role_name = NULL, @capture_instance = N'dbo_orders'",
    )
    .await
    .expect("enable it again under the same name");
    change(
        &mut client,
        "dbo_orders",
        "INSERT INTO dbo.orders VALUES (12, N'again', 3, N'captured')",
        1,
    )
    .await;

    stream.run_once().await.expect("a run after the re-enable");
    let rows = stream
        .bronze_query(
            "SELECT CAST(id AS STRING) AS k, extra FROM t WHERE _operation = 'insert' ORDER BY k",
        )
        .await;
    assert_eq!(
        rows,
        vec![vec!["10", ""], vec!["12", "captured"]],
        "the new instance's column reaches bronze; the change made while CDC was off is not in CDC"
    );
    let skipped = stream
        .facts_query("SELECT COUNT(*) FROM t WHERE event = 'data_skipped'")
        .await;
    assert_eq!(
        skipped,
        vec![vec!["1"]],
        "the gap while CDC was off went through onDataLoss: skip"
    );
}

/// Moves the frozen sandbox clock to `utc` (`YYYY-MM-DDTHH:MM:SS`).
async fn clock_to(client: &mut Client, utc: &str) {
    let seconds = crate::support::server::scalar::<i64>(
        client,
        &format!("SELECT DATEDIFF_BIG(second, SYSUTCDATETIME(), '{utc}')"),
    )
    .await
    .expect("seconds to go");
    assert!(seconds >= 0, "the clock is past {utc}");
    crate::support::cdc::advance_clock(client, seconds).await;
}

/// Inserts order `id` now and lets the capture job (polling every 5
/// server seconds) take it.
async fn insert_now(client: &mut Client, id: i32) {
    let before = max_lsn(client).await;
    run(
        client,
        &format!("INSERT INTO dbo.orders VALUES ({id}, N'x', {id})"),
    )
    .await
    .expect("insert");
    crate::support::cdc::advance_clock(client, 5).await;
    wait_for_capture(client, "dbo_orders", before.as_deref(), 1).await;
}

/// `(id, _commit_ts)` of every bronze row, in LSN order, to the second
/// (the frozen clock keeps the fraction of the moment the sandbox started).
async fn commit_times(stream: &StreamFixture) -> Vec<(String, chrono::NaiveDateTime)> {
    stream
        .bronze_query("SELECT CAST(id AS STRING), CAST(_commit_ts AS STRING) FROM t ORDER BY _lsn")
        .await
        .into_iter()
        .map(|row| {
            let ts = chrono::NaiveDateTime::parse_from_str(&row[1], "%Y-%m-%dT%H:%M:%S%.f")
                .expect("a timestamp");
            (row[0].clone(), chrono::SubsecRound::trunc_subsecs(ts, 0))
        })
        .collect()
}

fn at(text: &str) -> chrono::NaiveDateTime {
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").expect("a time")
}

/// A server in New York on a frozen clock, moved across the 2027
/// spring-forward (07:00 UTC, March 14) and fall-back (06:00 UTC,
/// November 7) changes, the stream reading after each: every commit keeps
/// its true instant (the server's zone named by CURRENT_TIMEZONE_ID), no
/// commit time steps back with the LSN in the repeated hour, and a batch
/// read after the fall-back change claims no moment it has not read.
#[tokio::test]
async fn commit_times_are_true_on_both_sides_of_a_clock_change() {
    let Some(server) = TestServer::sandbox_with(|options| {
        options.time_zone = "America/New_York".into();
        options.clock_speed = 0.0;
        options.cdc_idle_interval_secs = 365 * 86_400;
    })
    .await
    else {
        return;
    };
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    clock_to(&mut client, "2027-03-14T06:30:00").await;
    crate::support::cdc::enable_db(&mut client).await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
         @role_name = NULL",
    )
    .await
    .expect("capture dbo.orders");
    crate::support::cdc::advance_clock(&mut client, 5).await;
    crate::support::cdc::wait_for_max_lsn_past(&mut client, None).await;
    let stream = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    stream.run_once().await.expect("bootstrap");

    // 01:39:59 EST, then 03:09:59 EDT: read after the change.
    clock_to(&mut client, "2027-03-14T06:39:59").await;
    insert_now(&mut client, 1).await;
    clock_to(&mut client, "2027-03-14T07:09:59").await;
    insert_now(&mut client, 2).await;
    stream.run_once().await.expect("spring forward");
    assert_eq!(
        commit_times(&stream).await,
        [
            ("1".to_string(), at("2027-03-14T06:39:59")),
            ("2".to_string(), at("2027-03-14T07:09:59")),
        ],
        "each commit by the offset of its own instant"
    );

    // Eight months on, the jobs stopped meanwhile so the frozen clock
    // jumps without running them (cleanup stays stopped: the stream read
    // everything, but the months would purge its position's mapping).
    for job in ["capture", "cleanup"] {
        run(
            &mut client,
            &format!("EXEC sys.sp_cdc_stop_job @job_type = N'{job}'"),
        )
        .await
        .expect("stop job");
    }
    clock_to(&mut client, "2027-11-07T05:40:00").await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_start_job @job_type = N'capture'",
    )
    .await
    .expect("start the capture job");
    // 01:40 and 01:50 EDT, read at 01:05 EST (06:05 UTC), after the change.
    insert_now(&mut client, 3).await;
    clock_to(&mut client, "2027-11-07T05:50:00").await;
    insert_now(&mut client, 4).await;
    clock_to(&mut client, "2027-11-07T06:05:00").await;
    stream.run_once().await.expect("into the repeated hour");
    let ends = stream
        .facts_query(
            "SELECT CAST(end_commit_ts AS STRING) FROM t WHERE event IS NULL AND rows > 0 \
             ORDER BY batch_id",
        )
        .await;
    let last_end = ends
        .last()
        .and_then(|row| chrono::NaiveDateTime::parse_from_str(&row[0], "%Y-%m-%dT%H:%M:%S%.f").ok())
        .expect("the batch's end commit time");
    assert!(
        last_end <= at("2027-11-07T06:05:00"),
        "the batch claims {last_end}, after the moment it read at"
    );
    // 01:10 and 01:45 EST (the hour again), then 02:20 EST.
    clock_to(&mut client, "2027-11-07T06:10:00").await;
    insert_now(&mut client, 5).await;
    clock_to(&mut client, "2027-11-07T06:45:00").await;
    insert_now(&mut client, 6).await;
    clock_to(&mut client, "2027-11-07T07:20:00").await;
    insert_now(&mut client, 7).await;
    stream.run_once().await.expect("out of the repeated hour");
    let times = commit_times(&stream).await;
    assert!(
        times.windows(2).all(|pair| pair[0].1 <= pair[1].1),
        "commit times step back with the LSN: {times:?}"
    );
    assert_eq!(
        times[2..],
        [
            ("3".to_string(), at("2027-11-07T05:40:00")),
            ("4".to_string(), at("2027-11-07T05:50:00")),
            ("5".to_string(), at("2027-11-07T06:10:00")),
            ("6".to_string(), at("2027-11-07T06:45:00")),
            ("7".to_string(), at("2027-11-07T07:20:00")),
        ],
        "the repeated hour's two passes told apart by the commits' order"
    );
}
