//! Minimal Job controller: runs pods until `completions` succeed, counts
//! failures against `backoffLimit`, and sets Complete/Failed conditions.

use super::{create_pod, list, meta, owned_by, owner_ref, patch_status, pods_of, target};
use crate::ops;
use crate::state::{DeleteOpts, State};
use serde_json::{Value, json};

const MANAGER: &str = "job-controller";

/// Whether a Job has finished (Complete or Failed).
pub fn finished(job: &Value) -> Option<&'static str> {
    let conds = job
        .pointer("/status/conditions")
        .and_then(Value::as_array)?;
    conds
        .iter()
        .find_map(|c| match (c["type"].as_str(), c["status"].as_str()) {
            (Some("Complete"), Some("True")) => Some("Complete"),
            (Some("Failed"), Some("True")) => Some("Failed"),
            _ => None,
        })
}

/// Reconciles every Job once.
pub fn reconcile(st: &State) {
    for job in list(st, "batch", "jobs") {
        if meta(&job, "deletionTimestamp").is_empty() && finished(&job).is_none() {
            reconcile_job(st, &job);
        }
    }
}

fn reconcile_job(st: &State, job: &Value) {
    let (ns, name, uid) = (meta(job, "namespace"), meta(job, "name"), meta(job, "uid"));
    let int = |p: &str, d: i64| job.pointer(p).and_then(Value::as_i64).unwrap_or(d);
    let (completions, parallelism, backoff) = (
        int("/spec/completions", 1),
        int("/spec/parallelism", 1),
        int("/spec/backoffLimit", 6),
    );
    let pods: Vec<Value> = pods_of(st, uid)
        .into_iter()
        .filter(|p| meta(p, "deletionTimestamp").is_empty())
        .collect();
    let count = |ph: &str| pods.iter().filter(|p| super::phase(p) == ph).count() as i64;
    let (succeeded, failed) = (count("Succeeded"), count("Failed"));
    let restarts: i64 = pods
        .iter()
        .flat_map(|p| {
            p.pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| !matches!(super::phase(p), "Succeeded" | "Failed"))
        .collect();
    let now = st.clock.now_rfc3339();
    let mut status = json!({
        "active": active.len(),
        "succeeded": succeeded,
        "failed": failed,
        "startTime": job.pointer("/status/startTime").cloned().unwrap_or(json!(now)),
    });
    if succeeded >= completions {
        status["completionTime"] = json!(now);
        status["conditions"] = super::conditions(job, &[("Complete", true, "Completed")], &now);
    } else if failed + restarts > backoff {
        for p in &active {
            if let Some(t) = target(st, "", "Pod", ns, meta(p, "name")) {
                let _ = ops::delete(st, &t, &DeleteOpts::default());
            }
        }
        status["conditions"] =
            super::conditions(job, &[("Failed", true, "BackoffLimitExceeded")], &now);
    } else {
        let want = parallelism.min(completions - succeeded);
        let template = job.pointer("/spec/template").cloned().unwrap_or(json!({}));
        for _ in (active.len() as i64)..want {
            let labels = json!({ "job-name": name, "batch.kubernetes.io/job-name": name });
            let _ = create_pod(
                st,
                ns,
                &template,
                name,
                owner_ref(job, "batch/v1", "Job"),
                labels,
            );
        }
    }
    if let Some(t) = target(st, "batch", "Job", ns, name) {
        patch_status(st, &t, status, MANAGER);
    }
}

/// Jobs controlled by `uid`.
pub fn jobs_of(st: &State, uid: &str) -> Vec<Value> {
    list(st, "batch", "jobs")
        .into_iter()
        .filter(|j| owned_by(j, uid))
        .collect()
}
