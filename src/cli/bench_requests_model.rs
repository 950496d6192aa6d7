//! The per-batch operations of a stream that keeps its position in the
//! Delta log alone (kafka-delta-ingest's way, docs/adr/0010): one bronze
//! commit per batch, empty when the range held no row, carrying a `txn`
//! and the range in commitInfo. Counted on the same counting store as the
//! stream (`bench_requests`): the commit itself (with delta-rs's
//! checkpoint every `delta.checkpointInterval` commits), finding the
//! stream's `txn` at several distances from the last checkpoint, and
//! following the log from another handle (what a restarted writer, or a
//! table following bronze, does).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{DataType, StructField, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};
use mssql_cdc::lake::requests::{self, Counts, Kind, RequestCounter};
use url::Url;

/// delta-rs's default `delta.checkpointInterval`.
const CHECKPOINT_INTERVAL: u64 = 100;
/// Commits made: two checkpoint intervals.
const COMMITS: u64 = 2 * CHECKPOINT_INTERVAL;

/// Runs the model and prints its table.
pub async fn run(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let root = Url::from_directory_path(dir)
        .map_err(|()| anyhow::anyhow!("{} is not an absolute path", dir.display()))?;
    let prefix = root.clone();
    let counter = RequestCounter::new(Arc::new(move |url: &str| {
        let rest = url.strip_prefix(prefix.as_str())?;
        Some(if rest.contains("_delta_log") {
            "_delta_log".to_string()
        } else {
            "data".to_string()
        })
    }));
    requests::install(counter.clone());
    let result = measure(&root, &counter).await;
    requests::remove(&counter);
    let rows = result?;
    println!();
    println!(
        "### Delta log as the only record: bronze's per-batch operations (delta-rs, same counting store)"
    );
    println!();
    println!("| operation | requests | of which GET / LIST / PUT create / PUT |");
    println!("|---|---|---|");
    for (what, counts, per) in rows {
        let n = |kind| counts.of_kind(kind) as f64 / per as f64;
        println!(
            "| {what} | {:.2} | {:.2} / {:.2} / {:.2} / {:.2} |",
            counts.total() as f64 / per as f64,
            n(Kind::Get) + n(Kind::GetRange) + n(Kind::Head),
            n(Kind::List),
            n(Kind::PutCreate),
            n(Kind::Put),
        );
    }
    Ok(())
}

type Row = (String, Counts, u64);

async fn measure(root: &Url, counter: &Arc<RequestCounter>) -> anyhow::Result<Vec<Row>> {
    let url = root.join("bronze/")?;
    std::fs::create_dir_all(url.to_file_path().map_err(|()| anyhow::anyhow!("{url}"))?)?;
    let mut table = DeltaTable::try_from_url_with_storage_options(url.clone(), HashMap::new())
        .await?
        .create()
        .with_columns([StructField::new("id", DataType::LONG, true)])
        .with_save_mode(SaveMode::ErrorIfExists)
        .await
        .context("creating the model's table")?;
    let mut rows = Vec::new();
    let mut all_commits = Counts::default();
    let mut checkpoint_commits = Counts::default();
    let mut plain = 0u64;
    let mut lookups: Vec<(u64, Counts)> = Vec::new();
    for batch in 1..=COMMITS {
        let before = counter.snapshot();
        commit_empty(&mut table, batch).await?;
        let cost = counter.snapshot().since(&before);
        // Version `batch` is the one delta-rs checkpoints at each interval.
        if batch.is_multiple_of(CHECKPOINT_INTERVAL) {
            checkpoint_commits.add(&cost);
        } else {
            plain += 1;
            all_commits.add(&cost);
        }
        let since_checkpoint = batch % CHECKPOINT_INTERVAL;
        if [1, 10, 50, 99].contains(&since_checkpoint) && batch > CHECKPOINT_INTERVAL {
            let before = counter.snapshot();
            let found = table
                .snapshot()?
                .transaction_version(table.log_store().as_ref(), "model")
                .await?;
            anyhow::ensure!(
                found == Some(i64::try_from(batch)?),
                "txn lookup found {found:?}"
            );
            lookups.push((since_checkpoint, counter.snapshot().since(&before)));
        }
    }
    rows.push((
        "empty commit with `txn` + commitInfo (snapshot held in memory)".to_string(),
        all_commits,
        plain,
    ));
    rows.push((
        format!("the commit that also writes delta-rs's checkpoint (every {CHECKPOINT_INTERVAL})"),
        checkpoint_commits,
        COMMITS / CHECKPOINT_INTERVAL,
    ));
    for (since, counts) in lookups {
        rows.push((
            format!("find the stream's `txn` version, {since} commit(s) after a checkpoint"),
            counts,
            1,
        ));
    }
    // Following the log from a second handle: nothing new, then one commit.
    let mut follower = DeltaTable::try_from_url_with_storage_options(url, HashMap::new()).await?;
    let before = counter.snapshot();
    follower.update_state().await?;
    rows.push((
        "refresh a handle, no new version".to_string(),
        counter.snapshot().since(&before),
        1,
    ));
    commit_empty(&mut table, COMMITS + 1).await?;
    let before = counter.snapshot();
    follower.update_state().await?;
    rows.push((
        "refresh a handle, one new version".to_string(),
        counter.snapshot().since(&before),
        1,
    ));
    let before = counter.snapshot();
    let opened = DeltaTable::try_from_url_with_storage_options(
        Url::parse(table.table_url().as_str())?,
        HashMap::new(),
    )
    .await?;
    anyhow::ensure!(opened.version().is_some(), "the model's table did not open");
    rows.push((
        format!(
            "open the table ({} versions, last checkpoint at {})",
            COMMITS + 2,
            COMMITS
        ),
        counter.snapshot().since(&before),
        1,
    ));
    Ok(rows)
}

/// One bronze commit with no file: the batch's `txn` and its record.
async fn commit_empty(table: &mut DeltaTable, batch: u64) -> Result<(), DeltaTableError> {
    let version = i64::try_from(batch).unwrap_or(i64::MAX);
    let mut record = serde_json::Map::new();
    record.insert("batch_id".into(), batch.into());
    record.insert("start_lsn".into(), "0x0000002a000001000001".into());
    record.insert("end_lsn".into(), "0x0000002a000001100003".into());
    record.insert("facts_row".into(), serde_json::json!({"rows": 0}));
    let properties = CommitProperties::default()
        .with_application_transaction(Transaction::new("model", version))
        .with_metadata(record);
    commit_no_file(table, properties).await
}

/// A commit that adds no file, with `properties` (its `txn`, its
/// metadata, its post-commit settings).
pub(super) async fn commit_no_file(
    table: &mut DeltaTable,
    properties: CommitProperties,
) -> Result<(), DeltaTableError> {
    let operation = DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: None,
        predicate: None,
    };
    let finalized = CommitBuilder::from(properties)
        .with_actions(Vec::new())
        .build(Some(table.snapshot()?), table.log_store(), operation)
        .await?;
    table.state = Some(finalized.snapshot());
    Ok(())
}
