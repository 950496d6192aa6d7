//! Kill -9 while several sessions read at once (`spec.source.readers`):
//! with some parts of a batch staged and none committed, with some key
//! ranges of the snapshot committed or finished and others not, and at
//! every point of a batch; the restarted run has every change and every
//! row exactly once and one facts row per batch.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::engine_crash::{crash_with_readers, run_until_killed};
use crate::engine_parallel::{bronze_commit, insert_rows, with_readers};
use crate::support::cdc::{capture_table, max_lsn, orders_changes, wait_for_capture};
use crate::support::objectstores::{Azurite, Moto};
use crate::support::server::{TestServer, run};
use crate::support::stream::StreamFixture;

#[tokio::test]
async fn kill_after_a_part_is_staged_in_a_batch_read_by_four() {
    crash_with_readers("after_part_staged", true, None, 4).await;
}

#[tokio::test]
async fn kill_mid_read_of_a_batch_read_by_four() {
    crash_with_readers("mid_read", true, None, 4).await;
}

#[tokio::test]
async fn kill_before_the_commit_of_a_batch_read_by_two() {
    crash_with_readers("before_bronze_commit", true, None, 2).await;
}

#[tokio::test]
async fn kill_after_the_commit_of_a_batch_read_by_four() {
    crash_with_readers("after_bronze_commit", true, None, 4).await;
}

#[tokio::test]
async fn kill_after_a_snapshot_chunk_is_staged_in_four_ranges() {
    crash_with_readers("after_part_staged", false, None, 4).await;
}

#[tokio::test]
async fn kill_after_a_snapshot_chunk_commit_in_four_ranges() {
    crash_with_readers("mid_snapshot", false, None, 4).await;
}

#[tokio::test]
async fn kill_after_one_of_four_snapshot_ranges_is_done() {
    crash_with_readers("after_snapshot_range_done", false, None, 2).await;
    crash_with_readers("after_snapshot_range_done", false, None, 4).await;
}

#[tokio::test]
async fn kill_after_parts_are_staged_on_s3_and_azure() {
    if let Some(moto) = Moto::start().await {
        for bootstrap_first in [true, false] {
            moto.fresh_prefix();
            crash_with_readers("after_part_staged", bootstrap_first, Some(&moto), 4).await;
        }
    }
    if let Some(azurite) = Azurite::start().await {
        for bootstrap_first in [true, false] {
            azurite.fresh_prefix();
            crash_with_readers("after_part_staged", bootstrap_first, Some(&azurite), 4).await;
        }
    }
}

/// Checks that a crash scenario's stream read in parallel: its snapshot in
/// `readers` key ranges, and (when it streamed changes) a batch in parts.
pub fn read_in_parallel(stream: &StreamFixture, readers: u32, point: &str, changes: bool) {
    let json = |rel: &Path| -> Value {
        let text = std::fs::read_to_string(rel).expect("a checkpoint file");
        serde_json::from_str(&text).expect("JSON")
    };
    let snapshot = json(&stream.path("checkpoint/snapshots/0"));
    let bounds = snapshot["key_bounds"].as_array().map_or(0, Vec::len);
    assert_eq!(
        bounds + 1,
        readers as usize,
        "{point}: key ranges: {snapshot}"
    );
    if !changes {
        return;
    }
    let split = std::fs::read_dir(stream.path("checkpoint/offsets"))
        .expect("plans")
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            json(&entry.path())["parts"]
                .as_array()
                .is_some_and(|p| p.len() > 1)
        })
        .count();
    assert!(split > 0, "{point}: a batch read in parts");
}

/// The paths of the data files bronze's log references.
fn referenced_files(stream: &StreamFixture) -> BTreeSet<String> {
    let log = stream.path("bronze/_delta_log");
    let mut versions: Vec<i64> = std::fs::read_dir(&log)
        .expect("the log")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    versions
        .into_iter()
        .flat_map(|version| bronze_commit(stream, version))
        .filter_map(|action| Some(action.get("add")?["path"].as_str()?.to_string()))
        .collect()
}

/// The Parquet files in bronze's folder.
fn parquet_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("bronze")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.ends_with(".parquet").then_some(name)
        })
        .collect()
}

#[tokio::test]
async fn a_batch_killed_with_parts_staged_is_replayed_from_its_plan_exactly_once() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)",
    )
    .await
    .expect("create table");
    capture_table(&mut client, "orders").await;
    let before = max_lsn(&mut client).await;
    for t in 0..6 {
        run(&mut client, &insert_rows(1 + t * 20, 20, "new"))
            .await
            .expect("insert");
    }
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 120).await;
    let stream = with_readers(
        StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n"),
        3,
    );

    run_until_killed(&stream, "after_part_staged").await;
    let plan: Value = serde_json::from_str(
        &std::fs::read_to_string(stream.path("checkpoint/offsets/1")).expect("the plan"),
    )
    .expect("JSON");
    let parts = plan["parts"].as_array().cloned().unwrap_or_default();
    assert_eq!(parts.len(), 3, "the plan records the parts: {plan}");
    assert!(
        !stream.path("checkpoint/commits/1").exists(),
        "the batch is not done"
    );
    let staged = parquet_files(&stream.path("bronze"));
    assert!(!staged.is_empty(), "a part's files are complete in storage");
    assert_eq!(
        referenced_files(&stream),
        BTreeSet::new(),
        "nothing is committed"
    );

    stream.run_once().await.expect("the replay");
    let replayed: Value = serde_json::from_str(
        &std::fs::read_to_string(stream.path("checkpoint/offsets/1")).expect("the plan"),
    )
    .expect("JSON");
    assert_eq!(
        replayed, plan,
        "the replay reads the plan as it was written"
    );
    assert_eq!(
        stream.bronze_changes().await,
        orders_changes(&mut client).await,
        "every change once"
    );
    let referenced = referenced_files(&stream);
    assert!(
        referenced.is_disjoint(&staged),
        "the killed run's files stay unreferenced"
    );
    let facts = stream
        .facts_query("SELECT batch_id, rows FROM t WHERE event IS NULL ORDER BY batch_id")
        .await;
    assert_eq!(facts, vec![vec!["1".to_string(), "120".to_string()]]);
}

