//! WorkerRunning: whether the stream's worker pod runs, judged from the
//! pods of its Deployment or CronJob's Jobs as the kubelet and scheduler
//! report them, and from what the worker itself said before it stopped
//! (`status.worker`). A pod that cannot run names the pod-level reason
//! (CrashLoopBackOff, CreateContainerConfigError, ImagePullBackOff,
//! OOMKilled, Unschedulable, a pending volume claim); the worker's own
//! error, when it reported one, gives the reason and leads the message.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::children::BuildError;
use super::conditions::{Judged, WORKER_RUNNING, judged};
use crate::spec::{Phase, WorkerState, WorkerStatus};

/// Waiting reasons that mean the container will not run as it is.
const FAILING_WAITS: [&str; 7] = [
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "RunContainerError",
];

/// The reason of a pod that waits for a PersistentVolumeClaim.
pub const VOLUME_CLAIM_PENDING: &str = "VolumeClaimPending";

/// What the pods say, before the worker's own word is added.
struct PodVerdict {
    failing: bool,
    reason: String,
    message: String,
}

/// The WorkerRunning condition.
pub(super) fn worker_running(
    pods: &[Pod],
    reported: Option<&WorkerStatus>,
    phase: Phase,
    refused: Option<&BuildError>,
) -> Judged {
    if let Some(error) = refused.filter(|e| e.removes_worker()) {
        return judged(
            WORKER_RUNNING,
            "False",
            error.reason(),
            format!("no worker runs: {error}"),
        );
    }
    if phase == Phase::Suspended {
        return judged(
            WORKER_RUNNING,
            "False",
            "Suspended",
            "spec.suspend is set: no worker runs",
        );
    }
    let failed = reported.filter(|w| w.state == WorkerState::Failed);
    let live: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let verdicts: Vec<PodVerdict> = live.iter().map(|p| pod_verdict(p)).collect();
    let failing = verdicts.iter().find(|v| v.failing);
    if let Some(pod) = failing {
        let (reason, message) = match failed {
            Some(w) => (
                w.reason.clone(),
                format!("{} ({}: {})", w.message, pod.reason, pod.message),
            ),
            None => (pod.reason.clone(), pod.message.clone()),
        };
        return judged(WORKER_RUNNING, "False", reason, message);
    }
    if let Some(running) = verdicts.iter().find(|v| v.reason == "Running") {
        return judged(WORKER_RUNNING, "True", "Running", running.message.clone());
    }
    if let Some(w) = failed {
        return judged(WORKER_RUNNING, "False", w.reason.clone(), w.message.clone());
    }
    if let Some(v) = verdicts.first() {
        let status = if v.reason == "Completed" {
            "True"
        } else {
            "Unknown"
        };
        return judged(WORKER_RUNNING, status, v.reason.clone(), v.message.clone());
    }
    judged(
        WORKER_RUNNING,
        "Unknown",
        "NoWorkerPod",
        "no worker pod exists yet (a scheduled stream has one only while it runs)",
    )
}

fn pod_verdict(pod: &Pod) -> PodVerdict {
    let status = pod.status.as_ref();
    let unscheduled = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .filter(|c| c.status == "False");
    if let Some(c) = unscheduled {
        let message = c.message.clone().unwrap_or_default();
        let reason = if message.contains("PersistentVolumeClaim") {
            VOLUME_CLAIM_PENDING.to_string()
        } else {
            c.reason.clone().unwrap_or_else(|| "Unschedulable".into())
        };
        return PodVerdict {
            failing: true,
            reason,
            message: format!(
                "{message}; create or bind the claim the worker mounts, or free a node"
            ),
        };
    }
    let containers: &[ContainerStatus] = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    for c in containers {
        if let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            let reason = waiting.reason.clone().unwrap_or_default();
            if FAILING_WAITS.contains(&reason.as_str()) {
                let oom = last_reason(c) == Some("OOMKilled");
                return PodVerdict {
                    failing: true,
                    reason: if oom {
                        "OOMKilled".into()
                    } else {
                        reason.clone()
                    },
                    message: waiting_message(&reason, waiting.message.as_deref(), oom),
                };
            }
        }
        if let Some(terminated) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) {
            let reason = terminated.reason.clone().unwrap_or_default();
            if terminated.exit_code == 0 {
                return PodVerdict {
                    failing: false,
                    reason: "Completed".into(),
                    message: "the last run completed; the next one starts on schedule".into(),
                };
            }
            return PodVerdict {
                failing: true,
                reason: if reason.is_empty() {
                    "Error".into()
                } else {
                    reason
                },
                message: terminated
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("exited with code {}", terminated.exit_code)),
            };
        }
        if c.state.as_ref().and_then(|s| s.running.as_ref()).is_some() {
            return PodVerdict {
                failing: false,
                reason: "Running".into(),
                message: format!("worker pod {} runs", pod_name(pod)),
            };
        }
    }
    PodVerdict {
        failing: false,
        reason: "Pending".into(),
        message: format!("worker pod {} is starting", pod_name(pod)),
    }
}

fn last_reason(c: &ContainerStatus) -> Option<&str> {
    c.last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.reason.as_deref())
}

fn waiting_message(reason: &str, said: Option<&str>, oom: bool) -> String {
    let todo = match reason {
        _ if oom => "the worker ran out of memory: raise spec.worker.resources.limits.memory",
        "CreateContainerConfigError" => "a Secret or ConfigMap the pod names is missing",
        "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName" => {
            "the image cannot be pulled: check spec.worker.image and the pull secrets"
        }
        _ => "the worker keeps failing: see the reason above and the pod's log",
    };
    match said {
        Some(said) => format!("{reason}: {said}; {todo}"),
        None => format!("{reason}; {todo}"),
    }
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("(unnamed)")
}

#[cfg(test)]
#[path = "worker_condition_tests.rs"]
mod tests;
