//! `mssql-cdc worker` against the test API server and the sandbox: it reads
//! its CdcStream (password from the variable the operator fills from the
//! Secret), streams into Delta, and applies `status.progress` and
//! `status.finalization` under its own field manager; a source's worker
//! also reports the captured tables no stream covers (`status.discovery`).

use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use mssql_cdc::operator::source_status::source_status_patch;
use mssql_cdc::operator::status::OPERATOR_FIELD_MANAGER;
use mssql_cdc::spec::{CdcSource, CdcSourceStatus, CdcStream};

use crate::support::kube::{KubeEnv, cells, eventually};
use crate::support::operator::{cluster_manifest, orders_with_changes};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::{StreamFixture, query_table};

/// `mssql-cdc worker FLAG NS/NAME` by hand with the test API server's
/// kubeconfig and the SQL password where the operator would put it; an
/// availableNow worker exits once caught up.
async fn worker(kube: &KubeEnv, flag: &str, what: &str, password: &str) -> std::process::Output {
    let worker = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["worker", flag, what, "--metrics-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", &kube.kubeconfig)
        .env("MSSQL_CDC_PASSWORD", password)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(120), worker)
        .await
        .expect("the availableNow worker exits once caught up")
        .expect("the worker starts")
}

#[tokio::test]
async fn worker_streams_and_reports_progress_into_status() {
    let server = TestServer::start().await;
    let (_client, db) = orders_with_changes(&server, 3).await;

    let control = tempfile::tempdir().expect("control dir");
    let control_path = control.path().join("control");
    let fixture = StreamFixture::new(
        &server,
        &db,
        &format!(
            "  snapshot: {{mode: never}}\n  finalization: {{name: ops.table_finalization, location: \"{}\"}}\n",
            control_path.display()
        ),
    );
    let manifest = cluster_manifest(&fixture);
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let file = kube.write("orders.yaml", &manifest);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;

    let out = worker(&kube, "--stream", "default/orders", &fixture.password).await;
    assert!(
        out.status.success(),
        "worker failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bronze = fixture.bronze_query("SELECT COUNT(*) FROM t").await;
    assert_eq!(bronze, vec![vec!["3".to_string()]]);
    let last = fixture
        .facts_query(
            "SELECT CAST(batch_id AS VARCHAR) AS batch, end_lsn FROM t WHERE batch_id IS NOT NULL \
             ORDER BY batch_id DESC LIMIT 1",
        )
        .await;

    let api: Api<CdcStream> = Api::namespaced(kube.client().await, "default");
    let stream = api.get("orders").await.expect("the stream");
    let status = stream.status.expect("a status after the run");
    let progress = status
        .progress
        .clone()
        .expect("status.progress after the run");
    assert_eq!(
        vec![vec![
            progress.batch_id.map(|b| b.to_string()).unwrap_or_default(),
            progress.end_lsn.clone().unwrap_or_default()
        ]],
        last,
        "status.progress is the last facts row"
    );
    let finalization = status
        .finalization
        .expect("status.finalization after the run");
    let row = query_table(
        &control_path,
        "SELECT CAST(finalized_until AS VARCHAR), CAST(open_snapshot_lsn AS VARCHAR) FROM t",
    )
    .await;
    let reported = finalization
        .finalized_until
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default();
    assert_eq!(
        row,
        vec![vec![reported, String::new()]],
        "status.finalization is the control table's row"
    );
    assert_eq!(finalization.open_snapshot_lsn, None);
    assert_status_manager(&stream.metadata, "mssql-cdc-worker");

    let table = kube.kubectl_ok(&["get", "cdcstreams"]).await;
    println!("{table}");
    let row = table.lines().nth(1).unwrap_or_default();
    assert_eq!(cells(row)[0], "orders", "{table}");
}

/// `mssql-cdc worker --source default/sales` running on (a processingTime
/// source), reporting every second; killed when dropped.
pub(crate) fn running_source_worker(kube: &KubeEnv, password: &str) -> tokio::process::Child {
    source_worker_logging_to(kube, password, None)
}

/// [`running_source_worker`], its log (stdout and stderr) in `log` when given.
fn source_worker_logging_to(
    kube: &KubeEnv,
    password: &str,
    log: Option<&std::path::Path>,
) -> tokio::process::Child {
    source_worker_with(kube, password, log, &[])
}

/// [`source_worker_logging_to`] with variables `env` set too.
fn source_worker_with(
    kube: &KubeEnv,
    password: &str,
    log: Option<&std::path::Path>,
    env: &[(&str, &str)],
) -> tokio::process::Child {
    let output = || match log {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(std::process::Stdio::from)
            .expect("the worker's log"),
        None => std::process::Stdio::null(),
    };
    tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args([
            "worker",
            "--source",
            "default/sales",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--status-interval", "1s"])
        .env("KUBECONFIG", &kube.kubeconfig)
        .env("MSSQL_CDC_PASSWORD", password)
        .envs(env.iter().copied())
        .stdout(output())
        .stderr(output())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker starts")
}

/// The lines of the worker's log at `log` that hold `message` and `target`.
fn logged(log: &std::path::Path, message: &str, target: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(message) && line.contains(target))
        .count()
}

/// Asserts that `manager` applied fields of the object's status.
fn assert_status_manager(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    manager: &str,
) {
    let managers: Vec<(&str, Option<&str>)> = meta
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.as_deref().unwrap_or_default(),
                m.subresource.as_deref(),
            )
        })
        .collect();
    assert!(
        managers.contains(&(manager, Some("status"))),
        "{managers:?}"
    );
}