/// Runs the stream's snapshot to its end, killed (SIGKILL) after every
/// chunk it commits: each armed run dies after its first chunk commit;
/// once a kill adds no row (the ranges' last, empty, chunks), an unarmed
/// run finishes. Returns the number of kills.
async fn kill_after_every_chunk(stream: &StreamFixture) -> usize {
    let run_once = |armed: bool| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"));
        command
            .args(["run", "--once", "--lease-ttl", "2s", "-f"])
            .arg(stream.manifest_file())
            .env(crate::support::stream::PASSWORD_ENV, &stream.password)
            .env("RUST_LOG", "warn")
            .kill_on_drop(true);
        if armed {
            command.env(mssql_cdc::failpoint::ENV, "mid_snapshot");
        }
        async move {
            tokio::time::timeout(std::time::Duration::from_secs(120), command.output())
                .await
                .expect("the run ends")
                .expect("the binary runs")
        }
    };
    let mut kills = 0;
    let mut rows = 0;
    loop {
        let output = run_once(true).await;
        if std::os::unix::process::ExitStatusExt::signal(&output.status) != Some(9) {
            assert!(
                output.status.success(),
                "after {kills} kills: {:?}\nstderr: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
            return kills;
        }
        kills += 1;
        let now = stream.bronze_query("SELECT code FROM t").await.len();
        if now == rows {
            break;
        }
        rows = now;
    }
    let output = run_once(false).await;
    assert!(
        output.status.success(),
        "the unarmed run after {kills} kills: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    kills
}

/// Keys outside ASCII in a Latin1 `varchar` column, in a `varchar`
/// column of another code page than the database's (Cyrillic in a Latin1
/// database), in a `_UTF8` `varchar` column, and in an `nvarchar` column: a snapshot read by two sessions
/// in chunks of 3 rows, killed after every chunk, holds each row exactly
/// once, with the keys as the server holds them.
#[tokio::test]
async fn non_ascii_keys_resume_exactly_across_a_kill_at_every_chunk() {
    let server = TestServer::start().await;
    let cases = [
        (
            "varchar(24) COLLATE Latin1_General_CI_AS",
            ["été", "Ärger", "Zürich", "ß", "Ångström", "ñandú"],
        ),
        (
            "varchar(24) COLLATE Cyrillic_General_CI_AS",
            ["Жук", "ёлка", "Щит", "Ярмарка", "аист", "Бобр"],
        ),
        (
            "varchar(24) COLLATE Latin1_General_100_CI_AS_SC_UTF8",
            ["日本", "Ärger", "été", "Zürich", "中文", "ß"],
        ),
        ("nvarchar(24)", ["日本", "Жук", "été", "Ωmega", "ß", "中文"]),
    ];
    for (column, words) in cases {
        let (mut client, db) = server.scratch_database().await;
        run(
            &mut client,
            &format!("CREATE TABLE dbo.orders (code {column} NOT NULL PRIMARY KEY, qty int NULL)"),
        )
        .await
        .expect("create table");
        let keys: Vec<String> = (0..24)
            .map(|i| format!("{}-{i:02}", words[i % words.len()]))
            .collect();
        let values: Vec<String> = keys.iter().map(|k| format!("(N'{k}', 1)")).collect();
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES {}", values.join(", ")),
        )
        .await
        .expect("seed");
        let mut held: Vec<String> = run(&mut client, "SELECT code FROM dbo.orders")
            .await
            .expect("the keys")
            .into_iter()
            .flatten()
            .filter_map(|row| row.get::<&str, _>(0).map(str::to_string))
            .collect();
        held.sort();
        let mut expected = keys.clone();
        expected.sort();
        assert_eq!(
            held, expected,
            "{column}: the server holds the keys as written"
        );
        capture_table(&mut client, "orders").await;
        let stream = crate::engine_parallel::with_readers(
            StreamFixture::new(&server, &db, "  snapshot: {mode: initial, chunkRows: 3}\n"),
            2,
        );
        let kills = kill_after_every_chunk(&stream).await;
        assert!(kills >= 4, "{column}: {kills} kills");
        let mut read: Vec<String> = stream
            .bronze_query("SELECT code FROM t WHERE _operation = 'snapshot'")
            .await
            .into_iter()
            .map(|row| row[0].clone())
            .collect();
        read.sort();
        assert_eq!(
            read, expected,
            "{column}: every row once, after {kills} kills"
        );
    }
}
