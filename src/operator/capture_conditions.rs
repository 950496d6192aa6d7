//! CaptureCurrent and CaptureHealthy: capture seen from the stream (the
//! live capture lag the worker reads on every trigger) and from the SQL
//! Server side (what the monitoring login reads into `status.capture`).

use chrono::{DateTime, Utc};

use super::conditions::{CAPTURE_CURRENT, CAPTURE_HEALTHY, Judged, judged};
use crate::health::{CaptureFacts, assess_capture};
use crate::spec::{AlertLimits, CaptureStatus, CdcStream, CdcStreamStatus};

/// The reason of CaptureCurrent when the live capture lag passes its limit.
pub const CAPTURE_BEHIND: &str = "CaptureBehind";

/// The live capture lag (seconds) the worker's last trigger saw.
pub fn live_capture_lag(status: &CdcStreamStatus) -> Option<f64> {
    status
        .progress
        .as_ref()?
        .latest_offset
        .as_ref()?
        .capture_lag_seconds()
}

/// CaptureCurrent: capture has mapped a commit within `captureLag`.
pub(super) fn capture_current(status: &CdcStreamStatus, limits: &AlertLimits) -> Judged {
    let Some(lag) = live_capture_lag(status) else {
        return judged(
            CAPTURE_CURRENT,
            "Unknown",
            "NoProgress",
            "the worker has not read the source's newest offset yet",
        );
    };
    let limit = humantime::format_duration(limits.capture_lag);
    if lag > limits.capture_lag.as_secs_f64() {
        return judged(
            CAPTURE_CURRENT,
            "False",
            CAPTURE_BEHIND,
            format!(
                "the source's newest change was committed {} before the worker's last look \
                 (limit {limit}): CDC capture has stopped or fallen behind; a DBA should check \
                 the capture job and SQL Server Agent",
                whole_duration(lag)
            ),
        );
    }
    judged(
        CAPTURE_CURRENT,
        "True",
        "CaptureCurrent",
        format!("capture is within {limit} of the database"),
    )
}

/// CaptureHealthy: the monitoring login's view of capture.
pub(super) fn capture_healthy(
    stream: &CdcStream,
    limits: &AlertLimits,
    now: DateTime<Utc>,
) -> Judged {
    if stream.spec.source.monitoring.is_none() {
        return judged(
            CAPTURE_HEALTHY,
            "Unknown",
            "NotMonitored",
            "set spec.source.monitoring to a login with VIEW DATABASE STATE and SELECT on msdb's \
             CDC job tables to have capture's own health here",
        );
    }
    let status = stream.status.clone().unwrap_or_default();
    let Some(capture) = status.capture.as_ref() else {
        return judged(
            CAPTURE_HEALTHY,
            "Unknown",
            "NotReported",
            "the worker has not read capture's health yet",
        );
    };
    judge_capture(capture, live_capture_lag(&status), limits, now)
}

/// CaptureHealthy from what the monitoring login read (`capture`) and the
/// live capture lag, if known: a stream's, and a CdcSource's (read once
/// for all of its tables).
pub(super) fn judge_capture(
    capture: &CaptureStatus,
    live_capture_lag_seconds: Option<f64>,
    limits: &AlertLimits,
    now: DateTime<Utc>,
) -> Judged {
    let facts = CaptureFacts {
        job_running: capture.job_running,
        last_scan_at: capture.last_scan_at,
        scan_latency_seconds: capture.scan_latency_seconds,
        last_error_at: capture.last_error.as_ref().map(|e| e.entry_time),
        live_capture_lag_seconds,
    };
    if let Some(problem) = assess_capture(&facts, now, limits.capture_lag) {
        let error = capture
            .last_error
            .as_ref()
            .filter(|_| problem == crate::health::CaptureProblem::Errors)
            .map(|e| format!(" (error {}: {})", e.number, e.message))
            .unwrap_or_default();
        return judged(
            CAPTURE_HEALTHY,
            "False",
            problem.name(),
            format!("{}{error}", problem.message()),
        );
    }
    if let Some(problem) = &capture.problem {
        return judged(
            CAPTURE_HEALTHY,
            "Unknown",
            "NotReadable",
            format!("the monitoring login cannot read all of capture's health: {problem}"),
        );
    }
    judged(
        CAPTURE_HEALTHY,
        "True",
        "CaptureHealthy",
        "the capture job runs and its log scans keep up without errors",
    )
}

/// Seconds as `1h 5m` (whole minutes), or `42s` under a minute.
fn whole_duration(seconds: f64) -> String {
    let seconds = seconds.max(0.0).round() as u64;
    let rounded = if seconds >= 60 {
        seconds / 60 * 60
    } else {
        seconds
    };
    humantime::format_duration(std::time::Duration::from_secs(rounded)).to_string()
}
