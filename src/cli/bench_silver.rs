//! `mssql-cdc bench --silver ROWS`: what applying one micro-batch to a
//! silver table costs, on a table of ROWS keys filled the way a bootstrap
//! fills it (one MERGE per snapshot chunk). Two shapes of batch: changes
//! to keys spread over the whole table, and changes to the newest keys
//! (updates of recent rows and inserts of new ones), the common shape of
//! an append-mostly table. Prints the apply rate, the files each MERGE
//! read and skipped, and the peak RSS of each shape.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::datafusion::prelude::SessionContext;
use mssql_cdc::domain::change::{BATCH_ID, COMMIT_TS, LSN, OPERATION, Operation, SEQVAL};
use mssql_cdc::lake::silver::{ApplyOutcome, Deletes, SilverTable};
use mssql_cdc::lake::txn::Txn;
use mssql_cdc::lake::{StorageLocation, StorageOptions};

use super::bench_measure::{peak_rss_mb, reset_peak_rss};

/// Rows per bootstrap chunk (the default `snapshot.chunkRows`).
const CHUNK_ROWS: u64 = 100_000;

/// What `bench --silver` measures.
pub struct SilverBench {
    /// Keys in the table before the batches.
    pub rows: u64,
    /// Changes per batch.
    pub changes: u64,
    /// Batches timed per shape.
    pub batches: u64,
    /// The shapes to time, in order.
    pub shapes: Vec<Shape>,
}

/// The shape of a batch's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// Updates of keys drawn uniformly from the whole table.
    Random,
    /// Half updates of the newest keys, half inserts of new ones.
    Newest,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Random => "random keys",
            Shape::Newest => "newest keys",
        }
    }
}

/// Builds the table and prints each shape's figures.
pub async fn run(dir: &Path, bench: &SilverBench) -> anyhow::Result<()> {
    if bench.rows == 0 || bench.changes == 0 || bench.batches == 0 {
        anyhow::bail!("--silver, --silver-changes and --silver-batches must be positive");
    }
    let location = StorageLocation::parse(&dir.join("silver").display().to_string())?;
    let captured = captured();
    let mut silver = SilverTable::open_or_create(
        &location,
        &StorageOptions::default(),
        captured
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect::<Vec<_>>()
            .as_slice(),
        vec!["id".into()],
        Deletes::Hard,
    )
    .await?;
    let schema = bronze_rows_schema(&captured);
    println!(
        "silver MERGE: a table of {} keys (bigint key, int, varchar), batches of {} changes, {} per shape, local disk",
        bench.rows, bench.changes, bench.batches
    );

    reset_peak_rss();
    let started = Instant::now();
    let mut chunk = 0u64;
    let mut from = 0u64;
    while from < bench.rows {
        let to = (from + CHUNK_ROWS).min(bench.rows);
        let ids: Vec<i64> = (from..to).map(to_i64).collect();
        let rows = changes(&schema, &ids, Operation::Snapshot, 1)?;
        let txn = Txn {
            app_id: "bench/silver/snapshot/1".into(),
            version: to_i64(chunk),
        };
        silver.apply(&txn, rows, &RECORD).await?;
        chunk += 1;
        from = to;
    }
    println!(
        "bootstrap: {} keys in {chunk} chunks, {:.1} s (peak RSS {:.0} MB)",
        bench.rows,
        started.elapsed().as_secs_f64(),
        peak_rss_mb()
    );

    let mut version = 0i64;
    let mut rng = fastrand::Rng::with_seed(7);
    let mut next_key = bench.rows;
    for &shape in &bench.shapes {
        reset_peak_rss();
        let mut times = Vec::new();
        let mut scanned = Vec::new();
        for _ in 0..bench.batches {
            version += 1;
            let (updates, inserts) = match shape {
                Shape::Random => (
                    (0..bench.changes)
                        .map(|_| to_i64(rng.u64(..next_key)))
                        .collect::<Vec<_>>(),
                    Vec::new(),
                ),
                Shape::Newest => {
                    let half = bench.changes / 2;
                    let newest = next_key.saturating_sub(half);
                    let updates = (newest..next_key).map(to_i64).collect();
                    let inserts = (next_key..next_key + (bench.changes - half))
                        .map(to_i64)
                        .collect();
                    next_key += bench.changes - half;
                    (updates, inserts)
                }
            };
            let lsn = 1 + version;
            let mut frame = changes(&schema, &updates, Operation::UpdateAfter, lsn)?;
            if !inserts.is_empty() {
                frame = frame.union(changes(&schema, &inserts, Operation::Insert, lsn)?)?;
            }
            let txn = Txn {
                app_id: "bench/silver".into(),
                version,
            };
            let started = Instant::now();
            let outcome = silver.apply(&txn, frame, &RECORD).await?;
            times.push(started.elapsed());
            if let ApplyOutcome::Applied {
                files_scanned,
                files_skipped,
                ..
            } = outcome
            {
                scanned.push((files_scanned, files_skipped));
            }
        }
        times.sort();
        let median = times[times.len() / 2];
        let (files_scanned, files_skipped) = scanned.last().copied().unwrap_or_default();
        println!(
            "{:>12}: median {:>6.2} s per batch, {:>8.0} changes/s, files read {files_scanned}, skipped {files_skipped} (peak RSS {:.0} MB)",
            shape.name(),
            median.as_secs_f64(),
            rate(bench.changes, median),
            peak_rss_mb()
        );
    }
    println!(
        "peak RSS is this process's, the bootstrap's counted apart; Linux only, from /proc/self/status VmHWM"
    );
    Ok(())
}

/// What each benchmark commit records.
#[derive(serde::Serialize)]
struct Record {
    bench: &'static str,
}

/// The record of every benchmark commit (silver takes a JSON object).
const RECORD: Record = Record { bench: "silver" };

pub(super) fn captured() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int32, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

/// The captured columns followed by the CDC columns, as bronze holds them.
pub(super) fn bronze_rows_schema(captured: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = captured
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend([
        Field::new(LSN, DataType::Utf8, false),
        Field::new(SEQVAL, DataType::Utf8, false),
        Field::new(OPERATION, DataType::Utf8, false),
        Field::new(
            COMMIT_TS,
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new(BATCH_ID, DataType::Int64, false),
    ]);
    Arc::new(Schema::new(fields))
}

/// One change of `operation` per id, all at LSN `lsn`, as a DataFrame.
pub(super) fn changes(
    schema: &SchemaRef,
    ids: &[i64],
    operation: Operation,
    lsn: i64,
) -> anyhow::Result<deltalake::datafusion::prelude::DataFrame> {
    let n = ids.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.to_vec())),
        Arc::new(Int32Array::from_iter_values(ids.iter().map(|i| {
            i32::try_from(i % 1000).unwrap_or(0) + i32::try_from(lsn % 7).unwrap_or(0)
        }))),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("event-{i}-{lsn}")),
        )),
        Arc::new(StringArray::from(vec![format!("0x{lsn:020X}"); n])),
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("0x{i:020X}")),
        )),
        Arc::new(StringArray::from(vec![operation.as_str(); n])),
        Arc::new(TimestampMicrosecondArray::from(vec![
            1_790_000_000_000_000i64
                + lsn;
            n
        ])),
        Arc::new(Int64Array::from(vec![lsn; n])),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(SessionContext::new().read_batch(batch)?)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn rate(changes: u64, took: Duration) -> f64 {
    changes as f64 / took.as_secs_f64().max(1e-9)
}
