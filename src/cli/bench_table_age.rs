//! `mssql-cdc bench --table-age 100,10000,100000`: what one commit of each
//! kind costs as its table ages. A quiet table commits every few seconds
//! for months (8,640 commits a day at a 10 s trigger), so a cost that
//! grows with the log is a cost that grows without bound.
//!
//! Each age is built directly rather than waited for: the engine creates
//! its facts, finalization, bronze and silver tables, then the log of each
//! gets commits written straight into `_delta_log` (a `txn` each, as a
//! stream's commits carry) up to the age, and a Delta checkpoint at the
//! end, as a table of that age has. Then each kind of commit is made a few
//! times through the engine's own table code, counting object-store
//! requests (a LIST once per page of 1,000 keys, as S3 sends them) and
//! time. The same empty commit is also made with the expired-log cleanup
//! on, as delta-rs runs it after every commit of a table that does not
//! turn it off (every table the engine created before it owned its
//! properties): it lists the whole log each time.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use deltalake::DeltaTable;
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use mssql_cdc::domain::change::Operation;
use mssql_cdc::domain::{BatchId, FactRow, Granularity, VerdictUpdate};
use mssql_cdc::lake::bronze::{BronzeTable, bronze_schema};
use mssql_cdc::lake::facts::{FactsKey, FactsTable};
use mssql_cdc::lake::finalization::FinalizationTable;
use mssql_cdc::lake::requests::{self, Counts, Kind, RequestCounter};
use mssql_cdc::lake::silver::{Deletes, SilverTable};
use mssql_cdc::lake::table_properties::commit_properties;
use mssql_cdc::lake::txn::{FactSequence, Txn};
use mssql_cdc::lake::{StorageLocation, StorageOptions};

use super::bench_requests_model::commit_no_file;
use super::bench_silver::{bronze_rows_schema, captured, changes};

/// The tables aged, in the order rows print.
const TABLES: [&str; 4] = ["facts", "finalization", "bronze", "silver"];

/// The application id of the commits written to age a table.
const AGE_APP_ID: &str = "bench-age";

/// One kind of commit measured at one age.
struct Measured {
    commit: &'static str,
    /// Median requests of one commit, every kind together.
    requests: u64,
    /// Median LIST pages of one commit.
    list_pages: u64,
    /// Median time of one commit.
    time: Duration,
}

/// Prints, for each age, the requests, LIST pages and time of each kind
/// of commit, each the median of `repeats` commits.
pub async fn run(dir: &Path, ages: &[u64], repeats: usize) -> anyhow::Result<()> {
    if ages.iter().any(|&age| age < 2) || repeats == 0 {
        anyhow::bail!(
            "--table-age takes log versions of at least 2, and --table-age-repeats at least 1"
        );
    }
    println!(
        "one commit of each kind on tables {ages:?} log versions old, a local disk ({}), median of {repeats}",
        dir.display()
    );
    println!(
        "{:>8}  {:<44}  {:>8}  {:>10}  {:>9}",
        "versions", "commit", "requests", "LIST pages", "time"
    );
    for &age in ages {
        let root = dir.join(format!("age-{age}"));
        let measured = measure_age(&root, age, repeats)
            .await
            .with_context(|| format!("tables {age} versions old"))?;
        for m in measured {
            println!(
                "{age:>8}  {:<44}  {:>8}  {:>10}  {:>6.1} ms",
                m.commit,
                m.requests,
                m.list_pages,
                m.time.as_secs_f64() * 1000.0
            );
        }
        std::fs::remove_dir_all(&root).ok();
    }
    println!(
        "requests: every object-store call of the commit, a LIST counted once per page of 1,000 keys"
    );
    Ok(())
}

