//! The health conditions of a CdcStream, as a pure function of the stream
//! (its spec and what its worker reported), its phase, its worker pods,
//! the last reconcile's outcome and the time. The verdicts are the shared
//! `src/health` ones, so a stream is judged exactly as `mssql-cdc health`
//! judges its facts. WorkerRunning, Progressing, CaptureCurrent and
//! CaptureHealthy are judged in their own modules.
//!
//! Every type is True when all is well, except DataLoss, which is True when
//! the worker met purged changes. Reasons are the health alert and stale
//! names; messages say what to do. `lastTransitionTime` only moves when a
//! condition's status changes. Messages of healthy conditions carry no
//! per-batch measure (Live's age is in whole minutes), so a healthy
//! stream's conditions are not rewritten after every batch.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::capture_conditions::{capture_current, capture_healthy, live_capture_lag};
use super::children::BuildError;
use super::rollout::{observed_generation, progressing};
use super::status::{Transition, failure_note};
pub use super::worker_condition::Runner;
use super::worker_condition::{WorkloadFault, worker_running};
use crate::domain::CopyShare;
use crate::health::{
    Alert, FreshnessLimits, LatestBatch, StreamHealth, Verdict, assess_finalization, assess_stream,
};
use crate::spec::{
    AlertLimits, CdcStream, CdcStreamStatus, DataLossAction, DataLossStatus, Phase, SnapshotPhase,
    SnapshotStatus, Trigger, WorkerState,
};

/// The stream runs and nothing fires.
pub const READY: &str = "Ready";
/// The worker wrote a batch within `spec.alerts.silence`.
pub const LIVE: &str = "Live";
/// CDC cleanup is at least `spec.alerts.minHeadroom` behind the position.
pub const RETENTION_HEADROOM: &str = "RetentionHeadroom";
/// The stream trails capture by at most `spec.alerts.maxIngestionLag`.
pub const INGESTION_LAG: &str = "IngestionLag";
/// Capture trails the database by at most `spec.alerts.maxCaptureLag`.
pub const CAPTURE_LAG: &str = "CaptureLag";
/// The last batch carries its retention and lag metrics.
pub const METRICS_AVAILABLE: &str = "MetricsAvailable";
/// The finalization verdict is fresh (only with `spec.finalization`).
pub const FINALIZED: &str = "Finalized";
/// The silver table's verdict is fresh (with `spec.finalization` and
/// `spec.silver`).
pub const SILVER_FINALIZED: &str = "SilverFinalized";
/// The worker met changes purged before it read them (True is bad).
pub const DATA_LOSS: &str = "DataLoss";
/// The worker pod runs (or its last scheduled run completed).
pub const WORKER_RUNNING: &str = "WorkerRunning";
/// A worker of an older spec runs while one of the current spec starts.
pub const PROGRESSING: &str = "Progressing";
/// The live capture lag is within `spec.alerts.captureLag`.
pub const CAPTURE_CURRENT: &str = "CaptureCurrent";
/// Capture's own health, read by the monitoring login.
pub const CAPTURE_HEALTHY: &str = "CaptureHealthy";

/// The reason of Ready (and the Warning Event) when a reconcile failed.
pub const RECONCILE_ERROR: &str = "ReconcileError";
/// The reason of Ready while a snapshot copies the table.
pub const SNAPSHOTTING: &str = "Snapshotting";

/// The reason of every condition that cannot be judged before the first batch.
const NO_PROGRESS: &str = "NoProgress";
const NO_PROGRESS_MESSAGE: &str = "the worker has not reported a batch yet: check that its pod \
     runs and read its log";

/// One condition before it becomes a `metav1.Condition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Judged {
    pub(super) type_: &'static str,
    pub(super) status: &'static str,
    pub(super) reason: String,
    pub(super) message: String,
    /// Whether it makes the stream not Ready (set from the verdict's own
    /// rule, e.g. `FinalizationHealth::fires`).
    blocks_ready: bool,
}

impl Judged {
    fn blocking(mut self, blocks: bool) -> Self {
        self.blocks_ready = blocks;
        self
    }
}

