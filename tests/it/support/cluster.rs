//! The operator e2e against a real cluster, when `KUBECONFIG` is set: the
//! image its pods run, the sandbox as a pod that the test reaches through
//! `kubectl port-forward`, and the worker's RBAC as the Helm chart grants
//! it (docs/kubernetes.md, "Running the e2e against a real cluster").

use std::ffi::OsString;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::kube::KubeEnv;
use super::server::{Endpoint, TestServer};

/// The variable naming the mssql-cdc image the cluster's nodes can run.
pub const IMAGE_VAR: &str = "MSSQL_CDC_TEST_IMAGE";

/// Name of the sandbox's Deployment and Service.
pub const SANDBOX: &str = "mssql-cdc-sandbox";

/// The `sa` password of the sandbox pod (a throwaway test server).
pub const SANDBOX_PASSWORD: &str = "E2e-Sandbox-Pa55word!";

/// How long a real cluster may take to pull, schedule and start a pod.
pub const POD_START: Duration = Duration::from_secs(180);

/// A real cluster to run the e2e on, and the image it runs.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// `KUBECONFIG` as given (it may list several files).
    pub kubeconfig: OsString,
    /// The mssql-cdc image for the sandbox and the workers.
    pub image: String,
}

impl Cluster {
    /// Whether `KUBECONFIG` asks for a real cluster.
    pub fn requested() -> bool {
        std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty())
    }

    /// The cluster `KUBECONFIG` names; `None` when it is not set.
    pub fn from_env() -> Option<Self> {
        let kubeconfig = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty())?;
        let image = std::env::var(IMAGE_VAR)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| {
                panic!(
                    "KUBECONFIG is set, so the operator e2e runs on that cluster; set {IMAGE_VAR} \
                     to an mssql-cdc image its nodes can run (docs/kubernetes.md)"
                )
            });
        Some(Cluster { kubeconfig, image })
    }
}

/// The sandbox as a Deployment of one pod and a Service on port 1433.
pub fn sandbox_manifest(namespace: &str, image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {SANDBOX}, namespace: {namespace}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {SANDBOX}}}}}
  template:
    metadata: {{labels: {{app: {SANDBOX}}}}}
    spec:
      securityContext: {{runAsNonRoot: true, runAsUser: 65532, seccompProfile: {{type: RuntimeDefault}}}}
      containers:
      - name: sandbox
        image: "{image}"
        args: [sandbox, --listen, "0.0.0.0:1433"]
        env: [{{name: MSSQL_CDC_SANDBOX_SA_PASSWORD, value: "{SANDBOX_PASSWORD}"}}]
        ports: [{{containerPort: 1433}}]
        readinessProbe: {{tcpSocket: {{port: 1433}}, periodSeconds: 2}}
        securityContext: {{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {{drop: [ALL]}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: {SANDBOX}, namespace: {namespace}}}
spec:
  selector: {{app: {SANDBOX}}}
  ports: [{{port: 1433, targetPort: 1433}}]
"#
    )
}

/// The in-cluster address of the sandbox, as the worker pods reach it.
pub fn sandbox_host(namespace: &str) -> String {
    format!("{SANDBOX}.{namespace}.svc")
}

/// `kubectl port-forward` from a free loopback port to the sandbox
/// Service; the forward lasts as long as the returned child.
pub async fn port_forward(kubeconfig: &OsString, namespace: &str) -> (Child, u16) {
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args([
            "port-forward",
            "--address",
            "127.0.0.1",
            "-n",
            namespace,
            &format!("svc/{SANDBOX}"),
            ":1433",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl port-forward starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    // "Forwarding from 127.0.0.1:PORT -> 1433"
    let port = tokio::time::timeout(POD_START, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(port) = forwarded_port(&line) {
                return Some(port);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .expect("kubectl port-forward names its local port");
    // Keep draining its output so the pipe never fills.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// The local port of a `kubectl port-forward` "Forwarding from" line.
fn forwarded_port(line: &str) -> Option<u16> {
    let rest = line.strip_prefix("Forwarding from 127.0.0.1:")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The ADO.NET connection string of the forwarded sandbox.
pub fn sandbox_url(port: u16) -> String {
    format!(
        "server=tcp:127.0.0.1,{port};user=sa;password={SANDBOX_PASSWORD};TrustServerCertificate=true"
    )
}

/// The sandbox as a pod of `kube`'s cluster, and a [`TestServer`] on it
/// through `kubectl port-forward` (kept open by the returned child).
pub async fn start_sandbox_pod(kube: &KubeEnv, cluster: &Cluster) -> (Child, TestServer) {
    let manifest = sandbox_manifest(&kube.namespace, &cluster.image);
    kube.kubectl_ok(&["apply", "-f", &kube.write("sandbox.yaml", &manifest)])
        .await;
    kube.kubectl_ok(&[
        "wait",
        "-n",
        &kube.namespace,
        "--for=condition=Available",
        &format!("deployment/{SANDBOX}"),
        &format!("--timeout={}s", POD_START.as_secs() - 10),
    ])
    .await;
    let (forward, port) = port_forward(&cluster.kubeconfig, &kube.namespace).await;
    (forward, TestServer::remote_sandbox(sandbox_url(port)))
}

/// Where the worker pods reach the sandbox pod.
pub fn sandbox_endpoint_for_pods(namespace: &str) -> Endpoint {
    Endpoint {
        host: sandbox_host(namespace),
        port: 1433,
        user: "sa".to_string(),
        password: SANDBOX_PASSWORD.to_string(),
    }
}

/// `SELECT COUNT(*)` of the Delta table at `location` as the worker pod of
/// Deployment `deployment` sees it (its lake is on the pod's `/tmp`).
pub async fn count_rows_in_pod(kube: &KubeEnv, deployment: &str, location: &str) -> Option<u64> {
    let out = kube
        .kubectl(&[
            "exec",
            "-n",
            &kube.namespace,
            &format!("deployment/{deployment}"),
            "--",
            "mssql-cdc",
            "sql",
            "--csv",
            "--table",
            &format!("t={location}"),
            "SELECT COUNT(*) AS n FROM t",
        ])
        .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    out.status
        .success()
        .then(|| stdout.lines().nth(1)?.trim().parse().ok())
        .flatten()
}

#[test]
fn reads_the_port_kubectl_forwards_from() {
    assert_eq!(
        forwarded_port("Forwarding from 127.0.0.1:40123 -> 1433"),
        Some(40123)
    );
    assert_eq!(forwarded_port("Forwarding from [::1]:40123 -> 1433"), None);
}
