//! The admission plugins a real API server runs on create that the tests'
//! objects depend on: ServiceAccount (a pod's account must exist; its
//! token, the CA and the namespace are projected into every container
//! unless `automountServiceAccountToken` is false) and DefaultStorageClass
//! (a claim without `storageClassName` gets the default class).

use crate::error::{ApiError, ApiResult};
use crate::state::{State, Target};
use crate::store::Gr;
use serde_json::{Value, json};

/// Where kubelets mount a pod's ServiceAccount credentials.
pub const TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The ConfigMap with the cluster's CA in every namespace.
pub const ROOT_CA: &str = "kube-root-ca.crt";
/// Marks the default StorageClass.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// Runs the create-time admission plugins on `obj`.
pub fn admit_create(st: &State, t: &Target, obj: &mut Value) -> ApiResult<()> {
    match (t.rt.group.as_str(), t.rt.kind.as_str()) {
        ("", "Pod") => service_account(st, t, obj),
        ("", "PersistentVolumeClaim") => {
            default_storage_class(st, obj);
            Ok(())
        }
        _ => Ok(()),
    }
}

fn service_account(st: &State, t: &Target, pod: &mut Value) -> ApiResult<()> {
    let name = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    pod["spec"]["serviceAccountName"] = json!(name);
    pod["spec"]["serviceAccount"] = json!(name);
    let Some(sa) = st
        .store
        .get(&Gr::new("", "serviceaccounts"), &t.namespace, &name)
    else {
        return Err(ApiError::Forbidden {
            group: String::new(),
            resource: "pods".into(),
            name: t.name.clone(),
            message: format!(
                "error looking up service account {}/{name}: serviceaccount \"{name}\" not found",
                t.namespace
            ),
        });
    };
    let automount = pod
        .pointer("/spec/automountServiceAccountToken")
        .or_else(|| sa.get("automountServiceAccountToken"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if !automount {
        return Ok(());
    }
    let mounted = |c: &Value| {
        c.get("volumeMounts")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|m| m["mountPath"] == TOKEN_MOUNT))
    };
    let volume = format!("kube-api-access-{}", crate::ops::random_suffix());
    let mut added = false;
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = pod.pointer_mut(&format!("/spec/{list}")) {
            for c in cs.iter_mut().filter(|c| !mounted(c)) {
                let mount = json!({ "name": volume, "mountPath": TOKEN_MOUNT, "readOnly": true });
                match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                    Some(m) => m.push(mount),
                    None => c["volumeMounts"] = json!([mount]),
                }
                added = true;
            }
        }
    }
    if added {
        let v = json!({ "name": volume, "projected": { "defaultMode": 420, "sources": [
            { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
            { "configMap": { "name": ROOT_CA, "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
            { "downwardAPI": { "items": [{ "path": "namespace",
                "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" } }] } },
        ]}});
        match pod
            .pointer_mut("/spec/volumes")
            .and_then(Value::as_array_mut)
        {
            Some(vs) => vs.push(v),
            None => pod["spec"]["volumes"] = json!([v]),
        }
    }
    Ok(())
}

fn default_storage_class(st: &State, pvc: &mut Value) {
    if pvc
        .pointer("/spec/storageClassName")
        .is_some_and(|c| !c.is_null())
    {
        return;
    }
    let default = st
        .store
        .list(&Gr::new("storage.k8s.io", "storageclasses"), None)
        .0
        .into_iter()
        .find(|c| {
            c.pointer(&format!(
                "/metadata/annotations/{}",
                DEFAULT_CLASS.replace('/', "~1")
            )) == Some(&json!("true"))
        });
    if let Some(c) = default {
        pvc["spec"]["storageClassName"] = c["metadata"]["name"].clone();
    }
}
