//! SQL Server Change Data Capture, as Microsoft documents it
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/about-change-data-capture-sql-server>).
//!
//! The engine's transaction log (`transaction::LogRecord`, with LSNs
//! assigned at commit) is the log CDC reads. A capture job per database
//! (driven by the server clock: `scheduler`) turns committed records into
//! rows of real `cdc.<capture_instance>_CT` tables and `cdc.lsn_time_mapping`
//! entries, asynchronously; a cleanup job trims them after the retention.
//!
//! Layout: `lsn` (the LSN type), `enable` (sp_cdc_enable/disable_*),
//! `capture` (the log scan), `cleanup`, `jobs` (job procedures and
//! sandbox.sp_advance_clock), `scheduler` (what falls due when),
//! `functions` (sys.fn_cdc_*), `changes` (the change-table TVFs), `views`
//! (cdc.* metadata tables, msdb.dbo.cdc_jobs, sys.dm_cdc_*).

use std::collections::VecDeque;

use chrono::NaiveDateTime;
use uuid::Uuid;

use super::types::DataType;

pub mod agent;
pub mod capture;
pub mod changes;
pub mod cleanup;
pub mod enable;
pub mod errors;
pub mod functions;
mod help;
pub mod jobs;
pub mod lsn;
pub(crate) mod params;
mod rename;
pub mod scheduler;
pub mod views;

#[cfg(test)]
mod changed_tables_tests;
#[cfg(test)]
mod tests;

pub use lsn::Lsn;

/// One captured column of a capture instance (cdc.captured_columns).
#[derive(Debug, Clone)]
pub struct CapturedColumn {
    pub name: String,
    /// The source column's column_id.
    pub column_id: i32,
    pub ty: DataType,
    /// 1-based position in the change table's captured columns.
    pub ordinal: i32,
    /// The source column's COLLATE, copied to the change table's column.
    pub collation: Option<crate::sql::collation::Collation>,
}

/// A capture instance (cdc.change_tables), documented at
/// <https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-change-tables-transact-sql>.
#[derive(Debug, Clone)]
pub struct CaptureInstance {
    pub name: String,
    pub source_object_id: i32,
    /// Object id of the change table `cdc.<name>_CT` (a real table).
    pub object_id: i32,
    pub role_name: Option<String>,
    pub supports_net_changes: bool,
    pub index_name: Option<String>,
    /// The unique index's columns: (name, source column_id).
    pub index_columns: Vec<(String, i32)>,
    pub captured: Vec<CapturedColumn>,
    pub filegroup_name: Option<String>,
    /// Low endpoint of the validity interval; cleanup moves it.
    pub start_lsn: Lsn,
    pub create_date: NaiveDateTime,
}

impl CaptureInstance {
    /// Position of a captured column in the change table's row.
    pub fn value_position(&self, ordinal: i32) -> usize {
        4 + ordinal as usize
    }
}

/// One row of cdc.lsn_time_mapping
/// (<https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-lsn-time-mapping-transact-sql>).
#[derive(Debug, Clone)]
pub struct LsnTime {
    pub start_lsn: Lsn,
    /// Server-local times, as SQL Server stores them.
    pub tran_begin_time: NaiveDateTime,
    pub tran_end_time: NaiveDateTime,
    /// 0 for the idle entries the capture job writes on a quiet log.
    pub tran_id: u64,
    pub tran_begin_lsn: Lsn,
}

/// One row of cdc.ddl_history
/// (<https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-ddl-history-transact-sql>).
#[derive(Debug, Clone)]
pub struct DdlHistory {
    pub source_object_id: i32,
    pub object_id: i32,
    pub required_column_update: bool,
    pub ddl_command: String,
    pub ddl_lsn: Lsn,
    pub ddl_time: NaiveDateTime,
}

