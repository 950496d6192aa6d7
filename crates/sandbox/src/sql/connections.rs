//! The server's live client connections, for `sys.dm_exec_connections`,
//! `sys.dm_exec_sessions` and `sys.dm_exec_session_wait_stats`: what
//! LOGIN7 said, how the session is protected and how long it waited for
//! its client, registered at login and dropped when the session closes.
//! `KILL` finds its target here too, and `sys.dm_os_performance_counters`
//! the requests and logins served since the server started.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;

use super::request::KillSignal;

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
    /// The session's current database (`sys.dm_exec_sessions.database_id`).
    pub database_id: i32,
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
    /// How to reach each live session for `KILL`.
    kill_signals: Mutex<BTreeMap<u16, KillSignal>>,
    /// Signalled whenever a session is unregistered.
    closed: Condvar,
    /// Requests (SQL batches, RPCs, transaction manager requests) clients
    /// sent, since the server started: SQL Server's `Batch Requests/sec`.
    requests: AtomicU64,
    /// Logins admitted since the server started: `Logins/sec`.
    logins: AtomicU64,
}

impl ConnectionRegistry {
    /// A new session starts with no waits (the DMV resets when a session
    /// is opened). Returns what `KILL` raises for it.
    pub fn register(&self, connection: Connection) -> KillSignal {
        let signal = KillSignal::default();
        let id = connection.session_id;
        lock(&self.network_waits).remove(&id);
        lock(&self.kill_signals).insert(id, signal.clone());
        lock(&self.connections).insert(id, connection);
        signal
    }

    /// Idempotent: a session may be closed and then dropped.
    pub fn unregister(&self, session_id: u16) {
        let mut connections = lock(&self.connections);
        connections.remove(&session_id);
        lock(&self.network_waits).remove(&session_id);
        lock(&self.kill_signals).remove(&session_id);
        drop(connections);
        self.closed.notify_all();
    }

    /// A live session changed its database (USE).
    pub fn set_database(&self, session_id: u16, database_id: i32) {
        if let Some(c) = lock(&self.connections).get_mut(&session_id) {
            c.database_id = database_id;
        }
    }

    /// Raises the kill signal of a live session; false when there is none.
    pub fn kill(&self, session_id: u16) -> bool {
        match lock(&self.kill_signals).get(&session_id) {
            Some(signal) => {
                signal.kill();
                true
            }
            None => false,
        }
    }

    /// Waits until the session is gone (its connection closed and its
    /// work rolled back), for at most `limit` or until `stop` says so;
    /// true when it is gone.
    pub fn wait_closed(&self, session_id: u16, limit: Duration, stop: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        let mut connections = lock(&self.connections);
        while connections.contains_key(&session_id) {
            let now = Instant::now();
            if now >= deadline || stop() {
                return false;
            }
            // Short slices, so a cancelled KILL notices.
            let slice = (deadline - now).min(Duration::from_millis(50));
            connections = self
                .closed
                .wait_timeout(connections, slice)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// One request a client sent (one round trip).
    pub fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// One login admitted.
    pub fn count_login(&self) {
        self.logins.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests and logins served since the server started.
    pub fn served(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.logins.load(Ordering::Relaxed),
        )
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
            database_id: 1,
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

    #[test]
    fn kill_raises_the_live_session_signal_and_waits_for_its_close() {
        let r = std::sync::Arc::new(ConnectionRegistry::default());
        let signal = r.register(connection(52));
        assert!(!r.kill(53), "no such session");
        assert!(!signal.is_killed());
        assert!(r.kill(52));
        assert!(signal.is_killed());
        assert!(!r.wait_closed(52, Duration::from_millis(20), || false));
        let closer = {
            let r = r.clone();
            std::thread::spawn(move || r.unregister(52))
        };
        assert!(r.wait_closed(52, Duration::from_secs(10), || false));
        closer.join().expect("closer");
        assert!(!r.kill(52), "a closed session cannot be killed");
    }
}
