//! `mssql-cdc maintain` on a facts table: old micro-batch rows go, event
//! rows and recent rows stay, small files are compacted and vacuumed.

use std::path::Path;
use std::process::Command;

use chrono::{Duration, Utc};
use mssql_cdc::domain::BatchId;
use mssql_cdc::domain::{FactEvent, FactRow};
use mssql_cdc::lake::StorageLocation;
use mssql_cdc::lake::facts::{FactsKey, FactsTable};
use mssql_cdc::lake::txn::FactSequence;

use crate::support::stream::{open_table, query_table};

const DAY: i64 = 24;

/// One commit per row, as streams write them; `age_hours` back from now.
async fn facts_lake(dir: &Path) {
    let location = StorageLocation::parse(dir.to_str().expect("utf-8 path")).expect("location");
    let mut facts = FactsTable::open_or_create(&location, &Default::default())
        .await
        .expect("facts table");
    let now = Utc::now();
    for target in ["bronze.a", "bronze.b"] {
        let snapshot = FactRow::new(
            target,
            "app",
            None,
            Some(FactEvent::Bootstrap),
            now - Duration::hours(40 * DAY),
        );
        let key = FactsKey {
            target: target.into(),
            app_id: "app".into(),
            sequence: FactSequence::Snapshot(0),
        };
        facts.append(&key, &[snapshot]).await.expect("append");
        for (batch, age_hours) in [(1u64, 40 * DAY), (2, 31 * DAY), (3, 29 * DAY), (4, 1)] {
            let id = BatchId::new(batch).expect("batch id");
            let row = FactRow::new(
                target,
                "app",
                Some(id),
                None,
                now - Duration::hours(age_hours),
            );
            let key = FactsKey {
                target: target.into(),
                app_id: "app".into(),
                sequence: FactSequence::Batch(id),
            };
            facts.append(&key, &[row]).await.expect("append");
        }
    }
}

fn maintain(dir: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .arg("maintain")
        .arg("--facts")
        .arg(dir)
        .args(extra)
        .output()
        .expect("mssql-cdc runs")
}

fn parquet_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("table dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
        .count()
}

#[tokio::test]
async fn maintain_deletes_old_batches_keeps_events_and_compacts() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("facts");
    facts_lake(&dir).await;
    assert_eq!(parquet_files(&dir), 10);

    let out = maintain(
        &dir,
        &[
            "--keep-days",
            "30",
            "--retain-hours",
            "0",
            "--allow-short-retention",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "maintain failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("deleted 4 micro-batch rows"), "{stdout}");
    assert!(stdout.contains("z-ordered by target, app_id"), "{stdout}");

    let rows = query_table(
        &dir,
        "SELECT target, coalesce(event, 'batch'), coalesce(CAST(batch_id AS VARCHAR), '-') \
         FROM t ORDER BY target, event NULLS FIRST, batch_id",
    )
    .await;
    let expected: Vec<Vec<String>> = ["bronze.a", "bronze.b"]
        .iter()
        .flat_map(|t| {
            [("batch", "3"), ("batch", "4"), ("bootstrap", "-")]
                .map(|(e, b)| vec![t.to_string(), e.to_string(), b.to_string()])
        })
        .collect();
    assert_eq!(rows, expected);

    // One file holds the table now, and vacuum removed every other one.
    let table = open_table(&dir).await;
    let active = table.get_file_uris().expect("files").count();
    assert_eq!(active, 1);
    assert_eq!(parquet_files(&dir), 1);
}

#[tokio::test]
async fn maintain_refuses_a_short_retention_before_touching_the_table() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("facts");
    facts_lake(&dir).await;
    let before = open_table(&dir).await.version();

    let out = maintain(&dir, &["--keep-days", "30", "--retain-hours", "1"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("below the safe minimum of 168 h"),
        "{stderr}"
    );
    assert_eq!(open_table(&dir).await.version(), before);

    let out = maintain(&dir, &["--keep-days", "0"]);
    assert!(!out.status.success());
    assert_eq!(open_table(&dir).await.version(), before);

    let missing = tmp.path().join("nothing-here");
    let out = maintain(&missing, &["--keep-days", "30"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nothing-here") && stderr.contains("Not a Delta table"),
        "{stderr}"
    );
}
