//! The fault matrix: a stream under store faults of each kind, two
//! engines on one checkpoint without the lease, and a lease whose renewals
//! fail while another process takes over. Whatever happens, bronze must
//! hold every change of the source exactly once and the facts one row per
//! batch. (Kill -9 at every crash point, locally and on S3 and Azure, is in
//! `engine_crash`.) `MSSQL_CDC_SOAK=1` lets the random runs go on longer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mssql_cdc::domain::{FactRow, Lsn};
use mssql_cdc::engine::{Backoff, EngineError, Observer, StoreDown};
use mssql_cdc::lake::faults::{Call, Fault, FaultPlan, Rule, install, remove};
use tokio_util::sync::CancellationToken;

use crate::support::cdc::{capture_table, max_lsn, orders_changes, wait_for_capture};
use crate::support::objectstores::{Moto, TestStore};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::{PASSWORD_ENV, StreamFixture, query_table, query_uri};

/// Source transactions a scenario makes while faults are on.
fn transactions() -> i32 {
    if std::env::var_os("MSSQL_CDC_SOAK").is_some() {
        200
    } else {
        24
    }
}

/// A captured `dbo.orders` with a few rows, and a continuous stream of it
/// (retrying fast) whose lake is local.
async fn orders(server: &TestServer) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(40) NULL, qty int NULL)",
    )
    .await
    .expect("create table");
    for id in 1..=10 {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'seed', {id})"),
        )
        .await
        .expect("seed");
    }
    capture_table(&mut client, "orders").await;
    let mut stream = StreamFixture::new(
        server,
        &db,
        "  maxCommitsPerBatch: 3\n  snapshot: {mode: initial, chunkRows: 4}\n",
    );
    stream.manifest = stream.manifest.replace(
        "trigger: {availableNow: true}",
        "trigger: {processingTime: 50ms}",
    );
    (client, stream)
}

/// Makes transaction `i` of a mixed workload (inserts, updates, deletes).
async fn change(client: &mut Client, i: i32) {
    let id = 100 + i;
    let sql = match i % 4 {
        0 | 1 => format!("INSERT INTO dbo.orders VALUES ({id}, N'new', {i})"),
        2 => format!("UPDATE dbo.orders SET qty = qty + 1 WHERE id = {}", id - 1),
        _ => format!("DELETE FROM dbo.orders WHERE id = {}", id - 3),
    };
    run(client, &sql).await.expect("change");
}

/// Bronze holds each source change once, the seed rows once, and the facts
/// one row per batch.
async fn assert_exactly_once(client: &mut Client, stream: &StreamFixture, what: &str) {
    assert_eq!(
        stream.bronze_changes().await,
        orders_changes(client).await,
        "{what}: every change once"
    );
    let seed = stream
        .bronze_query("SELECT COUNT(*), COUNT(DISTINCT id) FROM t WHERE _operation = 'snapshot'")
        .await;
    assert_eq!(seed[0], ["10", "10"], "{what}: every seed row once");
    let facts = stream
        .facts_query("SELECT COUNT(*), COUNT(DISTINCT batch_id) FROM t WHERE event IS NULL")
        .await;
    assert_eq!(facts[0][0], facts[0][1], "{what}: one facts row per batch");
    let bootstrap = stream
        .facts_query("SELECT COUNT(*) FROM t WHERE event = 'bootstrap'")
        .await;
    assert_eq!(bootstrap, [["1"]], "{what}: one bootstrap row");
}

/// Remembers the end of each batch the engine finished, and whether the
/// bootstrap is done.
#[derive(Default)]
struct Ends(
    Mutex<Vec<Lsn>>,
    std::sync::atomic::AtomicBool,
    Mutex<Vec<Option<StoreDown>>>,
);

