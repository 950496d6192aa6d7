//! Every file of `examples/kubernetes/` applied to the test API server and
//! run by the harness kubelet, with the whole chart installed as Helm
//! renders it (the operator in its own pod, as the chart's operator
//! ServiceAccount under its RBAC, on the server's fake clock), each pod in
//! a network of its own: only the SQL Server's address and certificate
//! trust and the object store's endpoint change (`support::examples`),
//! the test's servers reached as `host.harness.internal`. The test's
//! servers take the examples' placeholder credentials, so the Secrets are
//! applied as they are.
//!
//! - the continuous stream reaches Ready=True with its lake and checkpoint
//!   on its PersistentVolumeClaim, mounted for real in the pod's own mount
//!   namespace; its bronze table is on the claim's volume;
//! - the hourly `availableNow` stream makes no Job until its schedule: the
//!   fake clock (the server's and the operator's) moves to the next full
//!   hour and the CronJob's run
//!   completes with the table's rows on the claim; after a change and a
//!   run now (as `kubectl create job --from=cronjob/...`), the stream is
//!   Ready although the operator's clock is up to an hour past that run,
//!   thanks to its `alerts.silence`;
//! - the S3 stream runs as its own ServiceAccount with web identity (no
//!   keys) on moto, the ADLS stream with the account key from its Secret
//!   on Azurite; both reach Ready=True;
//! - the CdcSource example's three tables run in exactly one worker pod,
//!   each stream reaches Ready=True, the operator's label lists them, and
//!   `kubectl get cdcsrc` prints 3/3 in its Tables column; a stream added
//!   to the source does not restart its worker, which takes it up in its
//!   own process, and one naming no
//!   existing source reports `SourceNotFound`;
//! - the continuous example as it was before volumes (the lake on the
//!   read-only root) crash-loops, its pod's terminated message says why,
//!   and the stream is not Ready;
//! - the continuous example with its claim bound to a `hostPath` volume
//!   (storage that ignores `fsGroup`, as NFS does), root's with mode 0755:
//!   the stream says `VolumeNotWritable`, naming the volume, its claim and
//!   the fix, in its conditions and in `kubectl get cdcs`;
//! - docs/kubernetes.md's walk-through, every command of it in order as a
//!   user pastes it (`helm` is Helm's SDK behind its command line), ends
//!   with the PVC example's stream Ready.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::ListParams;
use mssql_cdc::spec::{CdcStream, CdcStreamStatus, Phase};

use crate::support::cdc::{advance_clock, max_lsn, wait_for_capture};
use crate::support::chart::ChartRelease;
use crate::support::examples::{Example, example_files};
use crate::support::kube::{KubeEnv, cells, eventually, poll};
use crate::support::objectstores::{Azurite, Moto};
use crate::support::operator::{chart_values, condition, has_condition};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::query_table;
use crate::support::sts::WebIdentitySts;

/// The examples' SQL Server side: examples/sandbox/shop-cdc.sql, then the
/// source example's third table (examples/sandbox/shop-payments-cdc.sql).
const SHOP: &str = include_str!("../../examples/sandbox/shop-cdc.sql");
const SHOP_PAYMENTS: &str = include_str!("../../examples/sandbox/shop-payments-cdc.sql");
/// The reader's password in SHOP, replaced by the example's.
const SHOP_PASSWORD: &str = "Reader-Pa55word!";

/// The billing database of the object-store examples, made as SHOP is.
fn billing(login: &str, password: &str) -> String {
    format!(
        "CREATE DATABASE billing;\nGO\nUSE billing;\nGO\nCREATE SCHEMA sales;\nGO\n\
         CREATE TABLE sales.invoices (id int NOT NULL PRIMARY KEY, customer nvarchar(100) NOT NULL, \
         total decimal(12,2) NOT NULL);\nGO\nEXEC sys.sp_cdc_enable_db;\nGO\n\
         EXEC sys.sp_cdc_enable_table @source_schema = N'sales', @source_name = N'invoices', \
         @role_name = NULL;\nGO\nCREATE LOGIN {login} WITH PASSWORD = '{password}';\n\
         CREATE USER {login} FOR LOGIN {login};\nGRANT SELECT ON SCHEMA::sales TO {login};\n\
         GRANT SELECT ON SCHEMA::cdc TO {login};\nGRANT VIEW DATABASE STATE TO {login};\nGO\n"
    )
}

/// The examples that run on a SQL Server with the demo's `shop`.
const SHOP_EXAMPLES: [&str; 2] = ["orders-continuous.yaml", "orders-hourly.yaml"];
/// The examples that run on `billing` and an object store.
const BILLING_EXAMPLES: [&str; 2] = ["invoices-s3.yaml", "invoices-adls.yaml"];
/// The examples of a CdcSource, on `shop` with its third table.
const SOURCE_EXAMPLES: [&str; 1] = ["shop-source.yaml"];

/// The chart values an example's header says it needs besides the
/// defaults: `workerServiceAccounts` and `workerEnv`.
#[derive(Clone, Copy, Default)]
struct Values {
    service_accounts: &'static [&'static str],
    env: &'static [&'static str],
}

