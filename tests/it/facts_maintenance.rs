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

/// A Parquet file no commit ever added (a failed commit's upload, a crash
/// between upload and commit) is deleted once older than the retention;
/// the log, the name claims and every file a version needs are kept. The
/// finalization table is maintained as well.
#[tokio::test]
async fn maintain_deletes_files_no_commit_added_and_nothing_hidden() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("facts");
    facts_lake(&dir).await;
    let orphan = dir.join("part-00000-never-committed.c000.snappy.parquet");
    let any_parquet = std::fs::read_dir(&dir)
        .expect("table dir")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
        .expect("a parquet file")
        .path();
    std::fs::copy(&any_parquet, &orphan).expect("orphan");
    let claims = dir.join("_mssql_cdc_claims");
    std::fs::create_dir_all(&claims).expect("claims dir");
    std::fs::write(claims.join("bronze.a.json"), "{}").expect("claim");
    let finalization = tmp.path().join("finalization");
    let location = StorageLocation::parse(finalization.to_str().expect("utf-8")).expect("location");
    mssql_cdc::lake::finalization::FinalizationTable::open_or_create(
        &location,
        &Default::default(),
    )
    .await
    .expect("finalization table");

    let out = maintain(
        &dir,
        &[
            "--keep-days",
            "30",
            "--retain-hours",
            "0",
            "--allow-short-retention",
            "--finalization",
            finalization.to_str().expect("utf-8"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "maintain failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!orphan.exists(), "the orphan was kept: {stdout}");
    assert!(claims.join("bronze.a.json").exists(), "a claim was deleted");
    assert!(
        dir.join("_delta_log")
            .join("00000000000000000000.json")
            .exists()
    );
    assert!(stdout.contains("finalization "), "{stdout}");
    // The table reads as before, with the same rows.
    let rows = query_table(&dir, "SELECT count(*) FROM t").await;
    assert_eq!(rows, vec![vec!["6".to_string()]]);
}

/// `maintain -f` takes a source's manifest and maintains what it names:
/// the shared facts table once, each stream's bronze table and checkpoint,
/// numbered as it goes; nothing is asked of SQL Server.
#[tokio::test]
async fn maintain_of_a_manifest_covers_each_table_it_names_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let lake = tmp.path();
    facts_lake(&lake.join("facts")).await;
    let captured =
        deltalake::arrow::datatypes::Schema::new(vec![deltalake::arrow::datatypes::Field::new(
            "id",
            deltalake::arrow::datatypes::DataType::Int32,
            false,
        )]);
    let schema = mssql_cdc::lake::bronze::bronze_schema(&captured).expect("bronze schema");
    let mut manifest = format!(
        "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcSource\nmetadata: {{name: shop}}\nspec:\n  \
         connection:\n    host: \"127.0.0.1\"\n    port: 1433\n    database: shop\n    \
         credentials: {{username: u, passwordFrom: {{env: MSSQL_CDC_PASSWORD}}}}\n  \
         defaults:\n    facts: {{name: ops.facts, location: \"{}\"}}\n",
        lake.join("facts").display()
    );
    for name in ["orders", "items"] {
        let bronze = lake.join("bronze").join(name);
        let location = StorageLocation::parse(bronze.to_str().expect("utf-8")).expect("location");
        mssql_cdc::lake::bronze::BronzeTable::open_or_create(
            &location,
            &Default::default(),
            &schema,
        )
        .await
        .expect("bronze table");
        std::fs::create_dir_all(lake.join("checkpoints").join(name)).expect("checkpoint");
        manifest.push_str(&format!(
            "---\napiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: {name}}}\n\
             spec:\n  appId: it-{name}\n  sourceRef: {{name: shop}}\n  source: {{table: dbo.{name}}}\n  \
             target: {{name: bronze.{name}, location: \"{}\"}}\n  checkpoint: \"{}\"\n",
            bronze.display(),
            lake.join("checkpoints").join(name).display()
        ));
    }
    let file = lake.join("shop.yaml");
    std::fs::write(&file, manifest).expect("manifest");

    let out = Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .arg("maintain")
        .arg("-f")
        .arg(&file)
        .args(["--retain-hours", "0", "--allow-short-retention"])
        .output()
        .expect("mssql-cdc runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "maintain failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps: Vec<&str> = stdout.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(steps.len(), 5, "{stdout}");
    assert!(steps[0].starts_with("[1/5] facts "), "{stdout}");
    for name in ["orders", "items"] {
        assert!(
            steps
                .iter()
                .any(|l| l.contains(" bronze ") && l.contains(name)),
            "{stdout}"
        );
        assert!(
            steps
                .iter()
                .any(|l| l.contains(" checkpoint ") && l.contains(name)),
            "{stdout}"
        );
    }
    assert!(stdout.contains("deleted 4 micro-batch rows"), "{stdout}");

    let both = Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .arg("maintain")
        .arg("-f")
        .arg(&file)
        .arg("--bronze")
        .arg(lake.join("bronze/orders"))
        .output()
        .expect("mssql-cdc runs");
    assert!(
        !both.status.success(),
        "-f and a table flag together are refused"
    );
}
