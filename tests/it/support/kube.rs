//! A Kubernetes API for the operator tests: the project's test API server
//! (crates/test-apiserver, optionally with its harness kubelet), driven
//! through a kubeconfig only, and the real `kubectl` client.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use mssql_cdc_test_apiserver::{KubeletOptions, ServerOptions, TestApiServer};

/// Upper bound of one kubectl call or wait.
pub const WAIT: Duration = Duration::from_secs(30);

/// A running API server, its kubeconfig, and a scratch directory.
pub struct KubeEnv {
    /// The server (dropped last).
    pub server: TestApiServer,
    /// Scratch files, kubectl's cache and the pods' logs.
    pub dir: tempfile::TempDir,
    /// The kubeconfig every client uses.
    pub kubeconfig: PathBuf,
}

impl KubeEnv {
    /// A server without a kubelet.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// A server whose harness kubelet runs pods as processes of `binary`.
    pub async fn with_kubelet(binary: PathBuf) -> Self {
        Self::start_with(Some(binary)).await
    }

    async fn start_with(binary: Option<PathBuf>) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        let kubelet = binary.map(|binary| KubeletOptions {
            binary,
            log_dir: dir.path().join("pods"),
        });
        let server = TestApiServer::start(ServerOptions {
            kubelet,
            ..ServerOptions::default()
        })
        .await
        .expect("start the test API server");
        let kubeconfig = dir.path().join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("write kubeconfig");
        KubeEnv {
            server,
            dir,
            kubeconfig,
        }
    }

    /// A kube-rs client for the server.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::from_yaml(&self.server.kubeconfig()).expect("kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("client config");
        kube::Client::try_from(config).expect("client")
    }

    /// Runs kubectl with `args`; the caller judges the outcome.
    pub async fn kubectl(&self, args: &[&str]) -> Output {
        let mut command = tokio::process::Command::new(kubectl_path());
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .kill_on_drop(true);
        tokio::time::timeout(WAIT, command.output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {} took over {WAIT:?}", args.join(" ")))
            .expect("kubectl starts")
    }

    /// kubectl's stdout; fails the test when kubectl fails.
    pub async fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "kubectl {} failed:\n{stdout}\n{stderr}",
            args.join(" ")
        );
        stdout.into_owned()
    }

    /// kubectl's stderr; fails the test when kubectl succeeds.
    pub async fn kubectl_fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert!(
            !out.status.success(),
            "kubectl {} should have failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Writes `text` into the scratch directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write scratch file");
        path.display().to_string()
    }

    /// Applies the generated CRD and waits until it is served.
    pub async fn install_crd(&self) {
        let crd = repo_file("crds/cdcstreams.yaml");
        self.kubectl_ok(&["apply", "-f", &crd]).await;
        self.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd/cdcstreams.mssql-cdc.io",
            "--timeout=20s",
        ])
        .await;
    }
}

/// A file of this repository, as a path string for kubectl.
pub fn repo_file(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(relative)
        .display()
        .to_string()
}

/// Splits a kubectl table line into its cells.
pub fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// kubectl must exist: these tests must not pass without running.
fn kubectl_path() -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "command -v kubectl"])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => panic!("kubectl is not on PATH: install a kubectl 1.32 client (see docs/testing.md)"),
    }
}

/// Polls `check` every 100 ms (each poll a real read) until it returns
/// `Some`, failing the test with `what` after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let polls = async {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            if let Some(value) = check().await {
                return value;
            }
        }
    };
    tokio::time::timeout(WAIT, polls)
        .await
        .unwrap_or_else(|_| panic!("timed out after {WAIT:?} waiting for {what}"))
}
