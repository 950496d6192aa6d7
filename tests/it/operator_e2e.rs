//! The whole path without a cluster: kubectl applies the CRD, a Secret, the
//! whole chart (rendered by Helm) and a CdcStream; the operator (in its own
//! pod from the chart's Deployment, as the chart's operator ServiceAccount
//! under its RBAC, on the API server's fake clock) creates the worker
//! Deployment;
//! the harness kubelet runs `mssql-cdc worker` as a pod of the chart's
//! worker ServiceAccount, with only its in-cluster identity (token, CA,
//! read-only root, its lake on the `/tmp` emptyDir); the sandbox's changes
//! reach Delta;
//! `kubectl get cdcstreams` shows the stream Streaming and Ready with its
//! lag and headroom; once the worker is killed and cannot come back, Live
//! and Ready turn False when the clock passes the silence limit; suspend
//! stops the worker; deleting the stream garbage-collects it. Without the
//! worker Role's `patch` on `cdcstreams/status` the stream never reports
//! progress and the worker's log shows the 403 as an error that says what to do.
//!
//! With `KUBECONFIG` (and `MSSQL_CDC_TEST_IMAGE`) set, the same steps run on
//! that cluster, with the sandbox as a pod (`support::cluster`).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::ListParams;
use mssql_cdc::spec::{CdcStream, CdcStreamStatus, Phase};

use crate::support::chart::ChartRelease;
use crate::support::cluster::count_rows_in_pod;
use crate::support::e2e::{E2e, E2eOptions, WORKER_PODS, start_e2e};
use crate::support::kube::{cells, eventually};
use crate::support::operator::{self, condition, suspend, wait_gone};
use crate::support::stream::query_table;

/// The status of the e2e's stream once `wanted` holds.
async fn status_when(
    streams: &Api<CdcStream>,
    what: &str,
    wanted: impl Fn(&CdcStreamStatus) -> bool,
) -> CdcStreamStatus {
    operator::status_when(streams, "orders", what, wanted).await
}

/// Waits until the stream's worker pods satisfy `wanted`.
async fn worker_pods_when(pods: &Api<Pod>, what: &str, wanted: impl Fn(&[Pod]) -> bool) {
    let wanted = &wanted;
    eventually(what, move || async move {
        let list = pods
            .list(&ListParams::default().labels(WORKER_PODS))
            .await
            .ok()?;
        wanted(&list.items).then_some(())
    })
    .await
}

/// Whether every container of `pod` waits on its configuration (here: the
/// Secret's removed key), so no worker process runs.
fn cannot_start(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses.is_some_and(|all| {
        all.iter().all(|c| {
            c.state
                .as_ref()
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref())
                == Some("CreateContainerConfigError")
        })
    })
}

/// Minutes since the last batch, as the Live message states them.
fn minutes_since_batch(live: &Condition) -> Option<u64> {
    let text = live.message.strip_prefix("last batch ")?;
    let (minutes, _) = text.split_once("m ago")?;
    minutes.parse().ok()
}

/// The e2e with the chart as `edit` leaves it.
async fn start(edit: impl FnOnce(ChartRelease) -> ChartRelease + 'static) -> Option<E2e> {
    start_e2e(E2eOptions {
        chart: Box::new(edit),
        ..E2eOptions::default()
    })
    .await
}

/// The rows of the worker pod's bronze table: through `kubectl exec` on a
/// real cluster; here from the pod's `/tmp` emptyDir, where its lake is.
async fn bronze_rows(e: &E2e, pods: &Api<Pod>) -> Option<u64> {
    let location = e.fixture.path("bronze");
    let Some(server) = e.kube.server() else {
        return count_rows_in_pod(&e.kube, "orders", &location.display().to_string()).await;
    };
    let pod = pods
        .list(&ListParams::default().labels(WORKER_PODS))
        .await
        .ok()?
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())?;
    let name = pod.metadata.name?;
    let tmp = server.pod_volume_path(&e.kube.namespace, &name, "tmp")?;
    let relative = location
        .strip_prefix("/tmp")
        .expect("the e2e lake is under /tmp, the worker's only writable volume");
    let table = tmp.join(relative);
    if !table.join("_delta_log").exists() {
        return None;
    }
    let rows = query_table(&table, "SELECT COUNT(*) FROM t").await;
    rows.first()?.first()?.parse().ok()
}