impl Observer for Ends {
    fn store_outage(&self, down: Option<&StoreDown>) {
        self.2.lock().expect("lock").push(down.cloned());
    }
    fn batch_done(&self, row: &FactRow) {
        if let Some(end) = row.end_lsn {
            self.0.lock().expect("lock").push(end);
        }
    }
    fn snapshot_done(&self, _row: &FactRow) {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Ends {
    fn reached(&self, lsn: &[u8]) -> bool {
        let Ok(lsn) = Lsn::try_from(lsn) else {
            return false;
        };
        self.0.lock().expect("lock").iter().any(|end| *end >= lsn)
    }
}

/// Runs the stream continuously while the workload goes on under `plan`,
/// then stops the faults and waits until the stream caught up: it must
/// keep going by itself.
async fn stream_through(
    client: &mut Client,
    stream: &StreamFixture,
    plan: &Arc<FaultPlan>,
) -> Arc<Ends> {
    let ends = Arc::new(Ends::default());
    let mut options = stream.options();
    options.once = false;
    options.observer = ends.clone();
    options.backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(100));
    let stop = options.stop.clone();
    let running = tokio::spawn(mssql_cdc::engine::run(stream.config(), options));
    // Changes made while the snapshot reads may be copied by it as well
    // (docs/user-guide.md); the workload starts after it.
    let bootstrapped = async {
        while !ends.1.load(std::sync::atomic::Ordering::SeqCst) && !running.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), bootstrapped)
        .await
        .expect("the bootstrap ends under faults");
    if running.is_finished() {
        let outcome = running.await.expect("the run's task");
        panic!("the stream stopped during the bootstrap: {outcome:?}");
    }
    for i in 0..transactions() {
        change(client, i).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        if running.is_finished() {
            let outcome = running.await.expect("the run's task");
            panic!("the stream stopped under faults: {outcome:?}");
        }
    }
    let before = max_lsn(client).await;
    wait_for_capture(client, "dbo_orders", None, 1).await;
    plan.stop();
    let last = max_lsn(client)
        .await
        .or(before)
        .expect("changes were captured");
    let caught_up = async {
        while !ends.reached(&last) && !running.is_finished() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let timed_out = tokio::time::timeout(Duration::from_secs(120), caught_up)
        .await
        .is_err();
    stop.cancel();
    let outcome = running.await.expect("the run's task");
    assert!(outcome.is_ok(), "the run ends cleanly: {outcome:?}");
    assert!(!timed_out, "the stream catches up once the faults stop");
    ends
}

/// A fault plan, with no rule yet, for the stream's lake.
fn lake_faults(stream: &StreamFixture) -> Arc<FaultPlan> {
    FaultPlan::new(&url::Url::from_directory_path(stream.lake.path()).expect("lake url"))
}

/// Matching store calls that pass before the certain fault: past the
/// checkpoint's and the lease's first writes, into the bootstrap's.
const FIRST_CALLS_WITHOUT_FAULTS: u64 = 4;

async fn under_store_faults(fault: Fault, calls: &[Call]) {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server).await;
    let plan = lake_faults(&stream);
    // One certain fault in the bootstrap (a short run may draw none at
    // random), then faults at random until the workload ends.
    plan.add(Rule {
        path: String::new(),
        calls: calls.to_vec(),
        fault,
        odds: 1.0,
        limit: Some(1),
        after: FIRST_CALLS_WITHOUT_FAULTS,
    });
    plan.add(Rule {
        path: String::new(),
        calls: calls.to_vec(),
        fault,
        odds: 0.15,
        limit: None,
        after: 0,
    });
    install(plan.clone());
    stream_through(&mut client, &stream, &plan).await;
    remove(&plan);
    assert!(plan.injected() > 0, "{fault:?}: no fault was injected");
    println!("{fault:?}: {} faults injected", plan.injected());
    assert_exactly_once(&mut client, &stream, &format!("{fault:?}")).await;
}

