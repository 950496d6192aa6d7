//! Runs each Pod's first container as a local process: the configured binary
//! stands in for `command[0]`, the rest of `command` plus `args` are passed
//! through, env is resolved from values, ConfigMaps, Secrets and field refs.
//! Reports phase, conditions and containerStatuses, restarts per
//! restartPolicy and kills the process when the Pod is deleted.

use super::{KubeletOptions, meta, opts, patch_status, target};
use crate::ops;
use crate::patch::PatchType;
use crate::state::State;
use crate::store::Gr;
use base64::Engine;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const MANAGER: &str = "harness-kubelet";

struct Running {
    kill: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Tracks the processes of running pods by uid.
pub struct Kubelet {
    st: State,
    o: KubeletOptions,
    running: HashMap<String, Running>,
}

impl Kubelet {
    /// A kubelet with nothing running yet.
    pub fn new(st: State, o: KubeletOptions) -> Self {
        Self {
            st,
            o,
            running: HashMap::new(),
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
        self.running.retain(|uid, r| {
            if !live.contains_key(uid) {
                r.kill.send_replace(true);
                return false;
            }
            !r.task.is_finished()
        });
        for (uid, p) in live {
            let terminal = matches!(super::phase(p), "Succeeded" | "Failed");
            let started = p.pointer("/status/startTime").is_some();
            // A pod with a startTime but no task was run by a task that has
            // finished (terminal) or by an earlier kubelet: leave it alone.
            if self.running.contains_key(&uid) || terminal || started {
                continue;
            }
            let (kill, rx) = watch::channel(false);
            let task = tokio::spawn(run_pod(self.st.clone(), self.o.clone(), p.clone(), rx));
            self.running.insert(uid, Running { kill, task });
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

fn field_ref(pod: &Value, path: &str) -> String {
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
        "status.podIP" | "status.hostIP" => "127.0.0.1".into(),
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

fn container_status(
    c: &Value,
    restarts: u32,
    state: Value,
    last: Option<Value>,
    ready: bool,
) -> Value {
    let mut s = json!({
        "name": c.get("name").cloned().unwrap_or(json!("")),
        "image": c.get("image").cloned().unwrap_or(json!("")),
        "imageID": "",
        "ready": ready,
        "started": ready,
        "restartCount": restarts,
        "state": state,
        "lastState": last.unwrap_or(json!({})),
    });
    if ready {
        s["containerID"] = json!("harness://local");
    }
    s
}

fn pod_status(
    st: &State,
    pod: &Value,
    phase: &str,
    cs: Value,
    ready: bool,
    started: &str,
) -> Value {
    let now = st.clock.now_rfc3339();
    json!({
        "phase": phase,
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "podIPs": [{ "ip": "127.0.0.1" }],
        "startTime": started,
        "conditions": super::conditions(pod, &[
            ("PodScheduled", true, ""),
            ("Initialized", true, ""),
            ("ContainersReady", ready, ""),
            ("Ready", ready, ""),
        ], &now),
        "containerStatuses": [cs],
    })
}

fn signal(child: &tokio::process::Child, sig: i32) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) on a pid we spawned and still own (not yet reaped).
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

async fn run_pod(st: State, o: KubeletOptions, pod: Value, mut kill: watch::Receiver<bool>) {
    let (ns, name) = (
        meta(&pod, "namespace").to_string(),
        meta(&pod, "name").to_string(),
    );
    let Some(t) = target(&st, "", "Pod", &ns, &name) else {
        return;
    };
    if pod.pointer("/spec/nodeName").is_none() {
        let bind = json!({ "spec": { "nodeName": "localhost" } }).to_string();
        let _ = ops::patch(&st, &t, PatchType::Merge, bind.as_bytes(), &opts(MANAGER));
    }
    let c = pod
        .pointer("/spec/containers/0")
        .cloned()
        .unwrap_or(json!({}));
    let policy = pod
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always")
        .to_string();
    let grace = pod
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(30)
        .min(10);
    let started = st.clock.now_rfc3339();
    let strs = |k: &str| -> Vec<String> {
        c.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut argv: Vec<String> = strs("command").into_iter().skip(1).collect();
    argv.extend(strs("args"));
    let log = o.log_dir.join(format!("{ns}_{name}.log"));
    let mut restarts = 0u32;
    let mut last: Option<Value> = None;
    loop {
        let env = match resolve_env(&st, &pod, &c) {
            Ok(e) => e,
            Err(msg) => {
                let state = json!({ "waiting": { "reason": "CreateContainerConfigError", "message": msg } });
                let cs = container_status(&c, restarts, state, last.clone(), false);
                let current = st.store.get(&t.gr(), &ns, &name).unwrap_or(pod.clone());
                patch_status(
                    &st,
                    &t,
                    pod_status(&st, &current, "Pending", cs, false, &started),
                    MANAGER,
                );
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(300)) => continue,
                    _ = kill.changed() => return,
                }
            }
        };
        let open = |f: &std::path::Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
        };
        let (Ok(out), Ok(err)) = (open(&log), open(&log)) else {
            return;
        };
        let mut cmd = tokio::process::Command::new(&o.binary);
        cmd.args(&argv)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOSTNAME", &name)
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(ch) => ch,
            Err(e) => {
                let state = json!({ "terminated": { "exitCode": 128, "reason": "StartError", "message": e.to_string() } });
                let cs = container_status(&c, restarts, state, last.clone(), false);
                let current = st.store.get(&t.gr(), &ns, &name).unwrap_or(pod.clone());
                patch_status(
                    &st,
                    &t,
                    pod_status(&st, &current, "Failed", cs, false, &started),
                    MANAGER,
                );
                return;
            }
        };
        let since = st.clock.now_rfc3339();
        let state = json!({ "running": { "startedAt": since } });
        let cs = container_status(&c, restarts, state, last.clone(), true);
        let current = st.store.get(&t.gr(), &ns, &name).unwrap_or(pod.clone());
        patch_status(
            &st,
            &t,
            pod_status(&st, &current, "Running", cs, true, &started),
            MANAGER,
        );
        let code = tokio::select! {
            r = child.wait() => r.ok().and_then(|s| s.code()).unwrap_or(137),
            _ = kill.changed() => {
                signal(&child, libc::SIGTERM);
                if tokio::time::timeout(Duration::from_secs(grace), child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
                return;
            }
        };
        let finished = st.clock.now_rfc3339();
        let reason = if code == 0 { "Completed" } else { "Error" };
        let terminated = json!({ "terminated": { "exitCode": code, "reason": reason, "startedAt": since, "finishedAt": finished } });
        let restart = match policy.as_str() {
            "Always" => true,
            "OnFailure" => code != 0,
            _ => false,
        };
        let current = st.store.get(&t.gr(), &ns, &name).unwrap_or(pod.clone());
        if !restart {
            let cs = container_status(&c, restarts, terminated, last.clone(), false);
            let phase = if code == 0 { "Succeeded" } else { "Failed" };
            patch_status(
                &st,
                &t,
                pod_status(&st, &current, phase, cs, false, &started),
                MANAGER,
            );
            return;
        }
        restarts += 1;
        last = Some(terminated);
        let waiting = json!({ "waiting": { "reason": "CrashLoopBackOff" } });
        let cs = container_status(&c, restarts, waiting, last.clone(), false);
        patch_status(
            &st,
            &t,
            pod_status(&st, &current, "Running", cs, false, &started),
            MANAGER,
        );
        let backoff = Duration::from_millis(100u64.saturating_mul(1 << restarts.min(5)))
            .min(Duration::from_secs(2));
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = kill.changed() => return,
        }
    }
}
