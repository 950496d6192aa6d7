//! Faults on demand, for tests of what a client does when SQL Server
//! fails: `KILL` (as SQL Server has it) and three sandbox-only procedures,
//! `sandbox.sp_inject_error` (the next requests of other sessions fail
//! with a chosen error), `sandbox.sp_route_logins` (the next logins are
//! redirected, as Azure SQL's redirect connection policy does) and
//! `sandbox.sp_clear_injections`. Which requests fail is decided by a
//! pattern the test gives at run time, never by the sandbox knowing a
//! client's queries.
//!
//! Layout: this file holds the pending injections, `kill` the statement,
//! `procedures` the sandbox procedures, `messages` SQL Server's texts for
//! the errors tests inject.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::error::{Abort, SqlError};
use super::request::{Output, Request};
use super::session::Session;
use super::types::Value;

mod kill;
mod messages;
mod procedures;

#[cfg(test)]
mod tests;

pub use kill::kill;
pub use procedures::register;

/// An error the next matching requests fail with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorInjection {
    pub number: i32,
    /// Requests still to fail.
    pub count: u32,
    /// Lower-case text a request must contain; None matches any request.
    pub pattern: Option<String>,
    pub severity: u8,
    pub state: u8,
    /// The session that asked for it: its own requests never fail.
    pub origin: u16,
}

/// Where the next logins are sent instead (ENVCHANGE routing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRoute {
    pub server: String,
    pub port: u16,
    /// Logins still to redirect.
    pub count: u32,
}

/// The injections waiting to happen, oldest first.
#[derive(Debug, Default)]
pub struct FaultInjector {
    errors: Mutex<VecDeque<ErrorInjection>>,
    routes: Mutex<VecDeque<LoginRoute>>,
}

impl FaultInjector {
    pub fn inject_error(&self, mut injection: ErrorInjection) {
        injection.pattern = injection.pattern.map(|p| p.to_lowercase());
        if injection.count > 0 {
            lock(&self.errors).push_back(injection);
        }
    }

    /// The oldest injection matching a request of `session_id` whose text
    /// is `text()` (only built when an injection waits), with one of its
    /// requests used up (`count` is then what is left).
    pub fn take_error(
        &self,
        session_id: u16,
        text: impl FnOnce() -> String,
    ) -> Option<ErrorInjection> {
        let mut errors = lock(&self.errors);
        if errors.is_empty() {
            return None;
        }
        let lower = text().to_lowercase();
        let at = errors.iter().position(|e| {
            e.origin != session_id && e.pattern.as_ref().is_none_or(|p| lower.contains(p))
        })?;
        let hit = &mut errors[at];
        hit.count -= 1;
        let taken = hit.clone();
        if taken.count == 0 {
            errors.remove(at);
        }
        Some(taken)
    }

    pub fn route_logins(&self, route: LoginRoute) {
        if route.count > 0 {
            lock(&self.routes).push_back(route);
        }
    }

    /// Where the next login goes instead, using up one of the route's.
    pub fn take_route(&self) -> Option<(String, u16)> {
        let mut routes = lock(&self.routes);
        let route = routes.front_mut()?;
        route.count -= 1;
        let target = (route.server.clone(), route.port);
        if route.count == 0 {
            routes.pop_front();
        }
        Some(target)
    }

    /// Drops every pending injection and route; how many there were.
    pub fn clear(&self) -> usize {
        let mut errors = lock(&self.errors);
        let mut routes = lock(&self.routes);
        let n = errors.len() + routes.len();
        errors.clear();
        routes.clear();
        n
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a pattern is matched against: a batch's text, or an RPC's
/// procedure name and its character parameters (the statement of
/// `sp_executesql` and `sp_prepexec` among them).
pub fn request_text(request: &Request) -> String {
    match request {
        Request::Batch { sql } => sql.clone(),
        Request::Rpc { procedure, params } => {
            let mut text = procedure.clone();
            for p in params {
                if let Value::String(s) = &p.value {
                    text.push(' ');
                    text.push_str(s);
                }
            }
            text
        }
    }
}

/// The injected error `request` of session `s` fails with, if any.
pub(crate) fn injected_error(s: &Session, request: &Request) -> Option<SqlError> {
    let faults = &s.engine.shared.faults;
    let hit = faults.take_error(s.info.spid, || request_text(request))?;
    let context = messages::Context {
        database: s.database(),
        server: s.engine.shared.config.server_name.clone(),
        session_id: s.info.spid,
    };
    tracing::info!(
        session_id = s.info.spid,
        number = hit.number,
        left = hit.count,
        "failing a request with an injected error"
    );
    let mut error = SqlError::new(hit.number, messages::text(hit.number, &context))
        .with_class(hit.severity)
        .with_state(hit.state)
        .aborting_batch();
    // Severity 20 and above ends the connection, as in SQL Server.
    if hit.severity >= 20 {
        error.abort = Abort::Connection;
    }
    Some(error)
}

/// Answers a request with its injected error instead of running it. A
/// deadlock victim (1205) also loses its transaction, as in SQL Server.
pub(crate) fn fail_request(s: &mut Session, error: SqlError, out: &mut Vec<Output>) {
    let deadlock = error.number == 1205;
    out.push(Output::Message(error));
    if deadlock && s.info.trancount > 0 {
        let _ = s.rollback(out);
    }
}