#[tokio::test]
async fn kubectl_apply_to_delta_and_back_to_the_status() {
    let Some(e) = start(|chart| chart).await else {
        return;
    };
    let (kube, ns) = (&e.kube, e.kube.namespace.clone());
    let kube_client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(kube_client.clone(), &ns);
    let status = status_when(
        &streams,
        "the stream Streaming with 3 rows read",
        |status| {
            status.phase == Some(Phase::Streaming)
                && status
                    .progress
                    .as_ref()
                    .is_some_and(|p| p.end_lsn.is_some())
        },
    )
    .await;
    assert!(status.progress.is_some());
    let pods: Api<Pod> = Api::namespaced(kube_client.clone(), &ns);
    let bronze = eventually("the changes in bronze", || async {
        bronze_rows(&e, &pods).await.filter(|rows| *rows == 3)
    })
    .await;
    assert_eq!(bronze, 3);

    let status = status_when(&streams, "Ready=True", |status| {
        condition(status, "Ready").is_some_and(|c| c.status == "True")
    })
    .await;
    for healthy in [
        "Live",
        "RetentionHeadroom",
        "IngestionLag",
        "CaptureLag",
        "MetricsAvailable",
    ] {
        let c = condition(&status, healthy).expect(healthy);
        assert_eq!(c.status, "True", "{healthy}: {} {}", c.reason, c.message);
    }
    let table = kube.kubectl_ok(&["get", "-n", &ns, "cdcstreams"]).await;
    println!("{table}");
    let row = cells(table.lines().nth(1).unwrap_or_default());
    assert_eq!(row[..3], ["orders", "Streaming", "True"], "{table}");

    // Kill the worker so it stays dead: without the Secret's key no new
    // worker can start (CreateContainerConfigError). The Secret itself
    // stays: without it the operator would refuse the stream
    // (SecretNotFound) and remove the worker.
    kube.kubectl_ok(&[
        "patch",
        "-n",
        &ns,
        "secret",
        "sql",
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/data/password"}]"#,
    ])
    .await;
    kube.kubectl_ok(&["delete", "-n", &ns, "pods", "-l", WORKER_PODS])
        .await;
    worker_pods_when(&pods, "a replacement worker that cannot start", |pods| {
        !pods.is_empty() && pods.iter().all(cannot_start)
    })
    .await;

    // Only the test API server's clock moves, and only a failpoints build
    // of the operator follows it (`MSSQL_CDC_TEST_CLOCK`).
    if kube.server().is_none() || !cfg!(feature = "failpoints") {
        eprintln!("skipped the silence steps: the operator's clock cannot be moved here");
    } else {
        silence_turns_live_false(&e, &streams).await;
    }

    suspend(kube, "orders").await;
    worker_pods_when(&pods, "suspend removes the worker pod", <[Pod]>::is_empty).await;

    kube.kubectl_ok(&["delete", "-n", &ns, "cdcs", "orders"])
        .await;
    let deployments: Api<Deployment> = Api::namespaced(kube_client, &ns);
    wait_gone(&deployments, "orders").await;
}

/// With the worker dead: 10 minutes later on the operator's clock the
/// stream is still live; past the 15-minute silence limit Live and Ready
/// turn False and say what to do.
async fn silence_turns_live_false(e: &E2e, streams: &Api<CdcStream>) {
    let (kube, ns) = (&e.kube, e.kube.namespace.as_str());
    // Within the silence limit (15 minutes) the stream still counts as live.
    kube.advance_clock(Duration::from_secs(10 * 60)).await;
    let status = status_when(streams, "Live judged 10 minutes later", |status| {
        condition(status, "Live")
            .and_then(minutes_since_batch)
            .is_some_and(|minutes| minutes >= 10)
    })
    .await;
    let live = condition(&status, "Live").expect("Live");
    assert_eq!(live.status, "True", "{}", live.message);

    // Past it, Live and Ready turn False and say what to do.
    kube.advance_clock(Duration::from_secs(6 * 60)).await;
    let status = status_when(streams, "Live=False past the silence limit", |status| {
        condition(status, "Live").is_some_and(|c| c.status == "False")
    })
    .await;
    let (live, ready) = (
        condition(&status, "Live").expect("Live"),
        condition(&status, "Ready").expect("Ready"),
    );
    assert_eq!(
        (live.reason.as_str(), ready.status.as_str()),
        ("FactsStopped", "False")
    );
    assert!(
        live.message
            .contains("check that the stream's process runs"),
        "{}",
        live.message
    );
    let table = kube.kubectl_ok(&["get", "-n", ns, "cdcstreams"]).await;
    println!("{table}");
    let row = cells(table.lines().nth(1).unwrap_or_default());
    assert_eq!(row[..3], ["orders", "Streaming", "False"], "{table}");
}

#[tokio::test]
async fn without_the_status_patch_rule_the_stream_never_reports_progress() {
    let Some(e) = start(|chart| chart.without_worker_verb("cdcstreams/status", "patch")).await
    else {
        return;
    };
    let (kube, ns) = (&e.kube, e.kube.namespace.clone());
    let streams: Api<CdcStream> = Api::namespaced(kube.client().await, &ns);
    // The worker streams (its batches reach bronze) but every report of
    // them is refused.
    let logs = eventually("the worker's log to show the 403", || async {
        let out = kube
            .kubectl(&["logs", "-n", &ns, "-l", WORKER_PODS, "--tail=-1"])
            .await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("cannot patch resource").then_some(text)
    })
    .await;
    let account = format!("system:serviceaccount:{ns}:{}", e.chart.worker_account());
    assert!(logs.contains(&account), "{logs}");
    assert!(logs.contains("cdcstreams/status"), "{logs}");
    assert!(logs.contains("forbidden"), "{logs}");
    // Not a warning lost among others: an error that says what to do.
    let refused = logs
        .lines()
        .find(|l| l.contains("cannot patch resource"))
        .unwrap_or_default();
    assert!(refused.contains("ERROR"), "{refused}");
    assert!(
        refused.contains("let this pod's ServiceAccount patch cdcstreams/status"),
        "{refused}"
    );
    let stream = streams.get("orders").await.expect("stream");
    let status = stream.status.unwrap_or_default();
    assert!(status.progress.is_none(), "{:?}", status.progress);
    assert_ne!(status.phase, Some(Phase::Streaming));
}

