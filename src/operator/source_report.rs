//! The source worker's own part of its CdcSource's status: whether its
//! rounds read SQL Server (`status.connection`) and what the monitoring
//! login read of capture (`status.capture`). Two small fields for the
//! whole source, whatever its number of tables, applied with server-side
//! apply under the worker's field manager (the operator's own fields are
//! left alone): a change of connection or of capture's state at once,
//! capture's moving numbers at most every status interval. The operator
//! judges SourceConnected and CaptureHealthy from them
//! (`source_conditions.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use tokio::sync::watch;

use super::failure::one_line;
use super::worker::{ReportError, StatusReports, WORKER_FIELD_MANAGER};
use crate::engine::{Observer, SourceHealth};
use crate::spec::{API_VERSION, CaptureStatus, CdcSource, ConnectionStatus, SOURCE_KIND};

/// What the worker says of its source.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceReport {
    /// `status.connection`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionStatus>,
    /// `status.capture`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStatus>,
}

/// `status.connection` for `health`; `None` before the first look.
pub fn connection_status(health: &SourceHealth) -> Option<ConnectionStatus> {
    match health {
        SourceHealth::Unknown => None,
        SourceHealth::Up { since } => Some(ConnectionStatus {
            connected: true,
            reason: "Connected".into(),
            message: "the worker's rounds read the database's max LSN".into(),
            since: *since,
        }),
        SourceHealth::Down(down) => Some(ConnectionStatus {
            connected: false,
            reason: down.outage.reason().into(),
            message: one_line(&format!("{}; {}", down.error, down.outage.remedy())),
            since: down.since,
        }),
    }
}

/// Collects what the worker says of its source: an engine observer (the
/// rounds' verdict) and the capture monitor's looks.
#[derive(Debug, Clone)]
pub struct SourceReporter {
    latest: Arc<watch::Sender<SourceReport>>,
}

impl SourceReporter {
    /// A reporter and the receiver [`publish_source_report`] reads from.
    pub fn new() -> (Self, watch::Receiver<SourceReport>) {
        let (sender, receiver) = watch::channel(SourceReport::default());
        (
            SourceReporter {
                latest: Arc::new(sender),
            },
            receiver,
        )
    }

    /// What the monitoring login read of capture.
    pub fn capture_looked(&self, capture: CaptureStatus) {
        self.latest
            .send_modify(|report| report.capture = Some(capture));
    }
}

impl Observer for SourceReporter {
    fn source_health(&self, health: &SourceHealth) {
        let connection = connection_status(health);
        self.latest.send_if_modified(|report| match connection {
            Some(c) if report.connection.as_ref() != Some(&c) => {
                report.connection = Some(c);
                true
            }
            _ => false,
        });
    }
}

/// Whether `next` must reach the API server at once after `last`: the
/// connection changed, or capture's state (job running, an error, a
/// problem reading it); capture's moving numbers may wait.
pub fn urgent(last: &SourceReport, next: &SourceReport) -> bool {
    let state = |r: &SourceReport| {
        r.capture.as_ref().map(|c| {
            (
                c.job_running,
                c.problem.is_some(),
                c.last_error.as_ref().map(|e| e.entry_time),
            )
        })
    };
    last.connection != next.connection || state(last) != state(next)
}

/// Applies new reports to CdcSource `name` until the reporter is dropped:
/// urgent ones ([`urgent`]) at once, others at most every `interval`. A
/// refused apply is recorded in `reports` and tried again after
/// `interval` or with the next urgent report.
pub async fn publish_source_report(
    api: Api<CdcSource>,
    name: String,
    mut latest: watch::Receiver<SourceReport>,
    reports: Arc<StatusReports>,
    interval: Duration,
) {
    let mut applied: Option<(SourceReport, Instant)> = None;
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
        if report == SourceReport::default() {
            if closed {
                return;
            }
            continue;
        }
        let now = Instant::now();
        let send = match &applied {
            None => true,
            Some((last, _)) if *last == report => false,
            Some((last, _)) if urgent(last, &report) => true,
            Some((_, at)) => *at + interval <= now,
        };
        if send || closed {
            let outcome = apply_source_report(&api, &name, &report).await;
            let ok = outcome.is_ok();
            reports.record(outcome);
            due = if ok {
                applied = Some((report, Instant::now()));
                None
            } else {
                Some(Instant::now() + interval.max(Duration::from_secs(1)))
            };
        } else if applied.as_ref().is_some_and(|(last, _)| *last != report) {
            due = applied.as_ref().map(|(_, at)| *at + interval);
        }
        if closed {
            return;
        }
    }
}

/// One server-side apply of the worker's fields of the source's status.
async fn apply_source_report(
    api: &Api<CdcSource>,
    name: &str,
    report: &SourceReport,
) -> Result<(), ReportError> {
    let body = serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": SOURCE_KIND,
        "metadata": {"name": name},
        "status": report,
    });
    api.patch_status(
        name,
        &PatchParams::apply(WORKER_FIELD_MANAGER),
        &Patch::Apply(body),
    )
    .await
    .map(|_| ())
    .map_err(|source| ReportError::Patch {
        name: name.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SourceDown;
    use crate::source::SourceOutage;

    fn at(seconds: i64) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("a time")
    }

    #[test]
    fn the_connection_says_which_outage_and_since_when() {
        assert_eq!(connection_status(&SourceHealth::Unknown), None);
        let up = connection_status(&SourceHealth::Up { since: at(0) }).expect("reported");
        assert!(up.connected);
        let down = connection_status(&SourceHealth::Down(SourceDown {
            outage: SourceOutage::LoginFailed,
            error: "SQL Server: login to db:1433: Login failed for user 'reader'".into(),
            since: at(5),
        }))
        .expect("reported");
        assert!(!down.connected);
        assert_eq!(down.reason, "LoginFailed");
        assert_eq!(down.since, at(5));
        assert!(down.message.contains("Secret"), "{}", down.message);
    }

    #[test]
    fn a_new_connection_state_is_urgent_and_capture_numbers_wait() {
        let up = SourceReport {
            connection: connection_status(&SourceHealth::Up { since: at(0) }),
            capture: Some(CaptureStatus {
                job_running: Some(true),
                scan_latency_seconds: Some(1),
                ..CaptureStatus::default()
            }),
        };
        let mut moved = up.clone();
        if let Some(c) = moved.capture.as_mut() {
            c.scan_latency_seconds = Some(3);
        }
        assert!(!urgent(&up, &moved), "a moving number waits");
        let mut stopped = up.clone();
        if let Some(c) = stopped.capture.as_mut() {
            c.job_running = Some(false);
        }
        assert!(urgent(&up, &stopped), "the capture job stopped");
        let down = SourceReport {
            connection: connection_status(&SourceHealth::Down(SourceDown {
                outage: SourceOutage::Unreachable,
                error: "cannot connect".into(),
                since: at(9),
            })),
            ..up.clone()
        };
        assert!(urgent(&up, &down), "the source went down");
    }
}
