//! What `kubectl get cdcstreams` tells an on-call engineer, the whole way
//! through the chart, the operator and a worker pod of the harness kubelet
//! (or a real cluster with `KUBECONFIG`): a wrong password shows as
//! LoginFailed, an edited trigger rolls the worker to the new generation,
//! a snapshot shows its rising percentage, a stopped capture job turns
//! CaptureCurrent False while the stream stays Live, a fresh database and
//! a quiet table are Ready, a capture error turns CaptureHealthy False,
//! and the worker's last status write on SIGTERM is accepted.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use mssql_cdc::spec::{CdcStream, CdcStreamStatus, Phase, SnapshotPhase, WorkerState};

use crate::support::e2e::{E2e, E2eOptions, WORKER_PODS, start_e2e};
use crate::support::kube::{cells, eventually, poll, wait_limit};
use crate::support::operator::{condition, has_condition, suspend};
use crate::support::server::run;

/// The stream's status once `wanted` holds; on timeout the test fails
/// with the last status seen and the worker's log.
async fn status_when(
    e: &E2e,
    what: &str,
    wanted: impl Fn(&CdcStreamStatus) -> bool,
) -> CdcStreamStatus {
    let api = streams(e).await;
    let last = std::sync::Mutex::new(None);
    let found = tokio::time::timeout(
        wait_limit(),
        poll(|| async {
            let status = api.get("orders").await.ok()?.status?;
            let done = wanted(&status);
            *last.lock().expect("lock") = Some(status.clone());
            done.then_some(status)
        }),
    )
    .await;
    match found {
        Ok(status) => status,
        Err(_) => {
            let mut out = e
                .kube
                .kubectl(&[
                    "logs",
                    "-n",
                    &e.kube.namespace,
                    "-l",
                    WORKER_PODS,
                    "--tail=20",
                ])
                .await;
            // Pods gone: their logs stay in the harness kubelet's folder.
            if let Ok(dir) = std::fs::read_dir(e.kube.dir.path().join("pods")) {
                for file in dir.flatten() {
                    let text = std::fs::read_to_string(file.path()).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(12).collect();
                    out.stdout
                        .extend(format!("{}:\n", file.path().display()).bytes());
                    out.stdout.extend(
                        tail.into_iter()
                            .rev()
                            .collect::<Vec<_>>()
                            .join("\n")
                            .bytes(),
                    );
                }
            }
            panic!(
                "timed out waiting for {what}; last status:\n{}\nworker log:\n{}",
                serde_json::to_string_pretty(&*last.lock().expect("lock")).unwrap_or_default(),
                String::from_utf8_lossy(&out.stdout)
            )
        }
    }
}

async fn streams(e: &E2e) -> Api<CdcStream> {
    Api::namespaced(e.kube.client().await, &e.kube.namespace)
}

/// Every status the stream's watch shows, as it comes.
async fn watched_statuses(e: &E2e) -> impl futures::Stream<Item = CdcStreamStatus> + Unpin + use<> {
    let config = watcher::Config::default().fields("metadata.name=orders");
    watcher::watcher(streams(e).await, config)
        .applied_objects()
        .filter_map(|stream| async move { stream.ok()?.status })
        .boxed()
}

fn reason(status: &CdcStreamStatus, type_: &str) -> Option<String> {
    condition(status, type_).map(|c| c.reason.clone())
}

