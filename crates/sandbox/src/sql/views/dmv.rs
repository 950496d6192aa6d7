//! Dynamic management views about connections and sessions.
//!
//! Columns follow learn.microsoft.com:
//! <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-connections-transact-sql>,
//! <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-sessions-transact-sql>
//! and
//! <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-session-wait-stats-transact-sql>.
//! `sys.dm_os_performance_counters` holds two cumulative counters of
//! <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-performance-counters-transact-sql>:
//! the requests clients sent and the logins admitted, each counted once
//! when the TDS server hands it to the engine.
//! `sys.dm_exec_connections` needs VIEW SERVER STATE (error 300 without
//! it). `sys.dm_exec_sessions` shows everyone their own session, and every
//! session to a login with VIEW SERVER STATE (SQL Server 2019) or, from
//! SQL Server 2022, VIEW SERVER PERFORMANCE STATE, which VIEW SERVER STATE
//! implies. `sys.dm_exec_session_wait_stats` follows the same rule up to
//! SQL Server 2019; from 2022 its page lists VIEW SERVER PERFORMANCE STATE
//! as required, so without it the read fails with error 300.

use super::{DATETIME, INT, SMALLINT, ViewDef, col, i, nvarchar, s};
use crate::sql::catalog::Database;
use crate::sql::engine::SqlVersion;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::executor::context::Ctx;
use crate::sql::request::Column;
use crate::sql::types::{DataType, Length, Value};

/// The one wait type the sandbox measures: the server waiting for a
/// client to read result packets.
const ASYNC_NETWORK_IO: &str = "ASYNC_NETWORK_IO";

pub fn dmv_views() -> Vec<ViewDef> {
    vec![
        ViewDef {
            schema: "sys",
            name: "dm_exec_connections",
            object_id: -500,
            columns: connections_cols,
            rows: connections_rows,
        },
        ViewDef {
            schema: "sys",
            name: "dm_exec_sessions",
            object_id: -501,
            columns: sessions_cols,
            rows: sessions_rows,
        },
        ViewDef {
            schema: "sys",
            name: "dm_exec_session_wait_stats",
            object_id: -502,
            columns: session_wait_stats_cols,
            rows: session_wait_stats_rows,
        },
        ViewDef {
            schema: "sys",
            name: "dm_os_performance_counters",
            object_id: -503,
            columns: performance_counters_cols,
            rows: performance_counters_rows,
        },
    ]
}

/// Whether the caller sees every session in the session-scoped DMVs, or
/// only its own. The permission depends on the release the sandbox
/// emulates (`EngineConfig::sql_version`).
pub fn sees_all_sessions(ctx: &Ctx<'_>) -> bool {
    if ctx.info.is_sysadmin {
        return true;
    }
    let Some(login) = ctx.state.security.login(&ctx.info.login) else {
        return false;
    };
    login.has_server_permission("VIEW SERVER STATE")
        || (ctx.shared.config.sql_version == SqlVersion::Sql2022
            && login.has_server_permission("VIEW SERVER PERFORMANCE STATE"))
}

/// SQL Server's error 300 for a DMV read without the server permission.
pub fn require_server_state(ctx: &Ctx<'_>) -> SqlResult<()> {
    let allowed = ctx.info.is_sysadmin
        || ctx
            .state
            .security
            .login(&ctx.info.login)
            .is_some_and(|l| l.has_server_permission("VIEW SERVER STATE"));
    if allowed {
        Ok(())
    } else {
        Err(SqlError::new(
            300,
            "VIEW SERVER STATE permission was denied on object 'server', database 'master'.",
        )
        .with_class(14))
    }
}

fn varchar(n: u16) -> DataType {
    DataType::VarChar(Length::Fixed(n))
}

fn connections_cols() -> Vec<Column> {
    vec![
        col("session_id", INT, true),
        col("most_recent_session_id", INT, true),
        col("connect_time", DATETIME, false),
        col("net_transport", nvarchar(40), false),
        col("protocol_type", nvarchar(40), true),
        col("protocol_version", INT, true),
        col("encrypt_option", nvarchar(40), false),
        col("auth_scheme", nvarchar(40), false),
        col("net_packet_size", INT, true),
        col("client_net_address", varchar(48), true),
        col("client_tcp_port", INT, true),
    ]
}

