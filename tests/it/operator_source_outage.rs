//! A CdcSource whose SQL Server goes down: the source's worker backs off as
//! one (its rounds look at the server, not each table), every table's
//! status says it waits for the source (Live False, reason
//! SourceUnavailable, the message naming the outage), the source's status
//! says why once (SourceConnected False), and when the server is back
//! every table goes on by itself and streams again.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use mssql_cdc::operator::conditions::{Observed, Runner, conditions};
use mssql_cdc::operator::source_conditions::SOURCE_CONNECTED;
use mssql_cdc::operator::source_status::{SourceObserved, condition, source_status};
use mssql_cdc::spec::{CdcSource, CdcStream, Phase, WorkerState};

use crate::operator_worker::{running_source_worker, source_manifests};
use crate::support::kube::{KubeEnv, eventually};
use crate::support::proxy::CuttableProxy;
use crate::support::server::{TestServer, run};
use crate::support::stream::{StreamFixture, query_table};

const TABLES: [(&str, &str); 3] = [
    ("orders", "dbo.orders"),
    ("items", "dbo.items"),
    ("payments", "dbo.payments"),
];

/// The source worker's pod as the kubelet shows a running one: what the
/// operator would judge the conditions with.
fn running_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sales-source-1"},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "worker", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-12-04T11:00:00Z"}}
        }]}
    }))
    .expect("a pod")
}

/// The Live condition the operator gives `stream` as it stands.
fn live(stream: &CdcStream) -> (String, String, String) {
    let pods = [running_pod()];
    let all = conditions(
        stream,
        Phase::Streaming,
        &Observed {
            pods: &pods,
            failure: None,
            reconcile_error: None,
            workload_fault: None,
            runner: Runner::Source,
            now: chrono::Utc::now(),
            allowance: Duration::ZERO,
        },
    );
    let live = all
        .into_iter()
        .find(|c| c.type_ == "Live")
        .expect("a Live condition");
    (live.status, live.reason, live.message)
}

/// SourceConnected as the operator derives it from the source's status
/// and its streams.
fn source_connected(source: &CdcSource, streams: &[CdcStream]) -> (String, String, String) {
    let refs: Vec<&CdcStream> = streams.iter().collect();
    let pods = [running_pod()];
    let status = source_status(
        source,
        &SourceObserved {
            streams: &refs,
            pods: &pods,
            failure: None,
            reconcile_error: None,
            workload_fault: None,
            now: chrono::Utc::now(),
        },
    );
    let c = condition(&status, SOURCE_CONNECTED).expect("SourceConnected");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

async fn all_streams(api: &Api<CdcStream>) -> Option<Vec<CdcStream>> {
    let mut streams = Vec::new();
    for (name, _) in TABLES {
        streams.push(api.get(name).await.ok()?);
    }
    Some(streams)
}

fn worker_state(stream: &CdcStream) -> Option<WorkerState> {
    Some(stream.status.as_ref()?.worker.as_ref()?.state)
}

/// Waits until every table's worker waits for the source; the streams.
async fn all_waiting(streams: &Api<CdcStream>) -> Vec<CdcStream> {
    eventually("every table waiting for its source", || async {
        let all = all_streams(streams).await?;
        all.iter()
            .all(|s| worker_state(s) == Some(WorkerState::Waiting))
            .then_some(all)
    })
    .await
}

/// Each of `streams` is not Live because its source is down, and its
/// message starts with the outage's reason.
fn assert_waiting_for(streams: &[CdcStream], outage: &str) -> Vec<String> {
    let mut messages = Vec::new();
    for stream in streams {
        let (status, reason, message) = live(stream);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "SourceUnavailable"),
            "{message}"
        );
        assert!(
            message.starts_with(outage),
            "the message says which outage: {message}"
        );
        messages.push(message);
    }
    messages
}

/// Waits until the source's status says it is not connected; the source.
async fn source_disconnected(sources: &Api<CdcSource>) -> CdcSource {
    eventually("the source says why", || async {
        let source = sources.get("sales").await.ok()?;
        let connection = source.status.as_ref()?.connection.as_ref()?;
        (!connection.connected).then_some(source)
    })
    .await
}

