//! The worker's side of the status: an engine [`Observer`] that keeps the
//! latest report (progress and the source's newest offset, the snapshot,
//! the worker's own state, capture's health, finalization row, purged
//! changes met), and a task that applies it to the status with server-side
//! apply under the worker's own field manager: at once when it changes the
//! verdict (phase, a condition's status or reason), otherwise at most every
//! status interval ([`pace`]). A report the API server refuses does not
//! stop the stream, so it must not go unseen: it is logged as an error and
//! counted in the worker's `/metrics` ([`StatusReports`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use kube::Api;
use kube::api::{Patch, PatchParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::Serialize;
use tokio::sync::watch;

use crate::domain::{FactEvent, FactRow, VerdictUpdate};
use crate::engine::{
    EngineError, Observer, SnapshotProgress, SourceCheck, SourceDown, SourceHealth, StoreDown,
};
use crate::metrics::{Exposition, Metrics};
use crate::spec::{
    API_VERSION, CaptureStatus, CdcStream, DataLossAction, DataLossStatus, FinalizationStatus,
    KIND, Progress, SnapshotPhase, SnapshotStatus, WorkerState, WorkerStatus,
};

use super::failure::{Failure, SOURCE_UNAVAILABLE, STORE_UNAVAILABLE};
use super::progress::{record_batch, record_check, record_snapshot};
use super::spec_hash::spec_hash;
use super::verdict::{report_allowance, reported_verdict};

/// How often snapshot progress may be reported: often enough to be seen
/// moving, rarely enough not to load the API server.
const SNAPSHOT_REPORT_EVERY: Duration = Duration::from_secs(1);

/// The field manager of everything the worker writes.
pub const WORKER_FIELD_MANAGER: &str = "mssql-cdc-worker";

/// Why the worker could not report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The API server refused or could not be reached.
    #[error("cannot patch the status of CdcStream {name}: {source}")]
    Patch {
        /// The stream.
        name: String,
        /// What the client said.
        source: kube::Error,
    },
}

/// What the worker has to say in the status: its last batch, its
/// target's finalization row and the last purged changes it met. Fields
/// stay `None` until the engine reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerReport {
    /// `status.progress`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// `status.finalization`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalization: Option<FinalizationStatus>,
    /// `status.silver`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silver: Option<FinalizationStatus>,
    /// `status.dataLoss`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_loss: Option<DataLossStatus>,
    /// `status.snapshot`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStatus>,
    /// `status.capture`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStatus>,
    /// `status.worker`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerStatus>,
}

impl WorkerReport {
    fn is_empty(&self) -> bool {
        *self == WorkerReport::default()
    }
}

/// Hands what the engine reports to [`publish_status`]; only the latest
/// report counts, so a slow API server never holds the engine back.
#[derive(Debug, Clone)]
pub struct StatusObserver {
    latest: Arc<watch::Sender<WorkerReport>>,
    /// The stream's target: its verdicts go to `status.finalization`, the
    /// silver table's to `status.silver`.
    target: String,
    /// When snapshot progress was last handed on.
    snapshot_reported: Arc<Mutex<Option<Instant>>>,
    /// What the worker said of itself before its source went down, said
    /// again when the source is back.
    before_outage: Arc<Mutex<Option<WorkerStatus>>>,
}

