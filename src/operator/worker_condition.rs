//! WorkerRunning: whether the stream's worker pod runs, judged from the
//! pods of its Deployment or CronJob's Jobs as the kubelet and scheduler
//! report them, and from what the worker itself said before it stopped
//! (`status.worker`). A pod that cannot run names the pod-level reason
//! (CrashLoopBackOff, CreateContainerConfigError, ImagePullBackOff,
//! OOMKilled, Unschedulable, a pending volume claim); the worker's own
//! error, when it reported one, gives the reason and leads the message.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::children::BuildError;
use super::conditions::{Judged, WORKER_RUNNING, judged};
use super::failure::{VOLUME_NOT_WRITABLE, WORKER_FORBIDDEN};
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
    /// For a container running again after the worker stopped on an
    /// error of its own: that error's reason and message (with the fix
    /// only the operator knows), from the container's last termination.
    restarted_after: Option<(String, String)>,
}

impl PodVerdict {
    fn new(failing: bool, reason: impl Into<String>, message: impl Into<String>) -> Self {
        PodVerdict {
            failing,
            reason: reason.into(),
            message: message.into(),
            restarted_after: None,
        }
    }
}

/// Why the worker's controller cannot make its pods, in the API server's
/// words: a Deployment's `ReplicaFailure` condition (which carries its
/// ReplicaSet's `FailedCreate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadFault {
    /// The condition's reason (`FailedCreate`).
    pub reason: String,
    /// The API server's refusal of the pod.
    pub message: String,
}

impl WorkloadFault {
    /// The fault a Deployment's status reports, if any.
    pub fn of_deployment(deployment: &Deployment) -> Option<Self> {
        let failed = deployment
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| {
                c.type_.as_deref() == Some("ReplicaFailure") && c.status.as_deref() == Some("True")
            })?;
        Some(WorkloadFault {
            reason: failed
                .reason
                .clone()
                .unwrap_or_else(|| "FailedCreate".into()),
            message: failed.message.clone().unwrap_or_default(),
        })
    }
}

impl WorkloadFault {
    /// Whether a CronJob's last run may have failed: it was scheduled
    /// after its last success (or never succeeded) and no run is active.
    /// Only then are its Jobs worth reading.
    pub fn last_run_unsuccessful(cron_job: &CronJob) -> bool {
        let Some(status) = cron_job.status.as_ref() else {
            return false;
        };
        let active = status.active.as_ref().is_some_and(|a| !a.is_empty());
        match (&status.last_schedule_time, &status.last_successful_time) {
            (Some(scheduled), Some(succeeded)) => !active && scheduled.0 > succeeded.0,
            (Some(_), None) => !active,
            (None, _) => false,
        }
    }

    /// The fault of a CronJob's newest Job (of `jobs`, those it owns),
    /// when that Job failed: `BackoffLimitExceeded`, `DeadlineExceeded`
    /// and the like, in the Job controller's words.
    pub fn of_jobs(cron_job: &CronJob, jobs: &[Job]) -> Option<Self> {
        let uid = cron_job.metadata.uid.as_deref()?;
        let newest = jobs
            .iter()
            .filter(|job| {
                job.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|owner| owner.uid == uid)
            })
            .max_by_key(|job| job.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
        let failed = newest
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Failed" && c.status == "True")?;
        let name = newest.metadata.name.as_deref().unwrap_or("(unnamed)");
        let reason = failed.reason.clone().unwrap_or_else(|| "JobFailed".into());
        let said = failed.message.as_deref().unwrap_or("the Job failed");
        Some(WorkloadFault {
            message: format!(
                "the last run (Job {name}) failed: {reason}: {said}; the next run starts on \
                 schedule (kubectl describe job {name} and its pods' logs say why)"
            ),
            reason,
        })
    }
}

/// Whose worker the pods are: the stream's own, or the source's that
/// runs the stream as one of its tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// The judged object's own worker (a standalone stream's, which exits
    /// when the stream fails; a source's, judged as the source).
    Own,
    /// A `CdcSource`'s worker: its pod runs on while one table is failed
    /// and retried, so the table's own report says whether it runs.
    Source,
}

