//! A silver table added to a stream that already ran. Silver is kept from
//! the stream's bronze commits, one MERGE per batch, so a silver table named
//! in the manifest after the stream's first batches would otherwise hold
//! only the changes after the edit and look complete. Before the run's
//! first step, it is filled from the rows bronze holds (docs/adr/0011 and
//! docs/silver.md, "Adding silver to a running stream"): once, under its own
//! `txn`, with its verdict held meanwhile. Until it commits no batch is
//! applied to silver.
//!
//! Whether silver is new to the stream is told by its `txn`s alone: a silver
//! table kept from the start holds the batches' sequence, or the bootstrap's
//! chunks, and a filled one holds the fill's. Three `txn` lookups in
//! silver's log decide it at every start; the checkpoint is read only when
//! silver holds none of them.

use chrono::{DateTime, Utc};

use super::context::Run;
use super::error::EngineError;
use super::observer::SilverFill;
use super::sink::Sink;
use crate::domain::Lsn;
use crate::lake::checkpoint::CheckpointState;
use crate::lake::txn::Txn;

/// Bootstrap snapshots are numbered 0, resnapshots from 1.
const BOOTSTRAP: u64 = 0;

/// What the checkpoint says the stream has written, as the fill needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct History {
    /// The bootstrap snapshot's LSN: every row of this stream is at or
    /// after it (older rows are another appId's).
    bootstrap: Option<Lsn>,
    /// The newest completed resnapshot's LSN: keys whose last change is
    /// older were not in it.
    resnapshot: Option<Lsn>,
    /// Where the fill leaves silver: the newest batch's end, or a newer
    /// completed snapshot's LSN.
    reached: Lsn,
    /// The commit time `reached` stands for, for the verdict.
    reached_commit_ts: Option<DateTime<Utc>>,
    /// Whether `reached` is a batch's end (silver's `applied_lsn`).
    by_batch: bool,
}

/// Fills silver when it is new to a stream that already wrote bronze; does
/// nothing otherwise (no silver, a silver kept from the start or already
/// filled, or nothing in bronze yet).
pub async fn fill_added_silver(run: &Run<'_>, sink: &mut Sink) -> Result<(), EngineError> {
    if !sink.has_silver() {
        return Ok(());
    }
    let app_id = &run.config.app_id;
    let done = Txn::silver_fill(app_id);
    for sequence in [
        done.app_id.clone(),
        Txn::silver_batch(app_id, crate::domain::BatchId::FIRST).app_id,
        Txn::silver_chunks(app_id, BOOTSTRAP),
    ] {
        if sink.silver_applied(&sequence).await?.is_some() {
            return Ok(());
        }
    }
    let state = sink.checkpoint.state().await?;
    let Some(history) = history(sink, &state).await? else {
        // Nothing committed yet: a bootstrap in progress reaches silver
        // chunk by chunk as it resumes.
        return Ok(());
    };
    let Some(silver) = run.config.silver.as_ref() else {
        return Ok(());
    };
    let fill = SilverFill {
        table: silver.table.name.clone(),
        lsn: history.reached,
    };
    tracing::info!(
        silver = %silver.table.name,
        up_to_lsn = %history.reached,
        "silver is new to this stream: filling it from bronze before the next batch"
    );
    sink.hold_silver_verdict(history.reached, run.observer())
        .await?;
    run.observer().silver_filling(&fill);
    crate::failpoint::hit("mid_silver_fill");
    let made = sink
        .fill_silver(&done, history.bootstrap, history.resnapshot)
        .await?;
    let applied = history.by_batch.then_some(history.reached);
    sink.advance_verdict(history.reached_commit_ts, applied, run.observer())
        .await?;
    if made {
        tracing::info!(silver = %silver.table.name, "silver filled from bronze");
    }
    Ok(())
}

/// The stream's history from its checkpoint; `None` when it has committed
/// neither a batch nor a snapshot.
async fn history(sink: &Sink, state: &CheckpointState) -> Result<Option<History>, EngineError> {
    let checkpoint = &sink.checkpoint;
    let batch = match state.latest_committed {
        Some(id) => checkpoint.planned(id).await?,
        None => None,
    };
    let mut bootstrap = None;
    let mut completed: Option<(u64, Lsn, Option<DateTime<Utc>>)> = None;
    if let Some(latest) = checkpoint.latest_snapshot().await? {
        for n in (BOOTSTRAP..=latest).rev() {
            let Some(plan) = checkpoint.planned_snapshot(n).await? else {
                continue;
            };
            if n == BOOTSTRAP {
                bootstrap = Some(plan.lsn);
            }
            if completed.is_none() && checkpoint.completed_snapshot(n).await?.is_some() {
                completed = Some((n, plan.lsn, plan.commit_ts));
            }
        }
    }
    let resnapshot = completed
        .filter(|(n, _, _)| *n != BOOTSTRAP)
        .map(|(_, lsn, _)| lsn);
    let reached = match (&batch, completed) {
        (Some(batch), Some((_, lsn, ts))) if lsn > batch.end_lsn => (lsn, ts, false),
        (Some(batch), _) => (batch.end_lsn, batch.end_commit_ts, true),
        (None, Some((_, lsn, ts))) => (lsn, ts, false),
        (None, None) => return Ok(None),
    };
    Ok(Some(History {
        bootstrap,
        resnapshot,
        reached: reached.0,
        reached_commit_ts: reached.1,
        by_batch: reached.2,
    }))
}