impl StatusObserver {
    /// An observer and the receiver [`publish_status`] reads from. The
    /// report starts from what a previous worker left in `stream`'s status
    /// (progress, and the finalization row while the spec names a control
    /// table), so a run that fails before its first batch does not erase
    /// them, and a held verdict keeps its `finalizedUntil`. Purged changes
    /// are only reported by the run that meets them.
    pub fn new(stream: &CdcStream) -> (Self, watch::Receiver<WorkerReport>) {
        let reported = stream.status.as_ref();
        let progress = Progress {
            generation: stream.metadata.generation,
            spec_hash: Some(spec_hash(&stream.spec)),
            ..reported
                .and_then(|s| s.progress.clone())
                .unwrap_or_default()
        };
        let before = reported.and_then(|s| s.worker.as_ref());
        let restarts = match before {
            Some(w) if w.state == WorkerState::Failed => w.restarts.saturating_add(1),
            _ => 0,
        };
        let report = WorkerReport {
            progress: Some(progress),
            snapshot: reported.and_then(|s| s.snapshot.clone()),
            capture: reported
                .and_then(|s| s.capture.clone())
                .filter(|_| stream.spec.source.monitoring.is_some()),
            worker: Some(WorkerStatus {
                state: WorkerState::Running,
                reason: "Running".into(),
                message: "the worker runs the stream".into(),
                since: Utc::now(),
                restarts,
            }),
            finalization: reported
                .and_then(|s| s.finalization.clone())
                .filter(|_| stream.spec.finalization.is_some()),
            silver: reported
                .and_then(|s| s.silver.clone())
                .filter(|_| stream.spec.finalization.is_some() && stream.spec.silver.is_some()),
            data_loss: None,
        };
        let (sender, receiver) = watch::channel(report);
        (
            StatusObserver {
                latest: Arc::new(sender),
                target: stream.spec.target.name.clone(),
                snapshot_reported: Arc::new(Mutex::new(None)),
                before_outage: Arc::new(Mutex::new(None)),
            },
            receiver,
        )
    }

    /// The worker's own state from now on; a failure keeps the count of
    /// failed runs in a row.
    pub fn worker_state(&self, state: WorkerState, failure: Option<&Failure>) {
        self.latest.send_modify(|report| {
            let restarts = report.worker.as_ref().map_or(0, |w| w.restarts);
            let (reason, message) = match (state, failure) {
                (_, Some(f)) => (f.reason.to_string(), f.message.clone()),
                (WorkerState::Stopped, None) => (
                    "Stopped".to_string(),
                    "the worker was asked to stop (SIGTERM) and did, after its batch".to_string(),
                ),
                (WorkerState::Completed, None) => (
                    "Completed".to_string(),
                    "the availableNow run caught up and ended".to_string(),
                ),
                (_, None) => (
                    "Running".to_string(),
                    "the worker runs the stream".to_string(),
                ),
            };
            report.worker = Some(WorkerStatus {
                state,
                reason,
                message,
                since: Utc::now(),
                restarts,
            });
        });
    }

    /// The table waits for something outside it (its source, its store):
    /// `status.worker` says Waiting with `reason`, and what it said before
    /// is kept for [`StatusObserver::end_wait`].
    fn wait(&self, reason: &str, message: String, since: chrono::DateTime<Utc>) {
        let mut before = self.before_outage.lock().unwrap_or_else(|p| p.into_inner());
        self.latest.send_modify(|report| {
            let restarts = report.worker.as_ref().map_or(0, |w| w.restarts);
            if let Some(w) = report.worker.take()
                && w.state != WorkerState::Waiting
            {
                *before = Some(w);
            }
            report.worker = Some(WorkerStatus {
                state: WorkerState::Waiting,
                reason: reason.into(),
                message,
                since,
                restarts,
            });
        });
    }

    /// What the table waited for is back: when `status.worker` is still
    /// the wait (`waiting` says so), it says again what it said before,
    /// or that it runs.
    fn end_wait(&self, waiting: impl Fn(&WorkerStatus) -> bool) {
        let said = self
            .before_outage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.latest.send_if_modified(|report| {
            let still = report.worker.as_ref().is_some_and(&waiting);
            if still {
                report.worker = Some(said.unwrap_or_else(|| WorkerStatus {
                    state: WorkerState::Running,
                    reason: "Running".into(),
                    message: "the worker runs the stream".into(),
                    since: Utc::now(),
                    restarts: 0,
                }));
            }
            still
        });
    }

    /// What the monitoring login read of capture.
    pub fn capture_looked(&self, capture: CaptureStatus) {
        self.latest
            .send_modify(|report| report.capture = Some(capture));
    }

