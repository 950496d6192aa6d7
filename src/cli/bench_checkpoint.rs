//! `mssql-cdc bench --checkpoint`: what one step costs the checkpoint log
//! as a stream ages. Before a step read a pointer, it listed `offsets/` and
//! `commits/`, two objects more per batch; the first step on an old
//! checkpoint still does once, to write the pointer.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use mssql_cdc::domain::{BatchId, CaptureInstance, Lsn};
use mssql_cdc::lake::checkpoint::{Checkpoint, CommittedBatch, PlannedBatch};
use mssql_cdc::lake::{StorageLocation, StorageOptions};

/// Steps timed after the first, for the median.
const STEPS: u64 = 21;

/// Prints, for each history size, the first step on a checkpoint without
/// a pointer (a listing, what every step cost before) and the median step
/// after it (read the log, plan, mark done).
pub async fn run(dir: &Path, histories: &[u64]) -> anyhow::Result<()> {
    println!(
        "checkpoint steps on a local disk ({dir})",
        dir = dir.display()
    );
    println!(
        "{:>10}  {:>22}  {:>20}",
        "batches", "first step (listing)", "median step"
    );
    for &history in histories {
        let root = dir.join(format!("checkpoint-{history}"));
        write_history(&root, history)?;
        let location = StorageLocation::parse(&root.display().to_string())?;
        let checkpoint = Checkpoint::open(&location, &StorageOptions::default())?;
        let started = Instant::now();
        step(&checkpoint).await?;
        let first = started.elapsed();
        let mut times = Vec::new();
        for _ in 0..STEPS {
            let started = Instant::now();
            step(&checkpoint).await?;
            times.push(started.elapsed());
        }
        times.sort();
        println!(
            "{history:>10}  {:>19.2} ms  {:>17.2} ms",
            millis(first),
            millis(times[times.len() / 2])
        );
        std::fs::remove_dir_all(&root).ok();
    }
    Ok(())
}

/// One step's work on the log: where it stands, plan the next batch,
/// mark it done.
async fn step(checkpoint: &Checkpoint) -> anyhow::Result<()> {
    let state = checkpoint.state().await?;
    let batch = state.next_batch_id()?;
    checkpoint.plan(&plan(batch)?).await?;
    checkpoint
        .commit(&CommittedBatch {
            batch_id: batch,
            bronze_version: None,
            committed_at: Utc::now(),
            bronze_mark: None,
        })
        .await?;
    Ok(())
}

fn plan(batch: BatchId) -> anyhow::Result<PlannedBatch> {
    Ok(PlannedBatch {
        batch_id: batch,
        start_lsn: Lsn::ZERO,
        end_lsn: Lsn::MAX,
        capture_instance: CaptureInstance::new("dbo_bench")?,
        end_commit_ts: None,
        planned_at: Utc::now(),
        events: Vec::new(),
        parts: Vec::new(),
        columns: Vec::new(),
    })
}

/// A checkpoint of an old stream: `n` plans and markers, no pointer.
fn write_history(root: &Path, n: u64) -> anyhow::Result<()> {
    for folder in ["offsets", "commits"] {
        std::fs::create_dir_all(root.join(folder))
            .with_context(|| format!("creating {}", root.display()))?;
    }
    for id in 1..=n {
        let batch = BatchId::new(id)?;
        std::fs::write(
            root.join("offsets").join(id.to_string()),
            serde_json::to_vec(&plan(batch)?)?,
        )?;
        let done = CommittedBatch {
            batch_id: batch,
            bronze_version: None,
            committed_at: Utc::now(),
            bronze_mark: None,
        };
        std::fs::write(
            root.join("commits").join(id.to_string()),
            serde_json::to_vec(&done)?,
        )?;
    }
    Ok(())
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
