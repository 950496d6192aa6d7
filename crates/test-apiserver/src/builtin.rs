//! Built-in types: shape validation by deserialising into the k8s-openapi
//! types, plus the handful of server-side defaults clients rely on.

use crate::error::Cause;
use base64::Engine;
use k8s_openapi::api::{apps, batch, coordination, core, events, policy, rbac, storage};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn check<T: DeserializeOwned>(obj: &Value) -> Option<String> {
    serde_json::from_value::<T>(obj.clone())
        .err()
        .map(|e| e.to_string())
}

/// Checks that `obj` deserialises into the k8s-openapi type for `group`/`kind`.
pub fn validate(group: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    let err = match (group, kind) {
        ("", "Namespace") => check::<core::v1::Namespace>(obj),
        ("", "ConfigMap") => check::<core::v1::ConfigMap>(obj),
        ("", "Secret") => check::<core::v1::Secret>(obj),
        ("", "ServiceAccount") => check::<core::v1::ServiceAccount>(obj),
        ("", "Service") => check::<core::v1::Service>(obj),
        ("", "Pod") => check::<core::v1::Pod>(obj),
        ("", "Event") => check::<core::v1::Event>(obj),
        ("", "Endpoints") => check::<core::v1::Endpoints>(obj),
        ("", "PersistentVolumeClaim") => check::<core::v1::PersistentVolumeClaim>(obj),
        ("", "Node") => check::<core::v1::Node>(obj),
        ("", "PersistentVolume") => check::<core::v1::PersistentVolume>(obj),
        ("storage.k8s.io", "StorageClass") => check::<storage::v1::StorageClass>(obj),
        ("events.k8s.io", "Event") => check::<events::v1::Event>(obj),
        ("apps", "Deployment") => check::<apps::v1::Deployment>(obj),
        ("apps", "ReplicaSet") => check::<apps::v1::ReplicaSet>(obj),
        ("apps", "StatefulSet") => check::<apps::v1::StatefulSet>(obj),
        ("batch", "Job") => check::<batch::v1::Job>(obj),
        ("batch", "CronJob") => check::<batch::v1::CronJob>(obj),
        ("coordination.k8s.io", "Lease") => check::<coordination::v1::Lease>(obj),
        ("rbac.authorization.k8s.io", "Role") => check::<rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => check::<rbac::v1::RoleBinding>(obj),
        ("rbac.authorization.k8s.io", "ClusterRole") => check::<rbac::v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            check::<rbac::v1::ClusterRoleBinding>(obj)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            check::<apiext::CustomResourceDefinition>(obj)
        }
        ("policy", "PodDisruptionBudget") => check::<policy::v1::PodDisruptionBudget>(obj),
        _ => None,
    };
    let mut causes: Vec<Cause> = err
        .into_iter()
        .map(|e| Cause::new("FieldValueInvalid", "", format!("Invalid value: {e}")))
        .collect();
    causes.extend(required_fields(group, kind, obj));
    causes
}

fn required_fields(group: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    let req = |p: &str, f: &str| -> Option<Cause> {
        obj.pointer(p)
            .is_none()
            .then(|| Cause::new("FieldValueRequired", f, "Required value"))
    };
    let mut out = Vec::new();
    match (group, kind) {
        ("", "Pod") => {
            let empty = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .is_none_or(|c| c.is_empty());
            if empty {
                out.push(Cause::new(
                    "FieldValueRequired",
                    "spec.containers",
                    "Required value",
                ));
            }
        }
        ("apps", "Deployment") | ("apps", "ReplicaSet") => {
            out.extend(req("/spec/selector", "spec.selector"));
            out.extend(req("/spec/template", "spec.template"));
        }
        ("batch", "CronJob") => out.extend(req("/spec/schedule", "spec.schedule")),
        ("storage.k8s.io", "StorageClass") => out.extend(req("/provisioner", "provisioner")),
        _ => {}
    }
    out
}

fn set_default(obj: &mut Value, ptr: &str, v: Value) {
    if obj.pointer(ptr).is_some() {
        return;
    }
    let (parent, key) = ptr.rsplit_once('/').unwrap_or(("", ptr));
    let mut cur = obj;
    for seg in parent.split('/').filter(|s| !s.is_empty()) {
        if !cur.get(seg).is_some_and(Value::is_object) {
            cur[seg] = json!({});
        }
        cur = &mut cur[seg];
    }
    cur[key] = v;
}