    /// Whether snapshot progress may be handed on now (or the phase
    /// changes, which is always handed on).
    fn snapshot_due(&self) -> bool {
        let mut last = self
            .snapshot_reported
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let due = last.is_none_or(|at| at.elapsed() >= SNAPSHOT_REPORT_EVERY);
        if due {
            *last = Some(Instant::now());
        }
        due
    }

    fn data_lost(&self, action: DataLossAction, row: &FactRow) {
        self.latest.send_modify(|report| {
            report.data_loss = Some(DataLossStatus {
                action,
                detected_at: row.written_at,
                lost_from_ts: row.lost_from_ts,
                lost_to_ts: row.lost_to_ts,
            });
        });
    }
}

impl Observer for StatusObserver {
    fn snapshot_progress(&self, p: &SnapshotProgress) {
        let now = Utc::now();
        let starting = self
            .latest
            .borrow()
            .snapshot
            .as_ref()
            .is_none_or(|s| s.phase != SnapshotPhase::Running);
        if !starting && !self.snapshot_due() {
            return;
        }
        let eta = p
            .eta
            .and_then(|eta| chrono::Duration::from_std(eta).ok())
            .map(|eta| now + eta);
        self.latest.send_modify(|report| {
            report.snapshot = Some(SnapshotStatus {
                phase: SnapshotPhase::Running,
                rows: p.rows,
                estimated_rows: p.estimated_rows,
                rows_per_second: (p.rows_per_second * 10.0).round() / 10.0,
                eta,
                chunks: p.chunks,
                started_at: p.started_at,
                updated_at: now,
            });
        });
    }

    fn snapshot_reading(&self, rows: u64) {
        if !self.snapshot_due() {
            return;
        }
        self.latest.send_modify(|report| {
            if let Some(snapshot) = report
                .snapshot
                .as_mut()
                .filter(|s| s.phase == SnapshotPhase::Running)
            {
                snapshot.rows = snapshot.rows.max(rows);
                snapshot.updated_at = Utc::now();
            }
        });
    }

    fn snapshot_done(&self, row: &FactRow) {
        if row.event == Some(FactEvent::Resnapshot) {
            self.data_lost(DataLossAction::Resnapshotted, row);
        }
        self.latest.send_modify(|report| {
            record_snapshot(report.progress.get_or_insert_with(Progress::default), row);
            let copied = row.rows.unwrap_or(0);
            let snapshot = report.snapshot.get_or_insert_with(|| SnapshotStatus {
                phase: SnapshotPhase::Done,
                rows: copied,
                estimated_rows: None,
                rows_per_second: 0.0,
                eta: None,
                chunks: 0,
                started_at: row.started_at.unwrap_or(row.written_at),
                updated_at: row.written_at,
            });
            snapshot.phase = SnapshotPhase::Done;
            snapshot.rows = copied;
            snapshot.eta = None;
            snapshot.updated_at = row.written_at;
        });
    }

    fn source_checked(&self, check: &SourceCheck) {
        self.latest.send_modify(|report| {
            record_check(report.progress.get_or_insert_with(Progress::default), check);
        });
    }

    fn batch_done(&self, row: &FactRow) {
        self.latest.send_if_modified(|report| {
            record_batch(report.progress.get_or_insert_with(Progress::default), row)
        });
    }

    fn events_recorded(&self, rows: &[FactRow]) {
        let skipped = rows
            .iter()
            .find(|r| r.event == Some(FactEvent::DataSkipped));
        if let Some(row) = skipped {
            self.data_lost(DataLossAction::Skipped, row);
        }
    }