/// The status of the stream `name`, which must have one.
async fn status_of(api: &Api<CdcStream>, name: &str) -> mssql_cdc::spec::CdcStreamStatus {
    api.get(name)
        .await
        .expect("the stream")
        .status
        .expect("a status")
}

/// A CdcSource of `db` (password from a Secret, as the CRD allows) and its
/// streams of `tables` (name, table), read as `user` with `trigger`, lakes
/// in `lake`.
pub fn source_manifests(
    server: &TestServer,
    db: &str,
    lake: &std::path::Path,
    tables: &[(&str, &str)],
    (user, trigger): (&str, &str),
) -> String {
    let endpoint = server.endpoint();
    let user = if user.is_empty() {
        endpoint.user.as_str()
    } else {
        user
    };
    let path = |rel: &str| lake.join(rel).display().to_string();
    let mut text = format!(
        "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcSource\nmetadata: {{name: sales}}\nspec:\n  \
         connection:\n    host: \"{host}\"\n    port: {port}\n    database: {db}\n    \
         credentials:\n      username: \"{user}\"\n      passwordFrom: {{secretKeyRef: {{name: sql, key: password}}}}\n    \
         encrypt: required\n    trustServerCertificate: true\n  trigger: {trigger}\n  \
         idleCommitInterval: 2s\n  defaults:\n    facts: {{name: ops.facts, location: \"{facts}\"}}\n",
        host = endpoint.host,
        port = endpoint.port,
        facts = path("facts"),
    );
    for (name, table) in tables {
        text.push_str(&format!(
            "---\napiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: {name}}}\n\
             spec:\n  appId: it-{name}\n  sourceRef: {{name: sales}}\n  source: {{table: {table}}}\n  \
             target: {{name: bronze.{name}, location: \"{bronze}\"}}\n  checkpoint: \"{checkpoint}\"\n",
            bronze = path(&format!("bronze/{name}")),
            checkpoint = path(&format!("checkpoints/{name}")),
        ));
    }
    text
}

