use k8s_openapi::api::core::v1::PodSpec;
use serde_json::json;

use super::*;
use crate::operator::children::{BuildError, Workload, desired_workload};
use crate::operator::policy::WorkerPolicy;
use crate::operator::test_fixtures::stream;

fn defaults() -> WorkerDefaults {
    WorkerDefaults {
        service_account: Some("cdc-worker".into()),
        image_pull_secrets: vec!["chart-pull".into()],
        pod_labels: BTreeMap::from([
            ("team".to_string(), "data".to_string()),
            ("tier".to_string(), "chart".to_string()),
        ]),
        policy: WorkerPolicy {
            env_from: true,
            env: vec!["MSSQL_CDC_*".into()],
            ..WorkerPolicy::default()
        },
        ..WorkerDefaults::new("mssql-cdc:test")
    }
}

/// The pod template of the fixture stream with `worker` as `spec.worker`.
fn template(worker: serde_json::Value) -> Result<PodTemplateSpec, BuildError> {
    let stream = stream(json!({"spec": {"worker": worker}}));
    match desired_workload(&stream, &defaults())? {
        Workload::Continuous(d) => Ok(d.spec.template),
        Workload::Scheduled(c) => panic!("expected a Deployment, got {c:?}"),
    }
}

fn pod(worker: serde_json::Value) -> PodSpec {
    template(worker).unwrap().spec.unwrap()
}

#[test]
fn a_failing_worker_leaves_its_error_in_the_pod_status() {
    let pod = pod(json!({}));
    assert_eq!(
        pod.containers[0].termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
}

#[test]
fn volumes_and_mounts_come_after_the_operators_tmp() {
    let pod = pod(json!({
        "volumes": [
            {"name": "lake", "persistentVolumeClaim": {"claimName": "orders-lake"}},
            {"name": "ca", "secret": {"secretName": "sql-ca"}}
        ],
        "volumeMounts": [
            {"name": "lake", "mountPath": "/lake"},
            {"name": "ca", "mountPath": "/etc/sql-ca", "readOnly": true}
        ]
    }));
    let volumes: Vec<(String, bool, bool)> = pod
        .volumes
        .unwrap()
        .into_iter()
        .map(|v| {
            (
                v.name,
                v.persistent_volume_claim.is_some(),
                v.empty_dir.is_some(),
            )
        })
        .collect();
    assert_eq!(
        volumes,
        [
            ("tmp".to_string(), false, true),
            ("lake".to_string(), true, false),
            ("ca".to_string(), false, false),
        ]
    );
    let mounts: Vec<(String, String)> = pod.containers[0]
        .volume_mounts
        .clone()
        .unwrap()
        .into_iter()
        .map(|m| (m.name, m.mount_path))
        .collect();
    assert_eq!(
        mounts,
        [
            ("tmp".to_string(), "/tmp".to_string()),
            ("lake".to_string(), "/lake".to_string()),
            ("ca".to_string(), "/etc/sql-ca".to_string()),
        ]
    );
    // The root stays read-only: volumes are the only writable places.
    let security = pod.containers[0].security_context.clone().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
}

#[test]
fn identity_placement_and_environment_reach_the_pod() {
    let template = template(json!({
        "imagePullSecrets": [{"name": "team-pull"}, {"name": "chart-pull"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["cdc"]}]}]}}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway"}],
        "priorityClassName": "cdc-high",
        "envFrom": [{"secretRef": {"name": "lake-credentials"}}],
        "podLabels": {"tier": "stream", "azure.workload.identity/use": "true"},
        "podAnnotations": {"eks.amazonaws.com/sts-regional-endpoints": "true"}
    }))
    .unwrap();
    let pod = template.spec.unwrap();
    let secrets: Vec<String> = pod
        .image_pull_secrets
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(secrets, ["chart-pull", "team-pull"], "chart's first, once");
    let terms = pod
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|n| n.required_during_scheduling_ignored_during_execution)
        .unwrap()
        .node_selector_terms;
    assert_eq!(terms[0].match_expressions.clone().unwrap()[0].key, "pool");
    assert_eq!(
        pod.topology_spread_constraints.unwrap()[0].topology_key,
        "topology.kubernetes.io/zone"
    );
    assert_eq!(pod.priority_class_name.as_deref(), Some("cdc-high"));
    let env_from = pod.containers[0].env_from.clone().unwrap();
    assert_eq!(
        env_from[0].secret_ref.as_ref().map(|s| s.name.as_str()),
        Some("lake-credentials")
    );
    let metadata = template.metadata.unwrap();
    let labels = metadata.labels.unwrap();
    assert_eq!(labels["team"], "data", "the chart's label");
    assert_eq!(labels["tier"], "stream", "the stream's label wins");
    assert_eq!(labels["azure.workload.identity/use"], "true");
    assert_eq!(labels["mssql-cdc.io/stream"], "orders");
    assert_eq!(labels["app.kubernetes.io/name"], "mssql-cdc-worker");
    assert_eq!(
        metadata.annotations.unwrap()["eks.amazonaws.com/sts-regional-endpoints"],
        "true"
    );
}