/// The test API server with its kubelet, the CRD from `crds/`, a sandbox
/// with the example's database and changes that give the stream two days
/// of CDC history (a younger database rightly fails the 24-hour retention
/// headroom), and the whole chart applied: the operator runs in its own
/// pod.
struct Cluster {
    kube: KubeEnv,
    sql: TestServer,
    source: &'static Source,
}

/// Where a stream's changes come from: its database, table, capture
/// instance and an INSERT of row `{id}`.
struct Source {
    database: &'static str,
    capture_instance: &'static str,
    insert: &'static str,
}

const ORDERS: Source = Source {
    database: "shop",
    capture_instance: "dbo_orders",
    insert: "INSERT INTO dbo.orders (id, customer_id, total) VALUES ({id}, 1, 10.50)",
};
const CUSTOMERS: Source = Source {
    database: "shop",
    capture_instance: "dbo_customers",
    insert: "INSERT INTO dbo.customers (id, name) VALUES ({id}, N'customer {id}')",
};
const PAYMENTS: Source = Source {
    database: "shop",
    capture_instance: "dbo_payments",
    insert: "INSERT INTO dbo.payments (id, order_id, amount) VALUES ({id}, 1, 5.00)",
};
const INVOICES: Source = Source {
    database: "billing",
    capture_instance: "sales_invoices",
    insert: "INSERT INTO sales.invoices (id, customer, total) VALUES ({id}, N'c{id}', 99.00)",
};

impl Cluster {
    /// Everything but the example, whose SQL login and password the
    /// sandbox takes; the chart is installed with its defaults and the
    /// `values` the example's header asks for, and the operator looks at
    /// every stream each second (`resync`), so that a verdict that time
    /// alone changes shows within the test's waits.
    async fn start(example: &Example, source: &'static Source, values: Values) -> Option<Self> {
        Self::start_tables(example, &[source], values).await
    }

