//! Storage as a cluster with a local-path provisioner has it: the default
//! StorageClass `standard`, a provisioner that gives each claim of that
//! class a PersistentVolume backed by a directory of its own (a `local`
//! volume, as a disk is: the kubelet gives its root to the pod's
//! `fsGroup`; deleted with the volume when its claim goes), and the binder that binds
//! claims to matching PersistentVolumes (static ones included) and marks
//! volumes of deleted claims Released.

use super::{meta, opts, target};
use crate::ops;
use crate::patch::PatchType;
use crate::state::{DeleteOpts, State};
use serde_json::{Value, json};
use std::path::Path;

/// The provisioner of the default class.
pub const PROVISIONER: &str = "harness.local/hostpath";
const MANAGER: &str = "persistentvolume-binder";

/// Creates the default StorageClass.
pub fn seed(st: &State) {
    let Some(t) = target(st, "storage.k8s.io", "StorageClass", "", "") else {
        return;
    };
    let class = json!({
        "metadata": { "name": "standard", "annotations": { crate::admission::DEFAULT_CLASS: "true" } },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    });
    let _ = ops::create(st, &t, class, &opts("kube-apiserver"));
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

/// Bytes of a quantity (`1Gi`, `500M`, `100`), roughly as Kubernetes reads it.
pub fn quantity(q: &str) -> Option<u128> {
    let q = q.trim();
    let split = q.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(q.len());
    let (num, unit) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        _ => return None,
    };
    Some((n * mult) as u128)
}