#[tokio::test]
async fn a_wrong_password_shows_login_failed_naming_the_login() {
    let Some(e) = start_e2e(E2eOptions {
        secret_password: Some("not-the-password".into()),
        ..E2eOptions::default()
    })
    .await
    else {
        return;
    };
    let user = e.server.endpoint().user;
    // Within the kubectl wait limit (30 s on the test API server).
    let status = status_when(&e, "Ready=False with LoginFailed", |s| {
        reason(s, "Ready").as_deref() == Some("LoginFailed")
    })
    .await;
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(ready.status, "False");
    assert!(ready.message.contains(&user), "{}", ready.message);
    assert!(
        !ready.message.contains("not-the-password"),
        "{}",
        ready.message
    );
    let worker = status.worker.clone().expect("status.worker");
    assert_eq!(
        (worker.state, worker.reason.as_str()),
        (WorkerState::Failed, "LoginFailed")
    );
    let table = e
        .kube
        .kubectl_ok(&["get", "-n", &e.kube.namespace, "cdcs"])
        .await;
    println!("{table}");
    let row = cells(table.lines().nth(1).unwrap_or_default());
    assert_eq!(row[3], "LoginFailed", "{table}");
    // The pods' own reason joins in once the kubelet backs off.
    let status = status_when(&e, "WorkerRunning names the crash loop", |s| {
        condition(s, "WorkerRunning").is_some_and(|c| c.message.contains("CrashLoopBackOff"))
    })
    .await;
    assert_eq!(
        reason(&status, "WorkerRunning").as_deref(),
        Some("LoginFailed")
    );
    // The container's termination message says the same.
    let pods: Api<Pod> = Api::namespaced(e.kube.client().await, &e.kube.namespace);
    let message = eventually("the termination message", || async {
        let list = pods
            .list(&ListParams::default().labels(WORKER_PODS))
            .await
            .ok()?;
        list.items.into_iter().find_map(|pod| {
            let status = pod.status?.container_statuses?.into_iter().next()?;
            status.last_state?.terminated?.message
        })
    })
    .await;
    assert!(message.starts_with("LoginFailed: "), "{message}");
    assert!(message.contains(&user), "{message}");
}

#[tokio::test]
async fn an_edited_trigger_rolls_the_worker_to_the_new_generation() {
    let Some(e) = start_e2e(E2eOptions::default()).await else {
        return;
    };
    let first = status_when(&e, "the worker reports generation 1", |s| {
        s.observed_generation == Some(1)
            && has_condition(s, "Ready", "True")
            && has_condition(s, "Progressing", "False")
    })
    .await;
    assert_eq!(first.progress.as_ref().and_then(|p| p.generation), Some(1));
    e.kube
        .kubectl_ok(&[
            "patch",
            "-n",
            &e.kube.namespace,
            "cdcs",
            "orders",
            "--type=merge",
            "-p",
            r#"{"spec":{"trigger":{"processingTime":"3s"}}}"#,
        ])
        .await;
    let status = status_when(&e, "the new worker reports generation 2", |s| {
        s.progress.as_ref().and_then(|p| p.generation) == Some(2)
            && s.observed_generation == Some(2)
    })
    .await;
    let ready = condition(&status, "Ready").expect("Ready");
    assert_eq!(ready.observed_generation, Some(2));
    let status = status_when(&e, "the rollout is over", |s| {
        has_condition(s, "Progressing", "False")
    })
    .await;
    assert_eq!(
        reason(&status, "Progressing").as_deref(),
        Some("WorkerCurrent")
    );
    // Triggers now come every 3 s: two looks at the source in a row are
    // at least that far apart.
    let looked = |s: &CdcStreamStatus| -> Option<DateTime<Utc>> {
        Some(s.progress.as_ref()?.latest_offset.as_ref()?.observed_at)
    };
    let one = looked(&status).expect("a look at the source");
    let next = status_when(&e, "the next trigger", |s| {
        looked(s).is_some_and(|t| t > one)
    })
    .await;
    let gap = looked(&next).expect("a look") - one;
    assert!(gap >= chrono::Duration::milliseconds(2900), "{gap}");
}