pub(super) fn judged(
    type_: &'static str,
    status: &'static str,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> Judged {
    Judged {
        type_,
        status,
        reason: reason.into(),
        message: message.into(),
        blocks_ready: false,
    }
}

/// What the operator saw besides the stream itself.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The stream's worker pods.
    pub pods: &'a [Pod],
    /// Why no worker could be built (phase Failed).
    pub failure: Option<&'a BuildError>,
    /// Why the last reconcile failed, if it did.
    pub reconcile_error: Option<&'a str>,
    /// Why the worker's pods cannot be created, when its Deployment says.
    pub workload_fault: Option<&'a WorkloadFault>,
    /// Whose worker `pods` are: a table of a source is judged on the
    /// source's pods, which run on while the table alone is failed.
    pub runner: Runner,
    /// The time conditions are judged at.
    pub now: DateTime<Utc>,
    /// How much older than the worker's own the status may be: moving
    /// numbers reach it at most every status interval, so every age limit
    /// on a time the worker reports is widened by this
    /// ([`super::verdict::report_allowance`]); zero judges the status as
    /// if it were written at every trigger.
    pub allowance: std::time::Duration,
}

/// The conditions of `stream` in `phase`, in a fixed order. Finalized is
/// left out when the stream keeps no finalization table.
pub fn conditions(stream: &CdcStream, phase: Phase, observed: &Observed<'_>) -> Vec<Condition> {
    let now = observed.now;
    let failure = observed.failure;
    let validated = stream.spec.validate();
    let (limits, trigger) = match &validated {
        Ok(config) => (config.alerts, config.trigger),
        Err(_) => (AlertLimits::default(), Trigger::AvailableNow),
    };
    // The limits ages are judged by; messages name the configured ones.
    let judging = widened(&limits, observed.allowance);
    let unreported = CdcStreamStatus::default();
    let status = stream.status.as_ref().unwrap_or(&unreported);
    let batch = status.progress.as_ref().and_then(|p| {
        Some(LatestBatch {
            target: stream.spec.target.name.clone(),
            written_at: p.written_at?,
            end_commit_ts: p.end_commit_ts,
            retention_headroom_hours: p.retention_headroom_hours,
            ingestion_lag_seconds: p.ingestion_lag_seconds,
            capture_lag_seconds: p.capture_lag_seconds,
        })
    });
    let health = batch
        .as_ref()
        .map(|b| assess_stream(b, now, &judging.thresholds));
    let snapshot = running_snapshot(status);

    let t = &limits.thresholds;
    let mut all = vec![
        live(
            phase,
            health.as_ref(),
            snapshot,
            status,
            &limits,
            &judging,
            now,
        ),
        worker_running(
            observed.pods,
            status.worker.as_ref(),
            phase,
            failure,
            observed.workload_fault,
            observed.runner,
        ),
        progressing(stream, phase),
        headroom(health.as_ref(), &limits),
        lag(
            INGESTION_LAG,
            health.as_ref(),
            Alert::IngestionLagHigh,
            |h| h.ingestion_lag_seconds,
            t.max_ingestion_lag,
        ),
        lag(
            CAPTURE_LAG,
            health.as_ref(),
            Alert::CaptureLagHigh,
            |h| h.capture_lag_seconds,
            t.max_capture_lag,
        ),
        capture_current(status, &limits),
        capture_healthy(stream, &limits, now),
        metrics(health.as_ref()),
    ];
    if let Some(spec) = &stream.spec.finalization {
        let interval = match trigger {
            Trigger::ProcessingTime(interval) => interval,
            // A scheduled stream's period is its schedule: the silence
            // limit is the closest the spec says about it.
            Trigger::AvailableNow => limits.thresholds.silence,
        };
        let freshness = judging.freshness(interval);
        let verdict = status.finalization.as_ref().map(|row| Verdict {
            table_name: stream.spec.target.name.clone(),
            granularity: spec.granularity,
            finalized_until: row.finalized_until,
            updated_at: row.updated_at,
            open_snapshot_lsn: row.open_snapshot_lsn.clone(),
            applied_lsn: None,
        });
        all.push(finalized(
            FINALIZED,
            verdict.as_ref(),
            batch.as_ref(),
            now,
            &freshness,
        ));
        if let Some(silver) = &stream.spec.silver {
            let verdict = status.silver.as_ref().map(|row| Verdict {
                table_name: silver.name.clone(),
                granularity: spec.granularity,
                finalized_until: row.finalized_until,
                updated_at: row.updated_at,
                open_snapshot_lsn: row.open_snapshot_lsn.clone(),
                applied_lsn: row.applied_lsn.clone(),
            });
            all.push(finalized(
                SILVER_FINALIZED,
                verdict.as_ref(),
                batch.as_ref(),
                now,
                &freshness,
            ));
        }
    }
    all.push(data_loss(status.data_loss.as_ref()));
    let blocking = Blocking {
        invalid: validated.as_ref().err(),
        failure,
        reconcile_error: observed.reconcile_error,
        snapshot,
    };
    let ready = ready(phase, &blocking, &all, health.as_ref());
    all.insert(0, ready);

    let old = &status.conditions;
    let generation = observed_generation(stream, phase);
    all.into_iter()
        .map(|j| to_condition(j, old, generation, now))
        .collect()
}

