//! Shared setup: start a server, write its kubeconfig, build clients, wait with timeouts.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use mssql_cdc_test_apiserver::{ServerOptions, TestApiServer};
use std::path::PathBuf;
use std::time::Duration;

/// Upper bound for any single wait in these tests.
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Env {
    pub server: TestApiServer,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

pub async fn start_with(opts: ServerOptions) -> Env {
    install_crypto_provider();
    let server = TestApiServer::start(opts)
        .await
        .expect("start test apiserver");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("write kubeconfig");
    Env {
        server,
        dir,
        kubeconfig,
    }
}

pub async fn start() -> Env {
    start_with(ServerOptions::default()).await
}

impl Env {
    pub async fn client(&self) -> Client {
        let kc = Kubeconfig::from_yaml(&self.server.kubeconfig()).expect("kubeconfig");
        let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("config");
        Client::try_from(cfg).expect("client")
    }
}

/// The workspace links both ring and aws-lc-rs, so rustls cannot pick a
/// provider by itself: choose one for the process before any client starts.
pub fn install_crypto_provider() {
    // Already installed by another test in this process is just as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Runs `f` under the shared timeout, failing the test with `what` on expiry.
pub async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `check` (no sleeping as synchronisation: each poll is a real read,
/// paced by a short interval) until it returns Some, under the shared timeout.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    within(what, async {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tick.tick().await;
            if let Some(v) = check().await {
                return v;
            }
        }
    })
    .await
}
