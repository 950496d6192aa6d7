//! Snapshots: the table's current rows, copied in key order one chunk per
//! bronze commit, resumable after a crash without duplicates. The first is
//! the bootstrap of a new stream; later ones follow purged changes under
//! `onDataLoss: resnapshot`.
//!
//! Each chunk commits under its own `txn` (`lake::txn::Txn::snapshot_chunk`)
//! and records how far the snapshot got (`lake::records::ChunkProgress`); a
//! restarted run reads that back and continues after the last key copied.
//! With `spec.source.readers` above 1 the plan splits the table into key
//! ranges copied at once (`snapshot_copy`), each resumed on its own
//! (`snapshot_ranges`). Tables whose key cannot be resumed from are copied
//! in one commit (`source::snapshot::paging`).

use chrono::{DateTime, Utc};

use super::change_source::ChangeSource;
use super::context::Run;
use super::error::EngineError;
use super::facts_row::{self, SnapshotMeasures};
use super::plan::{Position, Start};
use super::sink::{BronzeCommit, Sink};
use super::snapshot_copy::{SnapshotCopy, copy_ranges};
use super::snapshot_ranges::SnapshotRanges;
use super::source_changes::{planned_columns, read_schema};
use crate::domain::facts::detail::SwitchDetail;
use crate::domain::{FactRow, Lsn};
use crate::failpoint;
use crate::lake::checkpoint::{CompletedSnapshot, PlannedSnapshot};
use crate::lake::facts::FactsKey;
use crate::lake::records::{ChunkProgress, ChunkRecord};
use crate::lake::txn::{FactSequence, Txn};
use crate::source::snapshot::{Paging, paging};

/// The bootstrap is snapshot number 0.
const BOOTSTRAP: u64 = 0;

/// Where streaming goes on from, taking (or resuming) the snapshot the
/// start calls for first.
pub async fn position<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    start: Start,
) -> Result<Position, EngineError> {
    match start {
        Start::After(position) => Ok(position),
        Start::Snapshot(plan) => take(run, session, sink, *plan).await,
        Start::Bootstrap => {
            let readers = run.config.source.readers;
            let plan = plan_snapshot(session, sink, BOOTSTRAP, readers, None).await?;
            take(run, session, sink, plan).await
        }
        Start::OldestKept => {
            let instance = session.info().instance.clone();
            let min = session.min_lsn(&instance).await?;
            Ok(Position {
                lsn: min.checked_prev().unwrap_or(Lsn::ZERO),
                commit_ts: None,
                instance,
            })
        }
    }
}

/// `spec.onDataLoss: resnapshot`: plans and takes a new snapshot, whose
/// facts row records the commit times whose changes were purged, and the
/// move to a newer capture instance when there was one (`switched`).
pub async fn resnapshot<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    lost: Lost,
    switched: Option<SwitchDetail>,
) -> Result<Position, EngineError> {
    let n = sink
        .checkpoint
        .latest_snapshot()
        .await?
        .map_or(BOOTSTRAP + 1, |n| n + 1);
    let replaced = Replaced { lost, switched };
    let plan = plan_snapshot(session, sink, n, run.config.source.readers, Some(replaced)).await?;
    take(run, session, sink, plan).await
}

/// Commit times around the changes a re-snapshot replaces: of the last one
/// read, of the oldest one CDC still kept.
pub type Lost = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// What a re-snapshot replaces: the changes lost, and the capture
/// instance it moved away from, if it did.
struct Replaced {
    lost: Lost,
    switched: Option<SwitchDetail>,
}

/// Fixes snapshot `n`'s LSN (the source's max LSN now) and, for `readers`
/// above 1, the key bounds of its ranges before it reads.
async fn plan_snapshot<S: ChangeSource>(
    session: &mut S,
    sink: &mut Sink,
    n: u64,
    readers: usize,
    replaced: Option<Replaced>,
) -> Result<PlannedSnapshot, EngineError> {
    let (lost, switched) = replaced.map(|r| (r.lost, r.switched)).unwrap_or_default();
    let (lost_from_ts, lost_to_ts) = lost;
    let instance = session.info().instance.clone();
    let max = session.max_lsn().await?;
    let min = session.min_lsn(&instance).await?;
    // A capture instance newer than the last change starts after it:
    // nothing before its start was ever captured.
    let lsn = max.max(min.checked_prev().unwrap_or(Lsn::ZERO));
    let info = session.info().clone();
    let key_bounds = match paging(&info) {
        Paging::ByKey(_) if readers > 1 => session.key_bounds(&info, readers).await?,
        _ => Vec::new(),
    };
    let plan = PlannedSnapshot {
        snapshot: n,
        lsn,
        capture_instance: instance,
        commit_ts: session.lsn_time(lsn).await?,
        started_at: Utc::now(),
        lost_from_ts,
        lost_to_ts,
        key_bounds,
        switched,
        columns: planned_columns(&info),
    };
    sink.plan_snapshot(&plan).await?;
    Ok(plan)
}