/// The snapshot the worker reports running, if any.
fn running_snapshot(status: &CdcStreamStatus) -> Option<&SnapshotStatus> {
    status
        .snapshot
        .as_ref()
        .filter(|s| s.phase == SnapshotPhase::Running)
}

/// `42% of ~200000 rows (84000 rows, 3 chunks), 8000 rows/s, ETA 12:03:04 UTC`
pub fn snapshot_words(s: &SnapshotStatus) -> String {
    let counted = |n: u64, what: &str| match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    };
    let (rows, chunks) = (counted(s.rows, "row"), counted(s.chunks, "chunk"));
    let share = match s.share() {
        CopyShare::Of { percent, estimate } => Some(format!("{percent:.0}% of ~{estimate} rows")),
        CopyShare::PastEstimate { estimate } => {
            Some(format!("past the estimate of ~{estimate} rows"))
        }
        CopyShare::Unknown => None,
    };
    // Without an estimate the row count is the share: said once.
    let progress = match share {
        Some(share) => format!("{share} ({rows}, {chunks})"),
        None => format!("{rows} ({chunks})"),
    };
    let eta = s
        .eta
        .map(|eta| format!(", ETA {}", eta.format("%H:%M:%S UTC")))
        .unwrap_or_default();
    format!("{progress}, {:.0} rows/s{eta}", s.rows_per_second)
}

/// `limits` with every age limit on a reported time (silence, and the
/// finalization margin) longer by `allowance`.
fn widened(limits: &AlertLimits, allowance: std::time::Duration) -> AlertLimits {
    let mut wide = *limits;
    wide.thresholds.silence += allowance;
    wide.finalization_margin += allowance;
    wide
}

fn live(
    phase: Phase,
    health: Option<&StreamHealth>,
    snapshot: Option<&SnapshotStatus>,
    status: &CdcStreamStatus,
    limits: &AlertLimits,
    judging: &AlertLimits,
    now: DateTime<Utc>,
) -> Judged {
    if phase == Phase::Suspended {
        return judged(
            LIVE,
            "False",
            "Suspended",
            "spec.suspend is set, so no worker runs: unset it to resume the stream",
        );
    }
    // A table of a source whose SQL Server cannot be read: the source's
    // reason, not a stale batch's.
    if let Some(waiting) = status
        .worker
        .as_ref()
        .filter(|w| w.state == WorkerState::Waiting)
    {
        return judged(
            LIVE,
            "False",
            waiting.reason.clone(),
            waiting.message.clone(),
        );
    }
    let silence = limits.thresholds.silence;
    let limit = humantime::format_duration(silence);
    if let Some(snapshot) = snapshot {
        let since = format_hours(seconds(snapshot.updated_at, now) / 3600.0);
        if seconds(snapshot.updated_at, now) <= judging.thresholds.silence.as_secs_f64() {
            return judged(
                LIVE,
                "True",
                SNAPSHOTTING,
                format!("the snapshot reported progress {since} ago"),
            );
        }
        return judged(
            LIVE,
            "False",
            "SnapshotStalled",
            format!(
                "the snapshot reported no progress for {since} (limit {limit}): check that the \
                 worker pod runs and read its log"
            ),
        );
    }
    let Some(health) = health else {
        return judged(LIVE, "Unknown", NO_PROGRESS, NO_PROGRESS_MESSAGE);
    };
    let since = format_hours(health.hours_since_last);
    if health.alerts.contains(&Alert::FactsStopped) {
        return judged(
            LIVE,
            "False",
            Alert::FactsStopped.name(),
            format!(
                "last batch {since} ago (limit {limit}); {}",
                which_stopped(status, judging, now)
            ),
        );
    }
    // Healthy, the message counts the minutes only past half the limit: a
    // message that moved with the clock would be a status write on every
    // look at every busy stream.
    let message = if health.hours_since_last * 3600.0 >= silence.as_secs_f64() / 2.0 {
        format!("last batch {since} ago, within the silence limit ({limit})")
    } else {
        format!(
            "the last batch is well within the silence limit ({limit}); \
             status.progress.writtenAt says when it was written"
        )
    };
    judged(LIVE, "True", "BatchesReported", message)
}

