//! The capture and cleanup jobs and the procedures that manage them:
//! sys.sp_cdc_help_jobs, sys.sp_cdc_change_job
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-change-job-transact-sql>),
//! sys.sp_cdc_start_job / sys.sp_cdc_stop_job, sys.sp_cdc_scan
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-scan-transact-sql>),
//! sys.sp_cdc_cleanup_change_table, and the sandbox-only
//! `sandbox.sp_advance_clock @seconds = N` (not a SQL Server procedure:
//! it moves the sandbox's server clock and runs the jobs due meanwhile).

use chrono::NaiveDateTime;
use uuid::Uuid;

use super::capture::{self, ScanLimits, local};
use super::enable::{not_enabled, require_db_owner};
use super::params::Args;
use super::{CaptureJob, CleanupJob, Lsn, cleanup, scheduler};
use crate::sql::catalog::Database;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::executor::context::WriteCtx;
use crate::sql::procedures::{ProcResult, ProcedureRegistry};
use crate::sql::request::{CancelToken, Column, Output, Param};
use crate::sql::session::Session;
use crate::sql::types::{DataType, Length, Value};

pub fn register(r: &mut ProcedureRegistry) {
    r.register("sp_cdc_help_jobs", sp_cdc_help_jobs);
    r.register("sp_cdc_change_job", sp_cdc_change_job);
    r.register("sp_cdc_start_job", sp_cdc_start_job);
    r.register("sp_cdc_stop_job", sp_cdc_stop_job);
    r.register("sp_cdc_scan", sp_cdc_scan);
    r.register("sp_cdc_cleanup_change_table", sp_cdc_cleanup_change_table);
    r.register("sp_advance_clock", sp_advance_clock);
}

/// Creates the capture and cleanup jobs with SQL Server's defaults when
/// the database has none (the first sp_cdc_enable_table); true if created.
pub fn ensure_jobs(db: &mut Database, now: NaiveDateTime, offset: i32) -> bool {
    if db.cdc.capture_job.is_some() {
        return false;
    }
    db.cdc.capture_job = Some(CaptureJob {
        job_id: Uuid::new_v4(),
        maxtrans: 500,
        maxscans: 10,
        continuous: true,
        pollinginterval: 5,
        running: true,
        next_run: now,
        started_at: Some(now),
        stopped_at: None,
    });
    db.cdc.cleanup_job = Some(CleanupJob {
        job_id: Uuid::new_v4(),
        retention: 4320,
        threshold: 5000,
        running: true,
        next_run: scheduler::next_cleanup(now, offset),
    });
    true
}

pub(super) fn current_mut<'a>(w: &'a mut WriteCtx<'_>) -> SqlResult<&'a mut Database> {
    let id = w.info.db_id;
    {
        let ctx = w.read();
        let db = ctx.current_db()?;
        require_db_owner(&ctx, db)?;
        if !db.is_cdc_enabled {
            return Err(not_enabled(db));
        }
    }
    w.state
        .database_by_id_mut(id)
        .ok_or_else(|| SqlError::new(911, "The current database no longer exists."))
}

/// 22991-style error for a job that does not exist yet.
fn no_job(kind: &str, db: &Database) -> SqlError {
    SqlError::new(
        22991,
        format!(
            "The value specified for the parameter @job_type is not valid or the {kind} job does not exist for database '{}'.",
            db.name
        ),
    )
}

fn job_type(a: &Args<'_>) -> SqlResult<String> {
    let t = a
        .text("@job_type")
        .unwrap_or_else(|| "capture".into())
        .to_lowercase();
    if t == "capture" || t == "cleanup" {
        Ok(t)
    } else {
        Err(SqlError::new(
            22992,
            format!(
                "The specified @job_type, {t}, is not a valid job type. Valid job types are 'capture' and 'cleanup'."
            ),
        ))
    }
}

fn sp_cdc_help_jobs(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    Args::bind("sp_cdc_help_jobs", &[], params)?;
    let rows = s.with_read(cancel, |ctx| {
        let db = ctx.current_db()?;
        require_db_owner(ctx, db)?;
        if !db.is_cdc_enabled {
            return Err(not_enabled(db));
        }
        Ok(job_rows(db, false))
    })?;
    out.push(Output::ResultSet {
        columns: job_columns(false),
        rows,
    });
    Ok(ProcResult::default())
}