#[tokio::test]
async fn a_snapshot_shows_snapshotting_with_a_rising_percentage() {
    let digits = "(VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9))";
    let seed = format!(
        "INSERT INTO dbo.orders (id, note, qty) \
         SELECT 1000 + a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 10000 * f.n + 100000 * g.n, NULL, 1 \
         FROM {digits} AS a(n) CROSS JOIN {digits} AS b(n) CROSS JOIN {digits} AS c(n) \
         CROSS JOIN {digits} AS d(n) CROSS JOIN {digits} AS f(n) CROSS JOIN (VALUES (0),(1)) AS g(n)"
    );
    let Some(e) = start_e2e(E2eOptions {
        extra: "  snapshot: {mode: initial, chunkRows: 5000}\n".into(),
        seed: vec![seed],
        ..E2eOptions::default()
    })
    .await
    else {
        return;
    };
    let mut updates = watched_statuses(&e).await;
    let mut seen: Vec<f64> = Vec::new();
    let watched = tokio::time::timeout(Duration::from_secs(600), async {
        while let Some(status) = updates.next().await {
            let Some(snapshot) = status.snapshot.clone() else {
                continue;
            };
            if snapshot.phase == SnapshotPhase::Done {
                return;
            }
            let ready = condition(&status, "Ready");
            let snapshotting = status.phase == Some(Phase::Snapshotting)
                && ready.is_some_and(|c| c.reason == "Snapshotting" && c.message.contains('%'));
            if let Some(percent) = snapshot.share().percent().filter(|_| snapshotting)
                && seen.last().is_none_or(|last| percent > *last)
            {
                seen.push(percent);
            }
        }
    })
    .await;
    assert!(watched.is_ok(), "the snapshot did not end; seen {seen:?}");
    assert!(
        seen.len() >= 3,
        "percentages seen through the watch: {seen:?}"
    );
    let status = status_when(&e, "Ready after the snapshot", |s| {
        has_condition(s, "Ready", "True")
    })
    .await;
    assert_eq!(status.snapshot.map(|s| s.rows), Some(200_003));
}

#[tokio::test]
async fn a_stopped_capture_job_turns_capture_current_false_while_live_stays_true() {
    let Some(e) = start_e2e(E2eOptions {
        age_database: false,
        // Capture writes an idle entry every second on a quiet database,
        // as SQL Server does every few minutes: the max LSN keeps moving.
        idle_interval_secs: Some(1),
        extra: "  snapshot: {mode: never}\n  alerts: {captureLag: 5s}\n".into(),
        ..E2eOptions::default()
    })
    .await
    else {
        return;
    };
    status_when(&e, "Ready", |s| has_condition(s, "Ready", "True")).await;
    let mut client = e.server.connect_to(&e.database).await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_stop_job @job_type = N'capture'",
    )
    .await
    .expect("stop the capture job");
    run(&mut client, "INSERT INTO dbo.orders VALUES (4, N'n4', 4)")
        .await
        .expect("a change capture will not see");
    let status = status_when(&e, "CaptureCurrent=False", |s| {
        has_condition(s, "CaptureCurrent", "False")
    })
    .await;
    assert_eq!(
        reason(&status, "CaptureCurrent").as_deref(),
        Some("CaptureBehind")
    );
    let live = condition(&status, "Live").expect("Live");
    assert_eq!(live.status, "True", "{}", live.message);
    assert_eq!(reason(&status, "Ready").as_deref(), Some("CaptureBehind"));
    run(
        &mut client,
        "EXEC sys.sp_cdc_start_job @job_type = N'capture'",
    )
    .await
    .expect("start the capture job");
    status_when(&e, "CaptureCurrent again", |s| {
        has_condition(s, "CaptureCurrent", "True")
    })
    .await;
}

