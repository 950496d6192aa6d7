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
    let got = worker_running(&pods, Some(&worker), Phase::Streaming, None);
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
        let got = worker_running(&[pod], None, Phase::Streaming, None);
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
    let got = worker_running(&[running], None, Phase::Streaming, None);
    assert_eq!((got.status, got.reason.as_str()), ("True", "Running"));
    let got = worker_running(&[], None, Phase::Pending, None);
    assert_eq!(got.status, "Unknown");
    let got = worker_running(&[], None, Phase::Suspended, None);
    assert_eq!((got.status, got.reason.as_str()), ("False", "Suspended"));
}