    fn finalized(&self, update: &VerdictUpdate) {
        let silver = update.table_name != self.target;
        self.latest.send_modify(|report| {
            let row = if silver {
                &mut report.silver
            } else {
                &mut report.finalization
            };
            let before = row.as_ref().and_then(|f| f.finalized_until);
            let applied = row.as_ref().and_then(|f| f.applied_lsn.clone());
            *row = Some(FinalizationStatus {
                // The table keeps the later of the row's and the update's.
                finalized_until: before.max(update.finalized_until),
                updated_at: update.updated_at,
                open_snapshot_lsn: update.open_snapshot_lsn.map(|lsn| lsn.to_string()),
                applied_lsn: update.applied_lsn.map(|lsn| lsn.to_string()).max(applied),
            });
        });
    }

    /// The source down: the table waits for it (Waiting, reason
    /// SourceUnavailable, the outage in the message); back: the table says
    /// again what it said before, unless it said something new meanwhile.
    fn source_health(&self, health: &SourceHealth) {
        match health {
            SourceHealth::Down(down) => {
                self.wait(
                    SOURCE_UNAVAILABLE,
                    source_unavailable_message(down),
                    down.since,
                );
            }
            SourceHealth::Up { .. } => self.end_wait(|w| w.state == WorkerState::Waiting),
            SourceHealth::Unknown => {}
        }
    }

    /// The store down for longer than `storeOutageAfter`: the table waits
    /// for it (Waiting, reason StoreUnavailable, the store's answer in the
    /// message); back: the table says again what it said before.
    fn store_outage(&self, down: Option<&StoreDown>) {
        match down {
            Some(down) => self.wait(
                STORE_UNAVAILABLE,
                store_unavailable_message(down),
                down.since,
            ),
            None => self.end_wait(|w| w.reason == STORE_UNAVAILABLE),
        }
    }

    fn failed(&self, error: &EngineError) {
        if let EngineError::DataLoss(loss) = error {
            self.latest.send_modify(|report| {
                report.data_loss = Some(DataLossStatus {
                    action: DataLossAction::Stopped,
                    detected_at: Utc::now(),
                    lost_from_ts: loss.from_ts,
                    lost_to_ts: loss.to_ts,
                });
            });
        }
    }
}

/// `status.worker.message` of a table waiting for its source: which
/// outage (the source's own reason leads), what was met, what to check.
pub fn source_unavailable_message(down: &SourceDown) -> String {
    super::failure::one_line(&format!(
        "{}; no table of the source can run until it is back, and this one goes on by itself \
         then (the CdcSource's SourceConnected condition says the same)",
        down.message()
    ))
}

/// `status.worker.message` of a table whose store is down: since when,
/// what the store answered, that nothing is lost, and what to check.
pub fn store_unavailable_message(down: &StoreDown) -> String {
    super::failure::one_line(&format!(
        "the object store has failed every attempt since {}: {}; the worker retries with the \
         batch's files uploaded once, loses nothing, and goes on by itself when the store \
         answers: check the store's health, and the endpoint, network path and credentials the \
         stream's storageOptions and the pod give it",
        down.since.format("%Y-%m-%d %H:%M:%S UTC"),
        down.answer
    ))
}

/// The server-side apply body that sets the worker's status fields.
pub fn report_patch(name: &str, report: &WorkerReport) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "status": report,
    })
}

/// What the publisher does with the newest report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Apply it now: the first report, a new verdict, or the interval is up.
    Now,
    /// Apply it then, unless a report that changes the verdict comes first.
    At(Instant),
    /// The status already says it.
    Nothing,
}

/// When the worker writes `report`, given the last one the API server
/// took (`applied`, and when): at once when it changes the phase or a
/// condition's status or reason as the operator would judge them at `now`
/// ([`super::verdict`]), otherwise (moving numbers only) `interval` after
/// the last write. `allowance` is the operator's widening of age limits.
pub fn pace(
    stream: &CdcStream,
    applied: Option<&(WorkerReport, Instant)>,
    report: &WorkerReport,
    now: (Instant, chrono::DateTime<Utc>),
    interval: Duration,
    allowance: Duration,
) -> Pace {
    let Some((last, at)) = applied else {
        return Pace::Now;
    };
    if last == report {
        return Pace::Nothing;
    }
    let (instant, wall) = now;
    let judged = |r: &WorkerReport| reported_verdict(&as_reported(stream, r), wall, allowance);
    if judged(last) != judged(report) {
        return Pace::Now;
    }
    let due = *at + interval;
    if due <= instant {
        Pace::Now
    } else {
        Pace::At(due)
    }
}

