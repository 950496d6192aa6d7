//! A stream's position must not depend on how long its history is, and a
//! target that lost part of it must be refused: a thousand batches, with
//! compaction in between, then restarts and a kill; a target restored from
//! an older copy, rolled back with `RESTORE`, or deleted.

use mssql_cdc::engine::EngineError;
use mssql_cdc::lake::StorageLocation;
use mssql_cdc::lake::maintenance::Maintenance;

use crate::engine_safety::copy_dir;
use crate::support::cdc::{capture_table, max_lsn, wait_for_capture};
#[cfg(feature = "failpoints")]
use crate::support::long_run_batches;
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::{StreamFixture, open_table};

/// A captured `dbo.orders` with ten rows and a stream of it that makes a
/// batch per commit, bootstrapped.
async fn bootstrapped(server: &TestServer) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL)",
    )
    .await
    .expect("create table");
    let seed: Vec<String> = (1..=10).map(|id| format!("({id}, N'seed')")).collect();
    run(
        &mut client,
        &format!("INSERT INTO dbo.orders VALUES {}", seed.join(", ")),
    )
    .await
    .expect("seed");
    capture_table(&mut client, "orders").await;
    let stream = StreamFixture::new(
        server,
        &db,
        "  snapshot: {mode: initial}\n  maxCommitsPerBatch: 1\n",
    );
    stream.run_once().await.expect("bootstrap");
    (client, stream)
}

/// Inserts ids `from..from + count`, one commit each, and waits for capture.
async fn insert_commits(client: &mut Client, from: i32, count: i32) {
    let before = max_lsn(client).await;
    let statements: Vec<String> = (from..from + count)
        .map(|id| format!("INSERT INTO dbo.orders VALUES ({id}, N'new');"))
        .collect();
    run(client, &statements.join("\n")).await.expect("inserts");
    wait_for_capture(client, "dbo_orders", before.as_deref(), count).await;
}

/// Compacts bronze as `mssql-cdc maintain --bronze` does (a commit of its
/// own, with no `txn`).
async fn compact_bronze(stream: &StreamFixture) {
    let location =
        StorageLocation::parse(&stream.path("bronze").display().to_string()).expect("location");
    let mut bronze = Maintenance::open(&location, &Default::default())
        .await
        .expect("bronze opens");
    let (removed, _) = bronze.compact(&[]).await.expect("compaction");
    assert!(removed > 1, "the compaction rewrote files");
}

/// (change rows, distinct change rows, snapshot rows) in bronze, and
/// (batch rows, distinct batch ids) in facts.
async fn counts(stream: &StreamFixture) -> (Vec<String>, Vec<String>) {
    let bronze = stream
        .bronze_query(
            "SELECT COUNT(*), COUNT(DISTINCT id), SUM(CASE WHEN _operation = 'snapshot' THEN 1 ELSE 0 END) FROM t",
        )
        .await;
    let facts = stream
        .facts_query("SELECT COUNT(*), COUNT(DISTINCT batch_id) FROM t WHERE event IS NULL")
        .await;
    (bronze[0].clone(), facts[0].clone())
}

async fn bronze_version(stream: &StreamFixture) -> Option<u64> {
    open_table(&stream.path("bronze")).await.version()
}

#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_long_stream_restarts_after_compaction_and_a_kill() {
    // Two runs put the bootstrap past the old 200-version search; the
    // issue's 1,000 batches are two runs of 500.
    let per_run = long_run_batches();
    let server = TestServer::start().await;
    let (mut client, stream) = bootstrapped(&server).await;
    // Two runs of `per_run` batches with a compaction between them, so the
    // bootstrap's commit lies further back in bronze's log than the 200
    // versions the old search read, behind commits without a `txn`.
    insert_commits(&mut client, 100, per_run).await;
    let first = stream.run_once().await.expect("the first run");
    assert!(first.batches >= per_run as u64, "{first:?}");
    compact_bronze(&stream).await;
    insert_commits(&mut client, 100 + per_run, per_run).await;
    let second = stream
        .run_once()
        .await
        .expect("a restart after a run and a compaction");
    assert!(second.batches >= per_run as u64, "{second:?}");
    compact_bronze(&stream).await;

    // A restart with one more change: before, the bootstrap's commit was
    // looked for among the newest 200 versions and the run refused.
    insert_commits(&mut client, 100 + 2 * per_run, 1).await;
    let third = stream.run_once().await.expect("a restart after both runs");
    assert!(third.batches >= 1, "{third:?}");

    // Killed between the bronze commit and the facts row, compacted while
    // down, restarted: the replay finds its commit behind the compaction's.
    insert_commits(&mut client, 101 + 2 * per_run, 1).await;
    crate::engine_crash::run_until_killed(&stream, "after_bronze_commit").await;
    compact_bronze(&stream).await;
    stream.run_once().await.expect("the restart after the kill");
    insert_commits(&mut client, 102 + 2 * per_run, 1).await;
    stream.run_once().await.expect("streaming on");

    let (bronze, facts) = counts(&stream).await;
    let rows = (13 + 2 * per_run).to_string();
    assert_eq!(
        bronze,
        [rows.as_str(), rows.as_str(), "10"],
        "every row once: the 10 snapshot rows and every insert"
    );
    assert_eq!(facts[0], facts[1], "one facts row per batch");
}

