//! Data safety: what must never let a row be lost or written twice, beyond
//! plain crashes (those are in `engine_crash`): unsafe store settings,
//! replaced checkpoints, store and source faults, two writers.

use std::sync::{Arc, Mutex};

use mssql_cdc::engine::{EngineError, Observer};

use crate::support::cdc::{capture_table, max_lsn, wait_for_capture};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::{StreamFixture, open_table};

/// A captured `dbo.orders` with two rows and a stream of it.
async fn orders(server: &TestServer, extra: &str) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL)",
    )
    .await
    .expect("create table");
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (1, N'a'), (2, N'b')",
    )
    .await
    .expect("seed");
    capture_table(&mut client, "orders").await;
    (client, StreamFixture::new(server, &db, extra))
}

#[tokio::test]
async fn unsafe_s3_rename_is_refused_before_anything_is_written() {
    let server = TestServer::start().await;
    let (_client, stream) = orders(&server, "").await;
    let mut options = stream.options();
    options
        .env
        .insert("AWS_S3_ALLOW_UNSAFE_RENAME".into(), "true".into());
    let heard = Arc::new(Failures::default());
    options.observer = heard.clone();
    let refused = mssql_cdc::engine::run(stream.config(), options).await;
    match refused {
        Err(EngineError::UnsafeStorage { found_in, .. }) => assert_eq!(found_in, "environment"),
        other => panic!("expected UnsafeStorage, got {other:?}"),
    }
    // The observer hears it too: a table of a source says it in its status.
    let heard = heard.0.lock().expect("lock").clone();
    assert_eq!(heard, ["unsafe_storage"]);
    for dir in ["checkpoint", "bronze", "facts"] {
        assert!(!stream.path(dir).exists(), "{dir} was written");
    }

    let (_client, stream) = orders(
        &server,
        "  storageOptions:\n    aws_s3_allow_unsafe_rename: \"true\"\n",
    )
    .await;
    let refused = stream.run_once().await;
    assert!(
        matches!(
            refused,
            Err(EngineError::UnsafeStorage {
                found_in: "storageOptions",
                ..
            })
        ),
        "{refused:?}"
    );
}

/// The kinds of the errors a run told its observer it failed on.
#[derive(Default)]
struct Failures(Mutex<Vec<&'static str>>);

impl Observer for Failures {
    fn failed(&self, error: &EngineError) {
        self.0.lock().expect("lock").push(error.kind());
    }
}

/// Runs `sql` on the source and waits until capture has its `rows` changes.
async fn change(client: &mut Client, sql: &str, rows: i32) {
    let before = max_lsn(client).await;
    run(client, sql).await.expect("change");
    wait_for_capture(client, "dbo_orders", before.as_deref(), rows).await;
}

/// Points the stream at the checkpoint directory `name` of its lake, as
/// if its checkpoint had been replaced (an emptyDir, a "move").
fn replace_checkpoint(stream: &mut StreamFixture, name: &str) {
    let old = stream.path("checkpoint").display().to_string();
    let new = stream.path(name).display().to_string();
    stream.manifest = stream
        .manifest
        .replace(&format!("\"{old}\""), &format!("\"{new}\""));
}

/// Every change row of bronze: id and operation, in commit order.
async fn changes(stream: &StreamFixture) -> Vec<Vec<String>> {
    stream
        .bronze_query("SELECT id, _operation FROM t ORDER BY _lsn, _seqval, _operation")
        .await
}

async fn bronze_version(stream: &StreamFixture) -> Option<u64> {
    open_table(&stream.path("bronze")).await.version()
}

#[tokio::test]
async fn a_replaced_checkpoint_refuses_unless_it_adopts_the_target() {
    let server = TestServer::start().await;
    let (mut client, mut stream) = orders(&server, "").await;
    stream.run_once().await.expect("bootstrap");
    change(&mut client, "INSERT INTO dbo.orders VALUES (3, N'c')", 1).await;
    stream.run_once().await.expect("a batch");
    change(&mut client, "INSERT INTO dbo.orders VALUES (4, N'd')", 1).await;
    change(
        &mut client,
        "UPDATE dbo.orders SET note = N'z' WHERE id = 1",
        2,
    )
    .await;
    let before = changes(&stream).await;
    let version = bronze_version(&stream).await;

    // The same stream, its checkpoint gone.
    replace_checkpoint(&mut stream, "checkpoint-new");
    let refused = stream.run_once().await;
    match &refused {
        Err(EngineError::ForeignTarget { app_id, .. }) => assert_eq!(app_id, "it-orders"),
        other => panic!("expected ForeignTarget, got {other:?}"),
    }
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("new appId") && message.contains("adopt"),
        "{message}"
    );
    assert_eq!(
        bronze_version(&stream).await,
        version,
        "bronze is unchanged"
    );
    assert_eq!(changes(&stream).await, before);

    let mut options = stream.options();
    options.adopt_target = true;
    mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("adopting the target");
    let mut expected = before.clone();
    for row in [
        ["4", "insert"],
        ["1", "update_after"],
        ["1", "update_before"],
    ] {
        expected.push(row.map(String::from).to_vec());
    }
    assert_eq!(
        changes(&stream).await,
        expected,
        "the new changes, exactly once"
    );
    let batches = stream
        .facts_query("SELECT batch_id, COUNT(*) FROM t WHERE event IS NULL GROUP BY batch_id HAVING COUNT(*) > 1")
        .await;
    assert!(batches.is_empty(), "one facts row per batch: {batches:?}");
    let snapshots = stream
        .facts_query("SELECT COUNT(*) FROM t WHERE event IN ('bootstrap', 'resnapshot')")
        .await;
    assert_eq!(snapshots, vec![vec!["1"]], "no second snapshot");

    // The adopting checkpoint is the stream's own from now on.
    change(&mut client, "DELETE FROM dbo.orders WHERE id = 2", 1).await;
    stream.run_once().await.expect("streaming on");
    assert_eq!(
        changes(&stream).await.last(),
        Some(&vec!["2".into(), "delete".into()])
    );
}