    /// [`Cluster::start`] with CDC history in each of `tables` (of one
    /// database), for a CdcSource's example.
    async fn start_tables(
        example: &Example,
        tables: &[&'static Source],
        values: Values,
    ) -> Option<Self> {
        let source = tables[0];
        let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_mssql-cdc"));
        let kube = KubeEnv::with_pod_network(binary).await;
        let mut chart_values = chart_values(&kube);
        chart_values["workerServiceAccounts"] = values.service_accounts.into();
        chart_values["workerEnv"] = values.env.into();
        chart_values["resync"] = "1s".into();
        let chart = ChartRelease::render("cdc", &kube.namespace, &chart_values.to_string())
            .await?
            .with_test_clock();
        let (login, password) = (example.login(), example.sql_password());
        let script = match source.database {
            "shop" => format!(
                "{}\n{SHOP_PAYMENTS}",
                SHOP.replace(SHOP_PASSWORD, &password)
            ),
            _ => billing(&login, &password),
        };
        let sql = TestServer::sandbox_with_script(script).await;
        let mut client = sql.connect_to(source.database).await;
        changes_with_history(&mut client, tables).await;

        kube.install_crd().await;
        chart.apply(&kube).await;
        Some(Cluster { kube, sql, source })
    }

    /// `example` pointed at the sandbox, applied with kubectl.
    async fn apply(&self, example: Example) {
        let example = example.at_sql_server(&self.kube.for_pods(self.sql.endpoint()));
        let file = self.kube.write(&example.file, &example.to_yaml());
        self.kube
            .kubectl_ok(&["apply", "-n", &self.kube.namespace, "-f", &file])
            .await;
    }

    async fn streams(&self) -> Api<CdcStream> {
        Api::namespaced(self.kube.client().await, &self.kube.namespace)
    }

    /// A change after the worker's snapshot (seen in its log): a stream
    /// reports progress with its first batch, and the snapshot copied the
    /// changes made before it.
    async fn change_after_snapshot(&self, name: &str) {
        self.snapshots_done(&format!("mssql-cdc.io/stream={name}"), 1, name)
            .await;
        let mut client = self.sql.connect_to(self.source.database).await;
        insert_captured(&mut client, self.source, &[104]).await;
    }

    /// Waits until the log of the pods `selector` picks says `count`
    /// snapshots are done; on timeout the test fails explaining `name`.
    async fn snapshots_done(&self, selector: &str, count: usize, name: &str) {
        let args = [
            "logs",
            "-n",
            &self.kube.namespace,
            "-l",
            selector,
            "--tail=-1",
        ];
        let snapshot = poll(|| async {
            let out = self.kube.kubectl(&args).await;
            let done = String::from_utf8_lossy(&out.stdout)
                .matches("snapshot done")
                .count();
            (done >= count).then_some(())
        });
        if tokio::time::timeout(READY_WITHIN, snapshot).await.is_err() {
            panic!("{name} made no snapshot:\n{}", self.explain(name).await);
        }
    }

    /// The stream's status once Ready=True; on timeout the test fails
    /// with the stream, its pods and their logs.
    async fn ready(&self, name: &str) -> CdcStreamStatus {
        let streams = self.streams().await;
        let ready = poll(|| async {
            let status = streams.get(name).await.ok()?.status?;
            has_condition(&status, "Ready", "True").then_some(status)
        });
        let Ok(status) = tokio::time::timeout(READY_WITHIN, ready).await else {
            panic!("{name} is not Ready:\n{}", self.explain(name).await);
        };
        assert_eq!(status.phase, Some(Phase::Streaming));
        status
    }

    /// The stream, its pods and their logs, for a failure message.
    async fn explain(&self, name: &str) -> String {
        let ns = self.kube.namespace.as_str();
        // Every worker of the cluster: the stream's own, or its source's.
        let selector = "app.kubernetes.io/name=mssql-cdc-worker";
        let mut text = String::new();
        for args in [
            vec!["get", "-n", ns, "cdcs", name, "-o", "yaml"],
            vec!["get", "-n", ns, "cdcsrc", "-o", "yaml"],
            vec!["get", "-n", ns, "pods,pvc,jobs", "-o", "wide"],
            vec!["logs", "-n", ns, "-l", selector, "--tail=40"],
        ] {
            let out = self.kube.kubectl(&args).await;
            text.push_str(&String::from_utf8_lossy(&out.stdout));
            text.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        text
    }
}

/// How long a stream may take to be Ready once its change is captured:
/// the next trigger (30 s for the object-store examples), a batch, the
/// operator's next look.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// Two inserts in each table, two days on the sandbox's clock, a third
/// insert, all captured: two days of CDC history behind each stream's
/// position.
async fn changes_with_history(client: &mut Client, tables: &[&Source]) {
    for table in tables {
        insert_captured(client, table, &[101, 102]).await;
    }
    advance_clock(client, 2 * 86_400).await;
    for table in tables {
        insert_captured(client, table, &[103]).await;
    }
}

/// Rows `ids` inserted into the source's table, once CDC captured them.
async fn insert_captured(client: &mut Client, source: &Source, ids: &[i32]) {
    let before = max_lsn(client).await;
    for id in ids {
        let sql = source.insert.replace("{id}", &id.to_string());
        run(client, &sql).await.expect("insert");
    }
    let count = i32::try_from(ids.len()).expect("a few rows");
    wait_for_capture(client, source.capture_instance, before.as_deref(), count).await;
}

/// The host directory of the PersistentVolume bound to claim `name`.
async fn claim_directory(kube: &KubeEnv, name: &str) -> std::path::PathBuf {
    let client = kube.client().await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &kube.namespace);
    let volume = eventually(&format!("claim {name} bound"), || async {
        claims.get(name).await.ok()?.spec?.volume_name
    })
    .await;
    let volume = Api::<PersistentVolume>::all(client)
        .get(&volume)
        .await
        .expect("the bound PersistentVolume");
    let spec = volume.spec.expect("spec");
    let path = spec
        .host_path
        .map(|h| h.path)
        .or(spec.local.map(|l| l.path))
        .expect("a hostPath or local volume");
    std::path::PathBuf::from(path)
}

#[tokio::test]
async fn every_example_is_run_by_a_test_here() {
    let tested: Vec<&str> = SHOP_EXAMPLES
        .iter()
        .chain(BILLING_EXAMPLES.iter())
        .chain(SOURCE_EXAMPLES.iter())
        .copied()
        .collect();
    for file in example_files() {
        assert!(
            tested.contains(&file.as_str()),
            "examples/kubernetes/{file} is not run by tests/it/operator_examples.rs"
        );
    }
}

#[tokio::test]
async fn the_continuous_example_is_ready_with_its_lake_on_its_claim() {
    let example = Example::load("orders-continuous.yaml");
    let Some(cluster) = Cluster::start(&example, &ORDERS, Values::default()).await else {
        return;
    };
    let name = example.stream_name();
    cluster.apply(example).await;
    cluster.change_after_snapshot(&name).await;
    let status = cluster.ready(&name).await;
    for healthy in ["Live", "RetentionHeadroom", "IngestionLag", "CaptureLag"] {
        let c = condition(&status, healthy).expect(healthy);
        assert_eq!(c.status, "True", "{healthy}: {} {}", c.message, c.reason);
    }
    // The lake is on the claim's volume, not in the pod: a new pod keeps it.
    let lake = claim_directory(&cluster.kube, "orders-lake").await;
    let bronze = lake.join("bronze/orders");
    // Ready comes with the snapshot on a quiet table; the change follows
    // in the next batch.
    let count = "SELECT COUNT(DISTINCT id) FROM t WHERE id > 100";
    let rows = tokio::time::timeout(
        READY_WITHIN,
        poll(|| async {
            let rows = query_table(&bronze, count).await;
            (rows == [["4"]]).then_some(rows)
        }),
    )
    .await;
    assert!(
        rows.is_ok(),
        "the snapshot's three orders and the change after it: {:?}",
        query_table(&bronze, count).await
    );
    assert!(lake.join("_checkpoints/orders").is_dir());
    assert!(lake.join("ops/ingestion_facts/_delta_log").is_dir());
}

#[tokio::test]
async fn the_source_example_runs_its_three_tables_in_one_worker_pod() {
    let example = Example::load("shop-source.yaml");
    let tables = [&ORDERS, &CUSTOMERS, &PAYMENTS];
    let Some(cluster) = Cluster::start_tables(&example, &tables, Values::default()).await else {
        return;
    };
    let source = example.source_name();
    let names = example.stream_names();
    assert_eq!(names.len(), 3, "{names:?}");
    let shop = example.source().expect("the example's CdcSource").clone();
    cluster.apply(example).await;
    // Each table's snapshot in the one worker's log, then a change in each.
    let selector = format!("mssql-cdc.io/source={source}");
    cluster.snapshots_done(&selector, 3, &names[0]).await;
    let mut client = cluster.sql.connect_to("shop").await;
    for table in tables {
        insert_captured(&mut client, table, &[104]).await;
    }
    for name in &names {
        cluster.ready(name).await;
    }
    let kube = &cluster.kube;
    let ns = kube.namespace.as_str();
    // Exactly one worker pod, the source's: no stream has one of its own.
    let pods: Api<Pod> = Api::namespaced(kube.client().await, ns);
    let worker_pods = || async {
        pods.list(&ListParams::default().labels("app.kubernetes.io/name=mssql-cdc-worker"))
            .await
            .expect("pods")
            .items
    };
    let workers = worker_pods().await;
    assert_eq!(
        workers.len(),
        1,
        "{:?}",
        workers.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
    );
    assert_eq!(
        workers[0]
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("mssql-cdc.io/source")),
        Some(&source)
    );
    // The operator's label lists the source's tables.
    let listed = kube
        .kubectl_ok(&["get", "cdcs", "-n", ns, "-l", &selector, "-o", "name"])
        .await;
    assert_eq!(listed.lines().count(), 3, "{listed}");
    // `kubectl get cdcsrc` prints 3/3 in its Tables column.
    let table = eventually("kubectl get cdcsrc to print 3/3", || async {
        let table = kube.kubectl_ok(&["get", "cdcsrc", "-n", ns]).await;
        let header = cells(table.lines().next()?);
        let column = header.iter().position(|c| *c == "TABLES")?;
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("{source} ")))?;
        (cells(row).get(column) == Some(&"3/3")).then_some(table)
    })
    .await;
    println!("{table}");
    // The worker's rounds read SQL Server: it says so in the source's
    // status, and the operator (woken by that report) says SourceConnected.
    let connected = "{.status.conditions[?(@.type==\"SourceConnected\")].status}";
    eventually("the source's SourceConnected to be True", || async {
        let said = kube.jsonpath("cdcsrc", &source, connected).await;
        (said.trim() == "True").then_some(())
    })
    .await;

    // A fourth table named by a new stream does not restart the worker:
    // the Deployment's template does not hold the list of streams.
    let deployments: Api<Deployment> = Api::namespaced(kube.client().await, ns);
    let worker = format!("{source}-source");
    let before = deployments
        .get(&worker)
        .await
        .expect("the source's Deployment");
    let added = format!(
        "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: refunds}}\n\
         spec: {{sourceRef: {{name: {source}}}, appId: shop-refunds-v1, source: {{table: dbo.refunds}}, \
         target: {{name: bronze.refunds, location: /lake/bronze/refunds}}, \
         checkpoint: /lake/_checkpoints/refunds}}\n---\n\
         apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: stray}}\n\
         spec: {{sourceRef: {{name: nowhere}}, appId: stray-v1, source: {{table: dbo.orders}}, \
         target: {{name: bronze.stray, location: /lake/bronze/stray}}, \
         checkpoint: /lake/_checkpoints/stray}}\n"
    );
    let file = kube.write("added-streams.yaml", &added);
    kube.kubectl_ok(&["apply", "-n", ns, "-f", &file]).await;
    let streams = cluster.streams().await;
    // A stream naming no existing source says so, with the fix.
    let stray = eventually("the stray stream to report SourceNotFound", || async {
        let status = streams.get("stray").await.ok()?.status?;
        let ready = condition(&status, "Ready")?.clone();
        (ready.reason == "SourceNotFound").then_some(ready)
    })
    .await;
    assert_eq!(stray.status, "False");
    assert!(stray.message.contains("create it"), "{}", stray.message);
    eventually("the new stream labelled with its source", || async {
        let stream = streams.get("refunds").await.ok()?;
        (stream.metadata.labels?.get("mssql-cdc.io/source") == Some(&source)).then_some(())
    })
    .await;
    // The running worker takes the new stream up (it watches its
    // streams): the table has no capture instance, so it reports that in
    // the stream's own status, while the others go on.
    let taken_up = eventually(
        "the source's worker to report on the new stream",
        || async {
            let worker = streams.get("refunds").await.ok()?.status?.worker?;
            (worker.state == mssql_cdc::spec::WorkerState::Failed).then_some(worker)
        },
    )
    .await;
    println!("refunds: {taken_up:?}");
    // The user reads it where they look: the stream's Ready column, with
    // the worker's own reason and fix, and the source's TablesDegraded.
    let reason = "{.status.conditions[?(@.type==\"Ready\")].reason}";
    eventually("kubectl get cdcs refunds to say why it stopped", || async {
        let said = kube.jsonpath("cdcs", "refunds", reason).await;
        (said.trim() == taken_up.reason).then_some(())
    })
    .await;
    let degraded = "{.status.conditions[?(@.type==\"TablesDegraded\")]}";
    let said = eventually(
        "the source to count refunds among its degraded tables",
        || async {
            let said = kube.jsonpath("cdcsrc", &source, degraded).await;
            (said.contains("\"status\":\"True\"") && said.contains("refunds")).then_some(said)
        },
    )
    .await;
    println!("TablesDegraded: {said}");
    let after = deployments
        .get(&worker)
        .await
        .expect("the source's Deployment");
    assert_eq!(
        after.spec.template, before.spec.template,
        "the pod template is unchanged"
    );
    let still = worker_pods().await;
    assert_eq!(
        still
            .iter()
            .map(|p| p.metadata.uid.clone())
            .collect::<Vec<_>>(),
        [workers[0].metadata.uid.clone()],
        "the same one worker pod runs"
    );
    a_source_decides_who_may_use_it(kube, shop).await;
}

