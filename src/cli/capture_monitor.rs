//! The worker's look at capture from the SQL Server side, with the
//! monitoring login (`spec.source.monitoring`), never the reader: every
//! trigger interval it reads the newest log scan, the capture errors and
//! the capture job's state, and hands them to `status.capture` (a
//! stream's, or once for all of its tables a CdcSource's). Errors of its
//! own are reported there too; they never stop the stream.

use std::time::Duration;

use chrono::{DateTime, Utc};
use mssql_cdc::source::capture_health::{CaptureLook, look};
use mssql_cdc::source::{SqlClient, connect};
use mssql_cdc::spec::{CaptureErrorStatus, CaptureStatus, SourceConfig};
use secrecy::SecretString;

/// How often capture is looked at, at least.
const LOOK_EVERY_MIN: Duration = Duration::from_secs(1);
/// ... and at most.
const LOOK_EVERY_MAX: Duration = Duration::from_secs(60);

/// Looks at capture every `every` (bounded) until the task is dropped,
/// handing each look to `report`.
pub async fn watch_capture(
    source: SourceConfig,
    password: SecretString,
    every: Duration,
    report: impl Fn(CaptureStatus) + Send + 'static,
) {
    let Some(login) = source.monitoring.clone() else {
        return;
    };
    let mut as_monitor = source;
    as_monitor.username = login.username;
    let every = every.clamp(LOOK_EVERY_MIN, LOOK_EVERY_MAX);
    let mut client: Option<SqlClient> = None;
    let mut seen: Option<DateTime<Utc>> = None;
    loop {
        let looked = match client.as_mut() {
            Some(c) => look(c).await.map_err(|e| e.to_string()),
            None => match connect(&as_monitor, &password).await {
                Ok(mut c) => {
                    let looked = look(&mut c).await.map_err(|e| e.to_string());
                    client = Some(c);
                    looked
                }
                Err(e) => Err(e.to_string()),
            },
        };
        let looked_report = match looked {
            Ok(look) => {
                let report = capture_status(&look, seen);
                seen = look.errors.iter().map(|e| e.entry_time).max().or(seen);
                report
            }
            Err(problem) => {
                client = None;
                CaptureStatus {
                    observed_at: Some(Utc::now()),
                    problem: Some(format!(
                        "monitoring login {}: {problem}",
                        as_monitor.username
                    )),
                    ..CaptureStatus::default()
                }
            }
        };
        report(looked_report);
        tokio::time::sleep(every).await;
    }
}

/// `status.capture` from one look; `seen` is the newest error entry the
/// worker had seen before it.
pub fn capture_status(look: &CaptureLook, seen: Option<DateTime<Utc>>) -> CaptureStatus {
    let newest = look.errors.iter().max_by_key(|e| e.entry_time);
    CaptureStatus {
        observed_at: Some(Utc::now()),
        last_scan_at: look.last_scan.map(|(at, _)| at),
        scan_latency_seconds: look.last_scan.map(|(_, latency)| latency),
        new_errors: look
            .errors
            .iter()
            .filter(|e| seen.is_none_or(|s| e.entry_time > s))
            .count() as u64,
        last_error: newest.map(|e| CaptureErrorStatus {
            entry_time: e.entry_time,
            number: e.number,
            message: e.message.clone(),
        }),
        job_running: look.job_running,
        retention_minutes: look.retention_minutes,
        problem: (!look.problems.is_empty()).then(|| look.problems.join("; ")),
    }
}
