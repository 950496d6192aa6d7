use super::*;
use crate::operator::test_fixtures::stream;
use serde_json::json;

fn worker(spec: serde_json::Value) -> WorkerSpec {
    stream(json!({"spec": {"worker": spec}}))
        .spec
        .worker
        .expect("spec.worker")
}

fn policy(volume_types: &[&str], env: &[&str], env_from: bool) -> WorkerPolicy {
    WorkerPolicy {
        volume_types: volume_types.iter().map(|s| s.to_string()).collect(),
        env: env.iter().map(|s| s.to_string()).collect(),
        env_from,
        ..WorkerPolicy::default()
    }
}

#[test]
fn the_default_volume_types_are_storage_and_configuration_never_the_node() {
    let default = WorkerPolicy::default();
    for allowed in [
        json!({"name": "a", "persistentVolumeClaim": {"claimName": "lake"}}),
        json!({"name": "a", "emptyDir": {}}),
        json!({"name": "a"}),
        json!({"name": "a", "configMap": {"name": "cm"}}),
        json!({"name": "a", "secret": {"secretName": "ca"}}),
        json!({"name": "a", "csi": {"driver": "d"}}),
        json!({"name": "a", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}),
        json!({"name": "a", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
            {"configMap": {"name": "cm"}}, {"secret": {"name": "s"}}]}}),
    ] {
        let spec = worker(json!({"volumes": [allowed.clone()]}));
        assert_eq!(default.admit_pod(&spec), Ok(()), "{allowed}");
    }
    for (refused, field, kind) in [
        (
            json!({"name": "root", "hostPath": {"path": "/"}}),
            "spec.worker.volumes[1].hostPath",
            "hostPath",
        ),
        (
            json!({"name": "nfs", "nfs": {"server": "s", "path": "/"}}),
            "spec.worker.volumes[1].nfs",
            "nfs",
        ),
        (
            json!({"name": "p", "projected": {"sources": [{"downwardAPI": {"items": []}}]}}),
            "spec.worker.volumes[1].projected.sources[0].downwardAPI",
            "downwardAPI",
        ),
    ] {
        let spec = worker(json!({"volumes": [{"name": "ok", "emptyDir": {}}, refused]}));
        let refusal = default.admit_pod(&spec).unwrap_err();
        assert_eq!(refusal.reason(), "VolumeTypeNotAllowed");
        let message = refusal.to_string();
        assert!(
            message.starts_with(&format!("{field}: volumes of type {kind} are not allowed")),
            "{message}"
        );
        assert!(
            message.contains("--worker-volume-types") && message.contains("workerVolumeTypes"),
            "{message}"
        );
    }
    // Listed, hostPath passes; with nothing listed, no volume does.
    let host = worker(json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}));
    assert_eq!(policy(&["hostPath"], &[], false).admit_pod(&host), Ok(()));
    let none = policy(&[], &[], false).admit_pod(&worker(json!({"volumes": [{"name": "a"}]})));
    assert!(
        none.unwrap_err()
            .to_string()
            .contains("streams may use no volume types"),
    );
    // Listing projected allows every source.
    let downward = worker(json!({"volumes": [{"name": "p",
        "projected": {"sources": [{"downwardAPI": {"items": []}}]}}]}));
    assert_eq!(
        policy(&["projected"], &[], false).admit_pod(&downward),
        Ok(())
    );
}

#[test]
fn variables_are_only_the_listed_names_or_prefixes() {
    let spec = worker(json!({"env": [
        {"name": "AWS_ROLE_ARN", "value": "arn"},
        {"name": "AZURE_STORAGE_ACCOUNT_KEY",
            "valueFrom": {"secretKeyRef": {"name": "lake", "key": "k"}}}
    ]}));
    assert_eq!(
        policy(&[], &["AWS_ROLE_ARN", "AZURE_STORAGE_*"], false).admit_pod(&spec),
        Ok(())
    );
    let refusal = policy(&[], &["AWS_ROLE_ARN"], false)
        .admit_pod(&spec)
        .unwrap_err();
    assert_eq!(refusal.reason(), "EnvNotAllowed");
    let message = refusal.to_string();
    assert!(
        message.starts_with(
            "spec.worker.env[1].name: the variable \"AZURE_STORAGE_ACCOUNT_KEY\" is not allowed: \
             streams may set only variable \"AWS_ROLE_ARN\""
        ),
        "{message}"
    );
    let none = WorkerPolicy::default()
        .admit_pod(&spec)
        .unwrap_err()
        .to_string();
    assert!(none.contains("streams may set no variables"), "{none}");
    assert!(
        none.contains("--worker-env") && none.contains("workerEnv"),
        "{none}"
    );
    // A prefix is a prefix, not a substring.
    let other = worker(json!({"env": [{"name": "MY_AZURE_STORAGE_KEY", "value": "x"}]}));
    assert!(
        policy(&[], &["AZURE_STORAGE_*"], false)
            .admit_pod(&other)
            .is_err()
    );
}

#[test]
fn env_from_is_refused_unless_allowed() {
    let spec = worker(json!({"envFrom": [{"secretRef": {"name": "lake"}}]}));
    let refusal = WorkerPolicy::default().admit_pod(&spec).unwrap_err();
    assert_eq!(refusal.reason(), "EnvFromNotAllowed");
    let message = refusal.to_string();
    assert!(
        message.starts_with("spec.worker.envFrom[0]: envFrom is not allowed"),
        "{message}"
    );
    assert!(message.contains("--worker-env-from"), "{message}");
    assert_eq!(policy(&[], &[], true).admit_pod(&spec), Ok(()));
}