/// Columns of sp_cdc_help_jobs (or, with `msdb`, of msdb.dbo.cdc_jobs).
pub fn job_columns(msdb: bool) -> Vec<Column> {
    let c = |n: &str, ty: DataType| Column::new(n, ty, true);
    let mut cols = Vec::new();
    if msdb {
        cols.push(c("database_id", DataType::Int));
    }
    cols.push(c("job_id", DataType::UniqueIdentifier));
    cols.push(c("job_type", DataType::NVarChar(Length::Fixed(20))));
    if !msdb {
        cols.push(c("job_name", DataType::SYSNAME));
    }
    for (n, ty) in [
        ("maxtrans", DataType::Int),
        ("maxscans", DataType::Int),
        ("continuous", DataType::Bit),
        ("pollinginterval", DataType::BigInt),
        ("retention", DataType::BigInt),
        ("threshold", DataType::BigInt),
    ] {
        cols.push(c(n, ty));
    }
    cols
}

/// Rows matching [`job_columns`].
pub fn job_rows(db: &Database, msdb: bool) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    let head = |id: Uuid, kind: &str| {
        let mut r = Vec::new();
        if msdb {
            r.push(Value::Int(db.id));
        }
        r.push(Value::Guid(id));
        r.push(Value::String(kind.into()));
        if !msdb {
            r.push(Value::String(format!("cdc.{}_{kind}", db.name)));
        }
        r
    };
    if let Some(j) = &db.cdc.capture_job {
        let mut r = head(j.job_id, "capture");
        r.extend([
            Value::Int(j.maxtrans),
            Value::Int(j.maxscans),
            Value::Bit(j.continuous),
            Value::BigInt(j.pollinginterval),
            Value::BigInt(0),
            Value::BigInt(0),
        ]);
        rows.push(r);
    }
    if let Some(j) = &db.cdc.cleanup_job {
        let mut r = head(j.job_id, "cleanup");
        r.extend([
            Value::Int(0),
            Value::Int(0),
            Value::Bit(false),
            Value::BigInt(0),
            Value::BigInt(j.retention),
            Value::BigInt(j.threshold),
        ]);
        rows.push(r);
    }
    rows
}

fn positive(v: Option<i64>, name: &str) -> SqlResult<Option<i64>> {
    match v {
        Some(n) if n <= 0 => Err(SqlError::new(
            22970,
            format!("The value specified for the parameter {name} must be greater than 0."),
        )),
        other => Ok(other),
    }
}

fn sp_cdc_change_job(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind(
        "sp_cdc_change_job",
        &[
            "@job_type",
            "@maxtrans",
            "@maxscans",
            "@continuous",
            "@pollinginterval",
            "@retention",
            "@threshold",
        ],
        params,
    )?;
    let kind = job_type(&a)?;
    let maxtrans = positive(a.int("@maxtrans"), "@maxtrans")?;
    let maxscans = positive(a.int("@maxscans"), "@maxscans")?;
    let continuous = a.int("@continuous");
    let polling = a.int("@pollinginterval");
    let retention = positive(a.int("@retention"), "@retention")?;
    if retention.is_some_and(|r| r > 52_494_800) {
        return Err(SqlError::new(
            22969,
            "The value specified for the parameter @retention exceeds the maximum of 52494800 minutes (100 years).",
        ));
    }
    let threshold = positive(a.int("@threshold"), "@threshold")?;
    s.with_write(cancel, |w| {
        let db = current_mut(w)?;
        if kind == "capture" {
            let Some(j) = db.cdc.capture_job.as_mut() else {
                return Err(no_job(&kind, db));
            };
            if let Some(v) = maxtrans {
                j.maxtrans = v as i32;
            }
            if let Some(v) = maxscans {
                j.maxscans = v as i32;
            }
            match continuous {
                Some(0) => {
                    j.continuous = false;
                    j.pollinginterval = 0;
                }
                Some(_) => j.continuous = true,
                None if polling.is_some_and(|p| p > 0) => j.continuous = true,
                None => {}
            }
            if let Some(p) = polling
                && j.continuous
            {
                j.pollinginterval = p.max(0);
            }
        } else {
            let Some(j) = db.cdc.cleanup_job.as_mut() else {
                return Err(no_job(&kind, db));
            };
            if let Some(v) = retention {
                j.retention = v;
            }
            if let Some(v) = threshold {
                j.threshold = v;
            }
        }
        Ok(())
    })?;
    Ok(ProcResult::default())
}

fn set_running(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    name: &'static str,
    running: bool,
) -> SqlResult<ProcResult> {
    let a = Args::bind(name, &["@job_type"], params)?;
    let kind = job_type(&a)?;
    s.with_write(cancel, |w| {
        let now = w.read().now_utc();
        let offset = w.shared.clock.offset().local_minus_utc();
        let db = current_mut(w)?;
        if kind == "capture" {
            let Some(j) = db.cdc.capture_job.as_mut() else {
                return Err(no_job(&kind, db));
            };
            if running && !j.running {
                j.next_run = now;
                (j.started_at, j.stopped_at) = (Some(now), None);
            }
            if !running && j.running {
                j.stopped_at = Some(now);
            }
            j.running = running;
        } else {
            let Some(j) = db.cdc.cleanup_job.as_mut() else {
                return Err(no_job(&kind, db));
            };
            j.running = running;
            if running {
                // Starting the cleanup job runs it now, as Agent would.
                j.next_run = now;
            } else {
                j.next_run = scheduler::next_cleanup(now, offset);
            }
        }
        Ok(())
    })?;
    scheduler::run_due(&s.engine.shared);
    Ok(ProcResult::default())
}