#[tokio::test]
async fn a_source_worker_runs_every_stream_of_its_source_and_reports_each() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for (table, rows) in [("orders", 4), ("items", 2)] {
        crate::engine_source::seeded_capture(&mut client, table, rows).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let manifests = source_manifests(
        &server,
        &db,
        lake,
        &[
            ("orders", "dbo.orders"),
            ("items", "dbo.items"),
            ("missing", "dbo.missing"),
        ],
        ("", "{availableNow: true}"),
    );
    let file = kube.write("sales.yaml", &manifests);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    // Another source's stream in the namespace is not this worker's.
    let other = kube.write(
        "other.yaml",
        &source_manifests(
            &server,
            &db,
            lake,
            &[("elsewhere", "dbo.orders")],
            ("", "{availableNow: true}"),
        )
        .split("---\n")
        .nth(1)
        .unwrap_or_default()
        .replace("sourceRef: {name: sales}", "sourceRef: {name: other}"),
    );
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &other])
        .await;

    let out = worker(&kube, "--source", "default/sales", &fixture.password).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a failed table fails an availableNow worker"
    );
    assert!(
        stderr.contains("TablesFailed") && stderr.contains("bronze.missing"),
        "{stderr}"
    );

    let api: Api<CdcStream> = Api::namespaced(kube.client().await, "default");
    for (name, rows) in [("orders", "4"), ("items", "2")] {
        let bronze = query_table(
            &lake.join(format!("bronze/{name}")),
            "SELECT COUNT(*) FROM t",
        )
        .await;
        assert_eq!(bronze, [[rows.to_string()]], "bronze.{name}");
        let status = status_of(&api, name).await;
        let worker = status.worker.expect("status.worker");
        assert_eq!(
            worker.state,
            mssql_cdc::spec::WorkerState::Completed,
            "{name}: {worker:?}"
        );
        assert!(
            status.snapshot.is_some() || status.progress.is_some(),
            "{name}: progress reported"
        );
    }
    let missing = status_of(&api, "missing").await;
    let worker = missing.worker.expect("status.worker of the failed table");
    assert_eq!(
        worker.state,
        mssql_cdc::spec::WorkerState::Failed,
        "{worker:?}"
    );
    assert!(
        worker.message.contains("dbo.missing"),
        "the reason names the table: {worker:?}"
    );
    let elsewhere = api.get("elsewhere").await.expect("the other stream");
    assert!(
        elsewhere.status.is_none(),
        "another source's stream is left alone"
    );
}

#[tokio::test]
async fn a_table_stopped_by_its_own_error_is_still_measured_while_the_others_stream() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for table in ["orders", "items"] {
        crate::engine_source::seeded_capture(&mut client, table, 1).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let tables = [("orders", "dbo.orders"), ("items", "dbo.items")];
    // First both tables take their snapshot and a batch.
    let before = crate::support::cdc::max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.items VALUES (2, N'x')")
        .await
        .expect("items changes");
    crate::support::cdc::wait_for_capture(&mut client, "dbo_items", before.as_deref(), 1).await;
    let once = source_manifests(&server, &db, lake, &tables, ("", "{availableNow: true}"));
    let file = kube.write("once.yaml", &once);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    let out = worker(&kube, "--source", "default/sales", &fixture.password).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Then items asks for a column its capture instance does not have:
    // items alone stops, orders streams on.
    let on = source_manifests(&server, &db, lake, &tables, ("", "{processingTime: 1s}")).replace(
        "source: {table: dbo.items}",
        "source: {table: dbo.items, columns: [id, nope]}",
    );
    let file = kube.write("on.yaml", &on);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    let worker = running_source_worker(&kube, &fixture.password);
    let api: Api<CdcStream> = Api::namespaced(kube.client().await, "default");
    let stopped = eventually("items stopped by its own error", || async {
        let status = api.get("items").await.ok()?.status?;
        let worker = status.worker?;
        (worker.state == mssql_cdc::spec::WorkerState::Failed).then_some(worker)
    })
    .await;
    assert_eq!(stopped.reason, "ColumnNotCaptured", "{stopped:?}");

    // Each change of orders moves the database's max LSN, and items'
    // measured position follows it while items stays stopped.
    let mut newest = None;
    for id in 2..=3 {
        newest = Some(captured_insert(&mut client, "orders", id).await);
    }
    let newest = crate::support::cdc::lsn_literal(&newest.expect("a change"));
    let bronze = lake.join("bronze/orders");
    eventually("orders' changes in bronze", || async {
        let rows = query_table(&bronze, "SELECT COUNT(*) FROM t").await;
        (rows == [["3".to_string()]]).then_some(())
    })
    .await;
    let measured = eventually("items measured up to orders' change", || async {
        let status = api.get("items").await.ok()?.status?;
        let progress = status.progress?;
        let seen = progress.latest_offset?.lsn;
        (seen.as_str() >= newest.as_str() && progress.retention_headroom_hours.is_some())
            .then_some(status.worker?)
    })
    .await;
    assert_eq!(
        measured.state,
        mssql_cdc::spec::WorkerState::Failed,
        "measured, it is still the stopped table: {measured:?}"
    );
    drop(worker);
}

