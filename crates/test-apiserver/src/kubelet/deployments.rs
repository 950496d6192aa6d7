//! Minimal Deployment and ReplicaSet controllers. A Deployment owns one
//! ReplicaSet per pod-template hash; with the Recreate strategy the new
//! ReplicaSet is scaled up only after every old pod is gone. ReplicaSets keep
//! `replicas` pods (scale to 0 included).

use super::{
    conditions, create_pod, is_ready, list, meta, opts, owned_by, owner_ref, patch_status, pods_of,
    replica_failure, target,
};
use crate::ops;
use crate::patch::PatchType;
use crate::state::{DeleteOpts, State};
use serde_json::{Value, json};
use std::hash::{DefaultHasher, Hash, Hasher};

const MANAGER: &str = "deployment-controller";

fn template_hash(template: &Value) -> String {
    let mut h = DefaultHasher::new();
    template.to_string().hash(&mut h);
    format!("{:x}", h.finish() & 0xff_ffff_ffff)
}

fn replicas(o: &Value) -> i64 {
    o.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn live_pods(st: &State, uid: &str) -> Vec<Value> {
    pods_of(st, uid)
        .into_iter()
        .filter(|p| !matches!(super::phase(p), "Succeeded" | "Failed"))
        .collect()
}

fn scale(st: &State, rs: &Value, n: i64) {
    if replicas(rs) == n {
        return;
    }
    if let Some(t) = target(
        st,
        "apps",
        "ReplicaSet",
        meta(rs, "namespace"),
        meta(rs, "name"),
    ) {
        let body = json!({ "spec": { "replicas": n } }).to_string();
        let _ = ops::patch(st, &t, PatchType::Merge, body.as_bytes(), &opts(MANAGER));
    }
}

/// Reconciles every Deployment and ReplicaSet once.
pub fn reconcile(st: &State) {
    for d in list(st, "apps", "deployments") {
        if meta(&d, "deletionTimestamp").is_empty() {
            reconcile_deployment(st, &d);
        }
    }
    for rs in list(st, "apps", "replicasets") {
        if meta(&rs, "deletionTimestamp").is_empty() {
            reconcile_replicaset(st, &rs);
        }
    }
}

fn reconcile_deployment(st: &State, d: &Value) {
    let (ns, name, uid) = (meta(d, "namespace"), meta(d, "name"), meta(d, "uid"));
    let template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let hash = template_hash(&template);
    let rs_name = format!("{name}-{hash}");
    let owned: Vec<Value> = list(st, "apps", "replicasets")
        .into_iter()
        .filter(|r| owned_by(r, uid))
        .collect();
    let want = replicas(d);
    let recreate = d.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate");
    let olds: Vec<&Value> = owned
        .iter()
        .filter(|r| meta(r, "name") != rs_name)
        .collect();
    for old in &olds {
        scale(st, old, 0);
    }
    let old_pods: usize = olds
        .iter()
        .map(|r| live_pods(st, meta(r, "uid")).len())
        .sum();
    let new_replicas = if recreate && old_pods > 0 { 0 } else { want };
    match owned.iter().find(|r| meta(r, "name") == rs_name) {
        Some(rs) => scale(st, rs, new_replicas),
        None => {
            let mut tpl = template.clone();
            tpl["metadata"]["labels"]["pod-template-hash"] = json!(hash);
            let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
            selector["matchLabels"]["pod-template-hash"] = json!(hash);
            let rs = json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name,
                    "labels": tpl["metadata"]["labels"].clone(),
                    "ownerReferences": owner_ref(d, "apps/v1", "Deployment"),
                },
                "spec": { "replicas": new_replicas, "selector": selector, "template": tpl },
            });
            if let Some(t) = target(st, "apps", "ReplicaSet", ns, "") {
                let _ = ops::create(st, &t, rs, &opts(MANAGER));
            }
        }
    }
    let new_uid = owned
        .iter()
        .find(|r| meta(r, "name") == rs_name)
        .map(|r| meta(r, "uid").to_string());
    let all: Vec<Value> = owned
        .iter()
        .flat_map(|r| live_pods(st, meta(r, "uid")))
        .collect();
    let updated = new_uid.map(|u| live_pods(st, &u)).unwrap_or_default();
    let ready = all.iter().filter(|p| is_ready(p)).count() as i64;
    let now = st.clock.now_rfc3339();
    let mut status = json!({
        "observedGeneration": d.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": all.len(),
        "updatedReplicas": updated.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": (want - ready).max(0),
        "conditions": conditions(d, &[
            ("Available", ready >= want, if ready >= want { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" }),
            ("Progressing", true, "NewReplicaSetAvailable"),
        ], &now),
    });
    // The new ReplicaSet's failure to create pods, copied as the
    // Deployment controller copies it.
    let failure = owned
        .iter()
        .find(|r| meta(r, "name") == rs_name)
        .and_then(|r| r.pointer("/status/conditions").and_then(Value::as_array))
        .and_then(|c| {
            c.iter().find(|c| {
                c.get("type").and_then(Value::as_str) == Some("ReplicaFailure")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
        .and_then(|c| c.get("message").and_then(Value::as_str))
        .map(|m| replica_failure(d, m, &now));
    if let (Some(failure), Some(list)) = (failure, status["conditions"].as_array_mut()) {
        list.push(failure);
    }
    if let Some(t) = target(st, "apps", "Deployment", ns, name) {
        patch_status(st, &t, status, MANAGER);
    }
}

fn reconcile_replicaset(st: &State, rs: &Value) {
    let (ns, name, uid) = (meta(rs, "namespace"), meta(rs, "name"), meta(rs, "uid"));
    let mut pods: Vec<Value> = live_pods(st, uid)
        .into_iter()
        .filter(|p| meta(p, "deletionTimestamp").is_empty())
        .collect();
    let want = usize::try_from(replicas(rs)).unwrap_or(0);
    let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut refused = None;
    for _ in pods.len()..want {
        if let Err(message) = create_pod(
            st,
            ns,
            &template,
            name,
            owner_ref(rs, "apps/v1", "ReplicaSet"),
            json!({}),
        ) {
            refused = Some(message);
            break;
        }
    }
    if pods.len() > want {
        pods.sort_by(|a, b| meta(b, "creationTimestamp").cmp(meta(a, "creationTimestamp")));
        for p in pods.iter().take(pods.len() - want) {
            if let Some(t) = target(st, "", "Pod", ns, meta(p, "name")) {
                let _ = ops::delete(st, &t, &DeleteOpts::default());
            }
        }
    }
    let pods = live_pods(st, uid);
    let ready = pods.iter().filter(|p| is_ready(p)).count();
    // A pod the API server refuses (a missing ServiceAccount, a quota, an
    // admission webhook) is the ReplicaSet's ReplicaFailure, with its words.
    let failure = refused.map(|m| replica_failure(rs, &m, &st.clock.now_rfc3339()));
    let status = json!({
        "replicas": pods.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "fullyLabeledReplicas": pods.len(),
        "observedGeneration": rs.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "conditions": failure.into_iter().collect::<Vec<_>>(),
    });
    if let Some(t) = target(st, "apps", "ReplicaSet", ns, name) {
        patch_status(st, &t, status, MANAGER);
    }
}
