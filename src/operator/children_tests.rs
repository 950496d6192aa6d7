use k8s_openapi::api::core::v1::PodSpec;

use super::*;
use crate::operator::test_fixtures::stream;

/// The operator's defaults in these tests: its image, its worker account,
/// and one more registry and account that streams may ask for.
fn defaults() -> WorkerDefaults {
    WorkerDefaults {
        service_account: Some("cdc-worker".into()),
        policy: WorkerPolicy {
            images: vec!["registry.local/".into()],
            service_accounts: vec!["special".into()],
            env: vec!["AWS_REGION".into()],
            ..WorkerPolicy::default()
        },
        ..WorkerDefaults::new("mssql-cdc:test")
    }
}

fn deployment(w: Workload) -> Deployment {
    match w {
        Workload::Continuous(d) => *d,
        other => panic!("expected a Deployment, got {other:?}"),
    }
}

fn cron_job(w: Workload) -> CronJob {
    match w {
        Workload::Scheduled(c) => *c,
        other => panic!("expected a CronJob, got {other:?}"),
    }
}

fn pod(d: &Deployment) -> PodSpec {
    d.spec.template.spec.clone().expect("pod spec")
}

#[test]
fn continuous_stream_runs_one_hardened_worker_never_two() {
    let d = deployment(desired_workload(&stream(serde_json::json!({})), &defaults()).unwrap());
    let spec = d.spec.clone();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(
        spec.strategy.and_then(|s| s.type_).as_deref(),
        Some("Recreate")
    );
    assert_eq!(d.metadata.name.as_deref(), Some("orders"));
    assert_eq!(d.metadata.namespace.as_deref(), Some("shop"));
    let owner = &d.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("CdcStream", "orders", "7f3c-uid")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(
        spec.selector.match_labels,
        spec.template.metadata.unwrap().labels
    );

    let pod = pod(&d);
    assert_eq!(pod.service_account_name.as_deref(), Some("cdc-worker"));
    let pod_security = pod.security_context.clone().unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("mssql-cdc:test"));
    assert_eq!(
        c.args.clone().unwrap(),
        ["--log-format=json", "worker", "--stream", "shop/orders"]
    );
    let security = c.security_context.clone().unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(
        security.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".into()])
    );
    assert_eq!(
        security.seccomp_profile.map(|p| p.type_).as_deref(),
        Some("RuntimeDefault")
    );
    for probe in [&c.liveness_probe, &c.readiness_probe] {
        let get = probe.clone().and_then(|p| p.http_get).unwrap();
        assert_eq!(get.path.as_deref(), Some("/healthz"));
    }
    let password = &c.env.clone().unwrap()[0];
    assert_eq!(password.name, PASSWORD_ENV);
    assert_eq!(password.value, None, "the password is never inlined");
    let secret = password
        .value_from
        .clone()
        .and_then(|v| v.secret_key_ref)
        .unwrap();
    assert_eq!(
        (secret.name.as_str(), secret.key.as_str()),
        ("shop-sql", "password")
    );
}

#[test]
fn suspend_scales_to_zero_or_suspends_the_schedule() {
    type Check = fn(Workload);
    let cases: Vec<(serde_json::Value, Check)> = vec![
        (serde_json::json!({"spec": {"suspend": true}}), |w| {
            assert_eq!(deployment(w).spec.replicas, Some(0))
        }),
        (serde_json::json!({"spec": {"suspend": false}}), |w| {
            assert_eq!(deployment(w).spec.replicas, Some(1))
        }),
        (
            serde_json::json!({"spec": {"suspend": true, "trigger": {"availableNow": true, "schedule": "@hourly"}}}),
            |w| assert_eq!(cron_job(w).spec.suspend, Some(true)),
        ),
    ];
    for (patch, check) in cases {
        check(desired_workload(&stream(patch), &defaults()).unwrap());
    }
}

#[test]
fn scheduled_available_now_stream_is_a_forbid_cron_job() {
    let patch =
        serde_json::json!({"spec": {"trigger": {"availableNow": true, "schedule": "0 * * * *"}}});
    let c = cron_job(desired_workload(&stream(patch), &defaults()).unwrap());
    let spec = c.spec;
    assert_eq!(spec.schedule, "0 * * * *");
    assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
    assert_eq!(spec.suspend, Some(false));
    let pod = spec
        .job_template
        .spec
        .and_then(|j| j.template.spec)
        .unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(pod.containers[0].args.clone().unwrap()[3], "shop/orders");
    assert!(c.metadata.owner_references.is_some());
}

