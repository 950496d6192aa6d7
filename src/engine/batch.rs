//! Runs one planned micro-batch to its commit marker: read the planned
//! range (in the plan's parts, at once, when it has them) into staged
//! Parquet files, commit them to bronze with the batch's facts rows in the
//! same commit, append those rows to the facts table, move the verdict,
//! mark the batch done. A replay after a crash resumes
//! where the first run stopped (`plan::resume`); see
//! docs/adr/0002-exactly-once.md.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::change_source::ChangeSource;
use super::changes_read::{ChangesRead, read_changes};
use super::context::Run;
use super::data_loss::{self, PurgeTimes};
use super::error::EngineError;
use super::facts_row::{self, BatchMeasures};
use super::plan::{self, BronzeHolds, Resume, Watermarks};
use super::sink::{BronzeCommit, Sink};
use super::source_changes::switch_failpoint;
use crate::domain::facts::EventDetail;
use crate::domain::{FactRow, Lsn};
use crate::failpoint;
use crate::lake::bronze::BronzeOutcome;
use crate::lake::checkpoint::{CommittedBatch, PlannedBatch, PlannedEvent};
use crate::lake::facts::{AppendOutcome, FactsKey};
use crate::lake::records::{BatchRecord, LsnRange};
use crate::lake::txn::{FactSequence, Txn};

/// How a batch's changes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// From the source, on the run's session (or its reader pool).
    Source,
    /// Not at all: the source's round found the batch's range without a
    /// change of the table, with the instance's low-water mark read after
    /// that at or before the range's start (`source::round_marks`), so
    /// nothing of the range was purged before it was found empty, and no
    /// row can arrive in a range up to a max LSN already read. The
    /// round's round trip stands for the read's. A replay of the batch
    /// after a crash reads it from the source.
    KnownEmpty {
        /// The round's round trip to the source.
        round_trip: Duration,
    },
}

/// Runs (or replays) `plan`. `marks` are the source's watermarks when it
/// was planned (or replayed), for its facts row.
pub async fn run_batch<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    plan: &PlannedBatch,
    marks: &Watermarks,
    read: Read,
) -> Result<(), EngineError> {
    let txn = Txn::bronze_batch(&run.config.app_id, plan.batch_id);
    let holds = if sink.bronze.holds(&txn).await? {
        match sink.bronze_record::<BatchRecord>(&txn).await? {
            Some(record) => BronzeHolds::Batch(Box::new(record)),
            None => BronzeHolds::BatchWithoutRecord,
        }
    } else {
        BronzeHolds::Nothing
    };
    match plan::resume(plan, &run.config.app_id, &sink.identity, holds).map_err(|source| {
        EngineError::Resume {
            target: run.config.target.location.to_string(),
            source,
        }
    })? {
        // Bronze holds the batch: a crash came after its commit. Its facts
        // rows travelled in the commit; finish the bookkeeping.
        Resume::Recover(rows) => {
            record_facts(run, sink, plan, None, BronzeCommit::Made, rows).await
        }
        Resume::Read => {
            let started = (Utc::now(), Instant::now());
            let (read, events) = match read {
                Read::Source => read_checked(run, session, sink, plan).await?,
                Read::KnownEmpty { round_trip } => (
                    ChangesRead::nothing(sink, round_trip).await?,
                    plan.events.clone(),
                ),
            };
            let end_commit_ts = match plan.end_commit_ts {
                Some(ts) => Some(ts),
                None => session.lsn_time(plan.end_lsn).await?,
            };
            let read = Done {
                read,
                events,
                end_commit_ts,
                started,
            };
            commit_read(run, sink, plan, &txn, marks, read).await
        }
    }
}