#[tokio::test]
async fn a_replaced_checkpoint_during_the_bootstrap_resumes_only_when_adopting() {
    let server = TestServer::start().await;
    let (mut client, mut stream) = orders(&server, "").await;
    stream.run_once().await.expect("bootstrap");
    change(&mut client, "INSERT INTO dbo.orders VALUES (3, N'c')", 1).await;
    replace_checkpoint(&mut stream, "checkpoint-new");
    assert!(matches!(
        stream.run_once().await,
        Err(EngineError::ForeignTarget { .. })
    ));
    let mut options = stream.options();
    options.adopt_target = true;
    mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect("adopting a target that holds only its bootstrap");
    let rows = changes(&stream).await;
    assert_eq!(
        rows,
        [["1", "snapshot"], ["2", "snapshot"], ["3", "insert"]]
            .map(|r| r.map(String::from).to_vec()),
        "the snapshot once, then the change after it"
    );
}

#[tokio::test]
async fn a_restored_checkpoint_is_refused() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, "").await;
    stream.run_once().await.expect("bootstrap");
    change(&mut client, "INSERT INTO dbo.orders VALUES (3, N'c')", 1).await;
    stream.run_once().await.expect("batch 1");
    let backup = stream.path("checkpoint-backup");
    copy_dir(&stream.path("checkpoint"), &backup);
    change(&mut client, "INSERT INTO dbo.orders VALUES (4, N'd')", 1).await;
    stream.run_once().await.expect("batch 2");
    let version = bronze_version(&stream).await;

    std::fs::remove_dir_all(stream.path("checkpoint")).expect("remove");
    copy_dir(&backup, &stream.path("checkpoint"));
    change(&mut client, "INSERT INTO dbo.orders VALUES (5, N'e')", 1).await;
    let refused = stream.run_once().await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("restored"), "{message}");
    assert_eq!(
        bronze_version(&stream).await,
        version,
        "bronze is unchanged"
    );
}

#[tokio::test]
async fn a_changed_target_name_is_refused_by_the_checkpoint() {
    let server = TestServer::start().await;
    let (_client, stream) = orders(&server, "").await;
    stream.run_once().await.expect("bootstrap");
    let renamed = StreamFixture {
        manifest: stream
            .manifest
            .replace("name: bronze.orders", "name: bronze.orders_v2"),
        ..stream
    };
    let refused = renamed.run_once().await;
    match refused {
        Err(EngineError::IdentityChanged {
            field,
            recorded,
            given,
            ..
        }) => {
            assert_eq!(
                (field, recorded.as_str(), given.as_str()),
                ("target.name", "bronze.orders", "bronze.orders_v2")
            );
        }
        other => panic!("expected IdentityChanged, got {other:?}"),
    }
}

/// Copies a directory tree, leaving out lease files.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else if entry.file_name() != "lock" {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}