#[test]
fn nothing_extra_means_nothing_extra() {
    let stream = stream(json!({}));
    let defaults = WorkerDefaults::new("mssql-cdc:test");
    let Workload::Continuous(d) = desired_workload(&stream, &defaults).unwrap() else {
        panic!("a Deployment");
    };
    let template = d.spec.template;
    let pod = template.spec.unwrap();
    assert_eq!(pod.image_pull_secrets, None);
    assert_eq!(pod.affinity, None);
    assert_eq!(pod.topology_spread_constraints, None);
    assert_eq!(pod.priority_class_name, None);
    assert_eq!(pod.service_account_name, None);
    assert_eq!(pod.containers[0].env_from, None);
    let annotations = template.metadata.unwrap().annotations.unwrap_or_default();
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        ["mssql-cdc.io/spec-hash"],
        "only the hash of the spec the pod runs"
    );
}

#[test]
fn what_the_pod_cannot_have_is_refused_naming_the_field() {
    let cases = [
        (
            json!({"volumes": [{"name": "tmp", "emptyDir": {}}]}),
            "spec.worker.volumes[0].name: tmp is the operator's own emptyDir",
        ),
        (
            json!({"volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}]}),
            "spec.worker.volumes[1].name: \"a\" names two volumes",
        ),
        (
            json!({"volumeMounts": [{"name": "lake", "mountPath": "/lake"}]}),
            "spec.worker.volumeMounts[0].name: no volume \"lake\" in spec.worker.volumes",
        ),
        (
            json!({"volumes": [{"name": "lake", "emptyDir": {}}],
                   "volumeMounts": [{"name": "lake", "mountPath": "/tmp/"}]}),
            "spec.worker.volumeMounts[0].mountPath: /tmp is the operator's own emptyDir",
        ),
        (
            json!({"env": [{"name": "MSSQL_CDC_PASSWORD", "value": "mine"}]}),
            "spec.worker.env[0].name: MSSQL_CDC_PASSWORD is the operator's own",
        ),
        (
            json!({"podLabels": {"mssql-cdc.io/stream": "other"}}),
            "spec.worker.podLabels.mssql-cdc.io/stream: the operator selects its workers by this label",
        ),
    ];
    for (worker, message) in cases {
        let error = template(worker.clone()).unwrap_err();
        assert_eq!(error.reason(), "InvalidSpec", "{worker}");
        assert!(!error.removes_worker());
        assert!(error.to_string().contains(message), "{error}");
    }
}

#[test]
fn a_fresh_cloud_disk_is_writable_by_default_through_fs_group() {
    let security = pod(json!({})).security_context.unwrap();
    assert_eq!(security.run_as_user, Some(65532));
    assert_eq!(security.run_as_group, Some(65532));
    assert_eq!(security.fs_group, Some(65532));
    assert_eq!(
        security.fs_group_change_policy.as_deref(),
        Some("OnRootMismatch")
    );
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.supplemental_groups, None);
}

#[test]
fn pod_security_context_replaces_only_the_fields_it_sets() {
    let security = pod(json!({"podSecurityContext": {
        "fsGroup": 2000, "fsGroupChangePolicy": "Always", "supplementalGroups": [3000]
    }}))
    .security_context
    .unwrap();
    assert_eq!(security.fs_group, Some(2000));
    assert_eq!(security.fs_group_change_policy.as_deref(), Some("Always"));
    assert_eq!(security.supplemental_groups, Some(vec![3000]));
    // What it leaves out keeps the default; never root, whatever it says.
    assert_eq!(security.run_as_user, Some(65532));
    assert_eq!(security.run_as_non_root, Some(true));
    assert!(security.seccomp_profile.is_some());
}