#[test]
fn spec_worker_overrides_the_defaults() {
    let patch = serde_json::json!({"spec": {"worker": {
        "image": "registry.local/mssql-cdc:1.2",
        "serviceAccountName": "special",
        "nodeSelector": {"pool": "cdc"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cdc", "effect": "NoSchedule"}],
        "resources": {"limits": {"memory": "1Gi"}},
        "env": [{"name": "AWS_REGION", "value": "eu-west-1"}]
    }}});
    let pod = pod(&deployment(
        desired_workload(&stream(patch), &defaults()).unwrap(),
    ));
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("registry.local/mssql-cdc:1.2"));
    assert_eq!(pod.service_account_name.as_deref(), Some("special"));
    assert_eq!(pod.node_selector.unwrap()["pool"], "cdc");
    assert_eq!(
        pod.tolerations.unwrap()[0].key.as_deref(),
        Some("dedicated")
    );
    let limits = c.resources.clone().and_then(|r| r.limits).unwrap();
    assert_eq!(limits["memory"].0, "1Gi");
    let names: Vec<_> = c.env.clone().unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, [PASSWORD_ENV, "AWS_REGION"]);
}

#[test]
fn streams_that_cannot_run_say_why() {
    let cases = [
        (
            serde_json::json!({"metadata": {"uid": null}}),
            BuildError::Metadata("uid"),
        ),
        (
            serde_json::json!({"metadata": {"namespace": null}}),
            BuildError::Metadata("namespace"),
        ),
        (
            serde_json::json!({"spec": {"source": {"credentials": {"passwordFrom": {"secretKeyRef": null, "env": "PW"}}}}}),
            BuildError::PasswordNotFromSecret,
        ),
        (
            serde_json::json!({"spec": {"trigger": {"availableNow": true}}}),
            BuildError::AvailableNowWithoutSchedule,
        ),
    ];
    for (patch, expected) in cases {
        assert_eq!(
            desired_workload(&stream(patch.clone()), &defaults()),
            Err(expected),
            "{patch}"
        );
    }
}

#[test]
fn a_worker_reads_the_secret_password_from_the_variable_its_pod_sets() {
    let config = worker_config(&stream(serde_json::json!({}))).expect("the fixture is valid");
    assert_eq!(
        config.source.password,
        PasswordSource::Env(PASSWORD_ENV.into())
    );
    let pod = pod(&deployment(
        desired_workload(&stream(serde_json::json!({})), &defaults()).unwrap(),
    ));
    let env = &pod.containers[0].env.clone().unwrap_or_default();
    assert!(
        env.iter()
            .any(|e| e.name == PASSWORD_ENV && e.value_from.is_some()),
        "{env:?}"
    );
}

#[test]
fn a_stream_gets_no_worker_for_an_image_or_account_the_policy_refuses() {
    let cases = [
        (
            serde_json::json!({"spec": {"worker": {"image": "evil.io/miner:1"}}}),
            "ImageNotAllowed",
            "spec.worker.image \"evil.io/miner:1\" is not allowed",
        ),
        (
            serde_json::json!({"spec": {"worker": {"image": "registry.local.evil/x:1"}}}),
            "ImageNotAllowed",
            "\"registry.local/*\"",
        ),
        (
            serde_json::json!({"spec": {"worker": {"serviceAccountName": "default"}}}),
            "ServiceAccountNotAllowed",
            "only the ServiceAccounts \"cdc-worker\", \"special\"",
        ),
        (
            serde_json::json!({"spec": {"trigger": {"availableNow": true, "schedule": "@hourly"},
                "worker": {"serviceAccountName": "admin"}}}),
            "ServiceAccountNotAllowed",
            "spec.worker.serviceAccountName \"admin\" is not allowed",
        ),
    ];
    for (patch, reason, message) in cases {
        let error = desired_workload(&stream(patch.clone()), &defaults()).unwrap_err();
        assert_eq!(error.reason(), reason, "{patch}");
        assert!(error.removes_worker(), "{patch}");
        assert!(error.to_string().contains(message), "{error}");
    }
    // What is allowed runs: the operator's image, the listed registry and
    // accounts.
    for worker in [
        serde_json::json!({}),
        serde_json::json!({"image": "mssql-cdc:test", "serviceAccountName": "cdc-worker"}),
        serde_json::json!({"image": "registry.local/team/cdc:2", "serviceAccountName": "special"}),
    ] {
        let patch = serde_json::json!({"spec": {"worker": worker}});
        assert!(
            desired_workload(&stream(patch.clone()), &defaults()).is_ok(),
            "{patch}"
        );
    }
    // An invalid spec keeps the worker it had; a refusal does not.
    assert!(!BuildError::PasswordNotFromSecret.removes_worker());
    assert_eq!(BuildError::PasswordNotFromSecret.reason(), "InvalidSpec");
}
