//! Harness kubelet: runs Pods as local processes of a configured binary and
//! drives minimal Deployment/ReplicaSet/Job/CronJob controllers. Everything
//! runs in-process against the store, reconciling on every relevant change,
//! on fake-clock advances and on a short real-time tick.

mod cron;
pub mod cronjobs;
pub mod deployments;
pub mod groups;
pub mod identity;
pub mod isolation;
pub mod jobs;
pub mod network;
pub mod ownership;
pub mod pods;
pub mod runner;
pub mod storage;
pub mod volumes;

use crate::ops;
use crate::patch::PatchType;
use crate::state::{State, Target, WriteOpts};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Options of the harness kubelet.
#[derive(Debug, Clone)]
pub struct KubeletOptions {
    /// Binary that replaces the first element of every container's command.
    pub binary: PathBuf,
    /// Where container stdout/stderr go (served by `pods/log`).
    pub log_dir: PathBuf,
    /// Pods' state (emptyDirs, projected files, container roots) and the
    /// provisioner's volumes.
    pub data_dir: PathBuf,
    /// The restart back-off: the delay before the second restart, doubled
    /// after each failure up to `backoff_max` (the kubelet's 10 s and 5 min).
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Gives each pod a network of its own (`network`): a namespace, a
    /// veth pair and its own address; with mount namespaces only.
    pub pod_network: bool,
    /// The host's 127.0.0.1 ports pods reach as `network::HOST_NAME`
    /// (the API server's is always reachable).
    pub host_ports: network::HostPorts,
}

impl KubeletOptions {
    /// Runs `binary`, logs in `log_dir`, state in `<log_dir>/../kubelet-data`
    /// (a sibling of the log directory), and the kubelet's back-off.
    pub fn new(binary: PathBuf, log_dir: PathBuf) -> Self {
        let data_dir = log_dir.with_file_name(format!(
            "{}-kubelet-data",
            log_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
        Self {
            binary,
            log_dir,
            data_dir,
            backoff_initial: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            pod_network: false,
            host_ports: network::HostPorts::default(),
        }
    }
}

/// Whether containers get mount namespaces. Checked once per process; when
/// they cannot (not root), the kubelet says so once on stderr and runs pods
/// as plain processes: no volumes at their mount paths, no read-only root,
/// the ServiceAccount token through a `KUBECONFIG` instead of its files.
pub fn isolation_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| match isolation::probe() {
        Ok(()) => true,
        Err(why) => {
            eprintln!(
                "harness kubelet: no mount namespaces ({why}): pods run as plain processes, \
                 without their volumes, read-only root or token files; see docs/testing-apiserver.md"
            );
            false
        }
    })
}

/// Starts the kubelet and the workload controllers; the groups are those
/// of the containers it starts, for the server to stop.
pub fn start(
    st: State,
    o: KubeletOptions,
) -> (Vec<JoinHandle<()>>, std::sync::Arc<groups::Groups>) {
    let _ = std::fs::create_dir_all(&o.log_dir);
    let _ = std::fs::create_dir_all(&o.data_dir);
    let data_dir = o.data_dir.clone();
    let groups = std::sync::Arc::new(groups::Groups::new());
    let kubelet = pods::Kubelet::new(st.clone(), o, groups.clone());
    (
        vec![tokio::spawn(reconcile_loop(st, kubelet, data_dir))],
        groups,
    )
}

async fn reconcile_loop(st: State, mut kubelet: pods::Kubelet, data_dir: PathBuf) {
    let mut events = st.store.subscribe();
    let mut clock = st.clock.changed();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        storage::reconcile(&st, &data_dir);
        deployments::reconcile(&st);
        jobs::reconcile(&st);
        cronjobs::reconcile(&st);
        kubelet.reconcile();
        tokio::select! {
            r = events.recv() => {
                if matches!(r, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                    return;
                }
                while events.try_recv().is_ok() {}
            }
            _ = clock.changed() => {}
            _ = tick.tick() => {}
        }
    }
}

/// A target for a built-in kind.
pub(crate) fn target(st: &State, group: &str, kind: &str, ns: &str, name: &str) -> Option<Target> {
    let rt = st.registry.by_kind(group, kind)?;
    let version = rt.versions.first()?.name.clone();
    Some(Target {
        rt,
        version,
        namespace: ns.into(),
        name: name.into(),
        sub: String::new(),
    })
}

