//! Kill -9 at every step of a batch and of the snapshot, restart, and check
//! that each change is in bronze exactly once and each batch has one facts
//! row. The crash points exist only in builds with the `failpoints` feature
//! (`scripts/test` turns it on).

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use crate::support::cdc::{capture_table, max_lsn, wait_for_capture};
use crate::support::objectstores::{Azurite, Moto, TestStore};
use crate::support::server::{TestServer, run};
use crate::support::stream::{PASSWORD_ENV, StreamFixture, query_table, query_uri};

const SEED_ROWS: i32 = 25;
const CHANGES: i32 = 12;

/// Seeds and enables a table. For a batch crash point it bootstraps
/// in-process and makes changes; for a snapshot crash point it leaves the
/// snapshot to the armed run. Then it runs the binary armed to die at
/// `point`, restarts in process, and checks the lake.
async fn crash_at(point: &str, bootstrap_first: bool) {
    crash_on(point, bootstrap_first, None).await;
}

/// [`crash_at`] with the lake on `store` (a local temporary one when
/// `None`).
async fn crash_on(point: &str, bootstrap_first: bool, store: Option<&dyn TestStore>) {
    crash_with_readers(point, bootstrap_first, store, 1).await;
}

/// [`crash_on`] with `readers` sessions reading at once: batches are read
/// in parts, the snapshot in key ranges of chunks of 4 rows (so ranges
/// take more than one chunk).
pub async fn crash_with_readers(
    point: &str,
    bootstrap_first: bool,
    store: Option<&dyn TestStore>,
    readers: u32,
) {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)")
        .await
        .expect("create table");
    for id in 1..=SEED_ROWS {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'seed', {id})"),
        )
        .await
        .expect("seed");
    }
    capture_table(&mut client, "orders").await;
    let stream = StreamFixture::new(
        &server,
        &db,
        "  maxCommitsPerBatch: 4\n  snapshot: {mode: initial, chunkRows: 10}\n",
    );
    let stream = match store {
        Some(store) => crate::engine_faults::on_store(stream, store),
        None => stream,
    };
    let stream = if readers == 1 {
        stream
    } else {
        let mut stream = crate::engine_parallel::with_readers(stream, readers);
        stream.manifest = stream.manifest.replace("chunkRows: 10", "chunkRows: 4");
        stream
    };
    let lake = Lake {
        stream: &stream,
        store,
    };
    if bootstrap_first {
        stream.run_once().await.expect("bootstrap");
    }
    let before = max_lsn(&mut client).await;
    let changes = if bootstrap_first { CHANGES } else { 0 };
    for i in 0..changes {
        let id = 100 + i;
        let sql = match i % 3 {
            0 => format!("INSERT INTO dbo.orders VALUES ({id}, N'new', 1)"),
            1 => format!("UPDATE dbo.orders SET qty = qty + 1 WHERE id = {}", i + 1),
            _ => format!("DELETE FROM dbo.orders WHERE id = {}", i + 1),
        };
        run(&mut client, &sql).await.expect("change");
    }
    // Updates write two change rows.
    let change_rows = changes + changes / 3;
    if change_rows > 0 {
        wait_for_capture(&mut client, "dbo_orders", before.as_deref(), change_rows).await;
    }

    run_until_killed(&stream, point).await;

    let summary = stream.run_once().await.expect("the restarted run succeeds");
    let snapshot_rows = lake
        .bronze_query("SELECT COUNT(*), COUNT(DISTINCT id) FROM t WHERE _operation = 'snapshot'")
        .await;
    assert_eq!(
        snapshot_rows[0],
        vec![SEED_ROWS.to_string(), SEED_ROWS.to_string()],
        "{point}: every seed row once ({summary:?})"
    );
    let changes = lake
        .bronze_query(
            "SELECT COUNT(*), COUNT(DISTINCT concat(_lsn, _seqval, _operation)) FROM t WHERE _operation <> 'snapshot'",
        )
        .await;
    assert_eq!(
        changes[0],
        vec![change_rows.to_string(), change_rows.to_string()],
        "{point}: every change once"
    );
    let facts = lake
        .facts_query(
            "SELECT COUNT(*), COUNT(DISTINCT batch_id), SUM(rows) FROM t WHERE event IS NULL",
        )
        .await;
    assert_eq!(facts[0][0], facts[0][1], "{point}: one facts row per batch");
    let counted = if facts[0][2].is_empty() {
        "0"
    } else {
        facts[0][2].as_str()
    };
    assert_eq!(
        counted,
        change_rows.to_string(),
        "{point}: facts count every change"
    );
    let bootstrap = lake
        .facts_query("SELECT COUNT(*), MAX(rows) FROM t WHERE event = 'bootstrap'")
        .await;
    assert_eq!(
        bootstrap[0],
        vec!["1".to_string(), SEED_ROWS.to_string()],
        "{point}"
    );
    if readers > 1 && store.is_none() {
        crate::engine_parallel_crash::read_in_parallel(&stream, readers, point, bootstrap_first);
    }
}