async fn measure_age(root: &Path, age: u64, repeats: usize) -> anyhow::Result<Vec<Measured>> {
    let options = StorageOptions::default();
    let location = |table: &str| StorageLocation::parse(&root.join(table).display().to_string());
    let captured = captured();
    let fields: Vec<_> = captured
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    // The engine creates each table with its properties, then the log ages.
    FactsTable::open_or_create(&location("facts")?, &options).await?;
    FinalizationTable::open_or_create(&location("finalization")?, &options).await?;
    let schema = bronze_schema(&captured)?;
    BronzeTable::open_or_create(&location("bronze")?, &options, &schema).await?;
    SilverTable::open_or_create(
        &location("silver")?,
        &options,
        &fields,
        vec!["id".into()],
        Deletes::Hard,
    )
    .await?;
    for table in TABLES {
        age_log(&root.join(table), age).await?;
    }

    // A directory URL, ending with `/`.
    let base = url::Url::from_directory_path(root)
        .map_err(|()| anyhow::anyhow!("{} is not an absolute path", root.display()))?
        .to_string();
    let counter = RequestCounter::new(Arc::new(move |url: &str| {
        url.strip_prefix(&base)
            .map(|rest| rest.split('/').next().unwrap_or_default().to_string())
    }));
    requests::install(counter.clone());
    let measured = measure_commits(root, repeats, &counter).await;
    requests::remove(&counter);
    measured
}

async fn measure_commits(
    root: &Path,
    repeats: usize,
    counter: &Arc<RequestCounter>,
) -> anyhow::Result<Vec<Measured>> {
    let options = StorageOptions::default();
    let location = |table: &str| StorageLocation::parse(&root.join(table).display().to_string());
    let mut facts = FactsTable::open_or_create(&location("facts")?, &options).await?;
    let mut finalization =
        FinalizationTable::open_or_create(&location("finalization")?, &options).await?;
    let captured = captured();
    let schema = bronze_schema(&captured)?;
    let mut bronze = BronzeTable::open_or_create(&location("bronze")?, &options, &schema).await?;
    let fields: Vec<_> = captured
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut silver = SilverTable::open_or_create(
        &location("silver")?,
        &options,
        &fields,
        vec!["id".into()],
        Deletes::Hard,
    )
    .await?;
    let mut raw = deltalake::open_table(location("facts")?.url().clone()).await?;
    let rows_schema = bronze_rows_schema(&captured);

    let mut samples: BTreeMap<&'static str, Vec<(Counts, Duration)>> = BTreeMap::new();
    for round in 1..=repeats {
        let n = u64::try_from(round).unwrap_or(u64::MAX);
        let id = BatchId::new(n)?;
        let mut sample = |commit: &'static str, counts: Counts, took: Duration| {
            samples.entry(commit).or_default().push((counts, took));
        };

        let (counts, took) = counted(counter, async {
            let key = FactsKey {
                target: "bronze.orders".into(),
                app_id: "orders-v1".into(),
                sequence: FactSequence::Batch(id),
            };
            let row = FactRow::new("bronze.orders", "orders-v1", Some(id), None, Utc::now());
            facts.append(&key, &[row]).await?;
            Ok(())
        })
        .await?;
        sample("facts: one batch's row", counts, took);

        let (counts, took) = counted(counter, async {
            finalization
                .upsert(&VerdictUpdate {
                    table_name: "bronze.orders".into(),
                    app_id: "orders-v1".into(),
                    granularity: Granularity::Hour,
                    finalized_until: Some(Utc::now()),
                    updated_at: Utc::now(),
                    open_snapshot_lsn: None,
                    applied_lsn: None,
                })
                .await?;
            Ok(())
        })
        .await?;
        sample("finalization: one table's verdict (MERGE)", counts, took);

        let lsn = i64::try_from(n).unwrap_or(i64::MAX);
        let ids: Vec<i64> = (0..10).map(|i| lsn * 10 + i).collect();
        let frame = changes(&rows_schema, &ids, Operation::Insert, lsn)?;
        let batches = frame.collect().await?;
        let (counts, took) = counted(counter, async {
            let staged = bronze
                .stage(futures::stream::iter(
                    batches.into_iter().map(Ok::<_, std::io::Error>),
                ))
                .await?;
            bronze
                .commit_batch(
                    &Txn::bronze_batch("orders-v1", id),
                    staged,
                    &serde_json::json!({"batch_id": n}),
                )
                .await?;
            Ok(())
        })
        .await?;
        sample("bronze: a batch of 10 changes", counts, took);

        let frame = changes(&rows_schema, &ids, Operation::Insert, lsn)?;
        let (counts, took) = counted(counter, async {
            silver
                .apply(
                    &Txn::silver_batch("orders-v1", id),
                    frame,
                    &serde_json::json!({"batch_id": n}),
                )
                .await?;
            Ok(())
        })
        .await?;
        sample("silver: a batch of 10 changes (MERGE)", counts, took);

        // The other handle's commits are read first, not timed.
        raw.update_state().await?;
        let (counts, took) = counted(counter, async {
            empty_commit(&mut raw, n, commit_properties()).await
        })
        .await?;
        sample("empty commit, the engine's settings", counts, took);

        // The other handle's commits are read first, not timed.
        raw.update_state().await?;
        let (counts, took) = counted(counter, async {
            empty_commit(
                &mut raw,
                1_000_000 + n,
                CommitProperties::default().with_cleanup_expired_logs(Some(true)),
            )
            .await
        })
        .await?;
        sample("empty commit, with expired-log cleanup", counts, took);
    }
    Ok(samples
        .into_iter()
        .map(|(commit, mut runs)| {
            let median = |values: &mut Vec<u64>| {
                values.sort_unstable();
                values[values.len() / 2]
            };
            let mut requests: Vec<u64> = runs.iter().map(|(c, _)| c.total()).collect();
            let mut pages: Vec<u64> = runs.iter().map(|(c, _)| c.of_kind(Kind::List)).collect();
            runs.sort_by_key(|(_, took)| *took);
            Measured {
                commit,
                requests: median(&mut requests),
                list_pages: median(&mut pages),
                time: runs[runs.len() / 2].1,
            }
        })
        .collect())
}