/// Objects of a built-in kind, all namespaces.
pub(crate) fn list(st: &State, group: &str, plural: &str) -> Vec<Value> {
    st.store.list(&crate::store::Gr::new(group, plural), None).0
}

pub(crate) fn meta<'a>(o: &'a Value, f: &str) -> &'a str {
    o.pointer(&format!("/metadata/{f}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether `o` has a controller ownerReference to `uid`.
pub(crate) fn owned_by(o: &Value, uid: &str) -> bool {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
        })
}

/// A controller ownerReference to `owner`.
pub(crate) fn owner_ref(owner: &Value, api_version: &str, kind: &str) -> Value {
    json!([{
        "apiVersion": api_version, "kind": kind,
        "name": meta(owner, "name"), "uid": meta(owner, "uid"),
        "controller": true, "blockOwnerDeletion": true,
    }])
}

pub(crate) fn opts(manager: &str) -> WriteOpts {
    WriteOpts {
        manager: manager.into(),
        ..Default::default()
    }
}

/// Merge-patches the status subresource (a no-op write when nothing changed).
pub(crate) fn patch_status(st: &State, t: &Target, status: Value, manager: &str) {
    let mut t = t.clone();
    t.sub = "status".into();
    let body = json!({ "status": status }).to_string();
    if let Err(e) = ops::patch(st, &t, PatchType::Merge, body.as_bytes(), &opts(manager)) {
        tracing::debug!(error = %e, name = %t.name, "status update failed");
    }
}

/// A condition list that keeps `lastTransitionTime` when a status is unchanged,
/// so repeated reconciles do not write.
pub(crate) fn conditions(old: &Value, new: &[(&str, bool, &str)], now: &str) -> Value {
    let olds = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let out: Vec<Value> = new
        .iter()
        .map(|(ty, ok, reason)| {
            let status = if *ok { "True" } else { "False" };
            let prev = olds
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
            let since = match prev {
                Some(p) if p.get("status").and_then(Value::as_str) == Some(status) => {
                    p.get("lastTransitionTime").cloned().unwrap_or(json!(now))
                }
                _ => json!(now),
            };
            json!({ "type": ty, "status": status, "reason": reason, "lastTransitionTime": since })
        })
        .collect();
    Value::Array(out)
}

/// Pods (not terminating) controlled by `uid`.
pub(crate) fn pods_of(st: &State, uid: &str) -> Vec<Value> {
    list(st, "", "pods")
        .into_iter()
        .filter(|p| owned_by(p, uid))
        .collect()
}

pub(crate) fn phase(p: &Value) -> &str {
    p.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending")
}

pub(crate) fn is_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Creates a pod from a template, owned by `owner`.
pub(crate) fn create_pod(
    st: &State,
    ns: &str,
    template: &Value,
    prefix: &str,
    owner_refs: Value,
    extra_labels: Value,
) -> Result<(), String> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": template.get("metadata").cloned().unwrap_or(json!({})),
        "spec": template.get("spec").cloned().unwrap_or(json!({})),
    });
    pod["metadata"]["generateName"] = json!(format!("{prefix}-"));
    pod["metadata"]["ownerReferences"] = owner_refs;
    if let Some(m) = extra_labels.as_object() {
        for (k, v) in m {
            pod["metadata"]["labels"][k] = v.clone();
        }
    }
    if let Some(md) = pod["metadata"].as_object_mut() {
        md.remove("name");
        md.remove("creationTimestamp");
    }
    let Some(t) = target(st, "", "Pod", ns, "") else {
        return Err("the Pod resource is not served".to_string());
    };
    ops::create(st, &t, pod, &opts("harness-controller"))
        .map(|_| ())
        .map_err(|e| {
            tracing::warn!(error = %e, "creating pod failed");
            e.to_string()
        })
}

/// A `ReplicaFailure` condition (reason `FailedCreate`) carrying the API
/// server's refusal, as the ReplicaSet and Deployment controllers set it.
pub(crate) fn replica_failure(old: &Value, message: &str, now: &str) -> Value {
    let since = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("ReplicaFailure"))
        })
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or(json!(now));
    json!({
        "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
        "message": message, "lastTransitionTime": since,
    })
}