fn modes(v: &Value, p: &str) -> Vec<String> {
    v.pointer(p)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn fits(pv: &Value, pvc: &Value) -> bool {
    let claim_ref = pv.pointer("/spec/claimRef");
    let reserved_for_other = claim_ref.is_some_and(|r| {
        s(r, "/name") != meta(pvc, "name") || s(r, "/namespace") != meta(pvc, "namespace")
    });
    let requested = quantity(s(pvc, "/spec/resources/requests/storage")).unwrap_or(0);
    let capacity = quantity(s(pv, "/spec/capacity/storage")).unwrap_or(0);
    let wanted = modes(pvc, "/spec/accessModes");
    let offered = modes(pv, "/spec/accessModes");
    // A claim that names its volume binds that one alone.
    let named = s(pvc, "/spec/volumeName");
    s(pv, "/status/phase") == "Available"
        && (named.is_empty() || named == meta(pv, "name"))
        && !reserved_for_other
        && s(pv, "/spec/storageClassName") == s(pvc, "/spec/storageClassName")
        && capacity >= requested
        && wanted.iter().all(|m| offered.contains(m))
}

fn patch(st: &State, kind: &str, ns: &str, name: &str, sub: &str, body: Value) {
    if let Some(mut t) = target(st, "", kind, ns, name) {
        t.sub = sub.into();
        let body = body.to_string();
        if let Err(e) = ops::patch(st, &t, PatchType::Merge, body.as_bytes(), &opts(MANAGER)) {
            tracing::debug!(error = %e, name, "storage update failed");
        }
    }
}

fn bind(st: &State, pv: &Value, pvc: &Value) {
    let (ns, claim, pv_name) = (meta(pvc, "namespace"), meta(pvc, "name"), meta(pv, "name"));
    let claim_ref = json!({ "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns,
        "name": claim, "uid": meta(pvc, "uid") });
    patch(
        st,
        "PersistentVolume",
        "",
        pv_name,
        "",
        json!({ "spec": { "claimRef": claim_ref } }),
    );
    patch(
        st,
        "PersistentVolume",
        "",
        pv_name,
        "status",
        json!({ "status": { "phase": "Bound" } }),
    );
    patch(
        st,
        "PersistentVolumeClaim",
        ns,
        claim,
        "",
        json!({
            "metadata": { "annotations": { "pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes" } },
            "spec": { "volumeName": pv_name },
        }),
    );
    patch(
        st,
        "PersistentVolumeClaim",
        ns,
        claim,
        "status",
        json!({ "status": {
            "phase": "Bound",
            "accessModes": pv.pointer("/spec/accessModes").cloned().unwrap_or(json!([])),
            "capacity": pv.pointer("/spec/capacity").cloned().unwrap_or(json!({})),
        }}),
    );
}

fn provision(st: &State, data_dir: &Path, pvc: &Value, class: &Value) -> Option<Value> {
    let name = format!("pvc-{}", meta(pvc, "uid"));
    let dir = data_dir.join("volumes").join(&name);
    std::fs::create_dir_all(&dir).ok()?;
    use std::os::unix::fs::PermissionsExt;
    // A fresh filesystem's root: root's, 0755 (an EBS, Azure Disk or GCE
    // PD volume's is); a pod that is not root writes there only through
    // its fsGroup.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).ok()?;
    let pv = json!({
        "metadata": { "name": name, "annotations": { "pv.kubernetes.io/provisioned-by": PROVISIONER } },
        "spec": {
            "capacity": { "storage": s(pvc, "/spec/resources/requests/storage") },
            "accessModes": pvc.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
            "persistentVolumeReclaimPolicy": class.get("reclaimPolicy").cloned().unwrap_or(json!("Delete")),
            "storageClassName": meta(class, "name"),
            "local": { "path": dir.display().to_string() },
            "nodeAffinity": { "required": { "nodeSelectorTerms": [{ "matchExpressions": [{
                "key": "kubernetes.io/hostname", "operator": "In", "values": ["localhost"] }] }] } },
            "claimRef": { "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta(pvc, "namespace"),
                "name": meta(pvc, "name"), "uid": meta(pvc, "uid") },
        },
    });
    let t = target(st, "", "PersistentVolume", "", "")?;
    ops::create(st, &t, pv, &opts("harness-provisioner")).ok()
}

/// Binds and provisions pending claims; releases or deletes the volumes of
/// deleted claims.
pub fn reconcile(st: &State, data_dir: &Path) {
    let classes = super::list(st, "storage.k8s.io", "storageclasses");
    let mut pvs = super::list(st, "", "persistentvolumes");
    for pvc in super::list(st, "", "persistentvolumeclaims") {
        if s(&pvc, "/status/phase") == "Bound" || !meta(&pvc, "deletionTimestamp").is_empty() {
            continue;
        }
        let static_pv = pvs.iter().find(|pv| fits(pv, &pvc)).cloned();
        let pv = match static_pv {
            Some(pv) => Some(pv),
            None => classes
                .iter()
                .find(|c| {
                    meta(c, "name") == s(&pvc, "/spec/storageClassName")
                        && s(c, "/provisioner") == PROVISIONER
                })
                .and_then(|class| provision(st, data_dir, &pvc, class)),
        };
        if let Some(pv) = pv {
            bind(st, &pv, &pvc);
            pvs = super::list(st, "", "persistentvolumes");
        }
    }
    for pv in pvs {
        let Some(r) = pv.pointer("/spec/claimRef") else {
            continue;
        };
        let claim = st.store.get(
            &crate::store::Gr::new("", "persistentvolumeclaims"),
            s(r, "/namespace"),
            s(r, "/name"),
        );
        let claim_alive = claim.is_some_and(|c| meta(&c, "uid") == s(r, "/uid"));
        if claim_alive || s(&pv, "/status/phase") != "Bound" {
            continue;
        }
        let ours = s(
            &pv,
            "/metadata/annotations/pv.kubernetes.io~1provisioned-by",
        ) == PROVISIONER;
        if s(&pv, "/spec/persistentVolumeReclaimPolicy") == "Delete" && ours {
            let _ = std::fs::remove_dir_all(s(&pv, "/spec/local/path"));
            if let Some(t) = target(st, "", "PersistentVolume", "", meta(&pv, "name")) {
                let _ = ops::delete(st, &t, &DeleteOpts::default());
            }
        } else {
            patch(
                st,
                "PersistentVolume",
                "",
                meta(&pv, "name"),
                "status",
                json!({ "status": { "phase": "Released" } }),
            );
        }
    }
}