/// Reads the plan's changes from the source, and what cleanup did
/// meanwhile: the plan's events, with the policy's verdict on any purge.
async fn read_checked<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    plan: &PlannedBatch,
) -> Result<(ChangesRead, Vec<PlannedEvent>), EngineError> {
    session.use_instance(&plan.capture_instance).await?;
    let mut events = plan.events.clone();
    let mut read_from = match session
        .purged_past(&plan.capture_instance, plan.start_lsn)
        .await?
    {
        Some(min) => {
            purged_while_reading(run, session, plan, min, &mut events).await?;
            min
        }
        None => plan.start_lsn,
    };
    let waits = session.may_read_waits(&mut run.warnings).await?;
    let read = loop {
        match read_changes(run, session, sink, plan, read_from, waits).await {
            Ok(read) => break read,
            // Cleanup passed the start after it was checked (error 313):
            // the policy decides, and under skip the read starts again at
            // the new low-water mark. Nothing of the failed read was kept.
            Err(EngineError::Source(error)) if error.is_purged_range() => {
                let purged = session
                    .purged_past(&plan.capture_instance, read_from)
                    .await?;
                let Some(min) = purged else {
                    return Err(EngineError::Source(error));
                };
                purged_while_reading(run, session, plan, min, &mut events).await?;
                read_from = min;
            }
            Err(error) => return Err(error),
        }
    };
    // Each part asked for the low-water mark on the session that read it
    // (`readers::Check`): that query is also what tells a complete read
    // from one cut off, since a session killed mid-result may end the
    // result with a DONE token that carries only an error flag, which the
    // driver takes for its end; the server closes a killed session's
    // connection, so the query fails and the batch is read again. Keep a
    // query on each reading session between the read and the commit.
    let min = match read.min_lsn {
        Some(min) => min,
        None => session.min_lsn(&plan.capture_instance).await?,
    };
    if min > read_from {
        purged_while_reading(run, session, plan, min, &mut events).await?;
    }
    Ok((read, events))
}

/// A batch's read, done: what it read, its events, its end's commit time
/// and when it started (UTC, and the clock its duration is taken on).
struct Done {
    read: ChangesRead,
    events: Vec<PlannedEvent>,
    end_commit_ts: Option<chrono::DateTime<Utc>>,
    started: (chrono::DateTime<Utc>, Instant),
}

/// Commits a read batch to bronze with its facts rows, then records them.
async fn commit_read(
    run: &mut Run<'_>,
    sink: &mut Sink,
    plan: &PlannedBatch,
    txn: &Txn,
    marks: &Watermarks,
    done: Done,
) -> Result<(), EngineError> {
    let Done {
        read,
        events,
        end_commit_ts,
        started: (started_at, clock),
    } = done;
    let measures = BatchMeasures {
        started_at,
        duration: clock.elapsed(),
        read: read.stats,
        source_rtt_ms: read.round_trip.as_secs_f64() * 1000.0,
        network_wait_ms: read.network_wait_ms,
    };
    let now = Utc::now();
    let record = BatchRecord {
        facts: facts_row::batch_row(
            run.stream(),
            plan,
            end_commit_ts,
            &measures,
            marks,
            run.warnings.detail(),
            now,
        ),
        events: facts_row::event_rows(run.stream(), plan, &events, now),
        checkpoint: Some(sink.identity.id.clone()),
        range: Some(LsnRange {
            start: plan.start_lsn,
            end: plan.end_lsn,
        }),
    };
    let outcome = sink.commit_to_bronze(txn, read.staged, &record).await?;
    failpoint::hit("after_bronze_commit");
    switch_failpoint(plan, "after_bronze_commit");
    let (version, made) = match outcome {
        BronzeOutcome::Committed { version, .. } => {
            run.warnings.recorded(record.facts.detail.as_deref());
            (Some(version), BronzeCommit::Made)
        }
        BronzeOutcome::AlreadyCommitted => (None, BronzeCommit::Made),
        BronzeOutcome::Empty => (None, BronzeCommit::None),
    };
    record_facts(run, sink, plan, version, made, record.rows()).await
}