/// Runs (or resumes) a planned snapshot; returns the position changes are
/// streamed after.
async fn take<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    plan: PlannedSnapshot,
) -> Result<Position, EngineError> {
    let n = plan.snapshot;
    session.use_instance(&plan.capture_instance).await?;
    let position = Position {
        lsn: plan.lsn,
        commit_ts: plan.commit_ts,
        instance: plan.capture_instance.clone(),
    };
    if sink.checkpoint.completed_snapshot(n).await?.is_some() {
        // Completed by an earlier attempt or process, which may have
        // stopped before the verdict moved past it; moving it again is
        // harmless. Rows this run copied are reported once, here.
        sink.advance_verdict(plan.commit_ts, Some(plan.lsn), run.observer())
            .await?;
        if let Some((_, row)) = run.copied_snapshot.take_if(|(copied, _)| *copied == n) {
            report_done(run, &row);
        }
        return Ok(position);
    }
    // A source's table copies in one of its snapshot slots, and gives its
    // read slot back while it waits for one and copies; the source's group
    // commits do not wait for a copy either.
    run.read_permit = None;
    run.in_step = None;
    let _snapshot_slot = match run.options.pace.clone() {
        Some(pace) => pace.snapshot_permit().await,
        None => None,
    };
    sink.hold_verdict(plan.lsn, run.observer()).await?;
    let app_id = &run.config.app_id;
    let resumed =
        resumed_progress(sink, app_id, &plan, &run.config.target.location.to_string()).await?;
    let info = session.info().clone();
    let mut paged = info.clone();
    let key_positions = match paging(&info) {
        Paging::ByKey(positions) => positions,
        Paging::WholeTable => {
            paged.key_columns.clear();
            Vec::new()
        }
    };
    let chunk_rows = run.config.snapshot_chunk_rows.get();
    let estimated = session.estimated_rows().await;
    let schema = read_schema(&info, &sink.bronze.arrow_schema()?)?;

    let target = run.config.target.location.to_string();
    let mut ranges = SnapshotRanges::new(&plan, !paged.key_columns.is_empty(), resumed.as_ref())
        .map_err(|why| EngineError::SnapshotRangesMismatch {
            target: target.clone(),
            snapshot: n,
            why,
        })?;
    let first_chunk = resumed.as_ref().map_or(0, |progress| progress.chunk + 1);
    if resumed.is_some() {
        tracing::info!(
            rows = ranges.rows(),
            chunk = first_chunk,
            "resuming the snapshot after its last committed chunk"
        );
        // Silver applies the chunks a crash left in bronze only.
        if sink.has_silver() {
            let applied = sink.silver_applied(&Txn::silver_chunks(app_id, n)).await?;
            let first = applied.map_or(0, |v| u64::try_from(v).unwrap_or(0) + 1);
            for done in first..first_chunk {
                sink.apply_to_silver(
                    &Txn::snapshot_chunk(app_id, n, done),
                    &Txn::silver_chunk(app_id, n, done),
                    BronzeCommit::Maybe,
                )
                .await?;
            }
        }
    }
    let copy = SnapshotCopy {
        plan: &plan,
        first_chunk,
        estimated,
        paged,
        key_positions,
        schema,
        chunk_rows,
    };
    let copied = copy_ranges(run, session, sink, &mut ranges, &copy).await?;
    let rows = ranges.rows();
    let measures = SnapshotMeasures {
        rows,
        read_time: copied.read_time,
        read_bytes: copied.read_bytes,
    };
    if n != BOOTSTRAP {
        // Keys the new snapshot did not see are gone from the source.
        sink.silver_after_resnapshot(plan.lsn).await?;
    }
    let row = facts_row::snapshot_row(run.stream(), &plan, &measures, Utc::now());
    let key = FactsKey {
        target: run.config.target.name.clone(),
        app_id: app_id.clone(),
        sequence: FactSequence::Snapshot(n),
    };
    sink.append_facts(&key, std::slice::from_ref(&row)).await?;
    failpoint::hit("after_snapshot_facts");
    run.copied_snapshot = Some((n, row));
    sink.complete_snapshot(&CompletedSnapshot {
        snapshot: n,
        rows,
        completed_at: Utc::now(),
        bronze_mark: None,
    })
    .await?;
    // The observer reports it (console line, worker log, metrics).
    tracing::debug!(rows, lsn = %plan.lsn, "snapshot complete");
    sink.advance_verdict(plan.commit_ts, Some(plan.lsn), run.observer())
        .await?;
    if let Some((_, row)) = run.copied_snapshot.take() {
        report_done(run, &row);
    }
    Ok(position)
}

/// Counts a snapshot this run copied and tells the observer.
fn report_done(run: &mut Run<'_>, row: &FactRow) {
    run.summary.snapshot_rows += row.rows.unwrap_or(0);
    run.observer().snapshot_done(row);
}

/// Where the planned snapshot's committed chunks got to, from bronze, with
/// the key to resume after. The chunks must be this checkpoint's, of this
/// snapshot: another's would be resumed as if they were.
async fn resumed_progress(
    sink: &mut Sink,
    app_id: &str,
    plan: &PlannedSnapshot,
    target: &str,
) -> Result<Option<ChunkProgress>, EngineError> {
    let n = plan.snapshot;
    let Some(chunk) = sink
        .bronze
        .committed_version(&Txn::snapshot_chunks(app_id, n))
        .await?
    else {
        return Ok(None);
    };
    let unreadable = || EngineError::SnapshotProgressUnreadable {
        target: target.to_string(),
        chunk,
    };
    let chunk = u64::try_from(chunk).map_err(|_| unreadable())?;
    let record = sink
        .bronze_record::<ChunkRecord>(&Txn::snapshot_chunk(app_id, n, chunk))
        .await?
        .ok_or_else(unreadable)?;
    let foreign = !sink.identity.owns(record.progress.checkpoint.as_deref())
        || record
            .progress
            .plan
            .as_ref()
            .is_some_and(|p| p.lsn != plan.lsn);
    if foreign {
        return Err(EngineError::SnapshotForeign {
            target: target.to_string(),
            snapshot: n,
            written_by: record
                .progress
                .checkpoint
                .as_deref()
                .unwrap_or("(without an identity)")
                .to_string(),
            written_for: record
                .progress
                .plan
                .as_ref()
                .map_or_else(|| "unknown".to_string(), |p| p.lsn.to_string()),
            planned: plan.lsn,
        });
    }
    let mut progress = record.progress;
    progress.chunk = chunk;
    Ok(Some(progress))
}