/// A second source on the same database, suspended (only the operator's
/// verdicts are under test), that admits streams labelled `team: shop`
/// with locations under `/lake/guarded`: each refusal shows in `kubectl
/// get cdcs`, a refused stream stays out of the source's counts, and a
/// label edit lets it in.
async fn a_source_decides_who_may_use_it(kube: &KubeEnv, mut source: serde_yaml::Value) {
    let ns = kube.namespace.as_str();
    let yaml = |text: &str| serde_yaml::from_str::<serde_yaml::Value>(text).expect("yaml");
    source["metadata"] = yaml("{name: guarded}");
    let spec = &mut source["spec"];
    spec["suspend"] = yaml("true");
    spec["members"] = yaml("{matchLabels: {team: shop}}");
    spec["allowedLocations"] = yaml("[/lake/guarded]");
    spec["defaults"]["facts"] =
        yaml("{name: ops.guarded_facts, location: /lake/guarded/ops/facts}");
    let stream = |name: &str, labels: &str, location: &str, options: &str| {
        format!(
            "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\n\
             metadata: {{name: {name}, labels: {{{labels}}}}}\n\
             spec: {{sourceRef: {{name: guarded}}, appId: {name}-v1, source: {{table: dbo.orders}}, \
             target: {{name: bronze.{name}, location: {location}}}, \
             checkpoint: /lake/guarded/_checkpoints/{name}, storageOptions: {{{options}}}}}\n"
        )
    };
    let manifests = [
        serde_yaml::to_string(&source).expect("yaml"),
        stream("outsider", "", "/lake/guarded/outsider", ""),
        stream("wanderer", "team: shop", "/lake/elsewhere/wanderer", ""),
        stream(
            "redirector",
            "team: shop",
            "/lake/guarded/redirector",
            "endpoint: 'http://127.0.0.1:9'",
        ),
        stream(
            "insider",
            "team: shop",
            "/lake/guarded/insider",
            "region: eu-north-1",
        ),
    ]
    .join("---\n");
    let file = kube.write("guarded-source.yaml", &manifests);
    kube.kubectl_ok(&["apply", "-n", ns, "-f", &file]).await;
    let ready = "{.status.conditions[?(@.type==\"Ready\")]}";
    let condition_of = |name: &'static str, reason: &'static str| async move {
        eventually(
            &format!("kubectl get cdcs {name} to say {reason}"),
            || async {
                let said = kube.jsonpath("cdcs", name, ready).await;
                said.contains(&format!("\"reason\":\"{reason}\""))
                    .then_some(said)
            },
        )
        .await
    };
    let outsider = condition_of("outsider", "NotAMemberOfSource").await;
    assert!(
        outsider.contains("team=shop") && outsider.contains("kubectl get cdcsrc guarded"),
        "the selector and the fix: {outsider}"
    );
    let wanderer = condition_of("wanderer", "LocationNotAllowed").await;
    assert!(
        wanderer.contains("spec.target.location") && wanderer.contains("/lake/guarded/"),
        "the field and the allowed prefix: {wanderer}"
    );
    let redirector = condition_of("redirector", "StorageOptionNotAllowed").await;
    assert!(
        redirector.contains("spec.storageOptions.endpoint") && !redirector.contains("127.0.0.1"),
        "the key, never its value: {redirector}"
    );
    let phase = eventually("the admitted stream to be Suspended", || async {
        let phase = kube.jsonpath("cdcs", "insider", "{.status.phase}").await;
        (phase.trim() == "Suspended").then_some(phase)
    })
    .await;
    println!("insider: {phase}");
    // The source counts its members only: not the outsider.
    let total = "{.status.tables.total}";
    eventually("the guarded source to count 3 tables", || async {
        (kube.jsonpath("cdcsrc", "guarded", total).await.trim() == "3").then_some(())
    })
    .await;
    // The source's owner admits the outsider by its label.
    kube.kubectl_ok(&["label", "cdcs", "-n", ns, "outsider", "team=shop"])
        .await;
    eventually("the relabelled stream to join", || async {
        let phase = kube.jsonpath("cdcs", "outsider", "{.status.phase}").await;
        let total = kube.jsonpath("cdcsrc", "guarded", total).await;
        (phase.trim() == "Suspended" && total.trim() == "4").then_some(())
    })
    .await;
}

