//! Planning, as pure functions: where a stream starts, what its next batch
//! reads, and what a replayed batch still has to do. The engine reads the
//! checkpoint and the source's marks, hands them here, and carries out the
//! verdict; nothing here waits on SQL Server or storage.

use chrono::{DateTime, Utc};

use super::data_loss::{self, Purged};
use super::error::DataLossError;
use crate::domain::{BatchId, CaptureInstance, FactRow, Lsn};
use crate::lake::checkpoint::{CheckpointIdentity, PlannedBatch, PlannedEvent, PlannedSnapshot};
use crate::lake::records::{BatchRecord, LsnRange};
use crate::source::cdc::{Commit, DdlEvent};
use crate::spec::{OnDataLoss, SnapshotMode};

/// Where a stream stands: the last LSN it read up to, that LSN's commit
/// time, and the capture instance it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// Everything up to and including this LSN is in the target.
    pub lsn: Lsn,
    /// Its commit time (UTC), if known.
    pub commit_ts: Option<DateTime<Utc>>,
    /// The instance read up to it.
    pub instance: CaptureInstance,
}

/// How a run begins, from what the checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// Stream on after this position.
    After(Position),
    /// Take (or resume, or confirm) this planned snapshot first.
    Snapshot(Box<PlannedSnapshot>),
    /// A new stream with `snapshotMode: initial`: plan the bootstrap.
    Bootstrap,
    /// A new stream with `snapshotMode: never`: stream from the oldest
    /// change the capture instance keeps.
    OldestKept,
}

/// The start of a run: after the newest planned batch, or the newest
/// snapshot when that is later (a snapshot the batches have not passed is
/// resumed or confirmed; the engine checks whether it completed).
pub fn start(
    latest_batch: Option<&PlannedBatch>,
    latest_snapshot: Option<&PlannedSnapshot>,
    mode: SnapshotMode,
) -> Start {
    let batch = latest_batch.map(|plan| Position {
        lsn: plan.end_lsn,
        commit_ts: plan.end_commit_ts,
        instance: plan.capture_instance.clone(),
    });
    match (latest_snapshot, batch) {
        (Some(snapshot), Some(batch)) if batch.lsn >= snapshot.lsn => Start::After(batch),
        (Some(snapshot), _) => Start::Snapshot(Box::new(snapshot.clone())),
        (None, Some(batch)) => Start::After(batch),
        (None, None) => match mode {
            SnapshotMode::Initial => Start::Bootstrap,
            SnapshotMode::Never => Start::OldestKept,
        },
    }
}

/// The source's watermarks when a batch is planned, for its facts row.
#[derive(Debug, Clone, PartialEq)]
pub struct Watermarks {
    /// The database's max LSN (`sys.fn_cdc_get_max_lsn`).
    pub max_lsn: Lsn,
    /// Its commit time.
    pub max_commit_ts: Option<DateTime<Utc>>,
    /// Commit time of the read instance's low-water mark: what cleanup has
    /// deleted up to.
    pub min_commit_ts: Option<DateTime<Utc>>,
    /// When the watermarks were read (UTC, local clock).
    pub observed_at: DateTime<Utc>,
    /// The cleanup job's retention in minutes, when the logins may read it.
    pub retention_minutes: Option<i64>,
}

/// What planning needs to know of one capture instance.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceMarks {
    /// The instance.
    pub instance: CaptureInstance,
    /// The lowest LSN it still holds (`sys.fn_cdc_get_min_lsn`).
    pub min_lsn: Lsn,
    /// The commit time of the first change at or after `min_lsn`.
    pub min_commit_ts: Option<DateTime<Utc>>,
    /// The first mapped commits (the whole database's) from
    /// [`window_start`] to the upper bound, oldest first, at most
    /// `maxCommitsPerBatch` of them.
    pub commits: Vec<Commit>,
    /// The instance's DDL in the same range, oldest first.
    pub ddl: Vec<DdlEvent>,
    /// `cdc.change_tables` no longer lists it: it was disabled, and
    /// nothing of it can be read any more.
    pub gone: bool,
}

/// A newer capture instance of the table than the one read.
#[derive(Debug, Clone, PartialEq)]
pub struct NewerInstance {
    /// Its first LSN: changes before it belong to the older instance.
    pub start_lsn: Lsn,
    /// What planning needs of it.
    pub marks: InstanceMarks,
}

