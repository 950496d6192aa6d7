//! `mssql-cdc operator` against the test API server: it creates the
//! worker Deployment or CronJob a CdcStream needs, owned by the stream and
//! applied under its field manager, sets the phase, scales a suspended
//! stream to zero, and garbage collection removes the worker with the
//! stream. A stream asking for an image or ServiceAccount the operator's
//! flags do not allow gets no worker, a Ready condition and a Warning Event
//! saying why; with `--watch-namespaces` streams elsewhere are never seen.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use kube::Api;
use mssql_cdc::spec::{CdcStream, Phase};

use crate::support::kube::{KubeEnv, eventually, repo_file};
use crate::support::operator::{
    Operator, condition, once_warned, start_operator, status_when, stream_manifest,
    stream_with_secret, suspend, wait_gone,
};

#[tokio::test]
async fn operator_runs_workers_for_streams_and_follows_suspend_and_delete() {
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let _operator = start_operator(&kube, std::path::Path::new(env!("CARGO_BIN_EXE_mssql-cdc")));
    for example in ["orders-continuous.yaml", "orders-hourly.yaml"] {
        kube.kubectl_ok(&[
            "apply",
            "-f",
            &repo_file(&format!("examples/kubernetes/{example}")),
        ])
        .await;
    }
    let client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let uid = streams.get("orders").await.expect("stream").metadata.uid;

    let deployment = eventually("the worker Deployment", || {
        let deployments = deployments.clone();
        async move { deployments.get_opt("orders").await.ok().flatten() }
    })
    .await;
    assert_eq!(deployment.spec.replicas, Some(1));
    let owner = &deployment
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("CdcStream", uid.as_ref())
    );
    let managers: Vec<String> = deployment
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"mssql-cdc-operator".to_string()),
        "{managers:?}"
    );
    let container = &deployment
        .spec
        .template
        .spec
        .clone()
        .expect("pod")
        .containers[0];
    assert_eq!(container.image.as_deref(), Some("mssql-cdc:e2e"));

    let cron_job = eventually("the hourly CronJob", || {
        let cron_jobs = cron_jobs.clone();
        async move { cron_jobs.get_opt("customers-hourly").await.ok().flatten() }
    })
    .await;
    assert_eq!(cron_job.spec.schedule, "@hourly");
    assert_eq!(cron_job.spec.concurrency_policy.as_deref(), Some("Forbid"));

    let phase_of = |name: &'static str, wanted: Phase| {
        let streams = streams.clone();
        async move {
            let status = streams.get(name).await.ok()?.status?;
            (status.phase == Some(wanted)).then_some(status)
        }
    };
    let status = eventually("phase Pending", || phase_of("orders", Phase::Pending)).await;
    assert_eq!(
        status.observed_generation, None,
        "no worker reported that it runs generation 1"
    );

    suspend(&kube, "orders").await;
    eventually("suspend scales the worker to zero", || {
        let deployments = deployments.clone();
        async move {
            let replicas = deployments.get("orders").await.ok()?.spec.replicas;
            (replicas == Some(0)).then_some(())
        }
    })
    .await;
    let status = eventually("phase Suspended", || phase_of("orders", Phase::Suspended)).await;
    assert_eq!(status.observed_generation, Some(2));
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let reasons: Vec<String> = events
        .list(&Default::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("orders"))
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons.contains(&"Pending".to_string()) && reasons.contains(&"Suspended".to_string()),
        "{reasons:?}"
    );

    kube.kubectl_ok(&["delete", "cdcs", "orders"]).await;
    wait_gone(&deployments, "orders").await;
}

#[tokio::test]
async fn a_stream_asking_for_an_image_or_account_not_allowed_gets_no_worker() {
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let _operator = Operator::with_args(
        &kube,
        std::path::Path::new(env!("CARGO_BIN_EXE_mssql-cdc")),
        &[
            "--worker-images=registry.acme.io/cdc/",
            "--worker-service-accounts=s3-writer",
        ],
    );
    let streams = [
        ("allowed-image", "{image: registry.acme.io/cdc/worker:2}"),
        ("allowed-account", "{serviceAccountName: s3-writer}"),
        ("refused-image", "{image: evil.io/miner:1}"),
        ("refused-account", "{serviceAccountName: admin}"),
    ];
    let manifests: Vec<String> = streams
        .iter()
        .map(|(name, worker)| stream_with_secret(name, worker))
        .collect();
    let file = kube.write("streams.yaml", &manifests.join("---\n"));
    kube.kubectl_ok(&["apply", "-f", &file]).await;

    let client = kube.client().await;
    let streams_api: Api<CdcStream> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    for name in ["allowed-image", "allowed-account"] {
        eventually(&format!("the Deployment of {name}"), || async {
            deployments.get_opt(name).await.ok().flatten()
        })
        .await;
    }
    for (name, reason, says) in [
        (
            "refused-image",
            "ImageNotAllowed",
            "\"evil.io/miner:1\" is not allowed",
        ),
        (
            "refused-account",
            "ServiceAccountNotAllowed",
            "\"admin\" is not allowed",
        ),
    ] {
        let status = status_when(&streams_api, name, "Ready=False saying why", |s| {
            condition(s, "Ready").is_some_and(|c| c.reason == reason)
        })
        .await;
        let ready = condition(&status, "Ready").expect("Ready");
        assert_eq!(ready.status, "False");
        assert!(ready.message.contains(says), "{}", ready.message);
        assert_eq!(status.phase, Some(Phase::Failed));
        // The status is written after the worker was (not) applied.
        assert!(
            deployments.get_opt(name).await.expect("get").is_none(),
            "{name}"
        );
        let events = once_warned(&client, "default", name, reason).await;
        assert!(
            events.iter().any(|(_, _, note)| note.contains(says)),
            "{events:?}"
        );
    }

    // A worker that ran goes when its stream asks for a refused image.
    kube.kubectl_ok(&[
        "patch",
        "cdcs",
        "allowed-image",
        "--type=merge",
        "-p",
        r#"{"spec":{"worker":{"image":"registry.acme.io/cdc-evil/worker:2"}}}"#,
    ])
    .await;
    wait_gone(&deployments, "allowed-image").await;
}