/// Whether `job` completed.
fn complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// The Job `name`, once complete.
async fn completed_job(jobs: &Api<Job>, name: &str) -> Job {
    eventually(&format!("Job {name} to complete"), || async {
        jobs.get(name).await.ok().filter(complete)
    })
    .await
}

#[tokio::test]
async fn the_hourly_example_runs_on_its_schedule_and_is_ready_between_runs() {
    let example = Example::load("orders-hourly.yaml");
    let Some(cluster) = Cluster::start(&example, &CUSTOMERS, Values::default()).await else {
        return;
    };
    let name = example.stream_name();
    cluster.apply(example).await;
    let kube = &cluster.kube;
    let client = kube.client().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &kube.namespace);
    let cron_jobs: Api<CronJob> = Api::namespaced(client, &kube.namespace);
    // Nothing runs before the schedule.
    let cron_job = eventually("the CronJob", || async {
        cron_jobs.get_opt(&name).await.ok().flatten()
    })
    .await;
    assert!(
        jobs.list(&ListParams::default())
            .await
            .expect("jobs")
            .items
            .is_empty()
    );

    // The next full hour on the fake clock: the CronJob starts one run,
    // which copies the table onto the claim and exits.
    let now = kube.now().timestamp();
    let next_hour = (now / 3600 + 1) * 3600;
    kube.advance_clock(Duration::from_secs((next_hour - now).unsigned_abs() + 1))
        .await;
    let scheduled = eventually("the scheduled run", || async {
        jobs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let scheduled = completed_job(&jobs, &scheduled.metadata.name.unwrap_or_default()).await;
    assert_eq!(scheduled.status.and_then(|s| s.succeeded), Some(1));
    let bronze = claim_directory(kube, "customers-lake")
        .await
        .join("bronze/customers");
    let rows = query_table(&bronze, "SELECT COUNT(*) FROM t WHERE id > 100").await;
    assert_eq!(rows, [["3"]], "the snapshot's rows on the claim");

    // A change, and a run now (`kubectl create job --from=cronjob/...`):
    // its batch is the stream's first progress.
    let mut sql = cluster.sql.connect_to(CUSTOMERS.database).await;
    insert_captured(&mut sql, &CUSTOMERS, &[104]).await;
    let template = cron_job.spec.job_template;
    let manual = Job {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{name}-manual")),
            labels: template.metadata.and_then(|m| m.labels),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    };
    jobs.create(&Default::default(), &manual)
        .await
        .expect("a manual run");
    completed_job(&jobs, &format!("{name}-manual")).await;
    let status = cluster.ready(&name).await;
    assert!(
        status
            .progress
            .as_ref()
            .is_some_and(|p| p.end_lsn.is_some())
    );
    // The operator's clock is up to an hour ahead of the run's (it moved
    // to the full hour): past the default 15m silence, within the
    // example's 75m, which covers the schedule's interval and a run.
    let live = condition(&status, "Live").expect("Live");
    assert_eq!(live.status, "True", "{}", live.message);
}

/// What invoices-s3.yaml says the chart needs.
const S3_VALUES: Values = Values {
    service_accounts: &["invoices-s3"],
    env: &["AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"],
};
/// What invoices-adls.yaml says the chart needs.
const ADLS_VALUES: Values = Values {
    service_accounts: &[],
    env: &["AZURE_STORAGE_*"],
};

#[tokio::test]
async fn the_s3_example_streams_with_web_identity_and_no_keys() {
    let example = Example::load("invoices-s3.yaml");
    let Some(moto) = Moto::with_bucket("example-lake").await else {
        return;
    };
    let sts = WebIdentitySts::start().await;
    let Some(cluster) = Cluster::start(&example, &INVOICES, S3_VALUES).await else {
        return;
    };
    let name = example.stream_name();
    // STS is only spoken over HTTPS, and the stand-in's certificate is its own.
    let example = example.with_storage_options(&BTreeMap::from([
        (
            "aws_endpoint_url".to_string(),
            cluster.kube.url_for_pods(&moto.endpoint()),
        ),
        ("aws_allow_http".to_string(), "true".to_string()),
        (
            "aws_endpoint_url_sts".to_string(),
            cluster.kube.url_for_pods(&sts.endpoint()),
        ),
        (
            "aws_allow_invalid_certificates".to_string(),
            "true".to_string(),
        ),
    ]));
    cluster.apply(example).await;
    cluster.change_after_snapshot(&name).await;
    let status = cluster.ready(&name).await;
    assert!(status.progress.is_some());
    // The pod ran as the stream's own account, with a projected token.
    let pods: Api<Pod> = Api::namespaced(cluster.kube.client().await, &cluster.kube.namespace);
    let pod = pods
        .list(&ListParams::default().labels(&format!("mssql-cdc.io/stream={name}")))
        .await
        .expect("pods")
        .items
        .remove(0);
    let spec = pod.spec.expect("pod spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("invoices-s3"));
    let env = spec.containers[0].env.clone().unwrap_or_default();
    assert!(
        env.iter().all(|e| !e.name.starts_with("AWS_ACCESS_KEY")),
        "no static keys: {env:?}"
    );
    // Its credentials came from its own account's token, for STS.
    let call = sts
        .calls()
        .first()
        .cloned()
        .expect("an AssumeRoleWithWebIdentity call");
    assert_eq!(call.role_arn, "arn:aws:iam::111122223333:role/cdc-invoices");
    assert_eq!(
        call.subject,
        format!(
            "system:serviceaccount:{}:invoices-s3",
            cluster.kube.namespace
        )
    );
    assert_eq!(call.audiences, ["sts.amazonaws.com"]);
}

#[tokio::test]
async fn the_adls_example_streams_to_azurite() {
    let example = Example::load("invoices-adls.yaml");
    let (account, key) = (
        example.secret("lake-adls", "AZURE_STORAGE_ACCOUNT_NAME"),
        example.secret("lake-adls", "AZURE_STORAGE_ACCOUNT_KEY"),
    );
    let Some(azurite) = Azurite::with_account(&account, &key, "lake").await else {
        return;
    };
    let Some(cluster) = Cluster::start(&example, &INVOICES, ADLS_VALUES).await else {
        return;
    };
    let name = example.stream_name();
    let example = example.with_storage_options(&BTreeMap::from([
        (
            "azure_storage_endpoint".to_string(),
            cluster.kube.url_for_pods(&azurite.endpoint()),
        ),
        ("azure_allow_http".to_string(), "true".to_string()),
    ]));
    cluster.apply(example).await;
    cluster.change_after_snapshot(&name).await;
    let status = cluster.ready(&name).await;
    assert!(status.progress.is_some());
}

#[tokio::test]
async fn a_lake_on_the_read_only_root_crash_loops_and_says_why() {
    if !mssql_cdc_test_apiserver::kubelet::isolation_available() {
        eprintln!("skipped: mount namespaces are unavailable, so the root is not read-only");
        return;
    }
    let example = Example::load("orders-continuous.yaml").without_volumes();
    let Some(cluster) = Cluster::start(&example, &ORDERS, Values::default()).await else {
        return;
    };
    let name = example.stream_name();
    cluster.apply(example).await;
    let kube = &cluster.kube;
    let pods: Api<Pod> = Api::namespaced(kube.client().await, &kube.namespace);
    let message = eventually("the worker to fail and restart", || async {
        let list = pods
            .list(&ListParams::default().labels(&format!("mssql-cdc.io/stream={name}")))
            .await
            .ok()?;
        list.items.iter().find_map(|pod| {
            let status = pod
                .status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .first()?
                .clone();
            let terminated = status.last_state?.terminated?;
            (status.restart_count >= 1 && terminated.exit_code != 0)
                .then(|| terminated.message.unwrap_or_default())
        })
    })
    .await;
    assert!(
        message.starts_with("VolumeNotWritable")
            && message.contains("read-only filesystem")
            && message.contains("/lake"),
        "the terminated message says why: {message}"
    );
    let stream = cluster.streams().await.get(&name).await.expect("stream");
    let status = stream.status.unwrap_or_default();
    assert!(!has_condition(&status, "Ready", "True"), "{status:?}");
    // The worker said which spec it ran, but no batch was written.
    assert!(
        status
            .progress
            .as_ref()
            .is_none_or(|p| p.batch_id.is_none() && p.written_at.is_none()),
        "{:?}",
        status.progress
    );
}

#[tokio::test]
async fn a_claim_whose_storage_ignores_fs_group_names_the_volume_in_the_status() {
    if !mssql_cdc_test_apiserver::kubelet::isolation_available() {
        eprintln!("skipped: mount namespaces are unavailable, so the worker runs as root");
        return;
    }
    let example = Example::load("orders-continuous.yaml").with_claims_bound_to("orders-share");
    let Some(cluster) = Cluster::start(&example, &ORDERS, Values::default()).await else {
        return;
    };
    let kube = &cluster.kube;
    // An administrator's volume on a share: root's, 0755, and the kubelet
    // does not give a hostPath volume to the pod's fsGroup.
    let share = tempfile::tempdir().expect("a directory for the share");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(share.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod 0755");
    let volume = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: orders-share}}\nspec:\n  \
         capacity: {{storage: 5Gi}}\n  accessModes: [ReadWriteOnce]\n  \
         persistentVolumeReclaimPolicy: Retain\n  hostPath: {{path: {}, type: Directory}}\n",
        share.path().display()
    );
    let file = kube.write("orders-share.yaml", &volume);
    kube.kubectl_ok(&["apply", "-f", &file]).await;
    let name = example.stream_name();
    cluster.apply(example).await;

    let streams = cluster.streams().await;
    let said = tokio::time::timeout(
        READY_WITHIN,
        poll(|| async {
            let status = streams.get(&name).await.ok()?.status?;
            let running = condition(&status, "WorkerRunning")?;
            (running.reason == "VolumeNotWritable").then_some(status)
        }),
    )
    .await;
    let Ok(status) = said else {
        panic!(
            "{name} does not say VolumeNotWritable:\n{}",
            cluster.explain(&name).await
        );
    };
    let running = condition(&status, "WorkerRunning").expect("WorkerRunning");
    assert_eq!(running.status, "False");
    for part in [
        "volume lake (PersistentVolumeClaim orders-lake) at /lake",
        "owned by 0:0 with mode 0755",
        "uid 65532",
        "group 65532",
    ] {
        assert!(
            running.message.contains(part),
            "{part}: {}",
            running.message
        );
    }
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "VolumeNotWritable")
    );
    let table = kube
        .kubectl_ok(&["get", "-n", &kube.namespace, "cdcs", &name])
        .await;
    assert!(table.contains("VolumeNotWritable"), "{table}");
    // Nothing was written on the share.
    let written = std::fs::read_dir(share.path()).expect("the share").count();
    assert_eq!(written, 0, "the worker wrote nothing");
}

