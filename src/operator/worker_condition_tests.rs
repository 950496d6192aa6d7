use chrono::Utc;
use serde_json::json;

use super::*;

fn pod(status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "orders-abc"}, "status": status}))
        .expect("a pod")
}

fn waiting(reason: &str, message: &str) -> Pod {
    pod(json!({"containerStatuses": [{
        "name": "worker", "image": "x", "imageID": "", "ready": false, "restartCount": 3,
        "state": {"waiting": {"reason": reason, "message": message}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}
    }]}))
}

fn failed(reason: &str, message: &str) -> WorkerStatus {
    WorkerStatus {
        state: WorkerState::Failed,
        reason: reason.into(),
        message: message.into(),
        since: Utc::now(),
        restarts: 2,
    }
}

#[test]
fn a_crash_loop_takes_the_workers_own_reason_and_both_messages() {
    let pods = [waiting(
        "CrashLoopBackOff",
        "back-off 10s restarting failed container",
    )];
    let worker = failed("LoginFailed", "SQL Server refused login reader");
    let got = worker_running(&pods, Some(&worker), Phase::Streaming, None, None);
    assert_eq!((got.status, got.reason.as_str()), ("False", "LoginFailed"));
    assert!(
        got.message.contains("refused login reader"),
        "{}",
        got.message
    );
    assert!(got.message.contains("CrashLoopBackOff"), "{}", got.message);
}

#[test]
fn pod_level_reasons_stand_alone_without_a_worker_report() {
    let unschedulable = pod(json!({"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    }]}));
    let oom = pod(json!({"containerStatuses": [{
        "name": "worker", "image": "x", "imageID": "", "ready": false, "restartCount": 1,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    }]}));
    let cases = [
        (
            waiting("CreateContainerConfigError", "secret \"sql\" not found"),
            "CreateContainerConfigError",
            "Secret",
        ),
        (
            waiting("ImagePullBackOff", "pull failed"),
            "ImagePullBackOff",
            "spec.worker.image",
        ),
        (unschedulable, VOLUME_CLAIM_PENDING, "claim"),
        (oom, "OOMKilled", "memory"),
    ];
    for (pod, reason, says) in cases {
        let got = worker_running(&[pod], None, Phase::Streaming, None, None);
        assert_eq!((got.status, got.reason.as_str()), ("False", reason));
        assert!(got.message.contains(says), "{reason}: {}", got.message);
    }
}

#[test]
fn a_running_pod_is_true_and_no_pod_is_unknown() {
    let running = pod(json!({"containerStatuses": [{
        "name": "worker", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-11-29T10:00:00Z"}}
    }]}));
    let got = worker_running(&[running], None, Phase::Streaming, None, None);
    assert_eq!((got.status, got.reason.as_str()), ("True", "Running"));
    let got = worker_running(&[], None, Phase::Pending, None, None);
    assert_eq!(got.status, "Unknown");
    let got = worker_running(&[], None, Phase::Suspended, None, None);
    assert_eq!((got.status, got.reason.as_str()), ("False", "Suspended"));
}

#[test]
fn a_worker_forbidden_to_read_its_stream_says_which_account_to_bind() {
    let said = "WorkerForbidden: the worker may not get CdcStream shop/orders: cdcstreams \
                \"orders\" is forbidden";
    let mut crashing: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orders-abc", "namespace": "shop"},
        "spec": {"serviceAccountName": "cdc-worker", "containers": [{"name": "worker"}]},
        "status": {"containerStatuses": [{
            "name": "worker", "image": "x", "imageID": "", "ready": false, "restartCount": 2,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": said}}
        }]}
    }))
    .expect("a pod");
    // It could not report into the status: the termination message is all.
    let got = worker_running(
        std::slice::from_ref(&crashing),
        None,
        Phase::Pending,
        None,
        None,
    );
    assert_eq!(
        (got.status, got.reason.as_str()),
        ("False", WORKER_FORBIDDEN)
    );
    for part in [
        "ServiceAccount cdc-worker in namespace shop",
        "worker.namespaces",
        "CrashLoopBackOff",
    ] {
        assert!(got.message.contains(part), "{part}: {}", got.message);
    }
    // The first run's exit, before the back-off, says the same.
    crashing.status = serde_json::from_value(json!({"containerStatuses": [{
        "name": "worker", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": said}}
    }]}))
    .expect("a status");
    let got = worker_running(&[crashing], None, Phase::Pending, None, None);
    assert_eq!(got.reason, WORKER_FORBIDDEN);
    assert!(got.message.contains("cdc-worker"), "{}", got.message);
}

#[test]
fn a_log_tail_is_not_taken_for_a_reason() {
    for tail in [
        "{\"level\":\"ERROR\",\"message\":\"boom\"}",
        "thread 'main' panicked at src/x.rs:1:1: boom",
        "ERROR: boom",
    ] {
        assert_eq!(worker_said(tail), None, "{tail}");
    }
    assert_eq!(
        worker_said("LoginFailed: SQL Server refused login r\nmore"),
        Some(("LoginFailed", "SQL Server refused login r"))
    );
}

#[test]
fn pods_the_api_server_refuses_are_named_with_its_words() {
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "orders"},
        "status": {"conditions": [{
            "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
            "message": "pods \"orders-abc-\" is forbidden: error looking up service account shop/nobody"
        }]}
    }))
    .expect("a deployment");
    let fault = WorkloadFault::of_deployment(&deployment).expect("a fault");
    let got = worker_running(&[], None, Phase::Pending, None, Some(&fault));
    assert_eq!((got.status, got.reason.as_str()), ("False", "FailedCreate"));
    assert!(
        got.message.contains("service account shop/nobody"),
        "{}",
        got.message
    );
    // A pod that runs (the failure was of an extra one) wins.
    let running = pod(json!({"containerStatuses": [{
        "name": "worker", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-11-29T10:00:00Z"}}
    }]}));
    let got = worker_running(&[running], None, Phase::Streaming, None, Some(&fault));
    assert_eq!(got.status, "True");
    let healthy: Deployment = serde_json::from_value(json!({"metadata": {"name": "orders"},
        "status": {"conditions": [{"type": "Available", "status": "True"}]}}))
    .expect("a deployment");
    assert_eq!(WorkloadFault::of_deployment(&healthy), None);
}