/// A panic anywhere in one table's pipeline (here its silver MERGE, on
/// every pass) stops that table alone: its status names where it panicked
/// (never the panic's text), its position is still measured, and the
/// source's other tables stream on in the same worker, never restarted.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_panic_in_one_tables_pipeline_stops_that_table_alone() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for table in ["orders", "items", "payments"] {
        crate::engine_source::seeded_capture(&mut client, table, 1).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let tables = [
        ("orders", "dbo.orders"),
        ("items", "dbo.items"),
        ("payments", "dbo.payments"),
    ];
    let silver = lake.join("silver/items").display().to_string();
    let manifests = |trigger| {
        source_manifests(&server, &db, lake, &tables, ("", trigger)).replace(
            "target: {name: bronze.items,",
            &format!(
                "silver: {{name: silver.items, location: \"{silver}\"}}\n  target: {{name: bronze.items,"
            ),
        )
    };
    // First every table takes its snapshot, silver's included.
    let file = kube.write("once.yaml", &manifests("{availableNow: true}"));
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    let out = worker(&kube, "--source", "default/sales", &fixture.password).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Then items' next batch panics in its silver MERGE, every time.
    let file = kube.write("on.yaml", &manifests("{processingTime: 1s}"));
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    captured_insert(&mut client, "items", 2).await;
    let log = lake.join("worker.log");
    let mut worker = source_worker_with(
        &kube,
        &fixture.password,
        Some(&log),
        &[("MSSQL_CDC_PANIC_AT", "silver_merge@silver/items")],
    );
    let api: Api<CdcStream> = Api::namespaced(kube.client().await, "default");
    let stopped = eventually("items stopped by its panic", || async {
        let worker = api.get("items").await.ok()?.status?.worker?;
        (worker.state == mssql_cdc::spec::WorkerState::Failed).then_some(worker)
    })
    .await;
    assert_eq!(stopped.reason, "TablePanicked", "{stopped:?}");
    assert!(
        stopped.message.contains("silver.rs:")
            && stopped.message.contains("during batch")
            && !stopped.message.contains("panicking in"),
        "where and in which batch it panicked, not the panic's text: {stopped:?}"
    );

    // The others stream on: a change to each lands after the panic.
    let mut newest = None;
    for table in ["orders", "payments"] {
        newest = Some(captured_insert(&mut client, table, 2).await);
    }
    let newest = crate::support::cdc::lsn_literal(&newest.expect("a change"));
    for table in ["orders", "payments"] {
        let bronze = lake.join(format!("bronze/{table}"));
        eventually("the change in bronze", || async {
            let rows = query_table(&bronze, "SELECT COUNT(*) FROM t").await;
            (rows == [["2".to_string()]]).then_some(())
        })
        .await;
    }
    // Stopped, items' position is still measured against the source.
    eventually("items measured up to the others' changes", || async {
        let progress = api.get("items").await.ok()?.status?.progress?;
        let seen = progress.latest_offset?.lsn;
        (seen.as_str() >= newest.as_str() && progress.retention_headroom_hours.is_some())
            .then_some(())
    })
    .await;
    assert!(
        matches!(worker.try_wait(), Ok(None)),
        "the worker process runs on"
    );
    for table in ["bronze.orders", "bronze.payments"] {
        assert_eq!(
            logged(&log, "the table starts", table),
            1,
            "{table} started once"
        );
    }
    assert!(
        logged(&log, "the table starts", "bronze.items") >= 1,
        "items starts and is retried on its own"
    );
}

