//! What SQL Server Agent tells about the CDC jobs in msdb: msdb.dbo.sysjobs
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/dbo-sysjobs-transact-sql>)
//! and msdb.dbo.sysjobactivity
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/dbo-sysjobactivity-transact-sql>),
//! restricted to the columns a monitor reads: a job runs while its
//! activity row has a start and no stop. The capture job is continuous,
//! so it runs from sys.sp_cdc_start_job (or its creation) until
//! sys.sp_cdc_stop_job; the cleanup job runs only while it cleans, which
//! the sandbox does at once, so its row always has both dates.

use chrono::NaiveDateTime;

use super::capture::local;
use crate::sql::catalog::{Database, same_name};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::executor::context::Ctx;
use crate::sql::request::Column;
use crate::sql::types::{DataType, Length, Value};
use crate::sql::views::{DATETIME, INT, SYSNAME, ViewDef, col};

/// The Agent session the sandbox's jobs run in (one per server start).
const AGENT_SESSION: i32 = 1;

pub fn views() -> Vec<ViewDef> {
    vec![
        ViewDef {
            schema: "dbo",
            name: "sysjobs",
            object_id: -618,
            columns: jobs_cols,
            rows: jobs_rows,
        },
        ViewDef {
            schema: "dbo",
            name: "sysjobactivity",
            object_id: -619,
            columns: activity_cols,
            rows: activity_rows,
        },
    ]
}

/// One job of one CDC database: its id, name, and when it started and
/// stopped (server-local).
struct AgentJob {
    id: uuid::Uuid,
    name: String,
    started: Option<NaiveDateTime>,
    stopped: Option<NaiveDateTime>,
}

fn agent_jobs(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<AgentJob>> {
    if !same_name(&db.name, "msdb") {
        return Err(SqlError::invalid_object("dbo.sysjobs"));
    }
    let offset = ctx.shared.clock.offset().local_minus_utc();
    let at = |t: Option<NaiveDateTime>| t.map(|t| local(t, offset));
    let mut jobs = Vec::new();
    for d in ctx.state.databases.values() {
        if let Some(j) = &d.cdc.capture_job {
            jobs.push(AgentJob {
                id: j.job_id,
                name: format!("cdc.{}_capture", d.name),
                started: at(j.started_at),
                stopped: at(j.stopped_at),
            });
        }
        if let Some(j) = &d.cdc.cleanup_job {
            jobs.push(AgentJob {
                id: j.job_id,
                name: format!("cdc.{}_cleanup", d.name),
                started: None,
                stopped: None,
            });
        }
    }
    Ok(jobs)
}

fn jobs_cols() -> Vec<Column> {
    vec![
        col("job_id", DataType::UniqueIdentifier, false),
        col("name", SYSNAME, false),
        col("enabled", DataType::TinyInt, false),
        col("description", DataType::NVarChar(Length::Fixed(512)), true),
    ]
}

fn jobs_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(agent_jobs(ctx, db)?
        .into_iter()
        .map(|j| {
            vec![
                Value::Guid(j.id),
                Value::String(j.name),
                Value::TinyInt(1),
                Value::String("CDC job".into()),
            ]
        })
        .collect())
}

fn activity_cols() -> Vec<Column> {
    vec![
        col("session_id", INT, false),
        col("job_id", DataType::UniqueIdentifier, false),
        col("run_requested_date", DATETIME, true),
        col("start_execution_date", DATETIME, true),
        col("stop_execution_date", DATETIME, true),
    ]
}

fn activity_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let date = |t: Option<NaiveDateTime>| t.map_or(Value::Null, Value::DateTime);
    Ok(agent_jobs(ctx, db)?
        .into_iter()
        .map(|j| {
            vec![
                Value::Int(AGENT_SESSION),
                Value::Guid(j.id),
                date(j.started),
                date(j.started),
                date(j.stopped),
            ]
        })
        .collect())
}
