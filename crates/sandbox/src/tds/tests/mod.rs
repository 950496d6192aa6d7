//! Protocol tests against real clients: tiberius 0.13 for everything a
//! driver does, and a raw socket client for wire-level checks (packet
//! sizes, malformed input, tokens tiberius cannot show).

mod backend;
mod collation;
mod faults;
mod flow;
mod login;
mod raw;
mod types;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use self::backend::{Events, TestBackend};
use super::{TdsConfig, TdsError, TlsSettings, serve_with_config};

pub(crate) type TestClient = Client<Compat<TcpStream>>;

/// Every test body runs under this bound.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test exceeded its time bound")
}

/// The `sa` login of a sandbox on 127.0.0.1, over TLS (its certificate
/// trusted).
pub(crate) fn sa_config(sandbox: &crate::Sandbox, password: &str) -> Config {
    let mut config = Config::new();
    config.host("127.0.0.1");
    config.port(sandbox.local_addr().port());
    config.authentication(AuthMethod::sql_server("sa", password));
    config.encryption(EncryptionLevel::Required);
    config.trust_cert();
    config
}

/// A server on an ephemeral 127.0.0.1 port with the scripted backend.
pub(crate) struct TestServer {
    pub addr: SocketAddr,
    pub events: Arc<Events>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), TdsError>>,
}

impl TestServer {
    pub(crate) async fn start() -> Self {
        Self::start_with(TdsConfig::default()).await
    }

    pub(crate) async fn start_with(config: TdsConfig) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .try_init();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let backend = Arc::new(TestBackend::default());
        let events = backend.events.clone();
        let tls = Arc::new(TlsSettings::self_signed().expect("certificate"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with_config(listener, backend, tls, config, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            events,
            stop: Some(stop),
            task,
        }
    }

    /// Stops the server and waits for `serve` to return.
    pub(crate) async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let served = (&mut self.task).await.expect("serve task");
        assert!(served.is_ok(), "serve failed: {served:?}");
    }
}

pub(crate) fn config(addr: SocketAddr, encryption: EncryptionLevel) -> Config {
    let mut config = Config::new();
    config.host("127.0.0.1");
    config.port(addr.port());
    config.authentication(AuthMethod::sql_server("sa", "secret"));
    config.encryption(encryption);
    config.trust_cert();
    config.database("testdb");
    config
}

pub(crate) async fn connect_with(config: Config, addr: SocketAddr) -> tiberius::Result<TestClient> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Client::connect(config, tcp.compat_write()).await
}

pub(crate) async fn connect(addr: SocketAddr, encryption: EncryptionLevel) -> TestClient {
    connect_with(config(addr, encryption), addr)
        .await
        .expect("connect")
}

/// Runs a batch and returns the single int of its first row.
pub(crate) async fn select_one(client: &mut TestClient) -> i32 {
    scalar(client, "SELECT 1").await
}

/// The first column of the first row of a batch.
pub(crate) async fn scalar<T: tiberius::FromSqlOwned>(client: &mut TestClient, sql: &str) -> T {
    let row = client
        .simple_query(sql)
        .await
        .expect("query")
        .into_row()
        .await
        .expect("row")
        .expect("a row");
    let cell = row.into_iter().next().expect("a column");
    T::from_sql_owned(cell)
        .expect("converts")
        .expect("not NULL")
}
