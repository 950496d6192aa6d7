//! One stream run the whole way: the whole chart rendered by Helm and
//! applied with kubectl, so that the operator runs in its own pod as the
//! chart's operator ServiceAccount under the chart's RBAC; a Secret and a
//! CdcStream applied with kubectl; the worker run by the harness kubelet
//! (or a real cluster's, with `KUBECONFIG`) against the sandbox or a real
//! SQL Server. On the test API server the operator pod follows the
//! server's fake clock (`ChartRelease::with_test_clock`), so that
//! `KubeEnv::advance_clock` ages what it judges. [`E2eOptions`] says what
//! differs between scenarios.

use crate::support::cdc::{advance_clock, max_lsn, wait_for_capture};
use crate::support::chart::ChartRelease;
use crate::support::cluster::{sandbox_endpoint_for_pods, start_sandbox_pod};
use crate::support::kube::KubeEnv;
use crate::support::operator::{
    chart_values, cluster_manifest, labelled_secret, orders_with_changes,
};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::StreamFixture;

/// The worker pods' label.
pub const WORKER_PODS: &str = "mssql-cdc.io/stream=orders";

/// What a scenario changes.
pub struct E2eOptions {
    /// The rendered chart as the scenario wants it.
    pub chart: Box<dyn FnOnce(ChartRelease) -> ChartRelease>,
    /// Move the sandbox's clock two days on before the last change, as a
    /// database CDC has run on for a while (sandbox only).
    pub age_database: bool,
    /// Lines appended to the spec (indented two spaces).
    pub extra: String,
    /// The trigger, as a flow mapping.
    pub trigger: String,
    /// The password the Secret holds instead of the right one.
    pub secret_password: Option<String>,
    /// Statements run in the scratch database before the stream is applied.
    pub seed: Vec<String>,
    /// A monitoring login (name, password) for `spec.source.monitoring`,
    /// its password in the Secret's key `monitoring`.
    pub monitoring: Option<(String, String)>,
    /// Seconds of quiet after which capture writes an idle entry, for a
    /// sandbox in this process; such a scenario does not run on a real
    /// server or cluster (`start_e2e` returns `None`).
    pub idle_interval_secs: Option<i64>,
    /// Names of more streams of the same table, applied with the first in
    /// one `kubectl apply`.
    pub more_streams: Vec<String>,
}

impl Default for E2eOptions {
    fn default() -> Self {
        E2eOptions {
            chart: Box::new(|chart| chart),
            age_database: true,
            extra: "  snapshot: {mode: never}\n".into(),
            trigger: "{processingTime: 1s}".into(),
            secret_password: None,
            seed: Vec::new(),
            monitoring: None,
            idle_interval_secs: None,
            more_streams: Vec::new(),
        }
    }
}

/// A stream on the sandbox, run by the operator and its worker under the
/// chart's identities.
pub struct E2e {
    pub kube: KubeEnv,
    pub server: TestServer,
    pub fixture: StreamFixture,
    pub database: String,
    _forward: Option<tokio::process::Child>,
    pub chart: ChartRelease,
}

