//! Snapshots: the table's current rows, copied in key order one chunk per
//! bronze commit, resumable after a crash without duplicates. The first is
//! the bootstrap of a new stream; later ones follow purged changes under
//! `onDataLoss: resnapshot`.
//!
//! Each chunk commits under its own `txn` (`lake::txn::Txn::snapshot_chunk`)
//! and records how far the snapshot got (`lake::records::ChunkProgress`); a
//! restarted run reads that back and continues after the last key copied.
//! Tables whose key cannot be resumed from are copied in one commit
//! (`source::snapshot::paging`).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::context::Run;
use super::error::EngineError;
use super::facts_row::{self, SnapshotMeasures};
use super::observer::SnapshotProgress;
use super::plan::{Position, Start};
use super::session::SourceSession;
use super::sink::Sink;
use super::source_changes::read_schema;
use crate::domain::{BatchId, Lsn};
use crate::failpoint;
use crate::lake::checkpoint::{CompletedSnapshot, PlannedSnapshot};
use crate::lake::facts::FactsKey;
use crate::lake::records::{ChunkProgress, ChunkRecord};
use crate::lake::txn::{FactSequence, Txn};
use crate::source::reader::{ReadRequest, RowShape};
use crate::source::snapshot::{Paging, chunk_query, key_from_json, key_to_json, paging};

/// The bootstrap is snapshot number 0.
const BOOTSTRAP: u64 = 0;