/// Inserts row `id` into `dbo.{table}` and waits until CDC captured it;
/// the LSN of its change.
async fn captured_insert(client: &mut Client, table: &str, id: i32) -> Vec<u8> {
    let before = crate::support::cdc::max_lsn(client).await;
    run(
        client,
        &format!("INSERT INTO dbo.{table} VALUES ({id}, N'on')"),
    )
    .await
    .expect("a change");
    crate::support::cdc::wait_for_capture(client, &format!("dbo_{table}"), before.as_deref(), 1)
        .await
}

/// The discovery of source `sales` as its status shows it: (count, names).
async fn discovery_of(api: &Api<CdcSource>) -> Option<(u32, Vec<String>)> {
    let discovery = api.get("sales").await.ok()?.status?.discovery?;
    Some((discovery.count, discovery.tables))
}

#[tokio::test]
async fn a_source_worker_counts_the_captured_tables_no_stream_covers() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for table in ["orders", "items", "extra", "skipped"] {
        crate::engine_source::seeded_capture(&mut client, table, 1).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let discovering = |tables: &[(&str, &str)]| {
        source_manifests(&server, &db, lake, tables, ("", "{processingTime: 1s}")).replacen(
            "  idleCommitInterval: 2s\n",
            "  idleCommitInterval: 2s\n  discovery: {include: [\"DBO.*\"], exclude: [\"dbo.skip*\"]}\n",
            1,
        )
    };
    let file = kube.write("sales.yaml", &discovering(&[("orders", "dbo.orders")]));
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    let _worker = running_source_worker(&kube, &fixture.password);
    let sources: Api<CdcSource> = Api::namespaced(kube.client().await, "default");
    let wanted = (2, vec!["dbo.extra".to_string(), "dbo.items".to_string()]);
    eventually("the uncovered tables counted and named", || async {
        discovery_of(&sources).await.filter(|d| *d == wanted)
    })
    .await;
    let wide = kube
        .kubectl_ok(&["get", "cdcsrc", "sales", "-n", "default", "-o", "wide"])
        .await;
    // Columns are aligned; some cells are empty, so read by offset.
    let mut lines = wide.lines();
    let (header, row) = (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    );
    let cell = header
        .find("UNCOVERED")
        .and_then(|at| row.get(at..))
        .and_then(|rest| rest.split_whitespace().next());
    assert_eq!(
        cell,
        Some("2"),
        "kubectl get -o wide shows the count: {wide}"
    );

    // The operator's apply of the rolled-up status leaves the worker's
    // field alone: each has its own field manager.
    let rolled_up = CdcSourceStatus {
        tables_ready: Some("0/1".into()),
        ..CdcSourceStatus::default()
    };
    sources
        .patch_status(
            "sales",
            &PatchParams::apply(OPERATOR_FIELD_MANAGER).force(),
            &Patch::Apply(source_status_patch("sales", &rolled_up)),
        )
        .await
        .expect("the operator's status apply");
    let source = sources.get("sales").await.expect("the source");
    let status = source.status.clone().expect("a status");
    assert_eq!(status.tables_ready.as_deref(), Some("0/1"));
    assert_eq!(
        status.discovery.map(|d| (d.count, d.tables)),
        Some(wanted),
        "still there after the operator's apply"
    );
    assert_status_manager(&source.metadata, "mssql-cdc-source-discovery");

    // A stream added for items: the worker takes it up and counts again.
    let file = kube.write(
        "sales.yaml",
        &discovering(&[("orders", "dbo.orders"), ("items", "dbo.items")]),
    );
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    eventually("items no longer counted", || async {
        discovery_of(&sources)
            .await
            .filter(|d| *d == (1, vec!["dbo.extra".to_string()]))
    })
    .await;

    // Without spec.discovery the worker removes its report.
    kube.kubectl_ok(&[
        "patch",
        "cdcsources",
        "sales",
        "-n",
        "default",
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/spec/discovery"}]"#,
    ])
    .await;
    eventually("status.discovery removed", || async {
        let status = sources.get("sales").await.ok()?.status?;
        (status.discovery.is_none() && status.tables_ready.is_some()).then_some(())
    })
    .await;
}