/// The WorkerRunning condition.
pub(super) fn worker_running(
    pods: &[Pod],
    reported: Option<&WorkerStatus>,
    phase: Phase,
    refused: Option<&BuildError>,
    fault: Option<&WorkloadFault>,
    runner: Runner,
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
    // No pod can be made: nothing else will say so.
    if let Some(fault) = fault.filter(|_| verdicts.iter().all(|v| v.reason != "Running")) {
        let message = if fault.reason == "FailedCreate" {
            format!(
                "the worker's pod cannot be created: {}; fix what the API server names (the \
                 ServiceAccount, a ResourceQuota or LimitRange, an admission policy)",
                fault.message
            )
        } else {
            match failed {
                Some(w) => format!(
                    "{}; the worker said {}: {}",
                    fault.message, w.reason, w.message
                ),
                None => fault.message.clone(),
            }
        };
        return judged(WORKER_RUNNING, "False", fault.reason.clone(), message);
    }
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
    // A table of a source that failed, before its first batch or after,
    // while the source's worker runs its other tables.
    if let (Runner::Source, Some(w)) = (runner, failed) {
        let message = match live.first() {
            Some(pod) => with_fix(&w.reason, &w.message, pod),
            None => w.message.clone(),
        };
        return judged(
            WORKER_RUNNING,
            "False",
            w.reason.clone(),
            format!(
                "{message} (the source's worker retries this table with backoff; its other \
                 tables go on)"
            ),
        );
    }
    if let Some(running) = verdicts.iter().find(|v| v.reason == "Running") {
        // Between two crashes of a crash loop the container runs, and the
        // worker has not reported since its last failure: that failure
        // still stands until the worker reports running again.
        let still_failed = failed.zip(running.restarted_after.as_ref());
        if let Some((w, (_, message))) = still_failed.filter(|(w, (said, _))| *said == w.reason) {
            return judged(
                WORKER_RUNNING,
                "False",
                w.reason.clone(),
                format!("{message} (the worker restarted and has not reported since)"),
            );
        }
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
        return PodVerdict::new(
            true,
            reason,
            format!("{message}; create or bind the claim the worker mounts, or free a node"),
        );
    }
    let containers: &[ContainerStatus] = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    for c in containers {
        let last_said = c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.message.as_deref())
            .and_then(worker_said);
        if let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            let reason = waiting.reason.clone().unwrap_or_default();
            if FAILING_WAITS.contains(&reason.as_str()) {
                let oom = last_reason(c) == Some("OOMKilled");
                if let (Some((said, message)), false) = (last_said, oom) {
                    return PodVerdict::new(
                        true,
                        said,
                        format!("{} ({reason})", with_fix(said, message, pod)),
                    );
                }
                let message = waiting_message(&reason, waiting.message.as_deref(), oom);
                let reason = if oom { "OOMKilled".into() } else { reason };
                return PodVerdict::new(true, reason, message);
            }
        }
        if let Some(terminated) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) {
            if terminated.exit_code == 0 {
                return PodVerdict::new(
                    false,
                    "Completed",
                    "the last run completed; the next one starts on schedule",
                );
            }
            if let Some((said, message)) = terminated.message.as_deref().and_then(worker_said) {
                return PodVerdict::new(true, said, with_fix(said, message, pod));
            }
            let reason = match terminated.reason.as_deref() {
                None | Some("") => "Error",
                Some(reason) => reason,
            };
            let message = terminated
                .message
                .clone()
                .unwrap_or_else(|| format!("exited with code {}", terminated.exit_code));
            return PodVerdict::new(true, reason, message);
        }
        if c.state.as_ref().and_then(|s| s.running.as_ref()).is_some() {
            return PodVerdict {
                restarted_after: last_said
                    .map(|(said, message)| (said.to_string(), with_fix(said, message, pod))),
                ..PodVerdict::new(
                    false,
                    "Running",
                    format!("worker pod {} runs", pod_name(pod)),
                )
            };
        }
    }
    PodVerdict::new(
        false,
        "Pending",
        format!("worker pod {} is starting", pod_name(pod)),
    )
}

/// The reason and message a worker wrote into its termination message
/// (`Reason: message`, as `cli::worker` writes it), when the message is
/// one: a log tail the kubelet fell back to is not.
fn worker_said(termination: &str) -> Option<(&str, &str)> {
    let first = termination.lines().next()?;
    let (reason, message) = first.split_once(": ")?;
    let camel = reason.len() <= 64
        && reason.starts_with(|c: char| c.is_ascii_uppercase())
        && reason.chars().all(|c| c.is_ascii_alphanumeric())
        && reason.chars().any(|c| c.is_ascii_lowercase());
    camel.then_some((reason, message))
}

/// `message`, with what only the operator knows added: for a worker that
/// may not read its stream, the ServiceAccount and namespace to bind the
/// chart's worker Role to; for one that may not write a local path, the
/// volume of the pod the path is on.
fn with_fix(reason: &str, message: &str, pod: &Pod) -> String {
    match reason {
        WORKER_FORBIDDEN => forbidden_fix(message, pod),
        VOLUME_NOT_WRITABLE => volume_fix(message, pod),
        _ => message.to_string(),
    }
}

fn forbidden_fix(message: &str, pod: &Pod) -> String {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .unwrap_or("default");
    format!(
        "{message}; fix: bind a Role with get on cdcstreams and patch on cdcstreams/status to \
         ServiceAccount {account} in namespace {namespace} (helm upgrade with {namespace} added \
         to worker.namespaces does it)"
    )
}

/// The worker said `cannot write PATH: ...`: which volume mount of its
/// container holds PATH (the deepest), and what makes it writable.
fn volume_fix(message: &str, pod: &Pod) -> String {
    let Some(path) = message
        .strip_prefix("cannot write ")
        .and_then(|rest| rest.split(": ").next())
    else {
        return message.to_string();
    };
    let spec = pod.spec.as_ref();
    let mounts = spec
        .and_then(|s| s.containers.first())
        .and_then(|c| c.volume_mounts.as_deref())
        .unwrap_or_default();
    let mount = mounts
        .iter()
        .filter(|m| std::path::Path::new(path).starts_with(&m.mount_path))
        .max_by_key(|m| m.mount_path.len());
    let Some(mount) = mount else {
        return format!(
            "{message}; {path} is on no volume of the pod, and the worker's root filesystem is \
             read-only: mount a volume there (spec.worker.volumes and volumeMounts)"
        );
    };
    let claim = spec
        .and_then(|s| s.volumes.as_deref())
        .and_then(|volumes| volumes.iter().find(|v| v.name == mount.name))
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .map(|c| format!(" (PersistentVolumeClaim {})", c.claim_name))
        .unwrap_or_default();
    let group = spec
        .and_then(|s| s.security_context.as_ref())
        .and_then(|c| c.fs_group)
        .map_or_else(
            || "the worker's group".to_string(),
            |g| format!("group {g}"),
        );
    format!(
        "{message}; volume {volume}{claim} at {at} is not writable by the worker: its storage \
         does not apply the pod's fsGroup (hostPath and many NFS or file-share drivers do not), \
         or spec.worker.podSecurityContext changed it; fix: make the volume's root writable by \
         {group} (chgrp and chmod g+rwx on the export or disk), or use a StorageClass whose \
         driver applies fsGroup",
        volume = mount.name,
        at = mount.mount_path,
    )
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