/// `stream` with the status `report` leaves after it is applied: the
/// worker owns these fields, so one it leaves out is removed.
pub fn as_reported(stream: &CdcStream, report: &WorkerReport) -> CdcStream {
    let mut stream = stream.clone();
    let status = stream.status.get_or_insert_with(Default::default);
    status.progress = report.progress.clone();
    status.finalization = report.finalization.clone();
    status.silver = report.silver.clone();
    status.data_loss = report.data_loss.clone();
    status.snapshot = report.snapshot.clone();
    status.capture = report.capture.clone();
    status.worker = report.worker.clone();
    stream
}

/// Applies new reports until the observer is dropped, as [`pace`] says:
/// a change of the verdict at once, moving numbers at most every
/// `interval` (zero: every report). Then the last one, unless the stream
/// is gone or is another one of the same name by then (an apply would try
/// to create it, which the API server refuses for want of a spec). A
/// failed patch is recorded in `reports` (an error in the log, a count in
/// `/metrics`) and retried after `interval` or with the next new verdict.
pub async fn publish_status(
    api: Api<CdcStream>,
    stream: &CdcStream,
    mut latest: watch::Receiver<WorkerReport>,
    reports: Arc<StatusReports>,
    interval: Duration,
) {
    let name = kube::ResourceExt::name_any(stream);
    let allowance = report_allowance(interval);
    let mut applied: Option<(WorkerReport, Instant)> = None;
    let mut due: Option<Instant> = None;
    loop {
        let wait = async {
            match due {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        let closed = tokio::select! {
            changed = latest.changed() => changed.is_err(),
            () = wait => false,
        };
        let report = latest.borrow_and_update().clone();
        if closed {
            if !still_there(&api, stream).await {
                tracing::info!("CdcStream {name} is gone: its last status report is not sent");
                return;
            }
            if !report.is_empty() && applied.as_ref().map(|(r, _)| r) != Some(&report) {
                reports.record(apply_report(&api, &name, &report).await);
            }
            return;
        }
        if report.is_empty() {
            continue;
        }
        let now = (Instant::now(), Utc::now());
        due = match pace(stream, applied.as_ref(), &report, now, interval, allowance) {
            Pace::Nothing => None,
            Pace::At(at) => Some(at),
            Pace::Now => {
                let outcome = apply_report(&api, &name, &report).await;
                let ok = outcome.is_ok();
                reports.record(outcome);
                if ok {
                    applied = Some((report, Instant::now()));
                    None
                } else {
                    Some(Instant::now() + interval.max(Duration::from_secs(1)))
                }
            }
        };
    }
}

/// Whether the stream the worker runs still exists (the same object: a
/// stream deleted and created again has a new uid). When the API server
/// cannot say, the report is tried.
async fn still_there(api: &Api<CdcStream>, stream: &CdcStream) -> bool {
    match api.get_opt(&kube::ResourceExt::name_any(stream)).await {
        Ok(Some(now)) => now.metadata.uid == stream.metadata.uid,
        Ok(None) => false,
        Err(_) => true,
    }
}

/// How the worker's status reports fare: the series
/// `mssql_cdc_worker_status_reports_total{result}` and
/// `mssql_cdc_worker_status_report_failing`, and one error line whenever
/// reports start failing or fail differently.
#[derive(Debug)]
pub struct StatusReports {
    registry: prometheus_client::registry::Registry,
    total: Family<ResultLabel, Counter>,
    failing: Gauge,
    last_error: Mutex<Option<String>>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

impl Default for StatusReports {
    fn default() -> Self {
        let mut registry = prometheus_client::registry::Registry::with_prefix("mssql_cdc_worker");
        let total = Family::default();
        registry.register(
            "status_reports",
            "Status reports the worker applied to its CdcStream, by result (applied or failed)",
            total.clone(),
        );
        let failing = Gauge::default();
        registry.register(
            "status_report_failing",
            "1 while the worker's last status report was refused or unanswered: the stream runs but its status does not show it",
            failing.clone(),
        );
        StatusReports {
            registry,
            total,
            failing,
            last_error: Mutex::new(None),
        }
    }
}

impl StatusReports {
    /// Counts one report and logs a change between working and failing.
    pub fn record(&self, outcome: Result<(), ReportError>) {
        let result = if outcome.is_ok() { "applied" } else { "failed" };
        self.total.get_or_create(&ResultLabel { result }).inc();
        self.failing.set(i64::from(outcome.is_err()));
        let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Ok(()) => {
                if last.take().is_some() {
                    tracing::info!("status reports reach the CdcStream again");
                }
            }
            Err(error) => {
                let text = error.to_string();
                if last.as_deref() != Some(text.as_str()) {
                    tracing::error!(
                        "{text}; the stream keeps running, but its CdcStream shows none of its \
                         progress (the operator will judge it stopped): let this pod's \
                         ServiceAccount patch cdcstreams/status"
                    );
                    *last = Some(text);
                }
            }
        }
    }

    /// Whether the last report failed.
    pub fn failing(&self) -> bool {
        self.failing.get() == 1
    }
}

/// The worker's `/metrics`: the stream's series and [`StatusReports`].
pub struct WorkerMetrics {
    /// The engine's series of the stream.
    pub stream: Arc<Metrics>,
    /// How status reports fare.
    pub reports: Arc<StatusReports>,
}

impl Exposition for WorkerMetrics {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        let stream = self.stream.encode()?;
        let mut text = stream
            .strip_suffix("# EOF\n")
            .unwrap_or(&stream)
            .to_string();
        prometheus_client::encoding::text::encode_registry(&mut text, &self.reports.registry)?;
        prometheus_client::encoding::text::encode_eof(&mut text)?;
        Ok(text)
    }

    /// Only the stream's failures: a restart would not give the worker the
    /// right to report, and the stream itself runs.
    fn failures(&self) -> Vec<String> {
        self.stream.failed_streams()
    }
}

/// One server-side apply of the worker's status fields.
pub async fn apply_report(
    api: &Api<CdcStream>,
    name: &str,
    report: &WorkerReport,
) -> Result<(), ReportError> {
    let params = PatchParams::apply(WORKER_FIELD_MANAGER);
    api.patch_status(name, &params, &Patch::Apply(report_patch(name, report)))
        .await
        .map(|_| ())
        .map_err(|source| ReportError::Patch {
            name: name.to_string(),
            source,
        })
}

#[cfg(test)]
#[path = "worker_tests.rs"]
mod tests;

/// One table of a source's worker: an error that stops the table goes into
/// its own stream's status (`status.worker`, with the reason and fix of
/// the error), while the worker goes on with the other tables and starts
/// this one again after its backoff; once that run is connected with its
/// tables open, the status says it runs again. Its position, measured
/// meanwhile, goes to `status.progress` as usual.
pub struct TableFailureReport {
    status: StatusObserver,
    config: crate::spec::StreamConfig,
    failed: std::sync::atomic::AtomicBool,
}

impl TableFailureReport {
    /// Reports into `status` the failures of the table `config` runs.
    pub fn new(status: StatusObserver, config: crate::spec::StreamConfig) -> Self {
        TableFailureReport {
            status,
            config,
            failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn running_again(&self) {
        if self
            .failed
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            self.status.worker_state(WorkerState::Running, None);
        }
    }
}

impl Observer for TableFailureReport {
    fn running(&self) {
        self.running_again();
    }

    fn failed(&self, error: &EngineError) {
        let failure = super::failure::engine_failure(error, &self.config);
        self.status
            .worker_state(WorkerState::Failed, Some(&failure));
        self.failed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