fn connections_rows(ctx: &Ctx<'_>, _db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    require_server_state(ctx)?;
    Ok(ctx
        .shared
        .connections
        .snapshot()
        .into_iter()
        .map(|c| {
            vec![
                i(c.session_id.into()),
                i(c.session_id.into()),
                Value::DateTime(c.connect_time),
                s("TCP"),
                s("TSQL"),
                // TDS 7.4, as sys.dm_exec_connections reports it.
                i(0x7400_0004),
                s(if c.encrypted { "TRUE" } else { "FALSE" }),
                s("SQL"),
                Value::Null,
                c.client_addr
                    .map(|a| s(&a.ip().to_string()))
                    .unwrap_or(Value::Null),
                c.client_addr
                    .map(|a| i(a.port().into()))
                    .unwrap_or(Value::Null),
            ]
        })
        .collect())
}

fn sessions_cols() -> Vec<Column> {
    vec![
        col("session_id", SMALLINT, false),
        col("login_time", DATETIME, false),
        col("host_name", nvarchar(128), true),
        col("program_name", nvarchar(128), true),
        col("login_name", nvarchar(128), false),
        col("status", nvarchar(30), false),
        col("is_user_process", super::BIT, false),
        col("database_id", SMALLINT, false),
    ]
}

fn sessions_rows(ctx: &Ctx<'_>, _db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let all = sees_all_sessions(ctx);
    Ok(ctx
        .shared
        .connections
        .snapshot()
        .into_iter()
        .filter(|c| all || c.session_id == ctx.info.spid)
        .map(|c| {
            let status = if c.session_id == ctx.info.spid {
                "running"
            } else {
                "sleeping"
            };
            vec![
                Value::SmallInt(c.session_id as i16),
                Value::DateTime(c.connect_time),
                s(&c.host_name),
                s(&c.program_name),
                s(&c.login),
                s(status),
                Value::Bit(true),
                Value::SmallInt(c.database_id as i16),
            ]
        })
        .collect())
}

fn session_wait_stats_cols() -> Vec<Column> {
    vec![
        col("session_id", SMALLINT, false),
        col("wait_type", nvarchar(60), false),
        col("waiting_tasks_count", DataType::BigInt, false),
        col("wait_time_ms", DataType::BigInt, false),
        col("max_wait_time_ms", DataType::BigInt, false),
        col("signal_wait_time_ms", DataType::BigInt, false),
    ]
}

/// One ASYNC_NETWORK_IO row per session that has waited on its client.
/// Signal wait is zero: the sandbox's threads run as soon as the socket
/// takes data.
fn session_wait_stats_rows(ctx: &Ctx<'_>, _db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let all = sees_all_sessions(ctx);
    if !all && ctx.shared.config.sql_version == SqlVersion::Sql2022 {
        return Err(SqlError::new(
            300,
            "VIEW SERVER PERFORMANCE STATE permission was denied on object 'server', database 'master'.",
        )
        .with_class(14));
    }
    let ms =
        |d: std::time::Duration| Value::BigInt(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Ok(ctx
        .shared
        .connections
        .network_waits()
        .into_iter()
        .filter(|(id, _)| all || *id == ctx.info.spid)
        .map(|(id, w)| {
            vec![
                Value::SmallInt(id as i16),
                s(ASYNC_NETWORK_IO),
                Value::BigInt(i64::try_from(w.waiting_tasks_count).unwrap_or(i64::MAX)),
                ms(w.wait_time),
                ms(w.max_wait_time),
                Value::BigInt(0),
            ]
        })
        .collect())
}

/// SQL Server's type for a cumulative counter (PERF_COUNTER_BULK_COUNT):
/// the value only grows; a rate is the difference of two reads.
const PERF_COUNTER_BULK_COUNT: i32 = 272_696_576;

fn performance_counters_cols() -> Vec<Column> {
    vec![
        col("object_name", nvarchar(128), false),
        col("counter_name", nvarchar(128), false),
        col("instance_name", nvarchar(128), true),
        col("cntr_value", DataType::BigInt, false),
        col("cntr_type", INT, false),
    ]
}

/// `Batch Requests/sec` (every request a client sent: SQL batches, RPCs,
/// transaction manager requests) and `Logins/sec`, since the server
/// started. Not padded as SQL Server's nchar columns are. Needs VIEW
/// SERVER STATE, as on SQL Server.
fn performance_counters_rows(ctx: &Ctx<'_>, _db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    require_server_state(ctx)?;
    let (requests, logins) = ctx.shared.connections.served();
    let counter = |object: &str, name: &str, value: u64| {
        vec![
            s(object),
            s(name),
            s(""),
            Value::BigInt(i64::try_from(value).unwrap_or(i64::MAX)),
            i(PERF_COUNTER_BULK_COUNT),
        ]
    };
    Ok(vec![
        counter("SQLServer:SQL Statistics", "Batch Requests/sec", requests),
        counter("SQLServer:General Statistics", "Logins/sec", logins),
    ])
}
