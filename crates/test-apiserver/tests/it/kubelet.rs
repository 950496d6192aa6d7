//! Harness kubelet: a Deployment's pod runs as a local process (a tiny shell
//! script standing in for the container command), gets its env from
//! ConfigMaps/Secrets, is restarted when killed and stopped on scale to 0;
//! a CronJob driven by the fake clock honours concurrencyPolicy Forbid.

use crate::common::{self, Env, eventually};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, ListParams, LogParams, Patch, PatchParams, PostParams};
use mssql_cdc_test_apiserver::{KubeletOptions, ServerOptions};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

const SCRIPT: &str = "#!/bin/sh\necho \"started message=$MESSAGE password=$PASSWORD args=$*\"\necho $$ > \"$PIDFILE.$(date +%s%N)\"\necho $$ > \"$PIDFILE\"\nexec sleep \"$1\"\n";

async fn start() -> (Env, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir").keep();
    let script = dir.join("fake-container.sh");
    std::fs::write(&script, SCRIPT).expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let opts = ServerOptions {
        kubelet: Some(KubeletOptions::new(script, dir.join("logs"))),
        ..Default::default()
    };
    (common::start_with(opts).await, dir)
}

fn read_pid(path: &std::path::Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn alive(pid: i32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

async fn running_pod(pods: &Api<Pod>, selector: &str) -> Pod {
    let pods = pods.clone();
    let selector = selector.to_string();
    eventually("a running, ready pod", move || {
        let (pods, selector) = (pods.clone(), selector.clone());
        async move {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            list.items.into_iter().find(|p| {
                let st = p.status.as_ref();
                st.and_then(|s| s.phase.as_deref()) == Some("Running")
                    && st
                        .and_then(|s| s.container_statuses.as_ref())
                        .is_some_and(|c| c.iter().all(|c| c.ready))
            })
        }
    })
    .await
}

#[tokio::test]
async fn deployment_pod_runs_locally_restarts_and_scales_to_zero() {
    let (env, dir) = start().await;
    let client = env.client().await;
    let ns = "default";
    let pidfile = dir.join("pid");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "cfg"}, "data": {"message": "hi"}}))
            .expect("cm"),
    )
    .await
    .expect("cm");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "sec"}, "stringData": {"password": "s3cret"}}),
            )
            .expect("secret"),
        )
        .await
        .expect("secret");
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "app" },
        "spec": {
            "replicas": 1,
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": { "app": "app" } },
            "template": {
                "metadata": { "labels": { "app": "app" } },
                "spec": { "containers": [{
                    "name": "main", "image": "ignored:latest",
                    "command": ["/usr/bin/app", "3600"],
                    "env": [
                        { "name": "PIDFILE", "value": pidfile.display().to_string() },
                        { "name": "MESSAGE", "valueFrom": { "configMapKeyRef": { "name": "cfg", "key": "message" } } },
                        { "name": "PASSWORD", "valueFrom": { "secretKeyRef": { "name": "sec", "key": "password" } } }
                    ]
                }]}
            }
        }
    }))
    .expect("deployment");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deploys
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create deployment");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = running_pod(&pods, "app=app").await;
    let pod_name = pod.metadata.name.clone().expect("name");
    let pid = eventually("pid file", || {
        let p = pidfile.clone();
        async move { read_pid(&p) }
    })
    .await;
    assert!(alive(pid));
    let pods2 = pods.clone();
    let name2 = pod_name.clone();
    let logs = eventually("container log", move || {
        let (pods, name) = (pods2.clone(), name2.clone());
        async move {
            pods.logs(&name, &LogParams::default())
                .await
                .ok()
                .filter(|l| l.contains("started"))
        }
    })
    .await;
    assert!(
        logs.contains("message=hi password=s3cret args=3600"),
        "{logs}"
    );
    let deploys2 = deploys.clone();
    eventually("deployment ready", move || {
        let d = deploys2.clone();
        async move { (d.get("app").await.ok()?.status?.ready_replicas? == 1).then_some(()) }
    })
    .await;

    // Kill the process: the kubelet restarts it (restartPolicy Always).
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill")
            .success()
    );
    let (pods3, name3, pf) = (pods.clone(), pod_name.clone(), pidfile.clone());
    eventually("restarted container", move || {
        let (pods, name, pf) = (pods3.clone(), name3.clone(), pf.clone());
        async move {
            let p = pods.get(&name).await.ok()?;
            let cs = p.status?.container_statuses?.into_iter().next()?;
            let new_pid = read_pid(&pf)?;
            (cs.restart_count >= 1 && cs.ready && new_pid != pid && alive(new_pid)).then_some(())
        }
    })
    .await;
    let new_pid = read_pid(&pidfile).expect("pid");

    // Scale to zero: the pod is deleted and its process stopped.
    deploys
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .expect("scale");
    let pods4 = pods.clone();
    eventually("pods gone and process stopped", move || {
        let pods = pods4.clone();
        async move {
            let n = pods
                .list(&ListParams::default().labels("app=app"))
                .await
                .ok()?
                .items
                .len();
            (n == 0 && !alive(new_pid)).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn cronjob_follows_fake_clock_and_forbids_overlap() {
    let (env, dir) = start().await;
    let client = env.client().await;
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": { "name": "tick" },
        "spec": {
            "schedule": "*/5 * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{ "name": "c", "image": "x", "command": ["run", "3600"],
                    "env": [{ "name": "PIDFILE", "value": dir.join("cron-pid").display().to_string() }] }]
            }}}}
        }
    }))
    .expect("cronjob");
    let cjs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    cjs.create(&PostParams::default(), &cj)
        .await
        .expect("create cronjob");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    assert!(
        jobs.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );

    env.server.clock().advance(Duration::from_secs(6 * 60));
    let j = jobs.clone();
    eventually("first job", move || {
        let j = j.clone();
        async move { (j.list(&ListParams::default()).await.ok()?.items.len() == 1).then_some(()) }
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    running_pod(&pods, "job-name").await;

    // The first job is still running: Forbid skips the next schedule.
    env.server.clock().advance(Duration::from_secs(5 * 60));
    let cjs2 = cjs.clone();
    eventually("cronjob status reports the active job", move || {
        let c = cjs2.clone();
        async move { (c.get("tick").await.ok()?.status?.active?.len() == 1).then_some(()) }
    })
    .await;
    assert_eq!(
        jobs.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1,
        "Forbid must not start a second job"
    );
}