/// Where streaming goes on from, taking (or resuming) the snapshot the
/// start calls for first.
pub async fn position(
    run: &mut Run<'_>,
    session: &mut SourceSession,
    sink: &mut Sink,
    start: Start,
) -> Result<Position, EngineError> {
    match start {
        Start::After(position) => Ok(position),
        Start::Snapshot(plan) => take(run, session, sink, plan).await,
        Start::Bootstrap => {
            let plan = plan_snapshot(session, sink, BOOTSTRAP, None, None).await?;
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
/// facts row records the commit times whose changes were purged.
pub async fn resnapshot(
    run: &mut Run<'_>,
    session: &mut SourceSession,
    sink: &mut Sink,
    lost_from_ts: Option<DateTime<Utc>>,
    lost_to_ts: Option<DateTime<Utc>>,
) -> Result<Position, EngineError> {
    let n = sink
        .checkpoint
        .latest_snapshot()
        .await?
        .map_or(BOOTSTRAP + 1, |n| n + 1);
    let plan = plan_snapshot(session, sink, n, lost_from_ts, lost_to_ts).await?;
    take(run, session, sink, plan).await
}

/// Fixes snapshot `n`'s LSN (the source's max LSN now) before it reads.
async fn plan_snapshot(
    session: &mut SourceSession,
    sink: &mut Sink,
    n: u64,
    lost_from_ts: Option<DateTime<Utc>>,
    lost_to_ts: Option<DateTime<Utc>>,
) -> Result<PlannedSnapshot, EngineError> {
    let instance = session.info().instance.clone();
    let max = session.max_lsn().await?;
    let min = session.min_lsn(&instance).await?;
    // A capture instance newer than the last change starts after it:
    // nothing before its start was ever captured.
    let lsn = max.max(min.checked_prev().unwrap_or(Lsn::ZERO));
    let plan = PlannedSnapshot {
        snapshot: n,
        lsn,
        capture_instance: instance,
        commit_ts: session.lsn_time(lsn).await?,
        started_at: Utc::now(),
        lost_from_ts,
        lost_to_ts,
        key_bounds: Vec::new(),
    };
    sink.plan_snapshot(&plan).await?;
    Ok(plan)
}

/// Runs (or resumes) a planned snapshot; returns the position changes are
/// streamed after.
async fn take(
    run: &mut Run<'_>,
    session: &mut SourceSession,
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
        return Ok(position);
    }
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

    let (mut chunk, mut after, mut rows, mut finished) = match &resumed {
        Some((progress, after)) => (
            progress.chunk + 1,
            after.clone(),
            progress.rows,
            progress.finished,
        ),
        None => (0, None, 0, false),
    };
    if resumed.is_some() {
        tracing::info!(
            rows,
            chunk,
            "resuming the snapshot after its last committed chunk"
        );
        // Silver applies the chunks a crash left in bronze only.
        if sink.has_silver() {
            let applied = sink.silver_applied(&Txn::silver_chunks(app_id, n)).await?;
            let first = applied.map_or(0, |v| u64::try_from(v).unwrap_or(0) + 1);
            for done in first..chunk {
                sink.apply_to_silver(
                    &Txn::snapshot_chunk(app_id, n, done),
                    &Txn::silver_chunk(app_id, n, done),
                )
                .await?;
            }
        }
    }
    let resumed_rows = rows;
    let clock = Instant::now();
    let mut read_time = Duration::ZERO;
    let mut read_bytes = 0u64;
    while !finished {
        let request = ReadRequest {
            sql: chunk_query(
                &run.config.source.table,
                &paged,
                chunk_rows,
                after.as_deref(),
            ),
            params: after.clone().unwrap_or_default(),
            columns: info.columns.clone(),
            schema: schema.clone(),
            shape: RowShape::Snapshot {
                lsn: plan.lsn,
                commit_ts: plan.commit_ts,
                key_positions: key_positions.clone(),
            },
            batch_id: BatchId::SNAPSHOT.txn_version(),
            on_batch: Some(reading_observer(run, rows)),
        };
        let (staged, stats) = session.read_into(&mut sink.bronze, request).await?;
        read_time += stats.read_time;
        read_bytes += stats.bytes;
        rows += stats.rows;
        finished = paged.key_columns.is_empty() || stats.rows < chunk_rows;
        if finished && !paged.key_columns.is_empty() {
            // A short chunk ends the snapshot only once the table confirms
            // it has nothing past the last key read: a result cut off
            // mid-way, or rows inserted since, are read by another chunk.
            // (On a session that was cut off, the check itself fails.)
            let last = stats.last_key.as_deref().or(after.as_deref());
            finished = !session.has_rows_after(&paged, last).await?;
        }
        let record = ChunkRecord {
            progress: ChunkProgress {
                snapshot: n,
                chunk,
                rows,
                finished,
                last_key: stats.last_key.as_ref().map(|key| {
                    key.iter()
                        .map(|v| key_to_json(v).unwrap_or(Value::Null))
                        .collect()
                }),
                checkpoint: Some(sink.identity.id.clone()),
                plan: Some(plan.clone()),
                range: None,
                ranges: Vec::new(),
            },
        };
        sink.commit_to_bronze(&Txn::snapshot_chunk(app_id, n, chunk), staged, &record)
            .await?;
        sink.apply_to_silver(
            &Txn::snapshot_chunk(app_id, n, chunk),
            &Txn::silver_chunk(app_id, n, chunk),
        )
        .await?;
        failpoint::hit("mid_snapshot");
        let elapsed = clock.elapsed().as_secs_f64().max(1e-3);
        let rate = (rows - resumed_rows) as f64 / elapsed;
        let eta = estimated
            .filter(|_| rate > 0.0)
            .map(|total| Duration::from_secs_f64(total.saturating_sub(rows) as f64 / rate));
        run.observer().snapshot_progress(&SnapshotProgress {
            rows,
            estimated_rows: estimated,
            rows_per_second: rate,
            eta,
            chunks: chunk + 1,
            started_at: plan.started_at,
        });
        tracing::debug!(
            rows,
            estimated_rows = estimated,
            rows_per_second = rate.round(),
            "snapshot progress"
        );
        after = stats.last_key;
        chunk += 1;
    }

    let measures = SnapshotMeasures {
        rows,
        read_time,
        read_bytes,
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
    sink.complete_snapshot(&CompletedSnapshot {
        snapshot: n,
        rows,
        completed_at: Utc::now(),
    })
    .await?;
    tracing::info!(rows, lsn = %plan.lsn, "snapshot complete");
    sink.advance_verdict(plan.commit_ts, Some(plan.lsn), run.observer())
        .await?;
    run.summary.snapshot_rows += rows;
    run.observer().snapshot_done(&row);
    Ok(position)
}

/// Tells the observer how many rows the snapshot holds while a chunk
/// reads, `before` being the rows of the chunks committed before it.
fn reading_observer(run: &Run<'_>, before: u64) -> Box<dyn FnMut(u64) + Send> {
    let observer = run.options.observer.clone();
    Box::new(move |rows| observer.snapshot_reading(before + rows))
}

/// Where the planned snapshot's committed chunks got to, from bronze, with
/// the key to resume after. The chunks must be this checkpoint's, of this
/// snapshot: another's would be resumed as if they were.
async fn resumed_progress(
    sink: &mut Sink,
    app_id: &str,
    plan: &PlannedSnapshot,
    target: &str,
) -> Result<Option<(ChunkProgress, Option<Vec<tiberius::ColumnData<'static>>>)>, EngineError> {
    let n = plan.snapshot;
    let Some(chunk) = sink
        .bronze
        .committed_version(&Txn::snapshot_chunks(app_id, n))
        .await?
    else {
        return Ok(None);
    };
    let unreadable = || {
        EngineError::Inconsistent(format!(
            "bronze table {target}: snapshot chunk {chunk} is committed but its progress record \
             cannot be read; move the checkpoint and target aside to re-snapshot"
        ))
    };
    let chunk = u64::try_from(chunk).map_err(|_| unreadable())?;
    let record = sink
        .bronze
        .record::<ChunkRecord>(&Txn::snapshot_chunk(app_id, n, chunk))
        .await?
        .ok_or_else(unreadable)?;
    let foreign = !sink.identity.owns(record.progress.checkpoint.as_deref())
        || record
            .progress
            .plan
            .as_ref()
            .is_some_and(|p| p.lsn != plan.lsn);
    if foreign {
        return Err(EngineError::Inconsistent(format!(
            "bronze table {target}: snapshot {n}'s chunks were written by checkpoint {} for LSN {}, \
             not by this one for LSN {}; nothing was written. See docs/user-guide.md, \
             \"Moving or rebuilding a stream\"",
            record
                .progress
                .checkpoint
                .as_deref()
                .unwrap_or("(without an identity)"),
            record
                .progress
                .plan
                .as_ref()
                .map_or_else(|| "unknown".to_string(), |p| p.lsn.to_string()),
            plan.lsn
        )));
    }
    let after = match &record.progress.last_key {
        Some(keys) => Some(
            keys.iter()
                .map(key_from_json)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(unreadable)?,
        ),
        None => None,
    };
    let mut progress = record.progress;
    progress.chunk = chunk;
    Ok(Some((progress, after)))
}