/// The title of docs/kubernetes.md's walk-through.
const WALK_THROUGH: &str = "## From `helm install` to a Ready stream";

/// Every command of the walk-through's shell blocks, in order, each on
/// one line (a trailing `\` joins the next).
fn walk_through_commands() -> Vec<String> {
    let doc = std::fs::read_to_string(crate::support::kube::repo_file("docs/kubernetes.md"))
        .expect("docs/kubernetes.md");
    let start = doc.find(WALK_THROUGH).expect("the walk-through section");
    let section = &doc[start + WALK_THROUGH.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let (mut commands, mut in_block, mut pending) = (Vec::new(), false, String::new());
    for line in section.lines().map(str::trim) {
        if line.starts_with("```") {
            in_block = line == "```sh";
            continue;
        }
        if !in_block || line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => pending.push_str(part),
            None => {
                pending.push_str(line);
                commands.push(std::mem::take(&mut pending));
            }
        }
    }
    commands
}

#[tokio::test]
async fn the_docs_walk_through_runs_as_written_to_a_ready_stream() {
    let commands = walk_through_commands();
    for needed in [
        "kubectl create namespace shop",
        "helm install cdc charts/mssql-cdc-operator",
        "kubectl apply -n shop -f examples/kubernetes/orders-continuous.yaml",
        "kubectl -n shop wait --for=condition=Ready cdcs/orders",
    ] {
        assert!(
            commands.iter().any(|c| c.starts_with(needed)),
            "the walk-through lost {needed:?}: {commands:#?}"
        );
    }
    let Some(python) = crate::support::tools::PYTHON.find() else {
        return;
    };
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_mssql-cdc"));
    let kube = KubeEnv::with_pod_network(binary).await;
    // Step 3: the database, with the examples' statements and two days of
    // captured history behind it.
    let example = Example::load("orders-continuous.yaml");
    let script = SHOP.replace(SHOP_PASSWORD, &example.sql_password());
    let sql = TestServer::sandbox_with_script(script).await;
    changes_with_history(&mut sql.connect_to("shop").await, &[&ORDERS]).await;
    // Step 4's edit: the SQL Server's host, whose test certificate the
    // stream is told to trust, as the step says for a test server.
    let edited = example.at_sql_server(&kube.for_pods(sql.endpoint()));
    let file = kube.write("orders-continuous.yaml", &edited.to_yaml());
    // `helm` is Helm's SDK behind the command line the docs use.
    let shim = kube.write(
        "helm",
        &format!(
            "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
            python.display(),
            crate::support::kube::repo_file("tests/it/support/py/helm_cli.py")
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let shim_dir = std::path::Path::new(&shim).parent().expect("scratch dir");
    let path = format!(
        "{}:{}",
        shim_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    for command in &commands {
        let pasted = command.replace("examples/kubernetes/orders-continuous.yaml", &file);
        let mut shell = tokio::process::Command::new("bash");
        shell
            .args(["-c", &pasted])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("KUBECONFIG", &kube.kubeconfig)
            .env("PATH", &path)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        // A watch (`-w`) runs until the user stops it: its first lines are
        // what the step shows.
        let watch = pasted.ends_with(" -w");
        let limit = if watch {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(600)
        };
        let out = tokio::time::timeout(limit, shell.output()).await;
        match (watch, out) {
            (true, Err(_)) => {}
            (false, Err(_)) => panic!("`{command}` ran over {limit:?}"),
            (_, Ok(out)) => {
                let out = out.expect("bash starts");
                let (stdout, stderr) = (
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr),
                );
                if !out.status.success() {
                    let cluster = kube
                        .kubectl(&["get", "-A", "pods,deploy,cdcs,pvc", "-o", "wide"])
                        .await;
                    panic!(
                        "`{command}` failed:\n{stdout}\n{stderr}\n{}",
                        String::from_utf8_lossy(&cluster.stdout)
                    );
                }
            }
        }
    }
    // The last step's table shows the stream Ready.
    let streams: Api<CdcStream> = Api::namespaced(kube.client().await, "shop");
    let status = streams
        .get("orders")
        .await
        .expect("the stream")
        .status
        .expect("a status");
    assert!(has_condition(&status, "Ready", "True"), "{status:?}");
}
