//! Capture's health from the SQL Server side, as a monitoring login reads
//! it: the newest log scans (sys.dm_cdc_log_scan_sessions), the errors of
//! recent scans (sys.dm_cdc_errors) and the capture job's state. Both
//! views need VIEW DATABASE STATE (VIEW DATABASE PERFORMANCE STATE on SQL
//! Server 2022); both reset when the instance restarts.

use chrono::{DateTime, Duration, NaiveDateTime, Utc};

use super::SourceError;
use super::cdc::utc_offset_minutes;
use super::connection::SqlClient;
use super::jobs::{Readable, capture_job_running, cleanup_retention, readable_rows};

/// One look at capture.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CaptureLook {
    /// The newest scan that read without error: when it ended (UTC) and its
    /// latency in seconds.
    pub last_scan: Option<(DateTime<Utc>, i64)>,
    /// Every error the view holds, oldest first.
    pub errors: Vec<CaptureError>,
    /// Whether the capture job runs; `None` when it cannot be told.
    pub job_running: Option<bool>,
    /// The cleanup job's retention in minutes.
    pub retention_minutes: Option<i64>,
    /// What could not be read, in words.
    pub problems: Vec<String>,
}

/// A row of sys.dm_cdc_errors.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureError {
    /// When it was logged (UTC).
    pub entry_time: DateTime<Utc>,
    /// SQL Server's error number.
    pub number: i32,
    /// The message.
    pub message: String,
}

const SCANS: &str = "SELECT TOP (1) start_time, end_time, latency \
     FROM sys.dm_cdc_log_scan_sessions \
     WHERE session_id > 0 AND error_count = 0 \
     ORDER BY session_id DESC";

const ERRORS: &str = "SELECT entry_time, error_number, error_message \
     FROM sys.dm_cdc_errors ORDER BY entry_time";

/// Reads everything the login may read; what it may not is named in
/// `problems`, never an error.
pub async fn look(client: &mut SqlClient) -> Result<CaptureLook, SourceError> {
    let offset = utc_offset_minutes(client).await?;
    let utc = |t: NaiveDateTime| (t - Duration::minutes(offset)).and_utc();
    let mut look = CaptureLook::default();
    match readable_rows(client, SCANS, "reading sys.dm_cdc_log_scan_sessions").await? {
        Readable::Value(rows) => {
            look.last_scan = rows.first().and_then(|row| {
                let at = |i: usize| row.try_get::<NaiveDateTime, _>(i).ok().flatten();
                let ended = at(1).or(at(0))?;
                let latency = row.try_get::<i32, _>(2).ok().flatten().unwrap_or(0);
                Some((utc(ended), i64::from(latency)))
            });
        }
        Readable::Denied(message) => look.problems.push(message),
    }
    match readable_rows(client, ERRORS, "reading sys.dm_cdc_errors").await? {
        Readable::Value(rows) => {
            look.errors = rows
                .iter()
                .filter_map(|row| {
                    Some(CaptureError {
                        entry_time: utc(row.try_get::<NaiveDateTime, _>(0).ok().flatten()?),
                        number: row.try_get::<i32, _>(1).ok().flatten().unwrap_or(0),
                        message: row
                            .try_get::<&str, _>(2)
                            .ok()
                            .flatten()
                            .unwrap_or_default()
                            .to_string(),
                    })
                })
                .collect();
        }
        Readable::Denied(message) => look.problems.push(message),
    }
    match capture_job_running(client).await? {
        Readable::Value(running) => look.job_running = running,
        Readable::Denied(message) => look.problems.push(message),
    }
    match cleanup_retention(client).await? {
        Readable::Value(minutes) => look.retention_minutes = minutes,
        Readable::Denied(message) => look.problems.push(message),
    }
    Ok(look)
}
