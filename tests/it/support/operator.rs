//! Set-up shared by the operator tests: a captured `dbo.orders` with
//! changes, the stream fixture's manifest as the cluster takes it, the
//! operator process (alone or as replicas with leader election and their
//! metrics) or the controller run in the test on the fake clock, and
//! waiting for garbage collection.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use mssql_cdc::operator::children::WorkerDefaults;
use mssql_cdc::operator::controller::{Context, run_controller};
use mssql_cdc::operator::metrics::OperatorMetrics;
use tokio::process::{Child, Command};

use super::cdc::{capture_table, max_lsn, wait_for_capture};
use super::http::{free_port, try_http_get};
use super::kube::{KubeEnv, eventually};
use super::server::{Client, TestServer, run};
use super::stream::{PASSWORD_ENV, StreamFixture};

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)";

/// A scratch database with CDC on `dbo.orders` and `count` captured inserts.
pub async fn orders_with_changes(server: &TestServer, count: i32) -> (Client, String) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    capture_table(&mut client, "orders").await;
    let before = max_lsn(&mut client).await;
    for id in 1..=count {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'n{id}', {id})"),
        )
        .await
        .expect("insert");
    }
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), count).await;
    (client, db)
}

/// The fixture's manifest with the password from the Secret `sql` (key
/// `password`), as the CRD requires.
pub fn cluster_manifest(fixture: &StreamFixture) -> String {
    fixture.manifest.replace(
        &format!("{{env: {PASSWORD_ENV}}}"),
        "{secretKeyRef: {name: sql, key: password}}",
    )
}

/// `mssql-cdc operator` against `kube`, killed when dropped.
pub fn start_operator(kube: &KubeEnv, binary: &Path) -> Child {
    operator_command(kube, binary, "127.0.0.1:0")
        .spawn()
        .expect("the operator starts")
}

/// An operator process serving `/metrics` on a known address.
pub struct Operator {
    /// The process, killed when dropped.
    pub process: Child,
    /// Its `--listen` address.
    pub metrics: SocketAddr,
}

impl Operator {
    /// One replica of the operator binary with leader election on the
    /// Lease `default/mssql-cdc-operator`, as the pod `identity`. The Lease
    /// lasts 6 s so that a take-over is quick (renewed every 4 s, each
    /// request given 2 s).
    pub fn replica(kube: &KubeEnv, binary: &Path, identity: &str) -> Self {
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let process = operator_command(kube, binary, &metrics.to_string())
            .args(["--leader-election", "--lease-duration", "6s"])
            .env("POD_NAME", identity)
            .env("POD_NAMESPACE", "default")
            .spawn()
            .expect("the operator starts");
        Operator { process, metrics }
    }

    /// The operator binary without leader election.
    pub fn alone(kube: &KubeEnv, binary: &Path) -> Self {
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let process = operator_command(kube, binary, &metrics.to_string())
            .spawn()
            .expect("the operator starts");
        Operator { process, metrics }
    }

    /// The value of `series` (name and labels, as exposed) on its
    /// `/metrics`; `None` while it has no such sample or does not listen yet.
    pub async fn sample(&self, series: &str) -> Option<f64> {
        let (status, body) = try_http_get(self.metrics, "/metrics").await?;
        assert!(status.contains("200"), "{status}\n{body}");
        body.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }
}

fn operator_command(kube: &KubeEnv, binary: &Path, listen: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .args([
            "operator",
            "--listen",
            listen,
            "--worker-image",
            "mssql-cdc:e2e",
            "--worker-service-account",
            "cdc-worker",
        ])
        .env("KUBECONFIG", &kube.kubeconfig)
        .kill_on_drop(true);
    command
}

/// The controller run inside the test, on the clock of [`KubeEnv::clock`]
/// (the test API server's fake clock), looking at every stream again each
/// `resync`; stopped when dropped.
pub struct InProcessOperator(tokio::task::JoinHandle<()>);

impl Drop for InProcessOperator {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts [`InProcessOperator`] with `client` (say, a token of the chart's
/// operator ServiceAccount), its workers running as `worker_account`.
pub async fn start_operator_as(
    kube: &KubeEnv,
    resync: Duration,
    client: kube::Client,
    worker_account: &str,
) -> InProcessOperator {
    let clock = kube.clock().clone();
    let image = kube.cluster.as_ref().map(|c| c.image.clone());
    let defaults = WorkerDefaults {
        image: image.unwrap_or_else(|| "mssql-cdc:e2e".to_string()),
        service_account: Some(worker_account.to_string()),
    };
    let context = Context::new(client, defaults, None)
        .with_clock(Arc::new(move || clock.now()))
        .with_resync(resync);
    InProcessOperator(tokio::spawn(run_controller(
        context,
        Arc::new(OperatorMetrics::new()),
        std::future::pending(),
    )))
}

/// Waits until `name` no longer exists in `api`.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} to be deleted"), || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// `spec.suspend: true` on the CdcStream `name`, through kubectl.
pub async fn suspend(kube: &KubeEnv, name: &str) {
    kube.kubectl_ok(&[
        "patch",
        "-n",
        &kube.namespace,
        "cdcs",
        name,
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ])
    .await;
}