/// What the source says when a batch is planned.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceMarks {
    /// The database's watermarks.
    pub watermarks: Watermarks,
    /// The instance read now.
    pub read: InstanceMarks,
    /// A newer instance to move to, unless the manifest pins the instance.
    pub newer: Option<NewerInstance>,
}

/// The settings planning follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// `--once` or availableNow: read up to this LSN (the max LSN seen
    /// when the run started) and stop.
    pub once_target: Option<Lsn>,
    /// `maxCommitsPerBatch`.
    pub max_commits: u64,
    /// `onDataLoss`.
    pub on_data_loss: OnDataLoss,
}

/// The highest LSN the next batch may read: the max LSN, or the `--once`
/// target when that is lower.
pub fn upper(max_lsn: Lsn, options: &PlanOptions) -> Lsn {
    options
        .once_target
        .map_or(max_lsn, |target| target.min(max_lsn))
}

/// Where the commit window of `instance` starts for a stream whose next
/// LSN is `next`: past the purged changes, and for a newer instance at its
/// start (the engine reads the window from here).
pub fn window_start(next: Lsn, instance_min: Lsn, newer_start: Option<Lsn>) -> Lsn {
    next.max(instance_min).max(newer_start.unwrap_or(Lsn::ZERO))
}

/// The next batch, before the engine fills in what needs the source (the
/// new instance's columns on a switch, the events' details).
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    /// The batch.
    pub batch_id: BatchId,
    /// First LSN to read.
    pub start_lsn: Lsn,
    /// Last LSN to read.
    pub end_lsn: Lsn,
    /// Commit time of `end_lsn`, when it is a commit of the window (an
    /// event-only batch ends elsewhere and the engine looks it up).
    pub end_commit_ts: Option<DateTime<Utc>>,
    /// The instance the batch reads.
    pub capture_instance: CaptureInstance,
    /// Set when the batch moves to `capture_instance`, a newer instance
    /// that starts at this LSN.
    pub switched_at: Option<Lsn>,
    /// A `data_skipped` event, when the policy skipped purged changes.
    pub skipped: Option<PlannedEvent>,
    /// The DDL the batch reads past (at most one statement per batch).
    pub ddl: Vec<DdlEvent>,
    /// Whether the batch reads up to the upper bound.
    pub caught_up: bool,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Plan and run this batch.
    Batch(Box<Draft>),
    /// Nothing new: wait for the trigger.
    Idle,
    /// `--once`: caught up.
    Done,
    /// Purged changes under `resnapshot`: take a new snapshot of
    /// `instance` (a newer one when the purge was found on moving to it).
    Resnapshot {
        /// The instance to snapshot.
        instance: CaptureInstance,
        /// Commit time of the last change read.
        lost_from_ts: Option<DateTime<Utc>>,
        /// Commit time of the oldest change kept.
        lost_to_ts: Option<DateTime<Utc>>,
    },
}

/// Why no batch can be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Changes were purged and the policy is `fail`.
    #[error(transparent)]
    DataLoss(#[from] DataLossError),
    /// The position is the highest LSN there is.
    #[error("LSN {0} has no successor")]
    LsnOverflow(Lsn),
}

