//! Runs each Pod's first container as a local process: the configured binary
//! stands in for `command[0]`, the rest of `command` plus `args` are passed
//! through, env is resolved from values, ConfigMaps, Secrets and field refs.
//! Each pod goes the way a kubelet takes it (`runner`): scheduling waits
//! for its claims, volumes are prepared (`volumes`), the container gets its own
//! filesystem (`isolation`) and the in-cluster environment, and its status
//! reports exit codes, termination messages and the restart back-off.

use super::{KubeletOptions, meta};
use crate::state::State;
use crate::store::Gr;
use base64::Engine;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub(crate) const MANAGER: &str = "harness-kubelet";

struct Running {
    kill: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Tracks the processes of running pods by uid.
pub struct Kubelet {
    st: State,
    o: Arc<KubeletOptions>,
    running: HashMap<String, Running>,
    /// Whether containers get mount namespaces (see `isolation::probe`).
    isolated: bool,
    groups: Arc<super::groups::Groups>,
}

impl Kubelet {
    /// A kubelet with nothing running yet.
    pub fn new(st: State, o: KubeletOptions, groups: Arc<super::groups::Groups>) -> Self {
        let isolated = super::isolation_available();
        Self {
            st,
            o: Arc::new(o),
            running: HashMap::new(),
            isolated,
            groups,
        }
    }

    /// Starts processes for new pods and kills those of deleted pods.
    pub fn reconcile(&mut self) {
        let pods = super::list(&self.st, "", "pods");
        let live: HashMap<String, &Value> = pods
            .iter()
            .filter(|p| meta(p, "deletionTimestamp").is_empty())
            .map(|p| (meta(p, "uid").to_string(), p))
            .collect();
        // A deleted pod's task is stopped (SIGTERM, then SIGKILL after the
        // grace period) and kept until its container is gone.
        self.running.retain(|uid, r| {
            if !live.contains_key(uid) {
                r.kill.send_replace(true);
            }
            !r.task.is_finished()
        });
        self.finish_terminating(&pods);
        for (uid, p) in &live {
            let terminal = matches!(super::phase(p), "Succeeded" | "Failed");
            let started = p.pointer("/status/startTime").is_some();
            // A pod with a startTime but no task was run by a task that has
            // finished (terminal) or by an earlier kubelet: leave it alone.
            if self.running.contains_key(uid) || terminal || started {
                continue;
            }
            let (kill, rx) = watch::channel(false);
            let ctx = super::runner::PodCtx::new(
                self.st.clone(),
                self.o.clone(),
                self.isolated,
                self.groups.clone(),
                (*p).clone(),
            );
            let task = tokio::spawn(super::runner::run_pod(ctx, rx));
            self.running.insert(uid.clone(), Running { kill, task });
        }
        self.sweep(&live);
    }

    /// Deletes the terminating pods whose containers have stopped, as a
    /// kubelet does once the grace period's work is done.
    fn finish_terminating(&self, pods: &[Value]) {
        for p in pods {
            let uid = meta(p, "uid");
            if meta(p, "deletionTimestamp").is_empty() || self.running.contains_key(uid) {
                continue;
            }
            let Some(t) = super::target(&self.st, "", "Pod", meta(p, "namespace"), meta(p, "name"))
            else {
                continue;
            };
            let now = crate::state::DeleteOpts {
                precondition_uid: Some(uid.to_string()),
                grace_period_seconds: Some(0),
                ..Default::default()
            };
            if let Err(e) = crate::ops::delete(&self.st, &t, &now) {
                tracing::debug!(error = %e, pod = %meta(p, "name"), "deleting a terminated pod");
            }
        }
    }

    /// Removes the state of pods that are gone (their emptyDirs, projected
    /// files and container roots); claims' volumes live elsewhere.
    fn sweep(&self, live: &HashMap<String, &Value>) {
        let dir = self.o.data_dir.join("pods");
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let uid = e.file_name().to_string_lossy().into_owned();
            if !live.contains_key(&uid)
                && !self.running.contains_key(&uid)
                && let Err(err) = std::fs::remove_dir_all(e.path())
            {
                tracing::debug!(error = %err, %uid, "cleaning pod state");
            }
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        for r in self.running.values() {
            r.kill.send_replace(true);
        }
    }
}

fn decode_b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Reads `key` of a ConfigMap or Secret; `Ok(None)` if optional and missing.
fn lookup(
    st: &State,
    ns: &str,
    secret: bool,
    r: &Value,
    key: Option<&str>,
) -> Result<Option<Vec<(String, String)>>, String> {
    let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
    let optional = r.get("optional").and_then(Value::as_bool).unwrap_or(false);
    let plural = if secret { "secrets" } else { "configmaps" };
    let Some(obj) = st.store.get(&Gr::new("", plural), ns, name) else {
        return if optional {
            Ok(None)
        } else {
            Err(format!("{plural} \"{name}\" not found"))
        };
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (k, v) in obj
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let s = v.as_str().unwrap_or_default();
        pairs.push((
            k.clone(),
            if secret { decode_b64(s) } else { s.to_string() },
        ));
    }
    match key {
        None => Ok(Some(pairs)),
        Some(k) => match pairs.into_iter().find(|(pk, _)| pk == k) {
            Some(p) => Ok(Some(vec![p])),
            None if optional => Ok(None),
            None => Err(format!("couldn't find key {k} in {plural} {ns}/{name}")),
        },
    }
}

/// The value of a downward-API field path of `pod`.
pub(crate) fn field_ref(pod: &Value, path: &str) -> String {
    if let Some(rest) = path
        .strip_prefix("metadata.labels['")
        .and_then(|r| r.strip_suffix("']"))
    {
        return pod
            .pointer(&format!("/metadata/labels/{rest}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into();
    }
    match path {
        "status.podIP" => pod
            .pointer("/status/podIP")
            .and_then(Value::as_str)
            .unwrap_or("127.0.0.1")
            .into(),
        "status.hostIP" => "127.0.0.1".into(),
        "spec.nodeName" => "localhost".into(),
        p => pod
            .pointer(&format!("/{}", p.replace('.', "/")))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
    }
}

/// Resolves a container's environment; `Err` is a CreateContainerConfigError message.
pub fn resolve_env(st: &State, pod: &Value, c: &Value) -> Result<Vec<(String, String)>, String> {
    let ns = meta(pod, "namespace");
    let mut env = Vec::new();
    for ef in c
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = ef.get("prefix").and_then(Value::as_str).unwrap_or_default();
        let found = match (ef.get("configMapRef"), ef.get("secretRef")) {
            (Some(r), _) => lookup(st, ns, false, r, None)?,
            (_, Some(r)) => lookup(st, ns, true, r, None)?,
            _ => None,
        };
        env.extend(
            found
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (format!("{prefix}{k}"), v)),
        );
    }
    for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(v) = e.get("value").and_then(Value::as_str) {
            env.push((name, v.to_string()));
            continue;
        }
        let Some(from) = e.get("valueFrom") else {
            env.push((name, String::new()));
            continue;
        };
        let value = if let Some(r) = from.get("configMapKeyRef") {
            lookup(st, ns, false, r, r.get("key").and_then(Value::as_str))?
        } else if let Some(r) = from.get("secretKeyRef") {
            lookup(st, ns, true, r, r.get("key").and_then(Value::as_str))?
        } else {
            from.get("fieldRef").map(|r| {
                let path = r
                    .get("fieldPath")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                vec![(name.clone(), field_ref(pod, path))]
            })
        };
        if let Some((_, v)) = value.and_then(|v| v.into_iter().next()) {
            env.push((name, v));
        }
    }
    Ok(env)
}
