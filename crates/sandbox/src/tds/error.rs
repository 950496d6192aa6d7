//! Errors of the TDS layer. None of them ever carries a password: login
//! data is only reported by user name.

use std::io;

/// Why a connection or the listener stopped.
#[derive(Debug, thiserror::Error)]
pub enum TdsError {
    /// The socket failed or the peer went away mid-message.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The client broke the protocol (bad header, truncated field, ...).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A message arrived where the state machine expected another.
    #[error("unexpected packet type {actual:#04x} while waiting for {expected}")]
    UnexpectedPacket { expected: &'static str, actual: u8 },
    /// A reassembled message grew past the configured limit.
    #[error("message larger than {limit} bytes")]
    MessageTooLarge { limit: usize },
    /// The TLS handshake or the TLS configuration failed.
    #[error("tls: {0}")]
    Tls(String),
    /// The certificate could not be generated or loaded.
    #[error("certificate: {0}")]
    Certificate(String),
    /// The handshake (PRELOGIN, TLS, LOGIN7) took too long.
    #[error("handshake timed out")]
    HandshakeTimeout,
    /// The backend panicked while running a request; its session is lost.
    #[error("backend task failed: {0}")]
    Backend(String),
}

impl TdsError {
    /// Shorthand for a protocol violation.
    pub(crate) fn protocol(detail: impl Into<String>) -> Self {
        TdsError::Protocol(detail.into())
    }
}
