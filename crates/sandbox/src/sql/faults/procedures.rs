//! The sandbox-only fault procedures (sysadmin only):
//!
//! - `sandbox.sp_inject_error @number, @count = 1, @pattern = NULL,
//!   @severity = 16, @state = 1`: the next `@count` requests of other
//!   sessions whose text contains `@pattern` (case-insensitive; any request
//!   when NULL) fail with error `@number` without running.
//! - `sandbox.sp_route_logins @server, @port, @count = 1`: the next
//!   `@count` logins get LOGINACK and an ENVCHANGE routing to
//!   `@server,@port`, and the server closes the connection.
//! - `sandbox.sp_clear_injections`: forgets both kinds.

use super::{ErrorInjection, LoginRoute};
use crate::sql::cdc::params::Args;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::procedures::{ProcResult, ProcedureRegistry};
use crate::sql::request::{CancelToken, Output, Param};
use crate::sql::session::Session;
use crate::sql::types::Value;

pub fn register(r: &mut ProcedureRegistry) {
    r.register("sp_inject_error", sp_inject_error);
    r.register("sp_route_logins", sp_route_logins);
    r.register("sp_clear_injections", sp_clear_injections);
}

/// 229, as SQL Server answers EXECUTE without the permission.
fn require_sysadmin(s: &Session, procedure: &str) -> SqlResult<()> {
    if s.info.is_sysadmin {
        return Ok(());
    }
    Err(SqlError::new(
        229,
        format!(
            "The EXECUTE permission was denied on the object '{procedure}', database 'master', schema 'sandbox'."
        ),
    )
    .with_class(14)
    .with_state(5))
}

fn invalid(procedure: &str, what: &str) -> SqlError {
    SqlError::new(50000, format!("sandbox.{procedure}: {what}"))
}

/// An integer parameter within `range`, `default` when not given.
fn int_in(
    a: &Args<'_>,
    name: &str,
    default: i64,
    range: std::ops::RangeInclusive<i64>,
) -> SqlResult<i64> {
    let value = match a.get(name) {
        None | Some(Value::Null) => default,
        Some(_) => a
            .int(name)
            .ok_or_else(|| invalid(a.proc_name, &format!("{name} must be an integer")))?,
    };
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(invalid(
            a.proc_name,
            &format!(
                "{name} must be between {} and {}, got {value}",
                range.start(),
                range.end()
            ),
        ))
    }
}

fn sp_inject_error(
    s: &mut Session,
    params: &[Param],
    _: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    require_sysadmin(s, "sp_inject_error")?;
    let a = Args::bind(
        "sp_inject_error",
        &["@number", "@count", "@pattern", "@severity", "@state"],
        params,
    )?;
    a.required("@number")?;
    let number = int_in(&a, "@number", 0, 1..=i64::from(i32::MAX))?;
    let count = int_in(&a, "@count", 1, 1..=i64::from(u32::MAX))?;
    // Severities 11-25 are errors; 20 and above also end the connection.
    let severity = int_in(&a, "@severity", 16, 11..=25)?;
    let state = int_in(&a, "@state", 1, 0..=255)?;
    let pattern = match a.get("@pattern") {
        Some(Value::String(p)) => Some(p.clone()),
        None | Some(Value::Null) => None,
        Some(_) => return Err(invalid(a.proc_name, "@pattern must be text")),
    };
    s.engine.shared.faults.inject_error(ErrorInjection {
        number: number as i32,
        count: count as u32,
        pattern,
        severity: severity as u8,
        state: state as u8,
        origin: s.info.spid,
    });
    Ok(ProcResult::default())
}

fn sp_route_logins(
    s: &mut Session,
    params: &[Param],
    _: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    require_sysadmin(s, "sp_route_logins")?;
    let a = Args::bind("sp_route_logins", &["@server", "@port", "@count"], params)?;
    a.required("@server")?;
    a.required("@port")?;
    let server = a
        .text("@server")
        .filter(|server| !server.is_empty() && server.encode_utf16().count() <= 256)
        .ok_or_else(|| {
            invalid(
                a.proc_name,
                "@server must be a host name of 1 to 256 characters",
            )
        })?;
    let port = int_in(&a, "@port", 0, 1..=i64::from(u16::MAX))?;
    let count = int_in(&a, "@count", 1, 1..=i64::from(u32::MAX))?;
    s.engine.shared.faults.route_logins(LoginRoute {
        server,
        port: port as u16,
        count: count as u32,
    });
    Ok(ProcResult::default())
}

fn sp_clear_injections(
    s: &mut Session,
    params: &[Param],
    _: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    require_sysadmin(s, "sp_clear_injections")?;
    Args::bind("sp_clear_injections", &[], params)?;
    s.engine.shared.faults.clear();
    Ok(ProcResult::default())
}
