//! A Kubernetes API for the operator tests: the project's test API server
//! (crates/test-apiserver, optionally with its harness kubelet), driven
//! through a kubeconfig only, and the real `kubectl` client. The e2e test
//! can also run on a real cluster (`KUBECONFIG`, see `super::cluster`).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use mssql_cdc_test_apiserver::kubelet::{self, network};
use mssql_cdc_test_apiserver::{Clock, KubeletOptions, ServerOptions, TestApiServer};

use super::cluster::{Cluster, POD_START};
use super::server::Endpoint;

/// Upper bound of one kubectl call or wait on the test API server.
pub const WAIT: Duration = Duration::from_secs(30);

/// A running API server (or a real cluster), its kubeconfig, and a scratch
/// directory.
pub struct KubeEnv {
    /// The test API server; `None` on a real cluster.
    server: Option<TestApiServer>,
    /// The real cluster, when the e2e runs on one.
    pub cluster: Option<Cluster>,
    /// The test API server's fake clock (on a real cluster one of the
    /// test's own, which nothing there reads).
    clock: Clock,
    /// Scratch files, kubectl's cache and the pods' logs.
    pub dir: tempfile::TempDir,
    /// The kubeconfig every client uses.
    pub kubeconfig: PathBuf,
    /// The namespace the test's objects go to.
    pub namespace: String,
    /// With a network per pod: the host's ports its pods may reach.
    host_ports: Option<network::HostPorts>,
}

impl KubeEnv {
    /// A server without a kubelet.
    pub async fn start() -> Self {
        Self::start_with(None, false).await
    }

    /// A server whose harness kubelet runs pods as processes of `binary`,
    /// each pod in a network of its own as on a cluster (when mount
    /// namespaces are available; see [`KubeEnv::pods_have_own_network`]).
    pub async fn with_pod_network(binary: PathBuf) -> Self {
        Self::start_with(Some(binary), true).await
    }

    /// For the e2e: the cluster `KUBECONFIG` names, in a new namespace, or
    /// else the test API server with its harness kubelet running `binary`.
    pub async fn for_e2e(binary: PathBuf) -> Self {
        let Some(cluster) = Cluster::from_env() else {
            return Self::with_pod_network(binary).await;
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let env = KubeEnv {
            server: None,
            kubeconfig: PathBuf::from(&cluster.kubeconfig),
            cluster: Some(cluster),
            clock: Clock::new(),
            dir: tempfile::tempdir().expect("tempdir"),
            namespace: format!(
                "mssql-cdc-e2e-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
            host_ports: None,
        };
        env.kubectl_ok(&["create", "namespace", &env.namespace])
            .await;
        env
    }

    async fn start_with(binary: Option<PathBuf>, pod_network: bool) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        // Without mount namespaces (not root) pods share the host's network.
        let host_ports = (pod_network && binary.is_some() && kubelet::isolation_available())
            .then(network::HostPorts::default);
        let kubelet = binary.map(|binary| {
            let mut k = KubeletOptions::new(binary, dir.path().join("pods"));
            if let Some(ports) = &host_ports {
                k.pod_network = true;
                k.host_ports = ports.clone();
            }
            k
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
            clock: server.clock().clone(),
            server: Some(server),
            cluster: None,
            dir,
            kubeconfig,
            namespace: "default".to_string(),
            host_ports,
        }
    }

    /// `endpoint` as the harness's pods reach it: a server on the host's
    /// loopback by the harness's name for the host (its port forwarded),
    /// the way a pod reaches a Service; anything else unchanged.
    pub fn for_pods(&self, endpoint: Endpoint) -> Endpoint {
        let loopback = matches!(endpoint.host.as_str(), "127.0.0.1" | "localhost");
        match &self.host_ports {
            Some(ports) if loopback => {
                ports.add(endpoint.port);
                Endpoint {
                    host: network::HOST_NAME.to_string(),
                    ..endpoint
                }
            }
            _ => endpoint,
        }
    }

    /// Whether each pod has a network of its own, so that every pod may
    /// listen on its default ports; without mount namespaces (not root)
    /// the harness's pods share the host's.
    pub fn pods_have_own_network(&self) -> bool {
        self.host_ports.is_some()
    }

    /// `url` (`scheme://127.0.0.1:PORT/...`, a test server on the host) as
    /// the harness's pods reach it: see [`KubeEnv::for_pods`].
    pub fn url_for_pods(&self, url: &str) -> String {
        let Some((scheme, rest)) = url.split_once("://") else {
            return url.to_string();
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let Some((host, port)) = authority
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        else {
            return url.to_string();
        };
        let endpoint = self.for_pods(Endpoint {
            host: host.to_string(),
            port,
            user: String::new(),
            password: String::new(),
        });
        format!("{scheme}://{}:{}{path}", endpoint.host, endpoint.port)
    }

    /// "Now" on the test API server's clock.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// Moves the test API server's clock on by `by` (its CronJobs, ages and
    /// tokens follow at once), and writes its offset from the wall clock
    /// into the ConfigMap an operator pod on the test's clock follows
    /// (`ChartRelease::with_test_clock`), which it sees a moment later.
    pub async fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
        let offset = (self.clock.now() - chrono::Utc::now()).num_milliseconds();
        let seconds = (offset + 500).div_euclid(1000);
        let config_map = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {}, namespace: {}}}\n\
             data: {{offsetSeconds: \"{seconds}\"}}\n",
            super::chart::TEST_CLOCK_CONFIG_MAP,
            self.namespace
        );
        let file = self.write("test-clock.yaml", &config_map);
        self.kubectl_ok(&["apply", "-f", &file]).await;
    }

    /// The test API server, when the tests do not run on a real cluster.
    pub fn server(&self) -> Option<&TestApiServer> {
        self.server.as_ref()
    }

    async fn config(&self) -> kube::Config {
        let kubeconfig = match &self.server {
            Some(server) => Kubeconfig::from_yaml(&server.kubeconfig()).expect("kubeconfig"),
            None => Kubeconfig::from_env()
                .expect("KUBECONFIG reads")
                .expect("KUBECONFIG is set"),
        };
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("client config")
    }

    /// A kube-rs client for the server or the cluster, as its admin.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config().await).expect("client")
    }