fn default_pod_spec(obj: &mut Value, base: &str, restart: &str) {
    set_default(obj, &format!("{base}/restartPolicy"), json!(restart));
    set_default(
        obj,
        &format!("{base}/terminationGracePeriodSeconds"),
        json!(30),
    );
    set_default(obj, &format!("{base}/dnsPolicy"), json!("ClusterFirst"));
    set_default(
        obj,
        &format!("{base}/schedulerName"),
        json!("default-scheduler"),
    );
}

/// Per-container defaults: the termination message file and policy.
fn default_containers(obj: &mut Value, base: &str) {
    if let Some(Value::Array(cs)) = obj.pointer_mut(&format!("{base}/containers")) {
        for c in cs.iter_mut().filter(|c| c.is_object()) {
            set_default(c, "/terminationMessagePath", json!("/dev/termination-log"));
            set_default(c, "/terminationMessagePolicy", json!("File"));
            set_default(c, "/imagePullPolicy", json!("IfNotPresent"));
        }
    }
}

/// Server-side defaults for built-ins (a small, commonly relied-upon subset).
pub fn apply_defaults(
    group: &str,
    kind: &str,
    obj: &mut Value,
    cluster_ip: impl FnOnce() -> String,
) {
    match (group, kind) {
        ("", "Namespace") => {
            set_default(obj, "/spec/finalizers", json!(["kubernetes"]));
            set_default(obj, "/status/phase", json!("Active"));
        }
        ("", "PersistentVolumeClaim") => {
            set_default(obj, "/spec/volumeMode", json!("Filesystem"));
            set_default(obj, "/status/phase", json!("Pending"));
        }
        ("", "PersistentVolume") => {
            set_default(obj, "/spec/persistentVolumeReclaimPolicy", json!("Retain"));
            set_default(obj, "/spec/volumeMode", json!("Filesystem"));
            set_default(obj, "/status/phase", json!("Available"));
        }
        ("", "Pod") => {
            default_pod_spec(obj, "/spec", "Always");
            default_containers(obj, "/spec");
            set_default(obj, "/status/phase", json!("Pending"));
        }
        ("", "Service") => {
            set_default(obj, "/spec/type", json!("ClusterIP"));
            if obj.pointer("/spec/clusterIP").is_none() {
                let ip = cluster_ip();
                set_default(obj, "/spec/clusterIP", json!(ip));
                set_default(obj, "/spec/clusterIPs", json!([ip]));
            }
            set_default(obj, "/spec/sessionAffinity", json!("None"));
        }
        ("apps", "Deployment") => {
            set_default(obj, "/spec/replicas", json!(1));
            set_default(obj, "/spec/revisionHistoryLimit", json!(10));
            set_default(obj, "/spec/progressDeadlineSeconds", json!(600));
            set_default(obj, "/spec/strategy/type", json!("RollingUpdate"));
            default_pod_spec(obj, "/spec/template/spec", "Always");
            default_containers(obj, "/spec/template/spec");
        }
        ("apps", "ReplicaSet") => {
            set_default(obj, "/spec/replicas", json!(1));
            default_pod_spec(obj, "/spec/template/spec", "Always");
            default_containers(obj, "/spec/template/spec");
        }
        ("batch", "Job") => {
            set_default(obj, "/spec/backoffLimit", json!(6));
            set_default(obj, "/spec/completions", json!(1));
            set_default(obj, "/spec/parallelism", json!(1));
            default_pod_spec(obj, "/spec/template/spec", "Never");
            default_containers(obj, "/spec/template/spec");
        }
        ("batch", "CronJob") => {
            set_default(obj, "/spec/concurrencyPolicy", json!("Allow"));
            set_default(obj, "/spec/suspend", json!(false));
            set_default(obj, "/spec/successfulJobsHistoryLimit", json!(3));
            set_default(obj, "/spec/failedJobsHistoryLimit", json!(1));
        }
        ("", "Secret") => {
            set_default(obj, "/type", json!("Opaque"));
            // stringData is write-only: merged into data, base64-encoded.
            if let Some(Value::Object(sd)) =
                obj.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                for (k, v) in sd {
                    let enc = base64::engine::general_purpose::STANDARD
                        .encode(v.as_str().unwrap_or_default());
                    obj["data"][k] = json!(enc);
                }
            }
        }
        _ => {}
    }
}

/// Whether writes to this kind bump `metadata.generation` on content changes.
pub fn has_spec_generation(kind: &str) -> bool {
    !matches!(
        kind,
        "ConfigMap" | "Secret" | "Event" | "Endpoints" | "ServiceAccount" | "Lease" | "Namespace"
    )
}