#[tokio::test]
async fn a_target_restored_from_an_older_copy_is_refused() {
    let server = TestServer::start().await;
    let (mut client, mut stream) = bootstrapped(&server).await;
    insert_commits(&mut client, 100, 1).await;
    stream.run_once().await.expect("batch 1");
    let backup = stream.path("bronze-backup");
    copy_dir(&stream.path("bronze"), &backup);
    insert_commits(&mut client, 101, 2).await;
    stream.run_once().await.expect("batches 2 and 3");
    let facts_before = counts(&stream).await.1;

    // The old copy put back under the checkpoint that went on.
    std::fs::remove_dir_all(stream.path("bronze")).expect("remove bronze");
    copy_dir(&backup, &stream.path("bronze"));
    let version = bronze_version(&stream).await;
    insert_commits(&mut client, 103, 1).await;
    let message = refused_as_behind(&stream).await;
    assert!(
        message.contains("holds it-orders only up to 1") && message.contains("adoptTarget"),
        "{message}"
    );
    assert_eq!(
        bronze_version(&stream).await,
        version,
        "bronze is unchanged"
    );
    assert_eq!(counts(&stream).await.1, facts_before, "facts is unchanged");

    // The way out the message gives: a new checkpoint adopting the target
    // re-reads the changes after its newest commit.
    let checkpoint = stream.path("checkpoint").display().to_string();
    let adopted = stream.path("checkpoint-adopted").display().to_string();
    stream.manifest = stream
        .manifest
        .replace(&format!("\"{checkpoint}\""), &format!("\"{adopted}\""));
    let mut options = stream.options();
    options.adopt_target = true;
    mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("adopting the restored target");
    let ids = stream
        .bronze_query("SELECT id FROM t WHERE _operation = 'insert' ORDER BY id")
        .await;
    assert_eq!(
        ids,
        [["100"], ["101"], ["102"], ["103"]].map(|r| r.map(String::from).to_vec()),
        "the missing changes are back, each once"
    );
}

#[tokio::test]
async fn a_target_rolled_back_with_restore_is_refused() {
    let server = TestServer::start().await;
    let (mut client, stream) = bootstrapped(&server).await;
    insert_commits(&mut client, 100, 1).await;
    stream.run_once().await.expect("batch 1");
    let restore_to = bronze_version(&stream).await.expect("a version");
    insert_commits(&mut client, 101, 2).await;
    stream.run_once().await.expect("batches 2 and 3");

    let table = open_table(&stream.path("bronze")).await;
    table
        .restore()
        .with_version_to_restore(restore_to)
        .await
        .expect("RESTORE");
    let version = bronze_version(&stream).await;
    insert_commits(&mut client, 103, 1).await;
    let message = refused_as_behind(&stream).await;
    assert!(
        message.contains(&format!("was restored to version {restore_to}")),
        "{message}"
    );
    assert_eq!(
        bronze_version(&stream).await,
        version,
        "bronze is unchanged"
    );
}

#[tokio::test]
async fn a_deleted_target_is_refused_and_not_created_again() {
    let server = TestServer::start().await;
    let (mut client, stream) = bootstrapped(&server).await;
    insert_commits(&mut client, 100, 1).await;
    stream.run_once().await.expect("batch 1");
    std::fs::remove_dir_all(stream.path("bronze")).expect("remove bronze");
    let message = refused_as_behind(&stream).await;
    assert!(message.contains("does not exist"), "{message}");
    assert!(!stream.path("bronze").exists(), "no new bronze was created");
}

/// A compaction between batches is not a rollback: the stream goes on.
#[tokio::test]
async fn a_compacted_target_is_still_its_checkpoints() {
    let server = TestServer::start().await;
    let (mut client, stream) = bootstrapped(&server).await;
    insert_commits(&mut client, 100, 3).await;
    stream.run_once().await.expect("three batches");
    compact_bronze(&stream).await;
    insert_commits(&mut client, 103, 1).await;
    stream.run_once().await.expect("after the compaction");
    let (bronze, facts) = counts(&stream).await;
    assert_eq!(bronze, ["14", "14", "10"]);
    assert_eq!(facts, ["4", "4"]);
}

/// Runs the stream, which must refuse with `TargetBehind`; its message.
async fn refused_as_behind(stream: &StreamFixture) -> String {
    match stream.run_once().await {
        Err(error @ EngineError::TargetBehind { .. }) => error.to_string(),
        other => panic!("expected TargetBehind, got {other:?}"),
    }
}
