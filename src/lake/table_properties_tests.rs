use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{TimeZone, Utc};

use super::*;
use crate::domain::{BatchId, FactRow};
use crate::lake::facts::{FactsError, FactsKey, FactsTable};
use crate::lake::finalization::{FinalizationError, FinalizationTable};
use crate::lake::maintenance::Maintenance;
use crate::lake::test_support::reopen;
use crate::lake::txn::FactSequence;
use crate::lake::{StorageLocation, StorageOptions};

fn location(dir: &tempfile::TempDir, name: &str) -> StorageLocation {
    StorageLocation::parse(dir.path().join(name).to_str().unwrap()).unwrap()
}

async fn append(facts: &mut FactsTable, batch: u64) {
    let id = BatchId::new(batch).unwrap();
    let at = Utc.timestamp_opt(1_790_000_000, 0).single().unwrap();
    let key = FactsKey {
        target: "bronze.orders".into(),
        app_id: "orders-v1".into(),
        sequence: FactSequence::Batch(id),
    };
    let row = FactRow::new("bronze.orders", "orders-v1", Some(id), None, at);
    facts.append(&key, &[row]).await.unwrap();
}

/// Sets table properties the way another writer (Spark, a person) would.
async fn set_properties(location: &StorageLocation, properties: &[(&str, &str)]) {
    let table = reopen(location).await;
    let properties: HashMap<String, String> = properties
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    table
        .set_tbl_properties()
        .with_properties(properties)
        .with_commit_properties(commit_properties())
        .await
        .unwrap();
}

fn log_file(dir: &Path, version: u64) -> PathBuf {
    dir.join("_delta_log").join(format!("{version:020}.json"))
}

#[tokio::test]
async fn every_table_is_created_with_the_properties_the_engine_owns() {
    let dir = tempfile::tempdir().unwrap();
    let facts = location(&dir, "facts");
    FactsTable::open_or_create(&facts, &StorageOptions::default())
        .await
        .unwrap();
    let finalization = location(&dir, "finalization");
    FinalizationTable::open_or_create(&finalization, &StorageOptions::default())
        .await
        .unwrap();
    for location in [facts, finalization] {
        let table = reopen(&location).await;
        let configuration = table.snapshot().unwrap().metadata().configuration().clone();
        for (key, value) in owned() {
            assert_eq!(configuration.get(key), Some(&value), "{key} of {location}");
        }
        assert!(!configuration.contains_key(TXN_RETENTION_PROPERTY));
    }
}

#[tokio::test]
async fn a_table_that_would_forget_txn_markers_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let facts = location(&dir, "facts");
    FactsTable::open_or_create(&facts, &StorageOptions::default())
        .await
        .unwrap();
    set_properties(&facts, &[(TXN_RETENTION_PROPERTY, "interval 1 days")]).await;
    let before = reopen(&facts).await.version();

    let refused = FactsTable::open_or_create(&facts, &StorageOptions::default())
        .await
        .unwrap_err();
    let FactsError::UnsafeProperty(refused) = refused else {
        panic!("expected UnsafeProperty, got {refused:?}");
    };
    assert_eq!(refused.property, TXN_RETENTION_PROPERTY);
    assert_eq!(refused.value, "interval 1 days");
    let said = refused.to_string();
    assert!(said.contains("UNSET TBLPROPERTIES"), "{said}");
    assert!(said.contains(&facts.to_string()), "{said}");
    assert_eq!(reopen(&facts).await.version(), before, "nothing written");

    let finalization = location(&dir, "finalization");
    FinalizationTable::open_or_create(&finalization, &StorageOptions::default())
        .await
        .unwrap();
    set_properties(
        &finalization,
        &[(TXN_RETENTION_PROPERTY, "interval 2 days")],
    )
    .await;
    let refused = FinalizationTable::open_or_create(&finalization, &StorageOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(refused, FinalizationError::UnsafeProperty(_)),
        "{refused:?}"
    );
}

/// A table made before the engine owned its properties (delta-rs's
/// default: clean up the log after every commit) with a short log
/// retention: our commits leave the log alone, maintenance cleans it.
#[tokio::test]
async fn commits_leave_expired_log_entries_to_maintenance() {
    let dir = tempfile::tempdir().unwrap();
    let location = location(&dir, "facts");
    let mut facts = FactsTable::open_or_create(&location, &StorageOptions::default())
        .await
        .unwrap();
    for batch in 1..=3 {
        append(&mut facts, batch).await;
    }
    set_properties(
        &location,
        &[
            ("delta.enableExpiredLogCleanup", "true"),
            ("delta.logRetentionDuration", "interval 1 minutes"),
        ],
    )
    .await;
    let table = reopen(&location).await;
    deltalake::checkpoints::create_checkpoint(&table, None)
        .await
        .unwrap();
    let checkpointed = table.version().unwrap();
    // Every log file so far is an hour old.
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    let table_dir = dir.path().join("facts");
    for entry in std::fs::read_dir(table_dir.join("_delta_log")).unwrap() {
        let file = std::fs::File::options()
            .write(true)
            .open(entry.unwrap().path())
            .unwrap();
        file.set_modified(an_hour_ago).unwrap();
    }

    let mut facts = FactsTable::open_or_create(&location, &StorageOptions::default())
        .await
        .unwrap();
    append(&mut facts, 4).await;
    append(&mut facts, 5).await;
    for version in 0..checkpointed {
        assert!(
            log_file(&table_dir, version).exists(),
            "a commit deleted log entry {version}"
        );
    }

    let mut maintenance = Maintenance::open(&location, &StorageOptions::default())
        .await
        .unwrap();
    let deleted = maintenance.clean_up_log().await.unwrap();
    assert!(deleted >= checkpointed as usize, "deleted {deleted}");
    for version in 0..checkpointed {
        assert!(!log_file(&table_dir, version).exists(), "{version} kept");
    }
    // The table still reads, from the checkpoint on.
    let table = reopen(&location).await;
    assert_eq!(table.version(), Some(checkpointed + 2));
}