/// The monitoring guide's rule for silent facts: while the worker still
/// reads the source, a stale max LSN means capture stopped, a current one
/// that the stream stopped; without such reads, the stream stopped.
fn which_stopped(status: &CdcStreamStatus, limits: &AlertLimits, now: DateTime<Utc>) -> String {
    let silence = limits.thresholds.silence.as_secs_f64();
    let looked = status
        .progress
        .as_ref()
        .and_then(|p| p.latest_offset.as_ref())
        .filter(|o| seconds(o.observed_at, now) <= silence);
    match (looked, live_capture_lag(status)) {
        (Some(_), Some(lag)) if lag > limits.capture_lag.as_secs_f64() => format!(
            "CDC capture stopped, not the stream: the worker still reads the source, whose newest \
             change is {} old; a DBA should check the capture job and SQL Server Agent",
            format_hours(lag / 3600.0)
        ),
        (Some(_), _) => "the stream stopped while capture is current: the worker reads the \
             source but runs no batch; read the worker's log"
            .to_string(),
        (None, _) => Alert::FactsStopped.message().to_string(),
    }
}

fn seconds(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_milliseconds() as f64 / 1000.0
}

fn headroom(health: Option<&StreamHealth>, limits: &AlertLimits) -> Judged {
    let Some(health) = health else {
        return judged(
            RETENTION_HEADROOM,
            "Unknown",
            NO_PROGRESS,
            NO_PROGRESS_MESSAGE,
        );
    };
    let Some(hours) = health.headroom_hours else {
        return judged(
            RETENTION_HEADROOM,
            "Unknown",
            Alert::MetricsMissing.name(),
            Alert::MetricsMissing.message(),
        );
    };
    let left = format_hours(hours - health.hours_since_last);
    let limit = humantime::format_duration(limits.thresholds.min_headroom);
    if health.alerts.contains(&Alert::RetentionHeadroomLow) {
        let message = format!(
            "{left} left before cleanup (limit {limit}); {}",
            Alert::RetentionHeadroomLow.message()
        );
        return judged(
            RETENTION_HEADROOM,
            "False",
            Alert::RetentionHeadroomLow.name(),
            message,
        );
    }
    judged(
        RETENTION_HEADROOM,
        "True",
        "HeadroomSufficient",
        format!("at least {limit} left before cleanup"),
    )
}

/// IngestionLag or CaptureLag: `alert` fires when `measured` (seconds)
/// passes `limit`.
fn lag(
    type_: &'static str,
    health: Option<&StreamHealth>,
    alert: Alert,
    measured: impl Fn(&StreamHealth) -> Option<f64>,
    limit: std::time::Duration,
) -> Judged {
    let Some(health) = health else {
        return judged(type_, "Unknown", NO_PROGRESS, NO_PROGRESS_MESSAGE);
    };
    let Some(seconds) = measured(health) else {
        return judged(
            type_,
            "Unknown",
            "NotMeasured",
            "the last batch has no value for this lag: check the worker's warnings and that its login can read the CDC metadata",
        );
    };
    let limit = humantime::format_duration(limit);
    if health.alerts.contains(&alert) {
        let message = format!("{seconds:.0} s (limit {limit}); {}", alert.message());
        return judged(type_, "False", alert.name(), message);
    }
    judged(
        type_,
        "True",
        "WithinLimit",
        format!("within the limit of {limit}"),
    )
}

