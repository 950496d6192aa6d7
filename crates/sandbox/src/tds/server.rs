//! The listener: accepts TCP connections and runs each on its own task
//! until the shutdown future resolves.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::Backend;
use super::connection::serve_connection;
use super::error::TdsError;
use super::tls::TlsSettings;

/// How the server presents itself and its limits.
#[derive(Debug, Clone)]
pub struct TdsConfig {
    /// Server name in INFO and ERROR tokens (what `@@SERVERNAME` shows).
    pub server_name: String,
    /// LOGINACK program name; clients check it says SQL Server.
    pub program_name: String,
    /// Product version (major, minor, build) in PRELOGIN and LOGINACK.
    pub version: (u8, u8, u16),
    /// Packet size when LOGIN7 asks for 0 (the server default).
    pub default_packet_size: u32,
    /// Language reported at login (ENVCHANGE 2, INFO 5703).
    pub language: String,
    /// Largest client message accepted (a reassembled batch or RPC).
    pub max_message_size: usize,
    /// Bound on PRELOGIN + TLS + LOGIN7 so idle sockets do not linger.
    pub handshake_timeout: Duration,
    /// How long idle connections get to close their sessions at shutdown.
    pub shutdown_grace: Duration,
}

impl Default for TdsConfig {
    fn default() -> Self {
        Self {
            server_name: "SANDBOX".to_string(),
            program_name: "Microsoft SQL Server".to_string(),
            version: (16, 0, 4135),
            default_packet_size: 4096,
            language: "us_english".to_string(),
            max_message_size: 256 * 1024 * 1024,
            handshake_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(2),
        }
    }
}

impl TdsConfig {
    /// The configuration of a server whose `SERVERPROPERTY('ProductVersion')`
    /// is `product_version` (`16.0.4135.4`): PRELOGIN and LOGINACK carry its
    /// major, minor and build, as SQL Server's do, so a client sees one
    /// version wherever it looks. A version that does not parse keeps the
    /// default's.
    pub fn for_product_version(product_version: &str) -> Self {
        let mut parts = product_version.split('.');
        let parsed = (|| {
            Some((
                parts.next()?.parse().ok()?,
                parts.next()?.parse().ok()?,
                parts.next()?.parse().ok()?,
            ))
        })();
        let default = Self::default();
        Self {
            version: parsed.unwrap_or(default.version),
            ..default
        }
    }
}

/// Serves TDS on `listener` with the default [`TdsConfig`] until
/// `shutdown` resolves.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    backend: Arc<B>,
    tls: Arc<TlsSettings>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), TdsError> {
    serve_with_config(listener, backend, tls, TdsConfig::default(), shutdown).await
}

/// Serves TDS on `listener` until `shutdown` resolves: then stops
/// accepting, lets idle connections close their sessions for
/// `shutdown_grace`, and drops the rest.
pub async fn serve_with_config<B: Backend>(
    listener: TcpListener,
    backend: Arc<B>,
    tls: Arc<TlsSettings>,
    config: TdsConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), TdsError> {
    let config = Arc::new(config);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    tracing::debug!(%peer, "connection accepted");
                    tasks.spawn(serve_connection(
                        tcp,
                        backend.clone(),
                        tls.clone(),
                        config.clone(),
                        stop_rx.clone(),
                    ));
                }
                Err(e) => {
                    // Out of descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = joined {
                    tracing::warn!(error = %e, "connection task failed");
                }
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = async { while tasks.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(config.shutdown_grace, drain).await;
    tasks.shutdown().await;
    Ok(())
}
