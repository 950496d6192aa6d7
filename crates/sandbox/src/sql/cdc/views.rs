//! The CDC metadata tables, computed from the database's CDC state each
//! time they are read: cdc.change_tables, cdc.captured_columns
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-captured-columns-transact-sql>),
//! cdc.index_columns, cdc.ddl_history, cdc.lsn_time_mapping,
//! msdb.dbo.cdc_jobs
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/dbo-cdc-jobs-transact-sql>),
//! and the DMVs sys.dm_cdc_log_scan_sessions
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/change-data-capture-sys-dm-cdc-log-scan-sessions>)
//! and sys.dm_cdc_errors
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/change-data-capture-sys-dm-cdc-errors>).
//! Outside a CDC-enabled database the cdc.* names do not exist (208).

use chrono::NaiveDateTime;

use super::{Lsn, ScanSession, jobs};
use crate::sql::catalog::{Database, same_name};
use crate::sql::engine::SqlVersion;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::executor::context::Ctx;
use crate::sql::request::Column;
use crate::sql::types::{DataType, Length, Value};
use crate::sql::views::{BIT, DATETIME, INT, SYSNAME, ViewDef, col, nvarchar};

type Rows = SqlResult<Vec<Vec<Value>>>;

const BIN10: DataType = DataType::Binary(10);
const BIGINT: DataType = DataType::BigInt;