fn finalized(
    type_: &'static str,
    verdict: Option<&Verdict>,
    batch: Option<&LatestBatch>,
    now: DateTime<Utc>,
    limits: &FreshnessLimits,
) -> Judged {
    let Some(verdict) = verdict else {
        return judged(
            type_,
            "Unknown",
            "NotReported",
            "the worker has not reported the finalization row yet: it does after its first batch",
        );
    };
    let health = assess_finalization(verdict, batch, now, limits);
    match health.stale {
        None => judged(
            type_,
            "True",
            "VerdictFresh",
            "the finalization verdict is within its age limit",
        ),
        Some(reason) => {
            judged(type_, "False", reason.name(), reason.message()).blocking(health.fires())
        }
    }
}

fn metrics(health: Option<&StreamHealth>) -> Judged {
    match health {
        None => judged(
            METRICS_AVAILABLE,
            "Unknown",
            NO_PROGRESS,
            NO_PROGRESS_MESSAGE,
        ),
        Some(h) if h.alerts.contains(&Alert::MetricsMissing) => judged(
            METRICS_AVAILABLE,
            "False",
            Alert::MetricsMissing.name(),
            Alert::MetricsMissing.message(),
        ),
        Some(_) => judged(
            METRICS_AVAILABLE,
            "True",
            "MetricsReported",
            "the last batch carries its retention headroom",
        ),
    }
}

fn data_loss(reported: Option<&DataLossStatus>) -> Judged {
    let Some(loss) = reported else {
        return judged(
            DATA_LOSS,
            "False",
            "NoneReported",
            "the running worker met no purged changes",
        );
    };
    let show =
        |t: Option<DateTime<Utc>>| t.map_or_else(|| "unknown".to_string(), |t| t.to_rfc3339());
    let range = format!(
        "changes committed from {} to {} were purged by CDC cleanup before the stream read them",
        show(loss.lost_from_ts),
        show(loss.lost_to_ts)
    );
    let stopped = loss.action == DataLossAction::Stopped;
    let (reason, todo) = match loss.action {
        DataLossAction::Stopped => (
            "DataLossStopped",
            "the worker stops (onDataLoss: fail): re-snapshot into a new target and checkpoint, or set onDataLoss, and lengthen the CDC retention",
        ),
        DataLossAction::Resnapshotted => (
            "Resnapshotted",
            "the table was copied again (onDataLoss: resnapshot); deletes in that range are not in the target: lengthen the CDC retention",
        ),
        DataLossAction::Skipped => (
            "ChangesSkipped",
            "streaming went on past the gap (onDataLoss: skip); the target misses those changes: repair it from the source if they matter, and lengthen the CDC retention",
        ),
    };
    judged(DATA_LOSS, "True", reason, format!("{range}; {todo}")).blocking(stopped)
}

/// What makes a stream not Ready before any condition does.
struct Blocking<'a> {
    invalid: Option<&'a crate::spec::ValidationErrors>,
    failure: Option<&'a BuildError>,
    reconcile_error: Option<&'a str>,
    snapshot: Option<&'a SnapshotStatus>,
}