/// The capture job's settings (msdb.dbo.cdc_jobs), defaults from
/// <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-add-job-transact-sql>.
#[derive(Debug, Clone)]
pub struct CaptureJob {
    pub job_id: Uuid,
    pub maxtrans: i32,
    pub maxscans: i32,
    pub continuous: bool,
    pub pollinginterval: i64,
    /// Started (sp_cdc_start_job) or stopped (sp_cdc_stop_job).
    pub running: bool,
    /// Next scan, server UTC.
    pub next_run: NaiveDateTime,
    /// When it last started and stopped, server UTC (msdb.dbo.sysjobactivity).
    pub started_at: Option<NaiveDateTime>,
    pub stopped_at: Option<NaiveDateTime>,
}

/// The cleanup job's settings: retention in minutes, delete threshold.
#[derive(Debug, Clone)]
pub struct CleanupJob {
    pub job_id: Uuid,
    pub retention: i64,
    pub threshold: i64,
    pub running: bool,
    /// Next scheduled run (daily at 02:00 server time), server UTC.
    pub next_run: NaiveDateTime,
}

/// One log scan session (sys.dm_cdc_log_scan_sessions).
#[derive(Debug, Clone, Default)]
pub struct ScanSession {
    pub session_id: i32,
    pub start_time: Option<NaiveDateTime>,
    pub end_time: Option<NaiveDateTime>,
    pub duration: i64,
    pub error_count: i32,
    pub start_lsn: Option<Lsn>,
    pub end_lsn: Option<Lsn>,
    pub tran_count: i64,
    pub last_commit_lsn: Option<Lsn>,
    pub last_commit_time: Option<NaiveDateTime>,
    pub log_record_count: i64,
    pub schema_change_count: i32,
    pub command_count: i64,
    pub first_begin_cdc_lsn: Option<Lsn>,
    pub last_commit_cdc_lsn: Option<Lsn>,
    pub last_commit_cdc_time: Option<NaiveDateTime>,
    pub latency: i32,
    pub empty_scan_count: i32,
    pub failed_sessions_count: i32,
}

/// How many recent sessions the DMV keeps besides the aggregate.
pub const KEPT_SESSIONS: usize = 32;

/// CDC state of one database.
#[derive(Debug, Clone, Default)]
pub struct CdcDatabase {
    pub instances: Vec<CaptureInstance>,
    pub lsn_time_mapping: Vec<LsnTime>,
    pub ddl_history: Vec<DdlHistory>,
    /// The log sequence the next scan starts at.
    pub next_sequence: u64,
    /// sys.fn_cdc_get_max_lsn(): NULL until a scan has run.
    pub max_lsn: Option<Lsn>,
    pub capture_job: Option<CaptureJob>,
    pub cleanup_job: Option<CleanupJob>,
    /// Server UTC of the last lsn_time_mapping entry (for idle entries).
    pub last_mapping_time: Option<NaiveDateTime>,
    /// Aggregate row (session 0) and the recent sessions.
    pub aggregate: ScanSession,
    pub sessions: VecDeque<ScanSession>,
    pub next_session_id: i32,
    /// sys.dm_cdc_errors, and a failure the next scan meets.
    pub errors: Vec<errors::CaptureError>,
    pub pending_failure: Option<errors::PendingFailure>,
}

impl CdcDatabase {
    pub fn instance(&self, name: &str) -> Option<&CaptureInstance> {
        self.instances
            .iter()
            .find(|i| super::catalog::same_name(&i.name, name))
    }

    /// Capture instances of a source table.
    pub fn instances_of(&self, source: i32) -> impl Iterator<Item = &CaptureInstance> {
        self.instances
            .iter()
            .filter(move |i| i.source_object_id == source)
    }
}

/// Registers the CDC procedures, views and table-valued functions.
pub fn register(
    procs: &mut super::procedures::ProcedureRegistry,
    views: &mut super::views::ViewRegistry,
    tvfs: &mut super::views::TableFunctionRegistry,
) {
    enable::register(procs);
    jobs::register(procs);
    rename::register(procs);
    errors::register(procs);
    for v in views::cdc_views().into_iter().chain(agent::views()) {
        views.register(v);
    }
    tvfs.register(changes::resolve);
}