/// A source's worker started before any stream names its source waits
/// (it does not exit), and starts the tables once streams are applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_worker_without_streams_waits_for_them() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    crate::engine_source::seeded_capture(&mut client, "orders", 2).await;
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let trigger = ("", "{processingTime: 1s}");
    let none = kube.write(
        "none.yaml",
        &source_manifests(&server, &db, lake, &[], trigger),
    );
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &none])
        .await;
    let log = lake.join("worker.log");
    let mut worker = source_worker_logging_to(&kube, &fixture.password, Some(&log));
    eventually("the worker waiting for streams", || async {
        (logged(&log, "waiting for its streams to change", "sales") == 1).then_some(())
    })
    .await;
    let one = kube.write(
        "one.yaml",
        &source_manifests(&server, &db, lake, &[("orders", "dbo.orders")], trigger),
    );
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &one])
        .await;
    let bronze = lake.join("bronze/orders");
    eventually("orders' snapshot", || async {
        if !bronze.join("_delta_log").exists() {
            return None;
        }
        let rows = query_table(&bronze, "SELECT COUNT(*) FROM t").await;
        (rows.first()?.first()? == "2").then_some(())
    })
    .await;
    assert!(
        matches!(worker.try_wait(), Ok(None)),
        "the worker kept running"
    );
    worker.kill().await.expect("the worker stops");
}

