use k8s_openapi::api::apps::v1::Deployment;

use super::*;
use crate::operator::spec_hash::SPEC_HASH_ANNOTATION;
use crate::operator::test_fixtures::{source, source_stream};

fn deployment(workload: Workload) -> Deployment {
    match workload {
        Workload::Continuous(d) => *d,
        other => panic!("expected a Deployment, got {other:?}"),
    }
}

fn built(patch: serde_json::Value) -> Deployment {
    deployment(
        desired_source_workload(&source(patch), &WorkerDefaults::new("mssql-cdc:test"))
            .expect("a worker"),
    )
}

fn spec_hash_of(d: &Deployment) -> String {
    d.spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()[SPEC_HASH_ANNOTATION]
        .clone()
}

#[test]
fn a_source_runs_one_hardened_worker_for_all_its_tables() {
    let d = built(serde_json::json!({}));
    assert_eq!(d.metadata.name.as_deref(), Some("shop-source"));
    let owner = &d.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("CdcSource", "5a1e-uid")
    );
    assert_eq!(d.spec.replicas, Some(1));
    let labels = d.spec.selector.match_labels.clone().unwrap();
    assert_eq!(labels.get(SOURCE_LABEL).map(String::as_str), Some("shop"));
    let pod = d.spec.template.spec.clone().unwrap();
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap();
    assert!(
        args.ends_with(&["worker".into(), "--source".into(), "shop/shop".into()]),
        "{args:?}"
    );
    // The same hardening as a stream's worker.
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    let env = container.env.clone().unwrap();
    assert_eq!(env[0].name, "MSSQL_CDC_PASSWORD");
}

#[test]
fn editing_the_source_rolls_its_worker_and_suspend_scales_it_to_zero() {
    let base = spec_hash_of(&built(serde_json::json!({})));
    let edited = built(serde_json::json!({"spec": {"concurrency": {"reads": 8}}}));
    assert_ne!(spec_hash_of(&edited), base);
    let suspended = built(serde_json::json!({"spec": {"suspend": true}}));
    assert_eq!(suspended.spec.replicas, Some(0));
    assert_eq!(spec_hash_of(&suspended), base);
    let resized = built(
        serde_json::json!({"spec": {"worker": {"resources": {"limits": {"memory": "2Gi"}}}}}),
    );
    assert_eq!(spec_hash_of(&resized), base);
}

#[test]
fn a_scheduled_source_is_a_cron_job() {
    let workload = desired_source_workload(
        &source(serde_json::json!({"spec": {"trigger": {"availableNow": true, "schedule": "0 * * * *"}}})),
        &WorkerDefaults::new("mssql-cdc:test"),
    )
    .expect("a worker");
    let Workload::Scheduled(cron_job) = workload else {
        panic!("expected a CronJob");
    };
    assert_eq!(cron_job.spec.schedule, "0 * * * *");
    assert_eq!(cron_job.metadata.name.as_deref(), Some("shop-source"));
}

#[test]
fn the_worker_pod_cannot_take_the_source_label() {
    let error = desired_source_workload(
        &source(
            serde_json::json!({"spec": {"worker": {"podLabels": {"mssql-cdc.io/source": "x"}}}}),
        ),
        &WorkerDefaults::new("mssql-cdc:test"),
    )
    .expect_err("refused");
    assert!(
        error.to_string().contains("podLabels.mssql-cdc.io/source"),
        "{error}"
    );
}

#[test]
fn a_stream_is_judged_as_its_source_runs_it() {
    let resolved = resolved_stream(&source(serde_json::json!({})), &source_stream("orders"))
        .expect("resolved");
    assert_eq!(resolved.spec.source.host.as_deref(), Some("sql"));
    assert!(resolved.spec.validate().is_ok());
    assert_eq!(resolved.metadata.name.as_deref(), Some("orders"));
    let mut own_host = source_stream("orders");
    own_host.spec.source.host = Some("other".into());
    let error = resolved_stream(&source(serde_json::json!({})), &own_host).expect_err("refused");
    assert_eq!(error.reason(), "InvalidSpec");
    assert!(error.removes_worker());
}
