//! `KILL session_id`
//! (<https://learn.microsoft.com/en-us/sql/t-sql/language-elements/kill-transact-sql>):
//! needs ALTER ANY CONNECTION (sysadmin has it). The target's running
//! request is cancelled, its transaction rolled back and its connection
//! closed by the server; KILL returns once that is done.

use std::time::Duration;

use crate::sql::error::{SqlError, SqlResult};
use crate::sql::request::CancelToken;
use crate::sql::session::Session;

/// How long KILL waits for its target to roll back and go. A target that
/// takes longer keeps going away on its own, as in SQL Server.
const WAIT_FOR_TARGET: Duration = Duration::from_secs(10);

pub fn kill(s: &Session, id: u64, cancel: &CancelToken) -> SqlResult<()> {
    if !may_kill(s) {
        return Err(SqlError::new(
            6102,
            "User does not have permission to use the KILL statement.",
        )
        .with_class(14));
    }
    if id == u64::from(s.info.spid) {
        return Err(SqlError::new(
            6104,
            "Cannot use KILL to kill your own process.",
        ));
    }
    let connections = &s.engine.shared.connections;
    let killed = u16::try_from(id).is_ok_and(|target| connections.kill(target));
    if !killed {
        return Err(SqlError::new(
            6106,
            format!("Process ID {id} is not an active process ID."),
        ));
    }
    let target = id as u16;
    tracing::info!(
        session_id = s.info.spid,
        target,
        "KILL: closing the target's connection"
    );
    connections.wait_closed(target, WAIT_FOR_TARGET, || cancel.is_cancelled());
    cancel.check()
}

/// sysadmin, or a login granted ALTER ANY CONNECTION.
fn may_kill(s: &Session) -> bool {
    s.info.is_sysadmin
        || s.engine
            .shared
            .read()
            .security
            .login(&s.info.login)
            .is_some_and(|l| l.has_server_permission("ALTER ANY CONNECTION"))
}