#[tokio::test]
async fn with_watch_namespaces_streams_elsewhere_are_ignored() {
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    for namespace in ["team-a", "elsewhere"] {
        kube.kubectl_ok(&["create", "namespace", namespace]).await;
        let file = kube.write(
            &format!("{namespace}.yaml"),
            &stream_with_secret("orders", "{}"),
        );
        kube.kubectl_ok(&["apply", "-n", namespace, "-f", &file])
            .await;
    }
    let operator = Operator::with_args(
        &kube,
        std::path::Path::new(env!("CARGO_BIN_EXE_mssql-cdc")),
        &["--watch-namespaces=team-a"],
    );
    let client = kube.client().await;
    let watched: Api<CdcStream> = Api::namespaced(client.clone(), "team-a");
    status_when(&watched, "orders", "the watched stream reconciled", |s| {
        s.phase == Some(Phase::Pending)
    })
    .await;
    // The operator's cache holds the watched namespace's stream only:
    // the other was never listed.
    let cached = eventually("the cached streams counted", || {
        operator.sample(r#"mssql_cdc_operator_streams{phase="Pending"}"#)
    })
    .await;
    assert_eq!(cached, 1.0);
    let elsewhere: Api<CdcStream> = Api::namespaced(client.clone(), "elsewhere");
    let ignored = elsewhere.get("orders").await.expect("the other stream");
    assert!(ignored.status.is_none(), "{:?}", ignored.status);
    let deployments: Api<Deployment> = Api::namespaced(client, "elsewhere");
    assert!(deployments.get_opt("orders").await.expect("get").is_none());
}

#[tokio::test]
async fn a_child_that_cannot_be_applied_is_a_reconcile_error_with_a_warning() {
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let _operator = start_operator(&kube, std::path::Path::new(env!("CARGO_BIN_EXE_mssql-cdc")));
    // A scheduled stream whose name is too long for its CronJob.
    let name = "a-scheduled-stream-whose-name-is-too-long-for-a-cronjob";
    let manifest = stream_with_secret(name, "{}").replace(
        "trigger: {processingTime: 10s}",
        "trigger: {availableNow: true, schedule: \"@hourly\"}",
    );
    let file = kube.write("long.yaml", &manifest);
    kube.kubectl_ok(&["apply", "-f", &file]).await;
    let client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), "default");
    let status = status_when(&streams, name, "Ready=False with ReconcileError", |s| {
        condition(s, "Ready").is_some_and(|c| c.reason == "ReconcileError")
    })
    .await;
    let ready = condition(&status, "Ready").expect("Ready");
    assert!(ready.message.contains("52 characters"), "{}", ready.message);
    let events = once_warned(&client, "default", name, "ReconcileError").await;
    assert!(
        events
            .iter()
            .any(|(_, _, note)| note.contains("shorter name")),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_invalid_cron_schedule_is_refused_by_the_api_server_and_by_validate() {
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let manifest = stream_manifest("bad-schedule", "{}").replace(
        "trigger: {processingTime: 10s}",
        "trigger: {availableNow: true, schedule: \"every hour\"}",
    );
    let file = kube.write("bad.yaml", &manifest);
    let refused = kube.kubectl_fails(&["apply", "-f", &file]).await;
    assert!(refused.contains("trigger.schedule"), "{refused}");
    // What CEL cannot tell (a minute past 59), validate() does.
    let stream =
        mssql_cdc::spec::load_yaml(&manifest.replace("every hour", "61 * * * *")).expect("parses");
    let errors = stream.spec.validate().expect_err("invalid").to_string();
    assert!(errors.contains("spec.trigger.schedule"), "{errors}");
}