/// A source's worker follows its streams while it runs (no exit, no new
/// process): a CdcStream applied to its namespace starts its table alone
/// and snapshots it; an edited one starts again alone; a deleted one's
/// table stops alone, and applied again resumes from its checkpoint. The
/// other tables never start again, keep their positions (no second
/// snapshot, no batch twice) and stream on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sources_streams_added_edited_and_removed_start_and_stop_alone() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    let tables = [
        ("orders", "dbo.orders"),
        ("items", "dbo.items"),
        ("payments", "dbo.payments"),
    ];
    for (name, _) in tables {
        crate::engine_source::seeded_capture(&mut client, name, 2).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let trigger = ("", "{processingTime: 1s}");
    let two = kube.write(
        "two.yaml",
        &source_manifests(&server, &db, lake, &tables[..2], trigger),
    );
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &two])
        .await;
    let log = lake.join("worker.log");
    let mut worker = source_worker_logging_to(&kube, &fixture.password, Some(&log));
    let rows_of = |name: &str| {
        let bronze = lake.join(format!("bronze/{name}"));
        async move {
            if !bronze.join("_delta_log").exists() {
                return None;
            }
            let rows = query_table(&bronze, "SELECT COUNT(*) FROM t").await;
            rows.first()?.first()?.parse::<u64>().ok()
        }
    };
    for name in ["orders", "items"] {
        eventually(&format!("{name}'s snapshot"), || async {
            (rows_of(name).await? == 2).then_some(())
        })
        .await;
    }
    let insert_and_await = async |client: &mut Client, table: &str, id: u64| {
        run(
            client,
            &format!("INSERT INTO dbo.{table} VALUES ({id}, N'x')"),
        )
        .await
        .expect("insert");
        eventually(&format!("{table}'s row {id}"), || async {
            (rows_of(table).await? == id).then_some(())
        })
        .await;
    };
    insert_and_await(&mut client, "orders", 3).await;

    // A third stream is applied with the other two unchanged: it starts
    // alone.
    let three = source_manifests(&server, &db, lake, &tables, trigger);
    let three_file = kube.write("three.yaml", &three);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &three_file])
        .await;
    eventually("payments' snapshot", || async {
        (rows_of("payments").await? == 2).then_some(())
    })
    .await;
    insert_and_await(&mut client, "orders", 4).await;
    let starts = |target: &str| logged(&log, "the table starts", target);
    assert_eq!(
        (
            starts("bronze.orders"),
            starts("bronze.items"),
            starts("bronze.payments")
        ),
        (1, 1, 1),
        "only the added table started"
    );

    // items' spec is edited: its table starts again after its batch, the
    // others run on.
    let edited = three.replace(
        "metadata: {name: items}\nspec:\n",
        "metadata: {name: items}\nspec:\n  maxCommitsPerBatch: 500\n",
    );
    assert_ne!(edited, three, "the edit applies to items");
    let edited_file = kube.write("edited.yaml", &edited);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &edited_file])
        .await;
    eventually("items started again", || async {
        (starts("bronze.items") == 2).then_some(())
    })
    .await;
    insert_and_await(&mut client, "items", 3).await;

    // payments is deleted: its table stops, the others run on.
    kube.kubectl_ok(&["delete", "cdcstream", "payments", "-n", "default"])
        .await;
    eventually("payments' table stopped", || async {
        (logged(&log, "the table's run ended", "bronze.payments") == 1).then_some(())
    })
    .await;
    insert_and_await(&mut client, "orders", 5).await;

    // Applied again, payments resumes from its checkpoint: no second
    // snapshot, and a change made meanwhile lands.
    run(&mut client, "INSERT INTO dbo.payments VALUES (3, N'x')")
        .await
        .expect("insert");
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &edited_file])
        .await;
    eventually("payments' change made while it was gone", || async {
        (rows_of("payments").await? == 3).then_some(())
    })
    .await;
    assert!(
        matches!(worker.try_wait(), Ok(None)),
        "the worker kept running"
    );
    assert_eq!(
        (
            starts("bronze.orders"),
            starts("bronze.items"),
            starts("bronze.payments")
        ),
        (1, 2, 2),
        "orders never started again"
    );

    // Each table was snapshotted once and no batch was written twice.
    let facts = lake.join("facts");
    let snapshots = query_table(
        &facts,
        "SELECT target, count(*) FROM t WHERE event = 'bootstrap' GROUP BY target ORDER BY target",
    )
    .await;
    assert_eq!(
        snapshots,
        [
            ["bronze.items".to_string(), "1".to_string()],
            ["bronze.orders".to_string(), "1".to_string()],
            ["bronze.payments".to_string(), "1".to_string()],
        ],
        "one snapshot per table"
    );
    let twice = query_table(
        &facts,
        "SELECT target, batch_id FROM t WHERE event IS NULL \
         GROUP BY target, batch_id HAVING count(*) > 1",
    )
    .await;
    assert!(twice.is_empty(), "batches written twice: {twice:?}");
    for (table, rows) in [("orders", "5"), ("items", "3"), ("payments", "3")] {
        let distinct = query_table(
            &lake.join(format!("bronze/{table}")),
            "SELECT count(DISTINCT id) FROM t",
        )
        .await;
        assert_eq!(distinct, [[rows.to_string()]], "{table}'s rows once each");
    }
    worker.kill().await.expect("the worker stops");
}
