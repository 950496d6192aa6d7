//! Kill -9 at every step of a batch and of the snapshot, restart, and check
//! that each change is in bronze exactly once and each batch has one facts
//! row. The crash points exist only in builds with the `failpoints` feature
//! (`scripts/test` turns it on).

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use crate::support::cdc::{capture_table, max_lsn, wait_for_capture};
use crate::support::server::{TestServer, run};
use crate::support::stream::{PASSWORD_ENV, StreamFixture};

const SEED_ROWS: i32 = 25;
const CHANGES: i32 = 12;

/// Seeds and enables a table. For a batch crash point it bootstraps
/// in-process and makes changes; for a snapshot crash point it leaves the
/// snapshot to the armed run. Then it runs the binary armed to die at
/// `point`, restarts in process, and checks the lake.
async fn crash_at(point: &str, bootstrap_first: bool) {
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

    let manifest = stream.manifest_file();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["run", "--once", "-f"])
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

    let summary = stream.run_once().await.expect("the restarted run succeeds");
    let snapshot_rows = stream
        .bronze_query("SELECT COUNT(*), COUNT(DISTINCT id) FROM t WHERE _operation = 'snapshot'")
        .await;
    assert_eq!(
        snapshot_rows[0],
        vec![SEED_ROWS.to_string(), SEED_ROWS.to_string()],
        "{point}: every seed row once ({summary:?})"
    );
    let changes = stream
        .bronze_query(
            "SELECT COUNT(*), COUNT(DISTINCT concat(_lsn, _seqval, _operation)) FROM t WHERE _operation <> 'snapshot'",
        )
        .await;
    assert_eq!(
        changes[0],
        vec![change_rows.to_string(), change_rows.to_string()],
        "{point}: every change once"
    );
    let facts = stream
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
    let bootstrap = stream
        .facts_query("SELECT COUNT(*), MAX(rows) FROM t WHERE event = 'bootstrap'")
        .await;
    assert_eq!(
        bootstrap[0],
        vec!["1".to_string(), SEED_ROWS.to_string()],
        "{point}"
    );
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