/// The requests and time of `work`.
async fn counted(
    counter: &RequestCounter,
    work: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<(Counts, Duration)> {
    let before = counter.snapshot();
    let started = Instant::now();
    work.await?;
    let took = started.elapsed();
    Ok((counter.snapshot().since(&before), took))
}

/// A commit with no file, only a `txn`, made with `properties`.
async fn empty_commit(
    table: &mut DeltaTable,
    version: u64,
    properties: CommitProperties,
) -> anyhow::Result<()> {
    let version = i64::try_from(version).unwrap_or(i64::MAX);
    let properties =
        properties.with_application_transaction(Transaction::new("bench-empty", version));
    Ok(commit_no_file(table, properties).await?)
}

/// Writes commits into the log of the table at `dir` up to version `age`,
/// each carrying one `txn`, and a Delta checkpoint at `age`. The
/// checkpoint is the table's state before those commits (they add no
/// file), written at its first version and moved to `age`, so that aging
/// costs no replay of the whole log: a checkpoint's version is its file
/// name's and `_last_checkpoint`'s, not its content's.
async fn age_log(dir: &Path, age: u64) -> anyhow::Result<()> {
    let url = url::Url::from_directory_path(dir)
        .map_err(|()| anyhow::anyhow!("{} is not an absolute path", dir.display()))?;
    let table = deltalake::open_table(url.clone()).await?;
    let created = table.version().unwrap_or(0);
    deltalake::checkpoints::create_checkpoint(&table, None).await?;
    let log = dir.join("_delta_log");
    let checkpoint = |version: u64| log.join(format!("{version:020}.checkpoint.parquet"));
    std::fs::rename(checkpoint(created), checkpoint(age))?;
    let last = log.join("_last_checkpoint");
    let mut pointer: serde_json::Value = serde_json::from_slice(&std::fs::read(&last)?)?;
    pointer["version"] = age.into();
    std::fs::write(&last, serde_json::to_vec(&pointer)?)?;
    let now = Utc::now().timestamp_millis();
    for version in created + 1..=age {
        let commit = serde_json::json!({
            "commitInfo": {
                "timestamp": now,
                "operation": "WRITE",
                "operationParameters": {"mode": "Append"},
                "clientVersion": "mssql-cdc-bench-table-age"
            }
        });
        let txn = serde_json::json!({
            "txn": {"appId": AGE_APP_ID, "version": version, "lastUpdated": now}
        });
        std::fs::write(
            log.join(format!("{version:020}.json")),
            format!("{commit}\n{txn}\n"),
        )?;
    }
    let aged = deltalake::open_table(url).await?;
    anyhow::ensure!(
        aged.version() == Some(age),
        "the log of {} reads as version {:?}, not {age}",
        dir.display(),
        aged.version()
    );
    Ok(())
}