/// Cleanup passed the batch's start (`min` is the new low-water mark): the
/// policy decides, with the commit times around the gap.
async fn purged_while_reading<S: ChangeSource>(
    run: &Run<'_>,
    session: &mut S,
    plan: &PlannedBatch,
    min: Lsn,
    events: &mut Vec<PlannedEvent>,
) -> Result<(), EngineError> {
    let times = PurgeTimes {
        to_ts: session.time_from(min).await?,
        from_ts: match plan.start_lsn.checked_prev() {
            Some(before) => session.lsn_time(before).await?,
            None => None,
        },
    };
    data_loss::purged_while_reading(run.config.on_data_loss, plan, min, times, events)?;
    tracing::warn!(
        batch_id = %plan.batch_id,
        capture_instance = %plan.capture_instance,
        min_lsn = %min,
        "CDC cleanup ran while the batch read; changes may be missing"
    );
    Ok(())
}

/// The columns a capture instance switch in `events` renamed, as
/// (old name, new name).
fn renamed_columns(events: &[PlannedEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|event| match &event.detail {
            EventDetail::Switched(switch) => Some(&switch.renamed_columns),
            _ => None,
        })
        .flatten()
        .map(|renamed| (renamed.from.clone(), renamed.to.clone()))
        .collect()
}

/// Appends the batch's facts rows (its own first), moves the verdict and
/// writes the commit marker.
async fn record_facts(
    run: &mut Run<'_>,
    sink: &mut Sink,
    plan: &PlannedBatch,
    bronze_version: Option<i64>,
    made: BronzeCommit,
    rows: Vec<FactRow>,
) -> Result<(), EngineError> {
    // A switch that renamed columns: silver's new columns take the old
    // ones' values first, so that every row, not only those the batch
    // changes, reads right under the new name (idempotent on a replay).
    let renamed = renamed_columns(&plan.events);
    if !renamed.is_empty() {
        sink.silver_carry_renamed(&renamed).await?;
    }
    // Silver applies the batch from its bronze commit (again after a
    // crash: idempotent by silver's own txn).
    sink.apply_to_silver(
        &Txn::bronze_batch(&run.config.app_id, plan.batch_id),
        &Txn::silver_batch(&run.config.app_id, plan.batch_id),
        made,
    )
    .await?;
    let key = FactsKey {
        target: run.config.target.name.clone(),
        app_id: run.config.app_id.clone(),
        sequence: FactSequence::Batch(plan.batch_id),
    };
    let row = rows.first().cloned().ok_or(EngineError::NoFactsRow {
        batch_id: plan.batch_id,
    })?;
    // The batch has read all it reads: its read slot goes to the next
    // table while its facts wait for the source's commit (`source_writes`).
    run.read_permit = None;
    if let AppendOutcome::Written { .. } = sink.append_facts(&key, &rows).await? {
        run.warnings.recorded(row.detail.as_deref());
    }
    run.observer().events_recorded(&rows[1..]);
    failpoint::hit("after_facts");
    sink.advance_verdict(row.end_commit_ts, Some(plan.end_lsn), run.observer())
        .await?;
    sink.mark_done(&CommittedBatch {
        batch_id: plan.batch_id,
        bronze_version,
        committed_at: Utc::now(),
        bronze_mark: None,
    })
    .await?;
    tracing::debug!(
        batch_id = %plan.batch_id,
        rows = row.rows.unwrap_or(0),
        start_lsn = %plan.start_lsn,
        end_lsn = %plan.end_lsn,
        ingestion_lag_s = row.ingestion_lag_seconds,
        retention_headroom_h = row.retention_headroom_hours,
        "batch committed"
    );
    run.summary.batches += 1;
    run.summary.rows += row.rows.unwrap_or(0);
    run.observer().batch_done(&row);
    run.summary.last = Some(row);
    Ok(())
}