/// Plans the batch after `position`, numbered `batch_id`.
///
/// The capture instance read is read up to the LSN before a newer one's
/// start, and the newer one from its start. A purged start goes through
/// the data-loss policy. A batch ends at the last of its first
/// `maxCommitsPerBatch` mapped commits (which may be other tables' or idle
/// entries) and holds at most one DDL statement; a switch or a skip is
/// recorded even when nothing follows it yet.
pub fn plan_next(
    position: &Position,
    batch_id: BatchId,
    marks: &SourceMarks,
    options: &PlanOptions,
) -> Result<Next, PlanError> {
    let overall_upper = upper(marks.watermarks.max_lsn, options);
    let next = position
        .lsn
        .checked_next()
        .ok_or(PlanError::LsnOverflow(position.lsn))?;
    let (instance, mut start, upper, switched_at) = follow_instances(next, overall_upper, marks);

    let mut skipped = None;
    match data_loss::decide(options.on_data_loss, start, upper, instance.min_lsn) {
        Purged::No => {}
        Purged::Skip { resume } => {
            skipped = Some(data_loss::skipped_event(
                instance.instance.clone(),
                start,
                resume,
                position.commit_ts,
                instance.min_commit_ts,
                true,
            ));
            start = resume;
        }
        Purged::Resnapshot => {
            return Ok(Next::Resnapshot {
                instance: instance.instance.clone(),
                lost_from_ts: position.commit_ts,
                lost_to_ts: instance.min_commit_ts,
            });
        }
        Purged::Fail => {
            let error = DataLossError::new(
                instance.instance.clone(),
                start,
                instance.min_lsn,
                position.commit_ts,
                instance.min_commit_ts,
            );
            let error = if marks.read.gone {
                error.disabled(marks.read.instance.clone())
            } else {
                error
            };
            return Err(error.into());
        }
    }

    let (batch_upper, ddl) = one_ddl_per_batch(&instance.ddl, start, upper);
    let end = last_commit(&instance.commits, start, batch_upper, options.max_commits);
    let has_events = switched_at.is_some() || skipped.is_some();
    let (end_lsn, end_commit_ts) = match end {
        Some(commit) => (commit.lsn, commit.commit_ts),
        None if has_events => (batch_upper.max(start), None),
        None if options.once_target.is_some() => return Ok(Next::Done),
        None => return Ok(Next::Idle),
    };
    Ok(Next::Batch(Box::new(Draft {
        batch_id,
        start_lsn: start,
        end_lsn,
        end_commit_ts,
        capture_instance: instance.instance.clone(),
        switched_at,
        skipped,
        ddl: ddl.into_iter().filter(|d| d.lsn <= end_lsn).collect(),
        caught_up: end_lsn >= overall_upper,
    })))
}

/// What the loop does after a batch, from whether it read up to the upper
/// bound and whether the run stops once caught up.
pub fn after_batch(caught_up: bool, once: bool) -> AfterBatch {
    match (once, caught_up) {
        (true, true) => AfterBatch::Done,
        (false, true) => AfterBatch::Wait,
        (_, false) => AfterBatch::Continue,
    }
}

/// What the loop does after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterBatch {
    /// More is waiting: plan the next batch at once.
    Continue,
    /// Caught up: wait for the trigger.
    Wait,
    /// `--once` and caught up: stop.
    Done,
}

/// The instance, start, upper bound and switch of the next batch.
fn follow_instances(
    next: Lsn,
    upper: Lsn,
    marks: &SourceMarks,
) -> (&InstanceMarks, Lsn, Lsn, Option<Lsn>) {
    let Some(newer) = &marks.newer else {
        return (&marks.read, next, upper, None);
    };
    let before = newer.start_lsn.checked_prev().unwrap_or(Lsn::ZERO);
    if marks.read.gone {
        if upper < newer.start_lsn {
            // Capture has not reached the new instance's start yet.
            return (&marks.read, next, upper.min(before), None);
        }
        // The instance read was disabled: what it held past the position,
        // and what changed while no instance captured the table, is in no
        // change table. The new instance is planned from the position, so
        // the data-loss policy judges that gap against its low end.
        return (&newer.marks, next, upper, Some(newer.start_lsn));
    }
    if next <= before {
        let old_upper = upper.min(before);
        let left = first_commit(&marks.read.commits, next, old_upper).is_some();
        if left || upper < newer.start_lsn {
            // Changes of the old instance are left, or capture has not
            // reached the new one's start yet.
            return (&marks.read, next, old_upper, None);
        }
    }
    (
        &newer.marks,
        next.max(newer.start_lsn),
        upper,
        Some(newer.start_lsn),
    )
}

/// The DDL within `[start, upper]` and the upper bound that keeps one
/// statement per batch (a batch has one `schema_change` row).
pub fn one_ddl_per_batch(ddl: &[DdlEvent], start: Lsn, upper: Lsn) -> (Lsn, Vec<DdlEvent>) {
    if start > upper {
        return (upper, Vec::new());
    }
    let within: Vec<&DdlEvent> = ddl
        .iter()
        .filter(|d| d.lsn >= start && d.lsn <= upper)
        .collect();
    let upper = match within.get(1).and_then(|second| second.lsn.checked_prev()) {
        Some(before_second) => before_second.max(start),
        None => upper,
    };
    let kept = within
        .into_iter()
        .filter(|d| d.lsn <= upper)
        .take(1)
        .cloned()
        .collect();
    (upper, kept)
}

