//! Starting and stopping a sandbox: the engine, its start-up script, and
//! the TDS listener, as one handle for the CLI and the tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::sql::{Engine, EngineConfig, SqlError};
use super::tds::{self, TdsError, TlsSettings};

/// Why a sandbox could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS set-up failed: {0}")]
    Tls(#[source] TdsError),
    #[error("the start-up script failed: {0}")]
    Script(#[source] SqlError),
    #[error("the server stopped: {0}")]
    Serve(#[source] TdsError),
    #[error("the server task panicked or was cancelled")]
    Join(#[from] tokio::task::JoinError),
}

/// Where the server's TLS certificate comes from.
#[derive(Debug, Clone, Default)]
pub enum TlsSource {
    /// A self-signed certificate for localhost, made at start.
    #[default]
    SelfSigned,
    /// PEM files.
    Files { cert: PathBuf, key: PathBuf },
}

/// How to start a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    pub listen: SocketAddr,
    /// The `sa` login's password.
    pub sa_password: String,
    /// T-SQL run as `sa` before clients are accepted (batches split by GO).
    pub script: Option<String>,
    pub tls: TlsSource,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 1433)),
            sa_password: String::new(),
            script: None,
            tls: TlsSource::SelfSigned,
        }
    }
}

/// A running sandbox. Dropping it stops accepting connections.
pub struct Sandbox {
    local_addr: SocketAddr,
    engine: Engine,
    shutdown: Option<oneshot::Sender<()>>,
    server: JoinHandle<Result<(), TdsError>>,
}

impl Sandbox {
    /// Runs the script, binds the listener and serves in the background.
    pub async fn start(options: SandboxOptions) -> Result<Self, SandboxError> {
        let tls = match &options.tls {
            TlsSource::SelfSigned => TlsSettings::self_signed(),
            TlsSource::Files { cert, key } => TlsSettings::from_pem_files(cert, key),
        }
        .map_err(SandboxError::Tls)?;
        let engine = Engine::new(EngineConfig {
            sa_password: options.sa_password.clone(),
            ..EngineConfig::default()
        });
        if let Some(script) = &options.script {
            engine.run_script(script).map_err(SandboxError::Script)?;
        }
        let listener =
            TcpListener::bind(options.listen)
                .await
                .map_err(|source| SandboxError::Listen {
                    addr: options.listen,
                    source,
                })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| SandboxError::Listen {
                addr: options.listen,
                source,
            })?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(tds::serve(
            listener,
            Arc::new(engine.clone()),
            Arc::new(tls),
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(Self {
            local_addr,
            engine,
            shutdown: Some(shutdown),
            server,
        })
    }

    /// The address clients connect to (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The engine, to run set-up T-SQL without a client.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Stops accepting connections and waits for the listener to close.
    pub async fn stop(mut self) -> Result<(), SandboxError> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        (&mut self.server).await?.map_err(SandboxError::Serve)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}