fn sp_cdc_start_job(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    set_running(s, params, cancel, "sp_cdc_start_job", true)
}

fn sp_cdc_stop_job(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    set_running(s, params, cancel, "sp_cdc_stop_job", false)
}

/// One log scan session now. Like SQL Server, refused while the capture
/// job runs (its continuous scan is the active one): stop the job first.
fn sp_cdc_scan(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind(
        "sp_cdc_scan",
        &["@maxtrans", "@maxscans", "@continuous", "@pollinginterval"],
        params,
    )?;
    let limits = ScanLimits {
        maxtrans: a
            .int("@maxtrans")
            .unwrap_or(500)
            .clamp(1, i64::from(i32::MAX)) as i32,
        maxscans: a
            .int("@maxscans")
            .unwrap_or(10)
            .clamp(1, i64::from(i32::MAX)) as i32,
    };
    s.with_write(cancel, |w| {
        let now = w.read().now_utc();
        let clock = w.shared.clock.clone();
        let idle = w.shared.config.cdc_idle_interval_secs;
        let db = current_mut(w)?;
        if db.cdc.capture_job.as_ref().is_some_and(|job| job.running) {
            return Err(SqlError::new(
                22903,
                "Another connection is already running 'sp_replcmds' for Change Data Capture in the current database.",
            ));
        }
        capture::scan(db, now, clock.as_ref(), limits, idle);
        Ok(())
    })?;
    Ok(ProcResult::default())
}

fn sp_cdc_cleanup_change_table(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind(
        "sp_cdc_cleanup_change_table",
        &["@capture_instance", "@low_water_mark", "@threshold"],
        params,
    )?;
    a.required("@capture_instance")?;
    let name = a.text("@capture_instance").unwrap_or_default();
    let lwm = match a.get("@low_water_mark") {
        Some(Value::Binary(b)) => Some(Lsn::from_bytes(b).ok_or_else(|| {
            SqlError::new(
                22964,
                "The @low_water_mark parameter must be a binary(10) LSN.",
            )
        })?),
        _ => None,
    };
    s.with_write(cancel, |w| {
        let now = w.read().now_utc();
        let offset = w.shared.clock.offset().local_minus_utc();
        let db = current_mut(w)?;
        let Some(ci) = db.cdc.instance(&name) else {
            return Err(SqlError::new(
                22958,
                format!("Could not locate capture instance '{name}' in the current database."),
            ));
        };
        let start = ci.start_lsn;
        let max = db.cdc.max_lsn.unwrap_or(start);
        let mark = match lwm {
            Some(l) => l,
            None => {
                let retention = db.cdc.cleanup_job.as_ref().map_or(4320, |j| j.retention);
                cleanup::retention_mark(db, local(now, offset), retention).unwrap_or(start)
            }
        };
        if mark < start || mark > max.increment() {
            return Err(SqlError::new(
                22957,
                format!(
                    "LSN {mark}, specified as the new low endpoint for the change table associated with capture instance '{name}', is not within the Change Data Capture timeline [{start}, {max}]."
                ),
            ));
        }
        cleanup::cleanup_instance(db, &name, mark);
        Ok(())
    })?;
    Ok(ProcResult::default())
}

/// sandbox.sp_advance_clock @seconds = N: sandbox only.
fn sp_advance_clock(
    s: &mut Session,
    params: &[Param],
    _: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind("sp_advance_clock", &["@seconds"], params)?;
    let seconds = match a.required("@seconds")? {
        Value::Float(f) => *f,
        Value::Real(f) => f64::from(*f),
        Value::Decimal(d) => d.value as f64 / 10f64.powi(i32::from(d.scale)),
        _ => a.int("@seconds").unwrap_or(0) as f64,
    };
    if seconds < 0.0 || !seconds.is_finite() {
        return Err(SqlError::new(
            50000,
            "sandbox.sp_advance_clock: @seconds must be zero or positive (the clock never goes back).",
        ));
    }
    if !scheduler::advance(&s.engine.shared, seconds) {
        return Err(SqlError::new(
            50000,
            "sandbox.sp_advance_clock: this engine runs on the machine's clock, which cannot be moved.",
        ));
    }
    Ok(ProcResult::default())
}