/// Sets up [`E2e`]; `None` when Helm (Python) is missing and allowed to be.
pub async fn start_e2e(options: E2eOptions) -> Option<E2e> {
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_mssql-cdc"));
    let kube = KubeEnv::for_e2e(binary).await;
    let ns = kube.namespace.clone();
    // On a real cluster the release is named after the namespace, so that
    // its ClusterRole does not meet another run's.
    let release = match &kube.cluster {
        Some(_) => ns.replace("mssql-cdc-", ""),
        None => "cdc".to_string(),
    };
    let values = e2e_values(&kube);
    let chart = ChartRelease::render(&release, &ns, &values.to_string()).await?;
    // Only the test API server's clock can be moved (and only a failpoints
    // build follows it); a real cluster's operator keeps the wall clock.
    let chart = match kube.server() {
        Some(_) => chart.with_test_clock(),
        None => chart,
    };
    let chart = (options.chart)(chart);
    // On a real cluster the sandbox runs as a pod, reached through a
    // port-forward; here, in this process.
    let (forward, server) = match (&kube.cluster, options.idle_interval_secs) {
        (Some(_), Some(_)) => {
            eprintln!("skipped: the scenario needs a sandbox with its own idle interval");
            return None;
        }
        (Some(cluster), None) => {
            let (forward, server) = start_sandbox_pod(&kube, cluster).await;
            (Some(forward), server)
        }
        (None, Some(seconds)) => {
            let Some(server) =
                TestServer::sandbox_with(|o| o.cdc_idle_interval_secs = seconds).await
            else {
                eprintln!("skipped: the scenario needs a sandbox with its own idle interval");
                return None;
            };
            (None, server)
        }
        (None, None) => (None, TestServer::start().await),
    };
    let (mut client, db) = orders_with_changes(&server, 2).await;
    if server.is_sandbox() && options.age_database {
        // Two days of kept changes before the third.
        advance_clock(&mut client, 2 * 86_400).await;
    }
    let before = max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (3, N'n3', 3)")
        .await
        .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    seed(&mut client, &options.seed).await;

    kube.install_crd().await;
    // The worker reaches the API server in-cluster only, and the sandbox
    // by a name: its Service on a real cluster, the harness's name for the
    // host here, where each pod has a network of its own.
    let endpoint = match &kube.cluster {
        Some(_) => sandbox_endpoint_for_pods(&ns),
        None => kube.for_pods(server.endpoint()),
    };
    let fixture = StreamFixture::with_endpoint(endpoint, &db, &options.extra);
    let one = cluster_manifest(&fixture).replace(
        "trigger: {availableNow: true}",
        &format!("trigger: {}", options.trigger),
    );
    // More streams of the same table, each with its own name, app id and lake.
    let lake = fixture.lake.path().display().to_string();
    let mut manifest = one.clone();
    for name in &options.more_streams {
        manifest += &format!(
            "---\n{}",
            one.replace(
                "metadata: {name: orders}",
                &format!("metadata: {{name: {name}}}")
            )
            .replace("appId: it-orders", &format!("appId: it-{name}"))
            .replace(&lake, &format!("{lake}/{name}"))
        );
    }
    let mut monitoring_key = String::new();
    if let Some((user, password)) = &options.monitoring {
        manifest = manifest.replace(
            "    encrypt: required",
            &format!(
                "    monitoring:\n      credentials:\n        username: \"{user}\"\n        \
                 passwordFrom: {{secretKeyRef: {{name: sql, key: monitoring}}}}\n    encrypt: required"
            ),
        );
        monitoring_key = format!(", monitoring: \"{password}\"");
    }
    let password = options
        .secret_password
        .unwrap_or_else(|| fixture.password.clone());
    let secret = labelled_secret("sql", &format!("password: \"{password}\"{monitoring_key}"));
    kube.kubectl_ok(&[
        "apply",
        "-n",
        &ns,
        "-f",
        &kube.write("secret.yaml", &secret),
    ])
    .await;
    chart.apply(&kube).await;
    kube.kubectl_ok(&[
        "apply",
        "-n",
        &ns,
        "-f",
        &kube.write("orders.yaml", &manifest),
    ])
    .await;
    Some(E2e {
        kube,
        server,
        fixture,
        database: db,
        _forward: forward,
        chart,
    })
}

/// The chart values of the e2e: [`chart_values`], the worker image of a
/// real cluster, and the numbers the tests watch moving within their 30 s
/// waits (snapshot progress, the next look at the source, an aged batch):
/// workers write them every second (`worker.statusInterval`) and the
/// operator looks at every stream each second (`resync`); the 30 s and 60 s
/// defaults and what they save are tested in operator_status_traffic.
fn e2e_values(kube: &KubeEnv) -> serde_json::Value {
    let mut values = chart_values(kube);
    values["worker"]["statusInterval"] = "1s".into();
    values["resync"] = "1s".into();
    if let Some(cluster) = &kube.cluster {
        let (repository, tag) = cluster
            .image
            .rsplit_once(':')
            .filter(|(_, tag)| !tag.contains('/'))
            .unwrap_or((cluster.image.as_str(), "latest"));
        values["image"] = serde_json::json!({"repository": repository, "tag": tag});
    }
    values
}

async fn seed(client: &mut Client, statements: &[String]) {
    for sql in statements {
        run(client, sql).await.expect("seed statement");
    }
}

impl Drop for E2e {
    fn drop(&mut self) {
        // A real cluster keeps cluster-scoped objects after the namespace.
        if self.kube.cluster.is_some() {
            for (kind, name) in self.chart.cluster_scoped() {
                let _ = std::process::Command::new("kubectl")
                    .env("KUBECONFIG", &self.kube.kubeconfig)
                    .args(["delete", &kind, &name, "--wait=false"])
                    .output();
            }
        }
    }
}
