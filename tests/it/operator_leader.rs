//! Two operator replicas with leader election against the test API server:
//! one holds the Lease and reconciles, the other only waits (its metrics
//! say so); when the leader is SIGKILLed the other takes the Lease over and
//! reconciles streams created after the kill; SIGTERM releases the Lease,
//! and a leader that finds another holder exits with an error.

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::support::kube::{KubeEnv, WAIT, eventually, repo_file};
use crate::support::operator::Operator;

const BINARY: &str = env!("CARGO_BIN_EXE_mssql-cdc");

/// The holder of the operator's Lease, once someone holds it.
async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("mssql-cdc-operator")
        .await
        .ok()??
        .spec?
        .holder_identity
}

async fn apply_example(kube: &KubeEnv, example: &str) {
    let path = repo_file(&format!("examples/kubernetes/{example}"));
    kube.kubectl_ok(&["apply", "-f", &path]).await;
}

#[tokio::test]
async fn one_replica_leads_and_the_other_takes_over_when_it_is_killed() {
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let client = kube.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let cron_jobs: Api<CronJob> = Api::namespaced(client, "default");

    let mut first = Operator::replica(&kube, Path::new(BINARY), "operator-a");
    let leader = eventually("operator-a to take the Lease", || holder(&leases)).await;
    assert_eq!(leader, "operator-a");
    let mut second = Operator::replica(&kube, Path::new(BINARY), "operator-b");

    apply_example(&kube, "orders-continuous.yaml").await;
    eventually("the leader's worker Deployment", || async {
        deployments.get_opt("orders").await.ok().flatten()
    })
    .await;
    let success = r#"mssql_cdc_operator_reconciles_total{result="success"}"#;
    eventually("the leader's metrics to count the reconcile", || async {
        first.sample(success).await.filter(|n| *n >= 1.0)
    })
    .await;
    assert_eq!(first.sample("mssql_cdc_operator_leader").await, Some(1.0));
    let reconciles = first.sample(success).await.unwrap_or_default();
    let timed = first
        .sample("mssql_cdc_operator_reconcile_duration_seconds_count")
        .await;
    assert!(timed >= Some(reconciles), "{timed:?} < {reconciles}");
    eventually(
        "the leader's metrics to show the stream Pending",
        || async {
            let pending = r#"mssql_cdc_operator_streams{phase="Pending"}"#;
            first.sample(pending).await.filter(|n| *n == 1.0)
        },
    )
    .await;
    // The candidate serves its metrics but has not reconciled anything.
    assert_eq!(second.sample("mssql_cdc_operator_leader").await, Some(0.0));
    assert_eq!(second.sample(success).await, None);
    assert_eq!(holder(&leases).await.as_deref(), Some("operator-a"));

    first.process.start_kill().expect("SIGKILL the leader");
    first.process.wait().await.expect("the leader is gone");
    let leader = eventually("operator-b to take the Lease over", || async {
        holder(&leases).await.filter(|h| h == "operator-b")
    })
    .await;
    assert_eq!(leader, "operator-b");

    apply_example(&kube, "orders-hourly.yaml").await;
    eventually(
        "the new leader's CronJob for a stream created after the kill",
        || async { cron_jobs.get_opt("customers-hourly").await.ok().flatten() },
    )
    .await;
    assert_eq!(second.sample("mssql_cdc_operator_leader").await, Some(1.0));
    eventually(
        "the new leader's metrics to count its reconciles",
        || async { second.sample(success).await.filter(|n| *n >= 2.0) },
    )
    .await;

    // SIGTERM: a clean exit that leaves the Lease free for the next replica.
    let pid = second.process.id().expect("the leader runs").to_string();
    let term = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("kill runs");
    assert!(term.success(), "kill -TERM {pid}: {term}");
    let exit = tokio::time::timeout(WAIT, second.process.wait())
        .await
        .expect("the leader stops on SIGTERM")
        .expect("wait for the leader");
    assert!(exit.success(), "{exit}");
    assert_eq!(holder(&leases).await, None, "the Lease is released");
}

#[tokio::test]
async fn a_leader_that_finds_another_holder_stops_and_exits_with_an_error() {
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let leases: Api<Lease> = Api::namespaced(kube.client().await, "default");
    let mut leader = Operator::replica(&kube, Path::new(BINARY), "operator-a");
    eventually("operator-a to take the Lease", || async {
        holder(&leases).await.filter(|h| h == "operator-a")
    })
    .await;

    // Someone else holds the Lease now (as after a pause longer than it lasts).
    let intruder = serde_json::json!({"spec": {"holderIdentity": "intruder"}});
    leases
        .patch(
            "mssql-cdc-operator",
            &PatchParams::default(),
            &Patch::Merge(&intruder),
        )
        .await
        .expect("take the Lease away");
    let exit = tokio::time::timeout(WAIT, leader.process.wait())
        .await
        .expect("the replica notices at its next renewal")
        .expect("wait for the replica");
    assert!(!exit.success(), "losing the Lease is an error exit: {exit}");
    assert_eq!(holder(&leases).await.as_deref(), Some("intruder"));
}