fn first_commit(commits: &[Commit], start: Lsn, upper: Lsn) -> Option<&Commit> {
    commits.iter().find(|c| c.lsn >= start && c.lsn <= upper)
}

/// The last of the first `max_commits` commits within `[start, upper]`.
fn last_commit(commits: &[Commit], start: Lsn, upper: Lsn, max_commits: u64) -> Option<&Commit> {
    if start > upper {
        return None;
    }
    commits
        .iter()
        .filter(|c| c.lsn >= start && c.lsn <= upper)
        .take(usize::try_from(max_commits).unwrap_or(usize::MAX))
        .last()
}

/// What bronze holds of a planned batch that is replayed.
#[derive(Debug, Clone, PartialEq)]
pub enum BronzeHolds {
    /// Nothing: the batch was not committed.
    Nothing,
    /// The batch, with the record its commit carried.
    Batch(Box<BatchRecord>),
    /// The batch's `txn`, but no readable record of its commit.
    BatchWithoutRecord,
}

/// What a replayed batch still has to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// Read the planned range and commit it (the crash came before the
    /// bronze commit).
    Read,
    /// Bronze holds the batch: write the facts rows its commit recorded,
    /// then finish (idempotent: facts already written are skipped).
    Recover(Vec<FactRow>),
}

/// Why a replay cannot go on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResumeError {
    /// Bronze records the batch but not what the engine wrote with it.
    #[error(
        "bronze holds batch {batch_id} of appId {app_id} but its commit carries no facts row \
         (was it written by another tool with appId {app_id}?)"
    )]
    NoRecord {
        /// The batch.
        batch_id: BatchId,
        /// The stream's appId.
        app_id: String,
    },
    /// The recorded rows belong to another batch or stream.
    #[error("bronze's record of batch {batch_id} holds the facts rows of another batch or stream")]
    Mismatch {
        /// The batch.
        batch_id: BatchId,
    },
    /// The commit was made by another checkpoint, or for another range:
    /// this batch number means something else there.
    #[error(
        "bronze holds a batch {batch_id} that {why}; this checkpoint's batch {batch_id} is not \
         in the target. Nothing was written: see docs/user-guide.md, \"Moving or rebuilding a stream\""
    )]
    Foreign {
        /// The batch.
        batch_id: BatchId,
        /// How it differs.
        why: String,
    },
}

/// The replay of `plan` by the checkpoint `identity`, from what bronze
/// holds of it: the commit must be this checkpoint's and cover the planned
/// range, else the batch number is another stream's.
pub fn resume(
    plan: &PlannedBatch,
    app_id: &str,
    identity: &CheckpointIdentity,
    bronze: BronzeHolds,
) -> Result<Resume, ResumeError> {
    let record = match bronze {
        BronzeHolds::Nothing => return Ok(Resume::Read),
        BronzeHolds::BatchWithoutRecord => {
            return Err(ResumeError::NoRecord {
                batch_id: plan.batch_id,
                app_id: app_id.to_string(),
            });
        }
        BronzeHolds::Batch(record) => record,
    };
    if !identity.owns(record.checkpoint.as_deref()) {
        return Err(ResumeError::Foreign {
            batch_id: plan.batch_id,
            why: format!(
                "checkpoint {} wrote",
                record
                    .checkpoint
                    .as_deref()
                    .unwrap_or("(without an identity)")
            ),
        });
    }
    let planned = LsnRange {
        start: plan.start_lsn,
        end: plan.end_lsn,
    };
    if let Some(range) = record.range.filter(|r| *r != planned) {
        return Err(ResumeError::Foreign {
            batch_id: plan.batch_id,
            why: format!(
                "covers {}..{}, not the planned {}..{}",
                range.start, range.end, planned.start, planned.end
            ),
        });
    }
    let rows = record.rows();
    let belongs = rows
        .iter()
        .all(|r| r.batch_id == Some(plan.batch_id) && r.app_id == app_id);
    if belongs {
        Ok(Resume::Recover(rows))
    } else {
        Err(ResumeError::Mismatch {
            batch_id: plan.batch_id,
        })
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
