//! What a client asks of a session and what comes back, independent of the
//! wire: the TDS layer decodes packets into a `Request` and encodes each
//! `Output` as tokens, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::collation::Collation;
use super::error::SqlError;
use super::types::{DataType, Value};

/// A typed parameter of an RPC call (sp_executesql, sp_prepexec, a stored
/// procedure), or an output value sent back.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// With its `@`; empty when the client sent it by position.
    pub name: String,
    pub ty: DataType,
    pub value: Value,
    /// Sent with fByRefValue: the procedure may return a value in it.
    pub output: bool,
}

/// One client request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A SQLBatch packet: T-SQL text, possibly several statements.
    Batch { sql: String },
    /// An RPC packet. `procedure` is the name the client gave, or the
    /// well-known name for a ProcID (10 -> `sp_executesql`, 11
    /// `sp_prepare`, 12 `sp_execute`, 13 `sp_prepexec`, 15 `sp_unprepare`).
    Rpc {
        procedure: String,
        params: Vec<Param>,
    },
}

/// A result-set column as COLMETADATA describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    /// A character column's collation; `None` for the database default.
    /// COLMETADATA describes the column with it, and varchar values go
    /// out in its code page.
    pub collation: Option<Collation>,
}

impl Column {
    /// A column of the database's default collation.
    pub fn new(name: impl Into<String>, ty: DataType, nullable: bool) -> Self {
        Self {
            name: name.into(),
            ty,
            nullable,
            collation: None,
        }
    }

    /// With a collation (kept only for character types).
    pub fn collated(mut self, collation: Option<Collation>) -> Self {
        self.collation = collation.filter(|_| self.ty.is_string());
        self
    }

    /// The 5-byte TDS collation COLMETADATA describes the column with.
    pub fn tds_collation(&self) -> Option<[u8; 5]> {
        self.collation.map(|c| c.tds())
    }
}

/// A transaction state change, reported as ENVCHANGE 8/9/10.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionEvent {
    /// A transaction began; the descriptor identifies it on the wire.
    Begin {
        descriptor: u64,
    },
    Commit {
        descriptor: u64,
    },
    Rollback {
        descriptor: u64,
    },
}

/// One piece of a response, in the order the client must see them.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// COLMETADATA followed by one ROW per row.
    ResultSet {
        columns: Vec<Column>,
        rows: Vec<Vec<Value>>,
    },
    /// The end of one statement: DONE (batch) or DONEINPROC (in an RPC),
    /// with the row count when the statement produces one.
    Done {
        rows: Option<u64>,
    },
    /// INFO (class <= 10) or ERROR token.
    Message(SqlError),
    /// ENVCHANGE type 1 after USE.
    DatabaseChanged {
        from: String,
        to: String,
    },
    Transaction(TransactionEvent),
    /// RETURNVALUE for an output parameter of an RPC.
    ReturnValue(Param),
    /// RETURNSTATUS of an RPC.
    ReturnStatus(i32),
}

/// Set by the TDS layer when the client sends ATTENTION; long-running work
/// checks it and stops.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Fails with the cancellation marker once the client asked to stop.
    pub fn check(&self) -> Result<(), SqlError> {
        if self.is_cancelled() {
            Err(SqlError::cancelled())
        } else {
            Ok(())
        }
    }
}

/// Raised when another session KILLs this one (T-SQL `KILL`): the TDS
/// layer then cancels the running request and closes the connection, also
/// in the middle of sending a result.
#[derive(Debug, Clone)]
pub struct KillSignal(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for KillSignal {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl KillSignal {
    pub fn kill(&self) {
        self.0.send_replace(true);
    }

    pub fn is_killed(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the session is killed (at once if it already is).
    pub async fn killed(&self) {
        let mut receiver = self.0.subscribe();
        // The sender lives as long as `self`, so this only ends on a kill.
        let _ = receiver.wait_for(|killed| *killed).await;
    }
}

/// What LOGIN7 carried that the engine needs to admit a session. Its
/// `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginRequest {
    pub user: String,
    /// Never logged or put in an error.
    pub password: String,
    /// The initial database, if the client named one.
    pub database: Option<String>,
    pub app_name: String,
    pub host_name: String,
    /// True when the whole session runs over TLS (not only the login), as
    /// `sys.dm_exec_connections.encrypt_option` reports it.
    pub encrypted: bool,
    /// The client's address, for `sys.dm_exec_connections.client_net_address`.
    pub client_addr: Option<std::net::SocketAddr>,
}

impl std::fmt::Debug for LoginRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginRequest")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("database", &self.database)
            .field("app_name", &self.app_name)
            .field("host_name", &self.host_name)
            .field("encrypted", &self.encrypted)
            .field("client_addr", &self.client_addr)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::LoginRequest;

    #[test]
    fn login_request_debug_hides_the_password() {
        let request = LoginRequest {
            user: "reader".into(),
            password: "Sup3r-Secret!".into(),
            database: Some("shop".into()),
            app_name: "app".into(),
            host_name: "host".into(),
            encrypted: true,
            client_addr: None,
        };
        let shown = format!("{request:?}");
        assert!(shown.contains("reader"));
        assert!(!shown.contains("Sup3r-Secret!"), "{shown}");
    }
}