const EVERY_CALL: [Call; 6] = [
    Call::Put,
    Call::Multipart,
    Call::Get,
    Call::List,
    Call::Delete,
    Call::Copy,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_answering_503_loses_and_duplicates_nothing() {
    under_store_faults(Fault::Unavailable, &EVERY_CALL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_timeouts_lose_and_duplicate_nothing() {
    under_store_faults(Fault::Timeout, &EVERY_CALL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_succeed_but_answer_500_lose_and_duplicate_nothing() {
    under_store_faults(Fault::SucceedThenFail, &[Call::Put, Call::Copy]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_writes_refused_on_their_own_retry_lose_and_duplicate_nothing() {
    under_store_faults(Fault::RetriedAfterSuccess, &[Call::Put]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_multipart_parts_lose_and_duplicate_nothing() {
    under_store_faults(Fault::PartFails, &[Call::Multipart, Call::Put]).await;
}

/// Counts the snapshots reported done, with their rows.
#[derive(Default)]
struct SnapshotsDone(Mutex<Vec<Option<u64>>>);

impl Observer for SnapshotsDone {
    fn snapshot_done(&self, row: &FactRow) {
        self.0.lock().expect("lock").push(row.rows);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_completion_that_answers_500_is_reported_once_and_releases_the_verdict() {
    let server = TestServer::start().await;
    let (_client, mut stream) = orders(&server).await;
    stream.manifest = stream.manifest.replace(
        "trigger: {processingTime: 50ms}",
        "trigger: {availableNow: true}",
    );
    let control = stream.path("control");
    stream.manifest += &format!(
        "  finalization: {{name: ops.table_finalization, location: \"{}\"}}\n",
        control.display()
    );
    let plan = lake_faults(&stream);
    // The completion marker is written, then the store answers 500: the
    // retry finds the snapshot complete.
    plan.add(Rule {
        path: "snapshots/0.done".into(),
        calls: vec![Call::Put],
        fault: Fault::SucceedThenFail,
        odds: 1.0,
        limit: Some(1),
        after: 0,
    });
    install(plan.clone());
    let done = Arc::new(SnapshotsDone::default());
    let mut options = stream.options();
    options.observer = done.clone();
    options.backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(50));
    let summary = mssql_cdc::engine::run(stream.config(), options).await;
    remove(&plan);
    let summary = summary.expect("the run retries past the 500");
    assert_eq!(plan.injected(), 1, "the completion answered 500");
    assert_eq!(
        *done.0.lock().expect("lock"),
        [Some(10)],
        "the snapshot is reported done once, with its rows"
    );
    assert_eq!(
        summary.snapshot_rows, 10,
        "the run counts the rows it copied"
    );
    let verdict = query_table(
        &control,
        "SELECT coalesce(open_snapshot_lsn, '-'), finalized_until IS NOT NULL FROM t",
    )
    .await;
    assert_eq!(
        verdict,
        [["-", "true"]],
        "the verdict moves past the completed snapshot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_engines_without_the_lease_race_and_nothing_is_lost_or_doubled() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server).await;
    stream.run_once().await.expect("bootstrap");
    // A batch planned by a run that died: both engines start by replaying it.
    change(&mut client, 0).await;
    wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    crate::engine_crash::run_until_killed(&stream, "after_offsets").await;
    let options = || {
        let mut options = stream.options();
        options.once = false;
        options.backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(50));
        options
            .env
            .insert("MSSQL_CDC_TEST_BYPASS_LEASE".into(), "1".into());
        options
    };
    let (first, second) = (options(), options());
    let stops = [first.stop.clone(), second.stop.clone()];
    let engines = [
        tokio::spawn(mssql_cdc::engine::run(stream.config(), first)),
        tokio::spawn(mssql_cdc::engine::run(stream.config(), second)),
    ];
    for i in 1..transactions() {
        change(&mut client, i).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
        if engines.iter().any(|e| e.is_finished()) {
            break;
        }
    }
    let stopped = async {
        while !engines.iter().any(|e| e.is_finished()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let collided = tokio::time::timeout(Duration::from_secs(60), stopped)
        .await
        .is_ok();
    stops.iter().for_each(CancellationToken::cancel);
    let mut errors = Vec::new();
    for engine in engines {
        if let Err(error) = engine.await.expect("the engine's task") {
            errors.push(error);
        }
    }
    assert!(
        collided,
        "two engines on one checkpoint ran side by side without colliding"
    );
    assert_eq!(errors.len(), 1, "one of them stops: {errors:?}");
    let message = errors[0].to_string();
    assert!(
        matches!(errors[0], EngineError::Checkpoint(_))
            && message.contains("only one stream may use a checkpoint"),
        "a clear error: {message}"
    );
    // The survivor stopped too; a last run finishes what is left.
    for i in transactions()..transactions() + 2 {
        change(&mut client, i).await;
    }
    wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    stream.run_once().await.expect("a single engine goes on");
    assert_exactly_once(&mut client, &stream, "two engines").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_cannot_renew_stops_and_a_successor_takes_over() {
    let Some(moto) = Moto::start().await else {
        return;
    };
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server).await;
    let stream = on_store(stream, &moto);
    let manifest = stream.manifest_file();
    // The first process: its lease is written once, then never renewed.
    let mut first = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["run", "--lease-ttl", "3s", "-f"])
        .arg(&manifest)
        .env(PASSWORD_ENV, &stream.password)
        .env(mssql_cdc::lake::faults::ENV, "lease:put:unavailable:1::1")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    for i in 0..8 {
        change(&mut client, i).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let exited = tokio::time::timeout(Duration::from_secs(60), first.wait())
        .await
        .expect("the first process stops by itself")
        .expect("exit status");
    let mut stderr = String::new();
    if let Some(mut pipe) = first.stderr.take() {
        use tokio::io::AsyncReadExt;
        pipe.read_to_string(&mut stderr).await.ok();
    }
    assert!(!exited.success(), "{stderr}");
    assert!(stderr.contains("could not be renewed"), "{stderr}");

    // The successor waits out the lease, then goes on from where the first
    // stopped writing.
    let mut options = stream.options();
    options.lease_ttl = Duration::from_secs(3);
    mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("the successor runs");
    let changes = count(&moto, "bronze", "SELECT COUNT(*), COUNT(DISTINCT concat(_lsn, _seqval, _operation)) FROM t WHERE _operation <> 'snapshot'").await;
    assert_eq!(changes[0][0], changes[0][1], "no change twice");
    assert_eq!(
        changes[0][0],
        orders_changes(&mut client).await.len().to_string(),
        "every change"
    );
}

/// The stream with its lake on `store`.
pub fn on_store(mut stream: StreamFixture, store: &dyn TestStore) -> StreamFixture {
    let base = store.base_uri();
    let base = base.trim_end_matches('/');
    for dir in ["bronze", "checkpoint", "facts"] {
        stream.manifest = stream.manifest.replace(
            &format!("\"{}\"", stream.path(dir).display()),
            &format!("\"{base}/{dir}\""),
        );
    }
    let options: Vec<String> = store
        .options()
        .iter()
        .map(|(k, v)| format!("    {k}: \"{v}\""))
        .collect();
    stream
        .manifest
        .push_str(&format!("  storageOptions:\n{}\n", options.join("\n")));
    stream
}

async fn count(store: &dyn TestStore, table: &str, sql: &str) -> Vec<Vec<String>> {
    let uri = format!("{}/{table}", store.base_uri().trim_end_matches('/'));
    query_uri(&uri, &store.options(), sql).await
}

/// A bronze commit that the store fails is tried again with the files it
/// already uploaded, instead of failing its batch, whose replay would
/// upload them again: every Parquet file in bronze's directory is one a
/// table version references, none left behind by a failed attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_bronze_commit_is_tried_again_without_uploading_its_files_again() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server).await;
    let plan = lake_faults(&stream);
    plan.add(Rule {
        path: "bronze/_delta_log".into(),
        calls: vec![Call::Put],
        fault: Fault::Unavailable,
        odds: 1.0,
        // Fewer than a commit's attempts, so each fault is retried in place.
        limit: Some(3),
        // The table's creation passes; its first commit meets the faults.
        after: 1,
    });
    install(plan.clone());
    stream_through(&mut client, &stream, &plan).await;
    remove(&plan);
    assert!(plan.injected() > 0, "no bronze commit failed");
    assert_exactly_once(&mut client, &stream, "failed bronze commits").await;

    assert_no_orphan_in_bronze(&stream, plan.injected()).await;
}

/// Every Parquet file in bronze's directory is one a table version
/// references: none was uploaded again by a retry and left behind.
async fn assert_no_orphan_in_bronze(stream: &StreamFixture, failures: u64) {
    let bronze = stream.path("bronze");
    let table = crate::support::stream::open_table(&bronze).await;
    let referenced: std::collections::BTreeSet<String> = table
        .get_file_uris()
        .expect("bronze's files")
        .filter_map(|uri| uri.rsplit('/').next().map(str::to_string))
        .collect();
    let on_disk: std::collections::BTreeSet<String> = std::fs::read_dir(&bronze)
        .expect("bronze's directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".parquet"))
        .collect();
    assert_eq!(
        on_disk, referenced,
        "{failures} failed commits left files no version references"
    );
}

/// A store that stays down (here: every bronze commit fails 60 times in a
/// row, seconds with the test's fast backoff, past a `storeOutageAfter` of
/// 300 ms): the commit is tried in place the whole time, so no retry
/// uploads the batch again or leaves a file behind; the observer hears
/// the outage once it passes the limit, with the store's answer, and its
/// end once the store answers; nothing is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_down_past_its_outage_limit_is_named_and_its_batch_never_uploaded_again() {
    let server = TestServer::start().await;
    let (mut client, mut stream) = orders(&server).await;
    stream
        .manifest
        .push_str("  alerts: {storeOutageAfter: 300ms}\n");
    let plan = lake_faults(&stream);
    plan.add(Rule {
        path: "bronze/_delta_log".into(),
        calls: vec![Call::Put],
        fault: Fault::Unavailable,
        odds: 1.0,
        // Far more than COMMIT_ATTEMPTS: an outage, not a blip.
        limit: Some(60),
        after: 1,
    });
    install(plan.clone());
    let ends = stream_through(&mut client, &stream, &plan).await;
    remove(&plan);
    assert_eq!(plan.injected(), 60, "the outage ran its course");
    assert_exactly_once(&mut client, &stream, "a long store outage").await;
    assert_no_orphan_in_bronze(&stream, plan.injected()).await;
    let heard = ends.2.lock().expect("lock").clone();
    assert_eq!(heard.len(), 2, "one outage and its end: {heard:?}");
    let down = heard[0].as_ref().expect("the outage first");
    assert!(
        down.answer.contains("bronze") || down.answer.contains("_delta_log"),
        "the store's answer names what failed: {down:?}"
    );
    assert_eq!(heard[1], None, "then the store answered again");
}
