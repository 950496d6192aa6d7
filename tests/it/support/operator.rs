//! Set-up shared by the operator tests: a captured `dbo.orders` with
//! changes, the stream fixture's manifest as the cluster takes it, the
//! chart values the tests install the operator with, the operator process
//! (alone or as replicas with leader election and their metrics) for the
//! tests of the binary itself, and waiting for garbage collection.

use std::net::SocketAddr;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use mssql_cdc::spec::{CdcStream, CdcStreamStatus};
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
        Self::with_args(kube, binary, &[])
    }

    /// The operator binary without leader election, with `args` added
    /// (`--worker-images ...`, `--watch-namespaces ...`).
    pub fn with_args(kube: &KubeEnv, binary: &Path, args: &[&str]) -> Self {
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let process = operator_command(kube, binary, &metrics.to_string())
            .args(args)
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

/// The chart values every operator test starts from: workers (and the
/// operator's Roles and watch) in the test's namespace, the CRD applied
/// apart (`KubeEnv::install_crd`), and, when the harness's pods share the
/// host's network, the operator's metrics on a free port (each pod has its
/// own network otherwise, and keeps the chart's port).
pub fn chart_values(kube: &KubeEnv) -> serde_json::Value {
    let mut values = serde_json::json!({
        "worker": {"namespaces": [kube.namespace]},
        "crds": {"enabled": false},
    });
    if !kube.pods_have_own_network() {
        values["metrics"] = serde_json::json!({"port": free_port()});
    }
    values
}

/// The condition `type_` of `status`.
pub fn condition<'a>(status: &'a CdcStreamStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Whether `status` has the condition `type_` with `value`.
pub fn has_condition(status: &CdcStreamStatus, type_: &str, value: &str) -> bool {
    condition(status, type_).is_some_and(|c| c.status == value)
}

/// The status of the stream `name` once `wanted` holds.
pub async fn status_when(
    streams: &Api<CdcStream>,
    name: &str,
    what: &str,
    wanted: impl Fn(&CdcStreamStatus) -> bool,
) -> CdcStreamStatus {
    let wanted = &wanted;
    eventually(what, move || async move {
        let status = streams.get(name).await.ok()?.status?;
        wanted(&status).then_some(status)
    })
    .await
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

/// A Secret `name` in the kubectl namespace with `string_data` (the body of
/// a flow mapping, e.g. `p: x`), labelled as the operator requires by
/// default (`--worker-secret-label`), so that streams may name it.
pub fn labelled_secret(name: &str, string_data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, labels: {{{DEFAULT_SECRET_LABEL_YAML}}}}}\n\
         stringData: {{{string_data}}}\n"
    )
}

/// The operator's default Secret label as a YAML mapping entry.
const DEFAULT_SECRET_LABEL_YAML: &str = "mssql-cdc.io/allow: \"true\"";

/// [`stream_manifest`] after the labelled Secret `s` it names, as one
/// file: what the operator turns into a worker.
pub fn stream_with_secret(name: &str, worker: &str) -> String {
    format!(
        "{}---\n{}",
        labelled_secret("s", "p: x"),
        stream_manifest(name, worker)
    )
}

/// A valid continuous CdcStream `name` (its source need not exist) with
/// `worker` as the flow mapping of `spec.worker`, e.g. `{image: x}`.
pub fn stream_manifest(name: &str, worker: &str) -> String {
    format!(
        "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: {name}}}\nspec:\n  \
         appId: {name}-v1\n  source:\n    host: sql\n    database: shop\n    table: dbo.orders\n    \
         credentials:\n      username: r\n      passwordFrom: {{secretKeyRef: {{name: s, key: p}}}}\n  \
         target: {{name: bronze.{name}, location: /lake/{name}}}\n  checkpoint: /lake/ckpt/{name}\n  \
         facts: {{name: ops.facts, location: /lake/facts}}\n  trigger: {{processingTime: 10s}}\n  \
         worker: {worker}\n"
    )
}

/// The Events about the object `name` in `namespace`: (type, reason, note).
pub async fn events_of(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Vec<(String, String, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), namespace);
    events
        .list(&Default::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// The Events about `name` once one is a Warning with `reason`.
pub async fn once_warned(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Vec<(String, String, String)> {
    eventually(&format!("a Warning Event {reason} for {name}"), || async {
        let events = events_of(client, namespace, name).await;
        events
            .iter()
            .any(|(type_, r, _)| type_ == "Warning" && r == reason)
            .then_some(events)
    })
    .await
}