/// Where a crash test reads its lake back.
struct Lake<'a> {
    stream: &'a StreamFixture,
    store: Option<&'a dyn TestStore>,
}

impl Lake<'_> {
    async fn query(&self, table: &str, sql: &str) -> Vec<Vec<String>> {
        match self.store {
            Some(store) => {
                let uri = format!("{}/{table}", store.base_uri().trim_end_matches('/'));
                query_uri(&uri, &store.options(), sql).await
            }
            None => query_table(&self.stream.path(table), sql).await,
        }
    }

    async fn bronze_query(&self, sql: &str) -> Vec<Vec<String>> {
        self.query("bronze", sql).await
    }

    async fn facts_query(&self, sql: &str) -> Vec<Vec<String>> {
        self.query("facts", sql).await
    }
}

/// The crash points of a batch and of the snapshot, with whether the test
/// bootstraps before the armed run.
const CRASH_POINTS: [(&str, bool); 7] = [
    ("mid_read", true),
    ("after_offsets", true),
    ("before_bronze_commit", true),
    ("after_bronze_commit", true),
    ("after_facts", true),
    ("mid_snapshot", false),
    ("after_snapshot_facts", false),
];

#[tokio::test]
async fn kill_9_at_every_point_on_s3() {
    let Some(moto) = Moto::start().await else {
        return;
    };
    for (point, bootstrap_first) in CRASH_POINTS {
        moto.fresh_prefix();
        crash_on(point, bootstrap_first, Some(&moto)).await;
    }
}

#[tokio::test]
async fn kill_9_at_every_point_on_azure() {
    let Some(azurite) = Azurite::start().await else {
        return;
    };
    for (point, bootstrap_first) in CRASH_POINTS {
        azurite.fresh_prefix();
        crash_on(point, bootstrap_first, Some(&azurite)).await;
    }
}

#[tokio::test]
async fn crash_mid_read() {
    crash_at("mid_read", true).await;
}

#[tokio::test]
async fn crash_after_offsets_write() {
    crash_at("after_offsets", true).await;
}

#[tokio::test]
async fn crash_after_parquet_files_before_delta_commit() {
    crash_at("before_bronze_commit", true).await;
}

#[tokio::test]
async fn crash_after_bronze_commit() {
    crash_at("after_bronze_commit", true).await;
}

#[tokio::test]
async fn crash_after_fact_row() {
    crash_at("after_facts", true).await;
}

#[tokio::test]
async fn crash_mid_snapshot() {
    crash_at("mid_snapshot", false).await;
}

#[tokio::test]
async fn crash_after_snapshot_fact_row() {
    crash_at("after_snapshot_facts", false).await;
}

