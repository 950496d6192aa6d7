//! The server's live client connections, for `sys.dm_exec_connections`,
//! `sys.dm_exec_sessions` and `sys.dm_exec_session_wait_stats`: what
//! LOGIN7 said, how the session is protected and how long it waited for
//! its client, registered at login and dropped when the session closes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use chrono::NaiveDateTime;

/// One client connection as the DMVs describe it.
#[derive(Debug, Clone)]
pub struct Connection {
    pub session_id: u16,
    pub login: String,
    pub connect_time: NaiveDateTime,
    /// TLS for the whole session (not only the login).
    pub encrypted: bool,
    pub client_addr: Option<SocketAddr>,
    pub host_name: String,
    pub program_name: String,
}

/// One wait type's counters for one session, as
/// `sys.dm_exec_session_wait_stats` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitStats {
    /// Number of waits (SQL Server counts at the start of each wait).
    pub waiting_tasks_count: u64,
    pub wait_time: Duration,
    pub max_wait_time: Duration,
}

impl WaitStats {
    fn add(&mut self, waited: Duration) {
        self.waiting_tasks_count += 1;
        self.wait_time = self.wait_time.saturating_add(waited);
        self.max_wait_time = self.max_wait_time.max(waited);
    }
}

/// Connections by session id, and their network waits.
#[derive(Debug, Default)]
pub struct ConnectionRegistry {
    connections: Mutex<BTreeMap<u16, Connection>>,
    /// ASYNC_NETWORK_IO per session: the only wait the sandbox measures,
    /// kept apart from [`Connection`] so that registering stays a plain
    /// value copy.
    network_waits: Mutex<BTreeMap<u16, WaitStats>>,
}

impl ConnectionRegistry {
    /// A new session starts with no waits (the DMV resets when a session
    /// is opened).
    pub fn register(&self, connection: Connection) {
        lock(&self.network_waits).remove(&connection.session_id);
        lock(&self.connections).insert(connection.session_id, connection);
    }

    /// Idempotent: a session may be closed and then dropped.
    pub fn unregister(&self, session_id: u16) {
        lock(&self.connections).remove(&session_id);
        lock(&self.network_waits).remove(&session_id);
    }

    /// The connections now, ordered by session id.
    pub fn snapshot(&self) -> Vec<Connection> {
        lock(&self.connections).values().cloned().collect()
    }

    /// Time a live session's response spent blocked on a client that did
    /// not read (one wait per response that had to wait). Ignored for
    /// sessions that are not registered (scripts, closed sessions).
    pub fn record_network_wait(&self, session_id: u16, waited: Duration) {
        if waited.is_zero() || !lock(&self.connections).contains_key(&session_id) {
            return;
        }
        lock(&self.network_waits)
            .entry(session_id)
            .or_default()
            .add(waited);
    }

    /// ASYNC_NETWORK_IO counters of the sessions that have waited, ordered
    /// by session id.
    pub fn network_waits(&self) -> Vec<(u16, WaitStats)> {
        lock(&self.network_waits)
            .iter()
            .map(|(id, w)| (*id, *w))
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(session_id: u16) -> Connection {
        Connection {
            session_id,
            login: "sa".into(),
            connect_time: NaiveDateTime::default(),
            encrypted: false,
            client_addr: None,
            host_name: String::new(),
            program_name: String::new(),
        }
    }

    #[test]
    fn waits_accumulate_per_session_and_reset_with_it() {
        let r = ConnectionRegistry::default();
        r.register(connection(51));
        r.record_network_wait(51, Duration::from_millis(30));
        r.record_network_wait(51, Duration::from_millis(10));
        r.record_network_wait(51, Duration::ZERO);
        r.record_network_wait(99, Duration::from_millis(5)); // not a live session
        let waits = r.network_waits();
        assert_eq!(waits.len(), 1);
        assert_eq!(
            waits[0],
            (
                51,
                WaitStats {
                    waiting_tasks_count: 2,
                    wait_time: Duration::from_millis(40),
                    max_wait_time: Duration::from_millis(30),
                }
            )
        );
        r.unregister(51);
        assert!(r.network_waits().is_empty());
    }
}
