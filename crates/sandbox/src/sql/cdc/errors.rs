//! Capture errors: what sys.dm_cdc_errors shows
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/change-data-capture-sys-dm-cdc-errors>),
//! one row per error of a log scan session, and the failed session itself
//! in sys.dm_cdc_log_scan_sessions (its `error_count`, and the aggregate's
//! `failed_sessions_count`). The sandbox's log reader never fails by
//! itself, so the sandbox-only `sandbox.sp_cdc_fail_next_scan
//! @error_number = N, @message = N'...'` (not a SQL Server procedure)
//! makes the database's next scan fail the way SQL Server's does: the
//! session reads nothing, records its error, and the next scan goes on
//! where it stopped.

use chrono::NaiveDateTime;

use super::capture::local;
use super::jobs::current_mut;
use super::params::Args;
use super::{KEPT_SESSIONS, ScanSession};
use crate::sql::catalog::Database;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::procedures::{ProcResult, ProcedureRegistry};
use crate::sql::request::{CancelToken, Output, Param};
use crate::sql::session::Session;
use crate::sql::types::Value;

/// How many error rows the view keeps (it shows those of recent sessions).
const KEPT_ERRORS: usize = 32;

/// The error a log scan stopped on.
#[derive(Debug, Clone)]
pub struct CaptureError {
    pub session_id: i32,
    /// Server-local time, as the view shows it.
    pub entry_time: NaiveDateTime,
    pub number: i32,
    pub severity: i32,
    pub message: String,
}

/// A failure waiting for the database's next scan.
#[derive(Debug, Clone)]
pub struct PendingFailure {
    pub number: i32,
    pub message: String,
}

pub fn register(r: &mut ProcedureRegistry) {
    r.register("sp_cdc_fail_next_scan", sp_cdc_fail_next_scan);
}

/// When a failure is pending, runs the failed session instead of a scan:
/// true when it did (the caller reads nothing this time).
pub fn fail_pending_scan(db: &mut Database, now_utc: NaiveDateTime, offset: i32) -> bool {
    let Some(failure) = db.cdc.pending_failure.take() else {
        return false;
    };
    let now = local(now_utc, offset);
    db.cdc.next_session_id += 1;
    let session_id = db.cdc.next_session_id;
    db.cdc.errors.push(CaptureError {
        session_id,
        entry_time: now,
        number: failure.number,
        severity: 16,
        message: failure.message,
    });
    if db.cdc.errors.len() > KEPT_ERRORS {
        db.cdc.errors.remove(0);
    }
    db.cdc.aggregate.failed_sessions_count += 1;
    db.cdc.aggregate.error_count += 1;
    db.cdc.sessions.push_back(ScanSession {
        session_id,
        start_time: Some(now),
        end_time: Some(now),
        error_count: 1,
        ..ScanSession::default()
    });
    while db.cdc.sessions.len() > KEPT_SESSIONS {
        db.cdc.sessions.pop_front();
    }
    true
}

/// Rows of sys.dm_cdc_errors, oldest first.
pub fn rows(db: &Database) -> Vec<Vec<Value>> {
    db.cdc
        .errors
        .iter()
        .map(|e| {
            vec![
                Value::Int(e.session_id),
                Value::Int(1),
                Value::DateTime(e.entry_time),
                Value::Int(e.number),
                Value::Int(e.severity),
                Value::Int(1),
                Value::String(e.message.clone()),
                Value::Null,
                Value::Null,
                Value::Null,
            ]
        })
        .collect()
}

/// sandbox.sp_cdc_fail_next_scan: sandbox only.
fn sp_cdc_fail_next_scan(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind(
        "sp_cdc_fail_next_scan",
        &["@error_number", "@message"],
        params,
    )?;
    let number = a.int("@error_number").unwrap_or(22859);
    let number = i32::try_from(number).map_err(|_| {
        SqlError::new(
            50000,
            "sandbox.sp_cdc_fail_next_scan: @error_number is out of range.",
        )
    })?;
    let message = a.text("@message").unwrap_or_else(|| {
        "Log Scan process failed in processing log records. Refer to previous errors in the \
         current session to identify the cause and correct any associated problems."
            .to_string()
    });
    s.with_write(cancel, |w| {
        current_mut(w)?.cdc.pending_failure = Some(PendingFailure { number, message });
        Ok(())
    })?;
    Ok(ProcResult::default())
}
