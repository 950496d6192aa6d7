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

/// WorkerRunning of a streaming standalone stream.
fn streaming(pods: &[Pod], reported: Option<&WorkerStatus>) -> Judged {
    worker_running(pods, reported, Phase::Streaming, None, None, Runner::Own)
}

#[test]
fn a_crash_loop_takes_the_workers_own_reason_and_both_messages() {
    let pods = [waiting(
        "CrashLoopBackOff",
        "back-off 10s restarting failed container",
    )];
    let worker = failed("LoginFailed", "SQL Server refused login reader");
    let got = streaming(&pods, Some(&worker));
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
        let got = streaming(&[pod], None);
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
    let got = streaming(&[running], None);
    assert_eq!((got.status, got.reason.as_str()), ("True", "Running"));
    let got = worker_running(&[], None, Phase::Pending, None, None, Runner::Own);
    assert_eq!(got.status, "Unknown");
    let got = worker_running(&[], None, Phase::Suspended, None, None, Runner::Own);
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
        Runner::Own,
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
    let got = worker_running(&[crashing], None, Phase::Pending, None, None, Runner::Own);
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
    let got = worker_running(&[], None, Phase::Pending, None, Some(&fault), Runner::Own);
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
    let got = worker_running(
        &[running],
        None,
        Phase::Streaming,
        None,
        Some(&fault),
        Runner::Own,
    );
    assert_eq!(got.status, "True");
    let healthy: Deployment = serde_json::from_value(json!({"metadata": {"name": "orders"},
        "status": {"conditions": [{"type": "Available", "status": "True"}]}}))
    .expect("a deployment");
    assert_eq!(WorkloadFault::of_deployment(&healthy), None);
}

#[test]
fn a_worker_that_may_not_write_its_lake_names_the_volume_and_the_fix() {
    let said = "VolumeNotWritable: cannot write /lake/_checkpoints/orders: /lake is owned by 0:0 \
                with mode 0755 (Permission denied (os error 13)); the worker runs as uid 65532, \
                gid 65532, groups 65532";
    let crashing = |mounts: serde_json::Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "orders-abc", "namespace": "shop"},
            "spec": {
                "securityContext": {"fsGroup": 65532},
                "volumes": [
                    {"name": "lake", "persistentVolumeClaim": {"claimName": "orders-lake"}},
                    {"name": "tmp", "emptyDir": {}}
                ],
                "containers": [{"name": "worker", "volumeMounts": mounts}]
            },
            "status": {"containerStatuses": [{
                "name": "worker", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": said}}
            }]}
        }))
        .expect("a pod")
    };
    let on_claim = crashing(json!([
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "lake", "mountPath": "/lake"}
    ]));
    let got = worker_running(&[on_claim], None, Phase::Pending, None, None, Runner::Own);
    assert_eq!(
        (got.status, got.reason.as_str()),
        ("False", VOLUME_NOT_WRITABLE)
    );
    for part in [
        "volume lake (PersistentVolumeClaim orders-lake) at /lake",
        "group 65532",
        "fsGroup",
        "owned by 0:0 with mode 0755",
    ] {
        assert!(got.message.contains(part), "{part}: {}", got.message);
    }
    // No volume holds the path: the read-only root is to blame.
    let no_volume = crashing(json!([{"name": "tmp", "mountPath": "/tmp"}]));
    let got = worker_running(&[no_volume], None, Phase::Pending, None, None, Runner::Own);
    assert_eq!(got.reason, VOLUME_NOT_WRITABLE);
    assert!(
        got.message.contains("on no volume of the pod"),
        "{}",
        got.message
    );
}