/// Kills a run whose stream reads `id, note` of a table that also has `qty`
/// (a warning) at `point` in its first batch, makes another change, and
/// restarts: the restarted run records the warning in its first batch row
/// unless the crashed run had already written that batch's row, then in
/// the next one. Returns the batch ids whose rows carry the warning.
async fn warnings_after_crash_at(point: &str) -> Vec<String> {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)")
        .await
        .expect("create table");
    capture_table(&mut client, "orders").await;
    let mut stream = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    stream.manifest = stream.manifest.replace(
        "    table: dbo.orders\n",
        "    table: dbo.orders\n    columns: [id, note]\n",
    );
    for id in [1, 2] {
        let before = max_lsn(&mut client).await;
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'x', 1)"),
        )
        .await
        .expect("insert");
        wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
        if id == 2 {
            break;
        }
        run_until_killed(&stream, point).await;
    }
    stream.run_once().await.expect("the restarted run");
    let rows = stream
        .facts_query("SELECT batch_id, detail FROM t WHERE event IS NULL ORDER BY batch_id")
        .await;
    assert_eq!(rows.len(), 2, "{point}: one row per batch: {rows:?}");
    rows.into_iter()
        .filter(|row| row[1].contains("leaves out: qty"))
        .map(|row| row[0].clone())
        .collect()
}

#[tokio::test]
async fn warnings_after_a_crash_before_the_first_row_go_to_the_replayed_batch() {
    assert_eq!(warnings_after_crash_at("after_offsets").await, vec!["1"]);
}

#[tokio::test]
async fn warnings_after_a_crash_after_the_first_row_go_to_the_next_batch() {
    // The crashed run wrote batch 1's row with its warnings; the restarted
    // run's first batch replays it, so its warnings go to batch 2.
    assert_eq!(warnings_after_crash_at("after_facts").await, vec!["1", "2"]);
}

/// Kills the run at `point` of the batch that moves to a newer capture
/// instance, restarts, and checks the switch is recorded once and every
/// change is in bronze once.
async fn crash_at_the_switch(point: &str) {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)")
        .await
        .expect("create table");
    capture_table(&mut client, "orders").await;
    let stream = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    let before = max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'old', 1)")
        .await
        .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    stream.run_once().await.expect("the old instance's changes");
    run(&mut client, "ALTER TABLE dbo.orders ADD extra int NULL")
        .await
        .expect("alter table");
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
         @role_name = NULL, @capture_instance = N'dbo_orders_v2'",
    )
    .await
    .expect("second capture instance");
    let before = max_lsn(&mut client).await;
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (2, N'new', 2, 20)",
    )
    .await
    .expect("insert");
    wait_for_capture(&mut client, "dbo_orders_v2", before.as_deref(), 1).await;

    run_until_killed(&stream, point).await;
    stream.run_once().await.expect("the restarted run");

    let rows = stream
        .bronze_query("SELECT id, extra, _operation FROM t ORDER BY _lsn")
        .await;
    assert_eq!(
        rows,
        vec![vec!["1", "", "insert"], vec!["2", "20", "insert"]],
        "{point}"
    );
    let events = stream
        .facts_query(
            "SELECT event, COUNT(*) FROM t WHERE event IS NOT NULL GROUP BY event ORDER BY event",
        )
        .await;
    assert_eq!(
        events,
        vec![
            vec!["capture_instance_switched", "1"],
            vec!["schema_change", "1"]
        ],
        "{point}"
    );
}

#[tokio::test]
async fn crash_after_planning_the_switch() {
    crash_at_the_switch("after_offsets_of_switch").await;
}

#[tokio::test]
async fn crash_after_the_switch_batch_commit() {
    crash_at_the_switch("after_bronze_commit_of_switch").await;
}

/// Runs the real binary (`run --once`) on the stream's manifest with the
/// failpoint `point` armed, and checks that it died there (SIGKILL).
pub async fn run_until_killed(stream: &StreamFixture, point: &str) {
    let manifest = stream.manifest_file();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["run", "--once", "--lease-ttl", "2s", "-f"])
        .arg(&manifest)
        .env(PASSWORD_ENV, &stream.password)
        .env(mssql_cdc::failpoint::ENV, point)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("the armed run ends")
        .expect("the binary runs");
    assert_eq!(
        output.status.signal(),
        Some(9),
        "the run should die at {point}: {:?}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
