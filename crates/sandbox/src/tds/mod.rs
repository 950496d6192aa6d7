//! The TDS 7.4 wire protocol, server side (MS-TDS).
//!
//! This layer only moves bytes: it decodes PRELOGIN, LOGIN7, SQLBatch, RPC
//! and ATTENTION packets into [`Request`]s and encodes [`Output`]s as
//! tokens. What a statement means is the [`Backend`]'s business, so the
//! protocol can be tested on its own.

use std::time::Duration;

use super::sql::{CancelToken, KillSignal, LoginRequest, Output, Request, SqlError};

mod codec;
mod connection;
mod error;
mod handshake;
mod login;
mod packet;
mod prelogin;
mod request;
mod response;
mod server;
mod session;
mod stream;
mod tls;
mod token;
mod wire;

#[cfg(test)]
mod tests;

pub use error::TdsError;
pub use server::{TdsConfig, serve, serve_with_config};
pub use tls::TlsSettings;

/// The engine behind the wire: admits logins and opens sessions.
pub trait Backend: Send + Sync + 'static {
    type Session: BackendSession;

    /// Checks credentials and the initial database. A failure is sent to
    /// the client as an ERROR token (18456 for bad credentials).
    fn login(&self, request: &LoginRequest) -> Result<Self::Session, SqlError>;

    /// Where an admitted login is sent instead (host, port): it gets
    /// LOGINACK and an ENVCHANGE routing (MS-TDS 2.2.7.9), as from Azure
    /// SQL's gateway under the redirect policy, and the connection closes.
    fn route_login(&self) -> Option<(String, u16)> {
        None
    }
}

/// One client's session: runs its requests, one at a time.
pub trait BackendSession: Send + 'static {
    /// The server process id (SPID) reported in packet headers.
    fn session_id(&self) -> u16;

    /// The current database, sent in ENVCHANGE after login.
    fn database(&self) -> String;

    /// Runs one request to completion, checking `cancel` in long work.
    /// Called on a blocking thread.
    fn execute(&mut self, request: Request, cancel: &CancelToken) -> Vec<Output>;

    /// Time the server spent waiting for the client to take result
    /// packets (ASYNC_NETWORK_IO).
    fn record_network_wait(&mut self, _waited: Duration) {}

    /// Raised when another session KILLs this one: the server cancels the
    /// running request and closes the connection, even mid-response.
    fn kill_signal(&self) -> Option<KillSignal> {
        None
    }

    /// The client disconnected; release locks and roll back.
    fn close(&mut self) {}
}