#[test]
fn a_scheduled_run_that_failed_says_so_with_the_job_controllers_words() {
    let cron_job: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "customers", "uid": "cron-1"},
        "spec": {"schedule": "0 * * * *", "jobTemplate": {}},
        "status": {
            "lastScheduleTime": "2026-12-06T10:00:00Z",
            "lastSuccessfulTime": "2026-12-06T09:01:00Z"
        }
    }))
    .expect("a CronJob");
    assert!(WorkloadFault::last_run_unsuccessful(&cron_job));
    let job = |name: &str, created: &str, condition: serde_json::Value| -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                    "name": "customers", "uid": "cron-1"}]},
            "status": {"conditions": [condition]}
        }))
        .expect("a Job")
    };
    let failed = json!({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit"});
    let complete = json!({"type": "Complete", "status": "True"});
    let jobs = [
        job("customers-1", "2026-12-06T09:00:00Z", complete.clone()),
        job("customers-2", "2026-12-06T10:00:00Z", failed),
    ];
    let fault = WorkloadFault::of_jobs(&cron_job, &jobs).expect("the last run failed");
    assert_eq!(fault.reason, "BackoffLimitExceeded");
    assert!(
        fault.message.contains("Job customers-2"),
        "{}",
        fault.message
    );
    // Its pods are gone: the fault is all there is, with the worker's word.
    let worker = failed_report();
    let got = worker_running(
        &[],
        Some(&worker),
        Phase::Streaming,
        None,
        Some(&fault),
        Runner::Own,
    );
    assert_eq!(
        (got.status, got.reason.as_str()),
        ("False", "BackoffLimitExceeded")
    );
    assert!(got.message.contains("backoff limit"), "{}", got.message);
    assert!(got.message.contains("LoginFailed"), "{}", got.message);

    // A later run that completed, or one still running, is no fault.
    let recovered = [
        job(
            "customers-2",
            "2026-12-06T10:00:00Z",
            json!({"type": "Failed", "status": "True"}),
        ),
        job("customers-3", "2026-12-06T11:00:00Z", complete),
    ];
    assert_eq!(WorkloadFault::of_jobs(&cron_job, &recovered), None);
    let mut running = cron_job.clone();
    if let Some(status) = running.status.as_mut() {
        status.active = Some(vec![Default::default()]);
    }
    assert!(!WorkloadFault::last_run_unsuccessful(&running));
    let mut succeeded = cron_job;
    if let Some(status) = succeeded.status.as_mut() {
        status.last_successful_time = status.last_schedule_time.clone();
    }
    assert!(!WorkloadFault::last_run_unsuccessful(&succeeded));
}

fn failed_report() -> WorkerStatus {
    failed("LoginFailed", "SQL Server refused login reader")
}

#[test]
fn a_crash_loops_failure_stands_while_the_restarted_container_runs_unreported() {
    let said = "LoginFailed: SQL Server refused login reader";
    let restarted = pod(json!({"containerStatuses": [{
        "name": "worker", "image": "x", "imageID": "", "ready": true, "restartCount": 3,
        "state": {"running": {"startedAt": "2026-11-29T10:00:00Z"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": said}}
    }]}));
    let pods = std::slice::from_ref(&restarted);
    let worker = failed("LoginFailed", "SQL Server refused login reader");
    let got = streaming(pods, Some(&worker));
    assert_eq!((got.status, got.reason.as_str()), ("False", "LoginFailed"));
    assert!(got.message.contains("refused login"), "{}", got.message);
    // Once the restarted worker reports running, the pod's word holds.
    let got = streaming(pods, None);
    assert_eq!((got.status, got.reason.as_str()), ("True", "Running"));
    // A failure the last termination does not name is an older one.
    let older = failed("DatabaseUnavailable", "cannot open database shop");
    let got = streaming(pods, Some(&older));
    assert_eq!((got.status, got.reason.as_str()), ("True", "Running"));
}

#[test]
fn a_source_table_that_failed_is_not_running_while_the_sources_pod_runs() {
    let source_pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "shop-abc", "namespace": "shop"},
        "spec": {
            "securityContext": {"fsGroup": 65532},
            "volumes": [{"name": "lake", "persistentVolumeClaim": {"claimName": "shop-lake"}}],
            "containers": [{"name": "worker",
                "volumeMounts": [{"name": "lake", "mountPath": "/lake"}]}]
        },
        "status": {"containerStatuses": [{
            "name": "worker", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-11-29T10:00:00Z"}}
        }]}
    }))
    .expect("a pod");
    let pods = std::slice::from_ref(&source_pod);
    let table = failed(
        VOLUME_NOT_WRITABLE,
        "cannot write /lake/orders: /lake is owned by 0:0 with mode 0755",
    );
    let got = worker_running(
        pods,
        Some(&table),
        Phase::Pending,
        None,
        None,
        Runner::Source,
    );
    assert_eq!(
        (got.status, got.reason.as_str()),
        ("False", VOLUME_NOT_WRITABLE)
    );
    for part in ["PersistentVolumeClaim shop-lake", "its other tables go on"] {
        assert!(got.message.contains(part), "{part}: {}", got.message);
    }
    // The source's pod runs, and so does every table that did not fail.
    let got = worker_running(pods, None, Phase::Streaming, None, None, Runner::Source);
    assert_eq!((got.status, got.reason.as_str()), ("True", "Running"));
}
