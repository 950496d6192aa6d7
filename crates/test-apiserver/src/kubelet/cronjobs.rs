//! Minimal CronJob controller driven by the server's fake clock: creates a
//! Job per due schedule time honouring `concurrencyPolicy` (Allow, Forbid,
//! Replace), `suspend`, and the history limits.

use super::cron::Schedule;
use super::jobs::{finished, jobs_of};
use super::{list, meta, opts, owner_ref, patch_status, target};
use crate::clock::{fmt_time, parse_time};
use crate::ops;
use crate::state::{DeleteOpts, State};
use serde_json::{Value, json};

const MANAGER: &str = "cronjob-controller";

/// Reconciles every CronJob once.
pub fn reconcile(st: &State) {
    for cj in list(st, "batch", "cronjobs") {
        if meta(&cj, "deletionTimestamp").is_empty() {
            reconcile_cronjob(st, &cj);
        }
    }
}

fn delete_job(st: &State, j: &Value) {
    if let Some(t) = target(st, "batch", "Job", meta(j, "namespace"), meta(j, "name")) {
        let _ = ops::delete(
            st,
            &t,
            &DeleteOpts {
                propagation: "Background".into(),
                ..Default::default()
            },
        );
    }
}

fn reconcile_cronjob(st: &State, cj: &Value) {
    let (ns, name, uid) = (meta(cj, "namespace"), meta(cj, "name"), meta(cj, "uid"));
    let now = st.clock.now();
    let jobs = jobs_of(st, uid);
    let active: Vec<&Value> = jobs.iter().filter(|j| finished(j).is_none()).collect();
    let mut status = json!({
        "active": active.iter().map(|j| json!({
            "apiVersion": "batch/v1", "kind": "Job", "name": meta(j, "name"),
            "namespace": ns, "uid": meta(j, "uid"),
        })).collect::<Vec<_>>(),
    });
    if let Some(t) = cj.pointer("/status/lastScheduleTime") {
        status["lastScheduleTime"] = t.clone();
    }
    if let Some(t) = jobs
        .iter()
        .filter(|j| finished(j) == Some("Complete"))
        .filter_map(|j| j.pointer("/status/completionTime"))
        .max_by_key(|t| t.as_str().map(String::from))
    {
        status["lastSuccessfulTime"] = t.clone();
    }
    prune_history(st, cj, &jobs);
    let suspended = cj
        .pointer("/spec/suspend")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let schedule = cj
        .pointer("/spec/schedule")
        .and_then(Value::as_str)
        .and_then(Schedule::parse);
    let last = cj
        .pointer("/status/lastScheduleTime")
        .and_then(Value::as_str)
        .or_else(|| {
            cj.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
        })
        .and_then(parse_time);
    if let (false, Some(schedule), Some(last)) = (suspended, schedule, last)
        && let Some(due) = schedule.latest_between(last, now)
    {
        let policy = cj
            .pointer("/spec/concurrencyPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Allow");
        let run = match policy {
            "Forbid" => active.is_empty(),
            "Replace" => {
                active.iter().for_each(|j| delete_job(st, j));
                true
            }
            _ => true,
        };
        if run {
            let job_name = format!("{name}-{}", due.timestamp() / 60);
            let tpl = cj
                .pointer("/spec/jobTemplate")
                .cloned()
                .unwrap_or(json!({}));
            let mut md = tpl.get("metadata").cloned().unwrap_or(json!({}));
            md["name"] = json!(job_name);
            md["ownerReferences"] = owner_ref(cj, "batch/v1", "CronJob");
            md["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] =
                json!(fmt_time(due));
            let job = json!({ "apiVersion": "batch/v1", "kind": "Job", "metadata": md, "spec": tpl.get("spec").cloned().unwrap_or(json!({})) });
            if let Some(t) = target(st, "batch", "Job", ns, "") {
                let _ = ops::create(st, &t, job, &opts(MANAGER));
            }
            status["lastScheduleTime"] = json!(fmt_time(due));
        }
    }
    if let Some(t) = target(st, "batch", "CronJob", ns, name) {
        patch_status(st, &t, status, MANAGER);
    }
}

fn prune_history(st: &State, cj: &Value, jobs: &[Value]) {
    for (kind, key, default) in [
        ("Complete", "successfulJobsHistoryLimit", 3),
        ("Failed", "failedJobsHistoryLimit", 1),
    ] {
        let limit = cj
            .pointer(&format!("/spec/{key}"))
            .and_then(Value::as_u64)
            .unwrap_or(default) as usize;
        let mut done: Vec<&Value> = jobs.iter().filter(|j| finished(j) == Some(kind)).collect();
        done.sort_by(|a, b| {
            meta(b, "creationTimestamp")
                .cmp(meta(a, "creationTimestamp"))
                .then(meta(b, "name").cmp(meta(a, "name")))
        });
        done.iter().skip(limit).for_each(|j| delete_job(st, j));
    }
}