#[tokio::test]
async fn a_worker_that_may_not_read_its_stream_shows_worker_forbidden_with_the_fix() {
    let Some(e) = start(|chart| chart.without_worker_verb("cdcstreams", "get")).await else {
        return;
    };
    let (kube, ns) = (&e.kube, e.kube.namespace.clone());
    let streams: Api<CdcStream> = Api::namespaced(kube.client().await, &ns);
    // The worker cannot report (it may not even read the stream): its
    // termination message is how the operator learns why.
    let status = status_when(&streams, "WorkerRunning to say WorkerForbidden", |s| {
        condition(s, "WorkerRunning").is_some_and(|c| c.reason == "WorkerForbidden")
    })
    .await;
    let running = condition(&status, "WorkerRunning").expect("WorkerRunning");
    assert_eq!(running.status, "False");
    let account = e.chart.worker_account();
    for part in [
        format!("ServiceAccount {account} in namespace {ns}"),
        "worker.namespaces".to_string(),
        "forbidden".to_string(),
    ] {
        assert!(
            running.message.contains(&part),
            "{part}: {}",
            running.message
        );
    }
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "WorkerForbidden")
    );
    let table = kube.kubectl_ok(&["get", "-n", &ns, "cdcs", "orders"]).await;
    assert!(table.contains("WorkerForbidden"), "{table}");
}

// Passes run alone (`-- --ignored operator_e2e::pods_refused`), but
// beside the other operator tests the stream never says
// WorkerServiceAccountMissing within 120 s since stop 41's merges: being
// investigated (stop 41's closing note), not a passing test meanwhile.
#[tokio::test]
async fn pods_refused_for_a_missing_service_account_say_which_account() {
    const OPERATOR_PODS: &str = "app.kubernetes.io/name=mssql-cdc-operator";
    let Some(e) = start(|chart| chart).await else {
        return;
    };
    let (kube, ns) = (&e.kube, e.kube.namespace.clone());
    let client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    worker_pods_when(&pods, "a worker pod", |p| !p.is_empty()).await;
    // Its ServiceAccount goes; the pod goes; no new one may be created.
    let account = e.chart.worker_account();
    kube.kubectl_ok(&["delete", "serviceaccount", "-n", &ns, &account])
        .await;
    kube.kubectl_ok(&[
        "delete",
        "pod",
        "-n",
        &ns,
        "-l",
        WORKER_PODS,
        "--wait=false",
    ])
    .await;
    // The Deployment's ReplicaFailure (FailedCreate) says so in the API
    // server's words; the operator, which can tell why, names the account.
    // The ReplicaSet's refused creations, the Deployment's condition and
    // the operator's look follow one another: bounded by that chain, not
    // by one kubectl wait.
    let missing = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        crate::support::kube::poll(|| async {
            let status = streams.get("orders").await.ok()?.status?;
            condition(&status, "WorkerRunning")
                .is_some_and(|c| c.status == "False" && c.reason == "WorkerServiceAccountMissing")
                .then_some(status)
        }),
    )
    .await;
    let Ok(status) = missing else {
        let mut seen = String::new();
        for what in [
            vec!["get", "cdcstreams", "-n", &ns, "-o", "yaml"],
            vec![
                "get",
                "deployments,replicasets,pods",
                "-n",
                &ns,
                "-o",
                "yaml",
            ],
            vec!["get", "events", "-n", &ns],
            vec!["get", "serviceaccounts", "-n", &ns],
            // The operator's log, its last run's and this one's.
            vec!["logs", "-n", &ns, "-l", OPERATOR_PODS, "--previous"],
            vec!["logs", "-n", &ns, "-l", OPERATOR_PODS],
        ] {
            let out = kube.kubectl(&what).await;
            seen.push_str(&String::from_utf8_lossy(&out.stdout));
            seen.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        panic!("WorkerRunning never said WorkerServiceAccountMissing; the cluster:\n{seen}");
    };
    let running = condition(&status, "WorkerRunning").expect("WorkerRunning");
    for part in [
        format!("ServiceAccount {account} does not exist in namespace {ns}"),
        format!("serviceaccount \"{account}\" not found"),
        "worker.namespaces".to_string(),
    ] {
        assert!(
            running.message.contains(&part),
            "{part}: {}",
            running.message
        );
    }
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(ready.reason, "WorkerServiceAccountMissing");
}
