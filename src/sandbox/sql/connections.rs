//! The server's live client connections, for `sys.dm_exec_connections`
//! and `sys.dm_exec_sessions`: what LOGIN7 said and how the session is
//! protected, registered at login and dropped when the session closes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;

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

/// Connections by session id.
#[derive(Debug, Default)]
pub struct ConnectionRegistry {
    connections: Mutex<BTreeMap<u16, Connection>>,
}

impl ConnectionRegistry {
    pub fn register(&self, connection: Connection) {
        self.lock().insert(connection.session_id, connection);
    }

    /// Idempotent: a session may be closed and then dropped.
    pub fn unregister(&self, session_id: u16) {
        self.lock().remove(&session_id);
    }

    /// The connections now, ordered by session id.
    pub fn snapshot(&self) -> Vec<Connection> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u16, Connection>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }
}
