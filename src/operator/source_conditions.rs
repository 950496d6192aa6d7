//! SourceConnected and CaptureHealthy of a CdcSource: the source as a
//! whole, judged from the two small facts its worker writes into the
//! source's status under its own field manager (`status.connection`: do
//! the worker's rounds read SQL Server, and if not, why; `status.capture`:
//! what the monitoring login read of capture, once for the source), never
//! from a list of its tables.

use std::hash::{DefaultHasher, Hash, Hasher};

use chrono::{DateTime, Utc};

use super::capture_conditions::judge_capture;
use super::conditions::{CAPTURE_HEALTHY, Judged, judged};
use crate::spec::{CdcSource, CdcSourceStatus};

/// True while the source's worker reads SQL Server (its rounds read the
/// database's max LSN).
pub const SOURCE_CONNECTED: &str = "SourceConnected";

/// SourceConnected: what the worker reported, while the worker runs (a
/// report of a worker that does not run may be stale, so it is Unknown).
pub(super) fn source_connected(source: &CdcSource, worker: &Judged) -> Judged {
    if source.spec.suspend {
        return judged(
            SOURCE_CONNECTED,
            "Unknown",
            "Suspended",
            "spec.suspend is set: no worker reads the source",
        );
    }
    if worker.status != "True" {
        return judged(
            SOURCE_CONNECTED,
            "Unknown",
            "WorkerNotRunning",
            format!(
                "the source's worker does not run ({}), so nothing reads SQL Server",
                worker.reason
            ),
        );
    }
    let reported = source.status.as_ref().and_then(|s| s.connection.as_ref());
    match reported {
        None => judged(
            SOURCE_CONNECTED,
            "Unknown",
            "NotReported",
            "the worker has not read SQL Server yet (an availableNow source's worker does not \
             report it)",
        ),
        Some(c) if c.connected => judged(
            SOURCE_CONNECTED,
            "True",
            "Connected",
            "the worker reads the database's max LSN every trigger",
        ),
        Some(c) => judged(
            SOURCE_CONNECTED,
            "False",
            c.reason.clone(),
            format!(
                "since {}: {}; every table waits (Live False, reason SourceUnavailable) and goes \
                 on by itself when the source is back",
                c.since.format("%Y-%m-%d %H:%M:%S UTC"),
                c.message
            ),
        ),
    }
}

/// CaptureHealthy: capture's health as the monitoring login read it for
/// the source (`spec.connection.monitoring`), judged as a stream's is.
pub(super) fn source_capture_healthy(source: &CdcSource, now: DateTime<Utc>) -> Judged {
    if source.spec.connection.monitoring.is_none() {
        return judged(
            CAPTURE_HEALTHY,
            "Unknown",
            "NotMonitored",
            "set spec.connection.monitoring to a login with VIEW DATABASE STATE and SELECT on \
             msdb's CDC job tables to have capture's own health here",
        );
    }
    let Some(capture) = source.status.as_ref().and_then(|s| s.capture.as_ref()) else {
        return judged(
            CAPTURE_HEALTHY,
            "Unknown",
            "NotReported",
            "the worker has not read capture's health yet",
        );
    };
    let limits = source
        .spec
        .defaults
        .alerts
        .as_ref()
        .and_then(|a| a.limits().ok())
        .unwrap_or_default();
    judge_capture(capture, None, &limits, now)
}

/// `status` without what the worker writes: what the operator's own
/// status is compared with, so the worker's fields never make it write.
pub fn operator_part(status: &CdcSourceStatus) -> CdcSourceStatus {
    CdcSourceStatus {
        connection: None,
        capture: None,
        discovery: None,
        ..status.clone()
    }
}

/// What of the worker's report wakes the operator: a change of connection
/// (connected, reason) or of capture's state (job running, an error, a
/// problem); its moving numbers wait for the resync. Combined with the
/// generation, so a spec change still wakes it and its own status writes
/// do not.
pub fn wake_hash(source: &CdcSource) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    source.metadata.generation.hash(&mut hasher);
    let status = source.status.as_ref();
    if let Some(c) = status.and_then(|s| s.connection.as_ref()) {
        (c.connected, &c.reason).hash(&mut hasher);
    }
    if let Some(c) = status.and_then(|s| s.capture.as_ref()) {
        (
            c.job_running,
            c.problem.is_some(),
            c.last_error.as_ref().map(|e| e.entry_time),
        )
            .hash(&mut hasher);
    }
    Some(hasher.finish())
}