/// Waits until each table's bronze holds its two seeded rows.
async fn snapshots_in_bronze(lake: &std::path::Path) {
    for (name, _) in TABLES {
        let bronze = lake.join(format!("bronze/{name}"));
        eventually(&format!("{name}'s snapshot in bronze"), || async {
            if !bronze.join("_delta_log").exists() {
                return None;
            }
            let rows = query_table(&bronze, "SELECT COUNT(*) FROM t").await;
            (rows == [["2".to_string()]]).then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_whose_server_is_down_waits_as_one_and_every_table_says_why() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for (name, _) in TABLES {
        crate::engine_source::seeded_capture(&mut client, name, 2).await;
    }
    let endpoint = server.endpoint();
    let target = format!("{}:{}", endpoint.host, endpoint.port)
        .parse()
        .expect("server address");
    let proxy = CuttableProxy::start(target).await;
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    // The worker reaches SQL Server through the proxy only.
    let manifests = source_manifests(&server, &db, lake, &TABLES, ("", "{processingTime: 1s}"))
        .replace(
            &format!("host: \"{}\"\n    port: {}", endpoint.host, endpoint.port),
            &format!(
                "host: \"{}\"\n    port: {}",
                proxy.addr.ip(),
                proxy.addr.port()
            ),
        );
    assert!(manifests.contains(&proxy.addr.port().to_string()));
    let file = kube.write("sales.yaml", &manifests);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    let worker = running_source_worker(&kube, &fixture.password);
    let client_api = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client_api.clone(), "default");
    let sources: Api<CdcSource> = Api::namespaced(client_api, "default");

    // Every table snapshots and streams; the source is connected.
    snapshots_in_bronze(lake).await;
    eventually("the source reported connected", || async {
        let status = sources.get("sales").await.ok()?.status?;
        status.connection.filter(|c| c.connected)
    })
    .await;

    // The server goes down.
    proxy.refuse(true);
    let down = all_waiting(&streams).await;
    assert_waiting_for(&down, "SourceUnreachable");
    let source = source_disconnected(&sources).await;
    let (status, reason, message) = source_connected(&source, &down);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "SourceUnreachable"),
        "{message}"
    );
    assert!(!message.contains(&fixture.password), "no secret: {message}");

    // While down, the source is looked at as one: over 8 s the attempts
    // stay within the rounds' backoff (waits of 1 s, 2 s, 4 s ...), not
    // one train of retries per table.
    let before = proxy.accepted();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let attempts = proxy.accepted() - before;
    assert!(
        attempts <= 6,
        "{attempts} connection attempts in 8 s while the source was down"
    );

    // Back: every table runs again by itself and streams a new change.
    proxy.refuse(false);
    eventually("every table running again", || async {
        let all = all_streams(&streams).await?;
        all.iter()
            .all(|s| worker_state(s) == Some(WorkerState::Running))
            .then_some(())
    })
    .await;
    let source = eventually("the source connected again", || async {
        let source = sources.get("sales").await.ok()?;
        let connected = source.status.as_ref()?.connection.as_ref()?.connected;
        connected.then_some(source)
    })
    .await;
    let back = all_streams(&streams).await.expect("the streams");
    assert_eq!(source_connected(&source, &back).0, "True");
    run(&mut client, "INSERT INTO dbo.orders VALUES (3, N'after')")
        .await
        .expect("a change after the outage");
    let bronze = lake.join("bronze/orders");
    eventually("the change after the outage in bronze", || async {
        let rows = query_table(&bronze, "SELECT COUNT(*) FROM t").await;
        (rows == [["3".to_string()]]).then_some(())
    })
    .await;
    drop(worker);
}

/// A source whose login SQL Server refuses (a wrong password in its
/// Secret): every table waits for the source and says why (Live False,
/// SourceUnavailable, the message naming LoginFailed and what to check),
/// the source says it once (SourceConnected False, LoginFailed), no status
/// holds the password, and the worker started again with the right
/// password streams every table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_whose_login_is_refused_says_so_on_every_table_and_on_the_source() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for (name, _) in TABLES {
        crate::engine_source::seeded_capture(&mut client, name, 2).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let manifests = source_manifests(&server, &db, lake, &TABLES, ("", "{processingTime: 1s}"));
    let file = kube.write("sales.yaml", &manifests);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    let wrong = format!("{}-not", fixture.password);
    let worker = running_source_worker(&kube, &wrong);
    let client_api = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client_api.clone(), "default");
    let sources: Api<CdcSource> = Api::namespaced(client_api, "default");

    let refused = all_waiting(&streams).await;
    for message in assert_waiting_for(&refused, "LoginFailed") {
        assert!(
            message.contains("password in its Secret"),
            "the message says what to check: {message}"
        );
        assert!(!message.contains(&wrong), "no secret: {message}");
    }
    let source = source_disconnected(&sources).await;
    let (status, reason, message) = source_connected(&source, &refused);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "LoginFailed"),
        "{message}"
    );
    assert!(!message.contains(&wrong), "no secret: {message}");
    assert!(
        !lake.join("bronze/orders/_delta_log").exists(),
        "nothing is written while the login is refused"
    );

    // The fix: the right password; the worker starts again with it (the
    // old one gone first, its checkpoint locks with it).
    let mut worker = worker;
    worker.kill().await.expect("the refused worker stops");
    let worker = running_source_worker(&kube, &fixture.password);
    snapshots_in_bronze(lake).await;
    eventually("the source connected", || async {
        let source = sources.get("sales").await.ok()?;
        source
            .status?
            .connection
            .filter(|c| c.connected)
            .map(|_| ())
    })
    .await;
    drop(worker);
}