#[tokio::test]
async fn a_fresh_database_and_a_quiet_table_are_ready_right_after_the_snapshot() {
    let Some(e) = start_e2e(E2eOptions {
        age_database: false,
        extra: "  snapshot: {mode: initial}\n".into(),
        trigger: "{processingTime: 2s}".into(),
        ..E2eOptions::default()
    })
    .await
    else {
        return;
    };
    // No change after the snapshot: count the worker's looks at the
    // source from the snapshot's end until Ready.
    let mut updates = watched_statuses(&e).await;
    let mut looks_after_snapshot: Vec<DateTime<Utc>> = Vec::new();
    let ready = tokio::time::timeout(wait_limit(), async {
        while let Some(status) = updates.next().await {
            let done = status
                .snapshot
                .as_ref()
                .filter(|s| s.phase == SnapshotPhase::Done)
                .map(|s| s.updated_at);
            let look = status
                .progress
                .as_ref()
                .and_then(|p| p.latest_offset.as_ref())
                .map(|o| o.observed_at);
            if let (Some(done), Some(look)) = (done, look)
                && look >= done
                && !looks_after_snapshot.contains(&look)
            {
                looks_after_snapshot.push(look);
            }
            if has_condition(&status, "Ready", "True") {
                return status;
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("Ready=True on a quiet table");
    assert!(
        looks_after_snapshot.len() <= 2,
        "Ready within two triggers of the snapshot's end: {looks_after_snapshot:?}"
    );
    let headroom = ready
        .progress
        .as_ref()
        .and_then(|p| p.retention_headroom_hours)
        .expect("headroom");
    // A young database: the cleanup job's three days, not its age.
    assert!(headroom > 71.0, "{headroom}");
    assert_eq!(reason(&ready, "Ready").as_deref(), Some("Healthy"));
}

#[tokio::test]
async fn a_capture_error_turns_capture_healthy_false() {
    // The sandbox's way to make a log scan fail is its own procedure.
    if std::env::var("MSSQL_CDC_TEST_URL").is_ok_and(|u| !u.trim().is_empty()) {
        return;
    }
    let password = "Monitor-Pa55word!";
    let Some(e) = start_e2e(E2eOptions {
        seed: vec![format!(
            "CREATE LOGIN monitor WITH PASSWORD = '{password}' \
             CREATE USER monitor FOR LOGIN monitor \
             GRANT VIEW DATABASE STATE TO monitor"
        )],
        monitoring: Some(("monitor".into(), password.into())),
        ..E2eOptions::default()
    })
    .await
    else {
        return;
    };
    let status = status_when(&e, "CaptureHealthy=True", |s| {
        has_condition(s, "CaptureHealthy", "True")
    })
    .await;
    assert_eq!(status.capture.and_then(|c| c.job_running), Some(true));
    let mut client = e.server.connect_to(&e.database).await;
    run(
        &mut client,
        "EXEC sandbox.sp_cdc_fail_next_scan @error_number = 22859",
    )
    .await
    .expect("fail the next log scan");
    let status = status_when(&e, "CaptureHealthy=False", |s| {
        has_condition(s, "CaptureHealthy", "False")
    })
    .await;
    let healthy = condition(&status, "CaptureHealthy").expect("CaptureHealthy");
    assert_eq!(healthy.reason, "CaptureErrors", "{}", healthy.message);
    assert!(healthy.message.contains("22859"), "{}", healthy.message);
    assert_eq!(reason(&status, "Ready").as_deref(), Some("CaptureErrors"));
    let capture = status.capture.expect("status.capture");
    assert_eq!(capture.last_error.map(|e| e.number), Some(22859));
}

#[tokio::test]
async fn the_workers_last_status_write_on_sigterm_is_accepted() {
    let Some(e) = start_e2e(E2eOptions::default()).await else {
        return;
    };
    status_when(&e, "Ready", |s| has_condition(s, "Ready", "True")).await;
    suspend(&e.kube, "orders").await;
    let status = status_when(&e, "the worker's word after SIGTERM", |s| {
        s.phase == Some(Phase::Suspended)
            && s.worker
                .as_ref()
                .is_some_and(|w| w.state == WorkerState::Stopped)
    })
    .await;
    assert_eq!(status.worker.map(|w| w.reason), Some("Stopped".to_string()));
    // No report was refused on the way out (the kubelet keeps the logs of
    // pods that are gone).
    if let Ok(dir) = std::fs::read_dir(e.kube.dir.path().join("pods")) {
        for file in dir.flatten() {
            let log = std::fs::read_to_string(file.path()).unwrap_or_default();
            assert!(!log.contains("cannot patch"), "{log}");
            assert!(!log.contains("was not applied"), "{log}");
        }
    }
}
