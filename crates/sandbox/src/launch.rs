//! Starting and stopping a sandbox: the engine, its start-up script, and
//! the TDS listener, as one handle for the CLI and the tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::demo::{self, DemoError, DemoHandle, DemoOptions};
use super::sql::clock::ServerZone;
use super::sql::engine::SqlVersion;
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
    #[error("unknown time zone {0:?} (use UTC or an IANA name such as Europe/Oslo)")]
    TimeZone(String),
    #[error("--clock-speed must be zero or a positive number, got {0}")]
    ClockSpeed(f64),
    #[error("--idle-interval must be at least one second, got {0}")]
    IdleInterval(i64),
    #[error(transparent)]
    Demo(#[from] DemoError),
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
    /// The SQL Server release to present and behave as.
    pub sql_version: SqlVersion,
    /// The server's time zone: `UTC` or an IANA name.
    pub time_zone: String,
    /// Clock speed: 1 = real time, 0 = frozen (moves only with
    /// `sandbox.sp_advance_clock`), 60 = a minute a second.
    pub clock_speed: f64,
    /// Seconds of quiet before the capture job writes an idle entry.
    pub cdc_idle_interval_secs: i64,
    /// Create the CDC-enabled `shop` database and keep changing it.
    pub demo: Option<DemoOptions>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        let defaults = EngineConfig::default();
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 1433)),
            sa_password: String::new(),
            script: None,
            tls: TlsSource::SelfSigned,
            sql_version: SqlVersion::default(),
            time_zone: defaults.time_zone,
            clock_speed: defaults.clock_speed,
            cdc_idle_interval_secs: defaults.cdc_idle_interval_secs,
            demo: None,
        }
    }
}

impl SandboxOptions {
    /// The engine configuration, or why the options are unusable (the
    /// engine itself would quietly fall back to UTC for a bad zone).
    fn engine_config(&self) -> Result<EngineConfig, SandboxError> {
        if ServerZone::parse(&self.time_zone).is_none() {
            return Err(SandboxError::TimeZone(self.time_zone.clone()));
        }
        if !(self.clock_speed.is_finite() && self.clock_speed >= 0.0) {
            return Err(SandboxError::ClockSpeed(self.clock_speed));
        }
        if self.cdc_idle_interval_secs < 1 {
            return Err(SandboxError::IdleInterval(self.cdc_idle_interval_secs));
        }
        Ok(EngineConfig {
            sa_password: self.sa_password.clone(),
            product_version: self.sql_version.default_build().into(),
            sql_version: self.sql_version,
            time_zone: self.time_zone.clone(),
            clock_speed: self.clock_speed,
            cdc_idle_interval_secs: self.cdc_idle_interval_secs,
            ..EngineConfig::default()
        })
    }
}

/// A running sandbox. Dropping it stops accepting connections.
pub struct Sandbox {
    local_addr: SocketAddr,
    engine: Engine,
    shutdown: Option<oneshot::Sender<()>>,
    server: JoinHandle<Result<(), TdsError>>,
    demo: Option<DemoHandle>,
}

impl Sandbox {
    /// Runs the script, binds the listener and serves in the background.
    pub async fn start(options: SandboxOptions) -> Result<Self, SandboxError> {
        let tls = match &options.tls {
            TlsSource::SelfSigned => TlsSettings::self_signed(),
            TlsSource::Files { cert, key } => TlsSettings::from_pem_files(cert, key),
        }
        .map_err(SandboxError::Tls)?;
        let config = options.engine_config()?;
        let tds_config = tds::TdsConfig::for_product_version(&config.product_version);
        let engine = Engine::new(config);
        if let Some(script) = &options.script {
            engine.run_script(script).map_err(SandboxError::Script)?;
        }
        let demo = match options.demo {
            Some(demo_options) => Some(demo::start(&engine, demo_options)?),
            None => None,
        };
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
        let server = tokio::spawn(tds::serve_with_config(
            listener,
            Arc::new(engine.clone()),
            Arc::new(tls),
            tds_config,
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(Self {
            local_addr,
            engine,
            shutdown: Some(shutdown),
            server,
            demo,
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

    /// Statements the demo generator has run (None without `--demo`).
    pub fn demo_changes(&self) -> Option<u64> {
        self.demo.as_ref().map(DemoHandle::changes)
    }

    /// Stops the demo generator, stops accepting connections and waits for
    /// the listener to close.
    pub async fn stop(mut self) -> Result<(), SandboxError> {
        if let Some(demo) = self.demo.take() {
            // Joining waits for at most one statement.
            let _ = tokio::task::spawn_blocking(move || demo.stop()).await;
        }
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