/// Ready: False with the reason of the first thing that fails, in the
/// order an on-call engineer fixes them.
fn ready(
    phase: Phase,
    blocking: &Blocking<'_>,
    others: &[Judged],
    health: Option<&StreamHealth>,
) -> Judged {
    let failure = blocking.failure;
    // A refused worker first: whatever else the spec says, nothing runs.
    if let Some(error) = failure.filter(|e| e.removes_worker()) {
        return judged(READY, "False", error.reason(), failure_note(error));
    }
    if let Some(errors) = blocking.invalid {
        let message = format!(
            "the spec is not valid: {}; fix the spec",
            errors
                .0
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        return judged(READY, "False", "InvalidSpec", message);
    }
    if let Some(error) = blocking.reconcile_error {
        return judged(
            READY,
            "False",
            RECONCILE_ERROR,
            format!("the operator cannot apply the worker: {error}"),
        );
    }
    match phase {
        Phase::Suspended => {
            return judged(
                READY,
                "False",
                "Suspended",
                "spec.suspend is set: unset it to resume the stream",
            );
        }
        Phase::Failed => {
            return match failure {
                Some(error) => judged(READY, "False", error.reason(), failure_note(error)),
                None => judged(
                    READY,
                    "False",
                    "Failed",
                    "the worker cannot run: see the stream's Warning Events",
                ),
            };
        }
        Phase::Pending | Phase::Streaming | Phase::Snapshotting => {}
    }
    let find = |type_: &str| others.iter().find(|j| j.type_ == type_);
    // Ready takes the reason and message of the first of `types` that is False.
    let first_false = |types: [&str; 2]| {
        types
            .into_iter()
            .filter_map(find)
            .find(|j| j.status == "False")
            .map(|j| judged(READY, "False", j.reason.clone(), j.message.clone()))
    };
    if let Some(ready) = first_false([WORKER_RUNNING, LIVE]) {
        return ready;
    }
    if let Some(snapshot) = blocking.snapshot {
        return judged(
            READY,
            "False",
            SNAPSHOTTING,
            format!("the worker copies the table: {}", snapshot_words(snapshot)),
        );
    }
    if phase == Phase::Pending || find(LIVE).is_some_and(|j| j.status != "True") {
        return judged(READY, "False", "Pending", NO_PROGRESS_MESSAGE);
    }
    if let Some(alert) = health.filter(|h| h.fires()).and_then(|h| h.alerts.first()) {
        return judged(READY, "False", alert.name(), alert.message());
    }
    if let Some(ready) = first_false([CAPTURE_CURRENT, CAPTURE_HEALTHY]) {
        return ready;
    }
    let blocking = others.iter().find(|j| j.blocks_ready);
    if let Some(other) = blocking {
        return judged(READY, "False", other.reason.clone(), other.message.clone());
    }
    judged(
        READY,
        "True",
        "Healthy",
        "the stream is running and no alert fires",
    )
}

pub(super) fn to_condition(
    judged: Judged,
    old: &[Condition],
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Condition {
    let previous = old.iter().find(|c| c.type_ == judged.type_);
    let last_transition_time = match previous {
        Some(c) if c.status == judged.status => c.last_transition_time.clone(),
        _ => metav1_time(now),
    };
    Condition {
        type_: judged.type_.to_string(),
        status: judged.status.to_string(),
        reason: judged.reason,
        message: judged.message,
        last_transition_time,
        observed_generation: generation,
    }
}

/// `now` at the second precision of `metav1.Time`.
fn metav1_time(now: DateTime<Utc>) -> Time {
    Time(Timestamp::from_second(now.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Hours as `2h 5m` (rounded to whole minutes; negative values as `0s`).
fn format_hours(hours: f64) -> String {
    let minutes = (hours * 60.0).round().max(0.0) as u64;
    humantime::format_duration(std::time::Duration::from_secs(minutes * 60)).to_string()
}

/// The new Ready condition when its status differs from the old one's.
/// A stream's first Ready counts only when it is True: a new stream is
/// not ready yet by nature, and the phase Event already says so.
pub fn ready_changed<'a>(old: &[Condition], new: &'a [Condition]) -> Option<&'a Condition> {
    let before = old
        .iter()
        .find(|c| c.type_ == READY)
        .map(|c| c.status.as_str());
    let after = new.iter().find(|c| c.type_ == READY)?;
    let changed = match before {
        Some(before) => before != after.status,
        None => after.status == "True",
    };
    changed.then_some(after)
}

/// The Event for a new Ready condition: Normal when the stream became
/// ready, a Warning saying why and what to do when it stopped being so.
pub fn ready_event(ready: &Condition) -> Transition {
    let ok = ready.status == "True";
    Transition {
        reason: if ok { "Ready" } else { "NotReady" },
        note: format!("{}: {}", ready.reason, ready.message),
        warning: !ok,
    }
}

#[cfg(test)]
#[path = "conditions_tests.rs"]
mod tests;
