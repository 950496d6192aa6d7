//! `mssql-cdc operator` against the test API server: it creates the
//! worker Deployment or CronJob a CdcStream needs, owned by the stream and
//! applied under its field manager, sets the phase, scales a suspended
//! stream to zero, and garbage collection removes the worker with the stream.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use kube::Api;
use mssql_cdc::spec::{CdcStream, Phase};

use crate::support::kube::{KubeEnv, eventually, repo_file};
use crate::support::operator::{start_operator, suspend, wait_gone};

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
    assert_eq!(status.observed_generation, Some(1));

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