    /// Runs kubectl with `args`; the caller judges the outcome.
    pub async fn kubectl(&self, args: &[&str]) -> Output {
        let mut command = tokio::process::Command::new(kubectl_path());
        command.env("KUBECONFIG", &self.kubeconfig);
        // A real cluster's credential plugins read the user's home.
        if self.server.is_some() {
            command.env("HOME", self.dir.path());
        }
        command
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .kill_on_drop(true);
        let limit = wait_limit();
        tokio::time::timeout(limit, command.output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {} took over {limit:?}", args.join(" ")))
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

    /// What `kubectl get KIND NAME -o jsonpath=PATH` prints in the test
    /// namespace, as a user reads one field.
    pub async fn jsonpath(&self, kind: &str, name: &str, path: &str) -> String {
        let path = format!("jsonpath={path}");
        self.kubectl_ok(&["get", kind, name, "-n", &self.namespace, "-o", &path])
            .await
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

    /// Applies the generated CRDs (CdcStream and CdcSource) and waits
    /// until they are served.
    pub async fn install_crd(&self) {
        // The operator watches both kinds.
        for kind in ["cdcstreams", "cdcsources"] {
            let crd = repo_file(&format!("crds/{kind}.yaml"));
            self.kubectl_ok(&["apply", "-f", &crd]).await;
            self.kubectl_ok(&[
                "wait",
                "--for=condition=Established",
                &format!("crd/{kind}.mssql-cdc.io"),
                "--timeout=20s",
            ])
            .await;
        }
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
/// `Some`, failing the test with `what` after [`wait_limit`].
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let limit = wait_limit();
    tokio::time::timeout(limit, poll(check))
        .await
        .unwrap_or_else(|_| panic!("timed out after {limit:?} waiting for {what}"))
}

/// Polls `check` every 100 ms until it returns `Some`, without a deadline
/// (the caller sets one, and says more when it passes).
pub async fn poll<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        if let Some(value) = check().await {
            return value;
        }
    }
}

/// How long one kubectl call or wait may take: longer when the e2e runs on
/// a real cluster, where pods pull images and get scheduled, and as long
/// as `MSSQL_CDC_TEST_WAIT` (seconds) says on a machine that is busy with
/// other work (the test API server shares the test's thread).
pub fn wait_limit() -> Duration {
    let given = std::env::var(WAIT_ENV)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let default = if Cluster::requested() {
        POD_START
    } else {
        WAIT
    };
    given.map_or(default, |given| given.max(default))
}

/// The variable that lengthens [`wait_limit`].
const WAIT_ENV: &str = "MSSQL_CDC_TEST_WAIT";

impl Drop for KubeEnv {
    fn drop(&mut self) {
        // A real cluster keeps what the test made unless it is deleted.
        if self.cluster.is_some() {
            let _ = std::process::Command::new(kubectl_path())
                .env("KUBECONFIG", &self.kubeconfig)
                .args(["delete", "namespace", &self.namespace, "--wait=false"])
                .output();
        }
    }
}