pub fn cdc_views() -> Vec<ViewDef> {
    let v = |schema, name, object_id, columns, rows| ViewDef {
        schema,
        name,
        object_id,
        columns,
        rows,
    };
    vec![
        v(
            "cdc",
            "change_tables",
            -610,
            change_tables_cols as fn() -> Vec<Column>,
            change_tables_rows as fn(&Ctx<'_>, &Database) -> Rows,
        ),
        v(
            "cdc",
            "captured_columns",
            -611,
            captured_cols,
            captured_rows,
        ),
        v("cdc", "index_columns", -612, index_cols, index_rows),
        v("cdc", "ddl_history", -613, ddl_cols, ddl_rows),
        v("cdc", "lsn_time_mapping", -614, mapping_cols, mapping_rows),
        v("dbo", "cdc_jobs", -615, jobs_cols, jobs_rows),
        v(
            "sys",
            "dm_cdc_log_scan_sessions",
            -616,
            sessions_cols,
            sessions_rows,
        ),
        v("sys", "dm_cdc_errors", -617, errors_cols, errors_rows),
    ]
}

fn bin(l: Option<Lsn>) -> Value {
    l.map(|l| Value::Binary(l.to_bytes()))
        .unwrap_or(Value::Null)
}

fn text(v: &str) -> Value {
    Value::String(v.to_string())
}

fn opt(v: Option<&str>) -> Value {
    v.map(text).unwrap_or(Value::Null)
}

fn dt(t: Option<NaiveDateTime>) -> Value {
    t.map(Value::DateTime).unwrap_or(Value::Null)
}

fn enabled(db: &Database, name: &str) -> SqlResult<()> {
    if db.is_cdc_enabled {
        Ok(())
    } else {
        Err(SqlError::invalid_object(&format!("cdc.{name}")))
    }
}

fn change_tables_cols() -> Vec<Column> {
    vec![
        col("object_id", INT, false),
        col("version", INT, true),
        col("source_object_id", INT, true),
        col("capture_instance", SYSNAME, false),
        col("start_lsn", BIN10, true),
        col("end_lsn", BIN10, true),
        col("supports_net_changes", BIT, true),
        col("has_drop_pending", BIT, true),
        col("role_name", SYSNAME, true),
        col("index_name", SYSNAME, true),
        col("filegroup_name", SYSNAME, true),
        col("create_date", DATETIME, true),
        col("partition_switch", BIT, false),
    ]
}

fn change_tables_rows(_: &Ctx<'_>, db: &Database) -> Rows {
    enabled(db, "change_tables")?;
    Ok(db
        .cdc
        .instances
        .iter()
        .map(|ci| {
            vec![
                Value::Int(ci.object_id),
                Value::Int(0),
                Value::Int(ci.source_object_id),
                text(&ci.name),
                bin(Some(ci.start_lsn)),
                Value::Null,
                Value::Bit(ci.supports_net_changes),
                Value::Null,
                opt(ci.role_name.as_deref()),
                opt(ci.index_name.as_deref()),
                opt(ci.filegroup_name.as_deref()),
                Value::DateTime(ci.create_date),
                Value::Bit(false),
            ]
        })
        .collect())
}

fn captured_cols() -> Vec<Column> {
    vec![
        col("object_id", INT, false),
        col("column_name", SYSNAME, false),
        col("column_id", INT, true),
        col("column_type", SYSNAME, false),
        col("column_ordinal", INT, false),
        col("is_computed", BIT, true),
    ]
}

fn captured_rows(_: &Ctx<'_>, db: &Database) -> Rows {
    enabled(db, "captured_columns")?;
    Ok(db
        .cdc
        .instances
        .iter()
        .flat_map(|ci| {
            ci.captured.iter().map(|c| {
                vec![
                    Value::Int(ci.object_id),
                    text(&c.name),
                    Value::Int(c.column_id),
                    text(c.ty.name()),
                    Value::Int(c.ordinal),
                    Value::Bit(false),
                ]
            })
        })
        .collect())
}

fn index_cols() -> Vec<Column> {
    vec![
        col("object_id", INT, false),
        col("column_name", SYSNAME, false),
        col("index_ordinal", DataType::TinyInt, false),
        col("column_id", INT, false),
    ]
}

fn index_rows(_: &Ctx<'_>, db: &Database) -> Rows {
    enabled(db, "index_columns")?;
    Ok(db
        .cdc
        .instances
        .iter()
        .filter(|ci| ci.supports_net_changes)
        .flat_map(|ci| {
            ci.index_columns.iter().enumerate().map(|(i, (n, id))| {
                vec![
                    Value::Int(ci.object_id),
                    text(n),
                    Value::TinyInt(i as u8 + 1),
                    Value::Int(*id),
                ]
            })
        })
        .collect())
}

fn ddl_cols() -> Vec<Column> {
    vec![
        col("source_object_id", INT, true),
        col("object_id", INT, false),
        col("required_column_update", BIT, true),
        col("ddl_command", DataType::NVarChar(Length::Max), true),
        col("ddl_lsn", BIN10, false),
        col("ddl_time", DATETIME, true),
    ]
}

fn ddl_rows(_: &Ctx<'_>, db: &Database) -> Rows {
    enabled(db, "ddl_history")?;
    Ok(db
        .cdc
        .ddl_history
        .iter()
        .map(|h| {
            vec![
                Value::Int(h.source_object_id),
                Value::Int(h.object_id),
                Value::Bit(h.required_column_update),
                text(&h.ddl_command),
                bin(Some(h.ddl_lsn)),
                Value::DateTime(h.ddl_time),
            ]
        })
        .collect())
}

fn mapping_cols() -> Vec<Column> {
    vec![
        col("start_lsn", BIN10, false),
        col("tran_begin_time", DATETIME, true),
        col("tran_end_time", DATETIME, true),
        col("tran_id", DataType::VarBinary(Length::Fixed(10)), true),
        col("tran_begin_lsn", BIN10, true),
    ]
}

fn mapping_rows(_: &Ctx<'_>, db: &Database) -> Rows {
    enabled(db, "lsn_time_mapping")?;
    Ok(db
        .cdc
        .lsn_time_mapping
        .iter()
        .map(|m| {
            let id = m.tran_id.to_be_bytes();
            vec![
                bin(Some(m.start_lsn)),
                Value::DateTime(m.tran_begin_time),
                Value::DateTime(m.tran_end_time),
                Value::Binary([[0u8, 0].as_slice(), id.as_slice()].concat()),
                bin(Some(m.tran_begin_lsn)),
            ]
        })
        .collect())
}

fn jobs_cols() -> Vec<Column> {
    jobs::job_columns(true)
}

/// msdb.dbo.cdc_jobs exists while some database has CDC jobs.
fn jobs_rows(ctx: &Ctx<'_>, db: &Database) -> Rows {
    let rows: Vec<Vec<Value>> = ctx
        .state
        .databases
        .values()
        .flat_map(|d| jobs::job_rows(d, true))
        .collect();
    if !same_name(&db.name, "msdb") || rows.is_empty() {
        return Err(SqlError::invalid_object("dbo.cdc_jobs"));
    }
    Ok(rows)
}

/// The permission the CDC DMVs need: VIEW DATABASE STATE (2019), VIEW
/// DATABASE PERFORMANCE STATE or VIEW DATABASE STATE (2022); Msg 300
/// otherwise.
fn require_database_state(ctx: &Ctx<'_>, db: &Database) -> SqlResult<()> {
    if ctx.info.is_sysadmin {
        return Ok(());
    }
    let user = ctx.user_in(db)?;
    let has = |p: &str| db.security.has_database_permission(user, p);
    let (ok, name) = match ctx.shared.config.sql_version {
        SqlVersion::Sql2019 => (has("VIEW DATABASE STATE"), "VIEW DATABASE STATE"),
        SqlVersion::Sql2022 => (
            has("VIEW DATABASE PERFORMANCE STATE") || has("VIEW DATABASE STATE"),
            "VIEW DATABASE PERFORMANCE STATE",
        ),
    };
    if ok {
        return Ok(());
    }
    Err(SqlError::new(
        300,
        format!(
            "{name} permission was denied on object '{}', database '{}'.",
            db.name, db.name
        ),
    )
    .with_class(14))
}

fn lsn23(l: Option<Lsn>) -> Value {
    l.map(|l| text(&l.dmv_text())).unwrap_or(Value::Null)
}

fn sessions_cols() -> Vec<Column> {
    let lsn = nvarchar(23);
    vec![
        col("session_id", INT, false),
        col("start_time", DATETIME, true),
        col("end_time", DATETIME, true),
        col("duration", INT, true),
        col("scan_phase", nvarchar(200), true),
        col("error_count", INT, true),
        col("start_lsn", lsn, true),
        col("current_lsn", lsn, true),
        col("end_lsn", lsn, true),
        col("tran_count", BIGINT, true),
        col("last_commit_lsn", lsn, true),
        col("last_commit_time", DATETIME, true),
        col("log_record_count", BIGINT, true),
        col("schema_change_count", INT, true),
        col("command_count", BIGINT, true),
        col("first_begin_cdc_lsn", lsn, true),
        col("last_commit_cdc_lsn", lsn, true),
        col("last_commit_cdc_time", DATETIME, true),
        col("latency", INT, true),
        col("empty_scan_count", INT, true),
        col("failed_sessions_count", INT, true),
    ]
}

fn session_row(s: &ScanSession, aggregate: bool) -> Vec<Value> {
    vec![
        Value::Int(s.session_id),
        dt(s.start_time),
        dt(s.end_time),
        Value::Int(s.duration.clamp(0, i64::from(i32::MAX)) as i32),
        text(if aggregate { "Aggregate" } else { "Done" }),
        Value::Int(s.error_count),
        lsn23(s.start_lsn),
        if aggregate {
            text("0")
        } else {
            lsn23(s.end_lsn)
        },
        lsn23(s.end_lsn),
        Value::BigInt(s.tran_count),
        lsn23(s.last_commit_lsn),
        dt(s.last_commit_time),
        Value::BigInt(s.log_record_count),
        Value::Int(s.schema_change_count),
        Value::BigInt(s.command_count),
        lsn23(s.first_begin_cdc_lsn),
        lsn23(s.last_commit_cdc_lsn),
        dt(s.last_commit_cdc_time),
        Value::Int(s.latency),
        Value::Int(s.empty_scan_count),
        Value::Int(s.failed_sessions_count),
    ]
}

fn sessions_rows(ctx: &Ctx<'_>, db: &Database) -> Rows {
    require_database_state(ctx, db)?;
    if !db.is_cdc_enabled {
        return Ok(Vec::new());
    }
    let mut rows = vec![session_row(&db.cdc.aggregate, true)];
    rows.extend(db.cdc.sessions.iter().map(|s| session_row(s, false)));
    Ok(rows)
}

fn errors_cols() -> Vec<Column> {
    let lsn = nvarchar(23);
    vec![
        col("session_id", INT, false),
        col("phase_number", INT, false),
        col("entry_time", DATETIME, false),
        col("error_number", INT, true),
        col("error_severity", INT, true),
        col("error_state", INT, true),
        col("error_message", nvarchar(1024), true),
        col("start_lsn", lsn, true),
        col("begin_lsn", lsn, true),
        col("sequence_value", lsn, true),
    ]
}

/// The errors of the recent failed scans (`errors`).
fn errors_rows(ctx: &Ctx<'_>, db: &Database) -> Rows {
    require_database_state(ctx, db)?;
    Ok(super::errors::rows(db))
}
