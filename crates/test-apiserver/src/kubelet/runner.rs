//! One pod's life, as a kubelet and the scheduler take it: scheduling
//! (kept `Pending` with `PodScheduled=False` while a claim is missing or
//! unbound), volume set-up (`ContainerCreating` and a FailedMount Event
//! while a Secret or ConfigMap is missing), the container's environment
//! (`CreateContainerConfigError`), then runs of the container with its
//! exit code and termination message reported, restarts per
//! `restartPolicy` with the kubelet's back-off (`CrashLoopBackOff`), and
//! SIGTERM then SIGKILL to its process group when the pod is deleted.

use super::groups::Groups;
use super::identity::Identity;
use super::isolation::{self, ContainerFs, Mount};
use super::network;
use super::pods::{MANAGER, resolve_env};
use super::volumes::{self, Prepared};
use super::{KubeletOptions, meta, opts, patch_status, target};
use crate::ops;
use crate::patch::PatchType;
use crate::state::{State, Target};
use crate::store::Gr;
use serde_json::{Value, json};
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Most of a termination message file that is reported.
const MESSAGE_LIMIT: usize = 4096;
/// The log tail `FallbackToLogsOnError` reports: at most this many bytes...
const LOG_TAIL_BYTES: usize = 2048;
/// ...and lines.
const LOG_TAIL_LINES: usize = 80;

/// What a pod's task works with.
pub struct PodCtx {
    st: State,
    o: Arc<KubeletOptions>,
    isolated: bool,
    groups: Arc<Groups>,
    pod: Value,
    t: Target,
    ns: String,
    name: String,
    container: Value,
    started: String,
    /// The pod's address once it has a network of its own.
    pod_ip: std::sync::OnceLock<String>,
}

impl PodCtx {
    /// The context of `pod`'s task.
    pub fn new(
        st: State,
        o: Arc<KubeletOptions>,
        isolated: bool,
        groups: Arc<Groups>,
        pod: Value,
    ) -> Option<Self> {
        let (ns, name) = (
            meta(&pod, "namespace").to_string(),
            meta(&pod, "name").to_string(),
        );
        let t = target(&st, "", "Pod", &ns, &name)?;
        let container = pod
            .pointer("/spec/containers/0")
            .cloned()
            .unwrap_or(json!({}));
        let started = st.clock.now_rfc3339();
        Some(Self {
            st,
            o,
            isolated,
            groups,
            pod,
            t,
            ns,
            name,
            container,
            started,
            pod_ip: std::sync::OnceLock::new(),
        })
    }

    fn current(&self) -> Value {
        self.st
            .store
            .get(&self.t.gr(), &self.ns, &self.name)
            .unwrap_or_else(|| self.pod.clone())
    }

    fn ip(&self) -> &str {
        self.pod_ip.get().map_or("127.0.0.1", String::as_str)
    }

    fn cname(&self) -> &str {
        self.container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("container")
    }

    fn container_status(
        &self,
        restarts: u32,
        state: Value,
        last: &Option<Value>,
        ready: bool,
    ) -> Value {
        let mut s = json!({
            "name": self.cname(),
            "image": self.container.get("image").cloned().unwrap_or(json!("")),
            "imageID": "",
            "ready": ready,
            "started": ready,
            "restartCount": restarts,
            "state": state,
            "lastState": last.clone().unwrap_or(json!({})),
        });
        if ready || state.get("terminated").is_some() {
            s["containerID"] = json!(format!("harness://{}", meta(&self.pod, "uid")));
        }
        s
    }

    /// Reports the pod scheduled and started, in `phase`, with one
    /// container status.
    fn report(&self, phase: &str, cs: Value, ready: bool) {
        let now = self.st.clock.now_rfc3339();
        let current = self.current();
        let status = json!({
            "phase": phase,
            "hostIP": "127.0.0.1",
            "podIP": self.ip(),
            "podIPs": [{ "ip": self.ip() }],
            "startTime": self.started,
            "conditions": super::conditions(&current, &[
                ("PodScheduled", true, ""),
                ("Initialized", true, ""),
                ("ContainersReady", ready, ""),
                ("Ready", ready, ""),
            ], &now),
            "containerStatuses": [cs],
        });
        patch_status(&self.st, &self.t, status, MANAGER);
    }

    /// Reports the pod unschedulable, as the scheduler does.
    fn unschedulable(&self, message: &str) {
        let current = self.current();
        let since = current
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            })
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(self.st.clock.now_rfc3339()));
        let status = json!({
            "phase": "Pending",
            "conditions": [{ "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": message, "lastTransitionTime": since }],
        });
        patch_status(&self.st, &self.t, status, MANAGER);
    }

    fn waiting(&self, restarts: u32, reason: &str, message: &str, last: &Option<Value>) {
        let state = json!({ "waiting": { "reason": reason, "message": message } });
        let cs = self.container_status(restarts, state, last, false);
        let phase = if restarts == 0 && last.is_none() {
            "Pending"
        } else {
            "Running"
        };
        self.report(phase, cs, false);
    }

    /// A Warning Event about the pod, from `component`.
    fn event(&self, component: &str, reason: &str, message: &str) {
        let Some(t) = target(&self.st, "", "Event", &self.ns, "") else {
            return;
        };
        let now = self.st.clock.now_rfc3339();
        let ev = json!({
            "metadata": { "generateName": format!("{}.", self.name) },
            "involvedObject": { "apiVersion": "v1", "kind": "Pod", "name": self.name, "namespace": self.ns,
                "uid": meta(&self.pod, "uid") },
            "reason": reason, "message": message, "type": "Warning", "count": 1,
            "source": { "component": component, "host": "localhost" },
            "firstTimestamp": now, "lastTimestamp": now, "reportingComponent": component,
        });
        let _ = ops::create(&self.st, &t, ev, &opts(MANAGER));
    }

    fn pod_dir(&self) -> PathBuf {
        volumes::pod_dir(&self.o.data_dir, &self.pod)
    }
}

/// Why the pod cannot be scheduled yet: a claim that is missing or unbound.
fn unbound_claim(st: &State, pod: &Value) -> Option<String> {
    let ns = meta(pod, "namespace");
    for v in pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(claim) = v
            .pointer("/persistentVolumeClaim/claimName")
            .and_then(Value::as_str)
        else {
            continue;
        };
        let why = match st
            .store
            .get(&Gr::new("", "persistentvolumeclaims"), ns, claim)
        {
            None => format!("persistentvolumeclaim \"{claim}\" not found"),
            Some(pvc) if pvc.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") => {
                "pod has unbound immediate PersistentVolumeClaims".to_string()
            }
            Some(_) => continue,
        };
        return Some(format!(
            "0/1 nodes are available: {why}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        ));
    }
    None
}

/// Sleeps `d`; true when the pod was deleted meanwhile.
async fn pause(kill: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = kill.changed() => true,
    }
}

/// Go's rendering of a duration (`10s`, `2m40s`, `5m0s`).
fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{secs}s")
    } else {
        format!("{}m{}s", secs / 60, secs % 60)
    }
}

/// Runs the pod until it ends or is deleted.
pub async fn run_pod(ctx: Option<PodCtx>, mut kill: watch::Receiver<bool>) {
    let Some(ctx) = ctx else {
        return;
    };
    // The scheduler: wait for the pod's claims.
    let mut reported = String::new();
    while let Some(why) = unbound_claim(&ctx.st, &ctx.pod) {
        if why != reported {
            ctx.unschedulable(&why);
            ctx.event("default-scheduler", "FailedScheduling", &why);
            reported = why;
        }
        if pause(&mut kill, Duration::from_millis(300)).await {
            return;
        }
    }
    if ctx.pod.pointer("/spec/nodeName").is_none() {
        let bind = json!({ "spec": { "nodeName": "localhost" } }).to_string();
        let _ = ops::patch(
            &ctx.st,
            &ctx.t,
            PatchType::Merge,
            bind.as_bytes(),
            &opts(MANAGER),
        );
    }
    // The volumes.
    let mut reported = String::new();
    let prepared = loop {
        match volumes::prepare(&ctx.st, &ctx.o.data_dir, &ctx.pod) {
            Ok(p) => break p,
            Err(why) => {
                if why != reported {
                    ctx.waiting(0, "ContainerCreating", "", &None);
                    ctx.event("kubelet", "FailedMount", &why);
                    reported = why;
                }
                if pause(&mut kill, Duration::from_millis(300)).await {
                    return;
                }
            }
        }
    };
    run_container(&ctx, &prepared, kill).await;
}

/// The argv after the binary: `command[1..]` then `args`.
fn argv(c: &Value) -> Vec<String> {
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
    argv
}

/// The variables a kubelet gives every container for the API server.
fn service_env(st: &State, host: &str) -> Vec<(String, String)> {
    let port = st
        .addr
        .rsplit_once(':')
        .map_or("443", |(_, p)| p)
        .to_string();
    vec![
        ("KUBERNETES_SERVICE_HOST".into(), host.into()),
        ("KUBERNETES_SERVICE_PORT".into(), port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.clone()),
        ("KUBERNETES_PORT".into(), format!("tcp://{host}:{port}")),
        (
            format!("KUBERNETES_PORT_{port}_TCP"),
            format!("tcp://{host}:{port}"),
        ),
        (format!("KUBERNETES_PORT_{port}_TCP_PROTO"), "tcp".into()),
        (format!("KUBERNETES_PORT_{port}_TCP_PORT"), port.clone()),
        (format!("KUBERNETES_PORT_{port}_TCP_ADDR"), host.into()),
    ]
}

/// The container's mounts: its volumeMounts (with `subPath`), and its
/// termination message file.
fn mounts(ctx: &PodCtx, prepared: &[Prepared], message_file: &Path) -> Result<Vec<Mount>, String> {
    let mut out = Vec::new();
    for vm in ctx
        .container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = vm.get("name").and_then(Value::as_str).unwrap_or_default();
        let v = prepared
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("volumeMount {name} names no volume of the pod"))?;
        let sub = vm
            .get("subPath")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let source = if sub.is_empty() {
            v.host_path.clone()
        } else {
            v.host_path.join(sub)
        };
        if !sub.is_empty() && !source.exists() && v.writable_source {
            volumes::make_sub_path(&v.host_path, sub).map_err(|e| format!("subPath {sub}: {e}"))?;
        }
        out.push(Mount {
            source,
            target: vm
                .get("mountPath")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            read_only: v.read_only || vm.get("readOnly").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    let path = ctx
        .container
        .get("terminationMessagePath")
        .and_then(Value::as_str)
        .unwrap_or("/dev/termination-log");
    out.push(Mount {
        source: message_file.to_path_buf(),
        target: path.to_string(),
        read_only: false,
    });
    Ok(out)
}

/// A kubeconfig with the pod's token, for the fallback without mount
/// namespaces (the token files cannot appear at their in-cluster path).
fn fallback_kubeconfig(ctx: &PodCtx, prepared: &[Prepared]) -> Option<PathBuf> {
    let token_dir = prepared
        .iter()
        .find(|p| p.name.starts_with("kube-api-access-"))?;
    let token = std::fs::read_to_string(token_dir.host_path.join("token")).ok()?;
    let url = format!("https://{}", ctx.st.addr);
    let text = crate::kubeconfig::render(
        &url,
        &ctx.st.auth.pki.ca_pem,
        &crate::kubeconfig::Credentials::Token(token),
    );
    let path = ctx.pod_dir().join("kubeconfig");
    std::fs::write(&path, text).ok()?;
    Some(path)
}

/// The termination message of a run that exited with `code`.
fn termination_message(
    ctx: &PodCtx,
    message_file: &Path,
    log: &Path,
    log_start: u64,
    code: i32,
) -> String {
    let mut message = String::new();
    if let Ok(mut f) = std::fs::File::open(message_file) {
        let mut buf = vec![0; MESSAGE_LIMIT];
        let n = f.read(&mut buf).unwrap_or(0);
        message = String::from_utf8_lossy(&buf[..n]).into_owned();
    }
    let policy = ctx
        .container
        .get("terminationMessagePolicy")
        .and_then(Value::as_str)
        .unwrap_or("File");
    if message.is_empty() && policy == "FallbackToLogsOnError" && code != 0 {
        let mut out = String::new();
        if let Ok(mut f) = std::fs::File::open(log) {
            let _ = f.seek(std::io::SeekFrom::Start(log_start));
            let _ = f.read_to_string(&mut out);
        }
        let lines: Vec<&str> = out.lines().collect();
        let mut tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        if tail.len() > LOG_TAIL_BYTES {
            let mut cut = tail.len() - LOG_TAIL_BYTES;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail = tail[cut..].to_string();
        }
        message = tail;
    }
    message
}

fn signal_group(pid: Option<u32>, sig: i32) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) of the process group we created for the container.
        unsafe {
            libc::kill(-pid, sig);
        }
    }
}

/// The pod's own network when the kubelet gives pods one (`Some(None)`
/// when it does not); `None` when the pod was deleted while its network
/// could not be made (the pod waits in `ContainerCreating` meanwhile).
async fn pod_network(
    ctx: &PodCtx,
    kill: &mut watch::Receiver<bool>,
) -> Option<Option<network::PodNetwork>> {
    if !(ctx.isolated && ctx.o.pod_network) {
        return Some(None);
    }
    let mut reported = String::new();
    loop {
        match network::PodNetwork::new(meta(&ctx.pod, "uid")) {
            Ok(mut n) => {
                n.forward(&host_ports(ctx));
                let _ = ctx.pod_ip.set(n.pod_ip.to_string());
                return Some(Some(n));
            }
            Err(why) => {
                if why != reported {
                    ctx.waiting(0, "ContainerCreating", "", &None);
                    ctx.event("kubelet", "FailedCreatePodSandBox", &why);
                    reported = why;
                }
                if pause(kill, Duration::from_millis(300)).await {
                    return None;
                }
            }
        }
    }
}

/// The host ports a pod reaches by `network::HOST_NAME`: the exposed ones
/// and the API server's.
fn host_ports(ctx: &PodCtx) -> std::collections::BTreeSet<u16> {
    let mut ports = ctx.o.host_ports.all();
    if let Some(port) = ctx
        .st
        .addr
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
    {
        ports.insert(port);
    }
    ports
}

/// A container's process group, known to the kubelet's [`Groups`] until
/// it is dropped (once the group has been killed).
struct Registered<'a>(&'a Groups, Option<i32>);

impl<'a> Registered<'a> {
    /// `None` when the kubelet is stopping.
    fn new(groups: &'a Groups, pid: Option<u32>, grace: u64) -> Option<Self> {
        let pgid = pid.and_then(|p| i32::try_from(p).ok());
        match pgid {
            Some(pg) if !groups.add(pg, Duration::from_secs(grace)) => None,
            _ => Some(Self(groups, pgid)),
        }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Some(pg) = self.1 {
            self.0.remove(pg);
        }
    }
}

async fn run_container(ctx: &PodCtx, prepared: &[Prepared], mut kill: watch::Receiver<bool>) {
    let policy = ctx
        .pod
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always")
        .to_string();
    let grace = ctx
        .pod
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(30)
        .min(10);
    let log = ctx.o.log_dir.join(format!("{}_{}.log", ctx.ns, ctx.name));
    let container_dir = ctx.pod_dir().join("containers").join(ctx.cname());
    let message_file = container_dir.join("termination-log");
    let read_only_root = ctx
        .container
        .pointer("/securityContext/readOnlyRootFilesystem")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // The pod's network, kept across restarts of its container.
    let Some(mut net) = pod_network(ctx, &mut kill).await else {
        return;
    };
    let hosts_file = ctx.pod_dir().join("etc-hosts");
    let service_host = if net.is_some() {
        "kubernetes.default.svc"
    } else {
        "127.0.0.1"
    };
    let (mut restarts, mut last, mut backoff, mut last_exit) =
        (0u32, None::<Value>, None::<Duration>, None::<Instant>);
    loop {
        let mut pod = ctx.pod.clone();
        pod["status"]["podIP"] = json!(ctx.ip());
        let mut env = match resolve_env(&ctx.st, &pod, &ctx.container) {
            Ok(e) => e,
            Err(msg) => {
                ctx.waiting(restarts, "CreateContainerConfigError", &msg, &last);
                if pause(&mut kill, Duration::from_millis(300)).await {
                    return;
                }
                continue;
            }
        };
        let mut all = service_env(&ctx.st, service_host);
        all.push(("HOME".into(), "/".into()));
        all.append(&mut env);
        let setup = (|| -> Result<tokio::process::Command, String> {
            std::fs::create_dir_all(&container_dir).map_err(|e| e.to_string())?;
            std::fs::write(&message_file, b"").map_err(|e| e.to_string())?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&message_file, std::fs::Permissions::from_mode(0o666));
            let open = || {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
            };
            let (out, err) = (
                open().map_err(|e| e.to_string())?,
                open().map_err(|e| e.to_string())?,
            );
            let program = if ctx.isolated {
                isolation::binary_in_container(&ctx.o.binary)
            } else {
                ctx.o.binary.clone()
            };
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(argv(&ctx.container))
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOSTNAME", &ctx.name)
                .envs(all.iter().cloned())
                .stdin(Stdio::null())
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err))
                .process_group(0)
                .kill_on_drop(true);
            if ctx.isolated {
                let mut mounts = mounts(ctx, prepared, &message_file)?;
                let entry = match &net {
                    Some(n) => {
                        std::fs::write(&hosts_file, n.hosts_file(&ctx.name))
                            .map_err(|e| format!("{}: {e}", hosts_file.display()))?;
                        mounts.push(Mount {
                            source: hosts_file.clone(),
                            target: "/etc/hosts".into(),
                            read_only: false,
                        });
                        Some(n.entry().map_err(|e| e.to_string())?)
                    }
                    None => None,
                };
                let fs = ContainerFs {
                    root_dir: container_dir.join("root"),
                    hostname: ctx.name.clone(),
                    mounts,
                    read_only_root,
                    binary: ctx.o.binary.clone(),
                    working_dir: ctx
                        .container
                        .get("workingDir")
                        .and_then(Value::as_str)
                        .map(String::from),
                };
                let plan = isolation::plan(&fs)?;
                let who = Identity::of(&ctx.pod, &ctx.container);
                // SAFETY: `Plan::apply` and `Identity::apply` only make
                // system calls on data prepared before the fork.
                unsafe {
                    cmd.pre_exec(move || {
                        if let Some(e) = &entry {
                            e.enter()?;
                        }
                        plan.apply()?;
                        who.apply()
                    });
                }
            } else if let Some(kc) = fallback_kubeconfig(ctx, prepared) {
                cmd.env("KUBECONFIG", kc);
            }
            Ok(cmd)
        })();
        let log_start = std::fs::metadata(&log).map_or(0, |m| m.len());
        let since = ctx.st.clock.now_rfc3339();
        let spawned = setup.and_then(|mut cmd| cmd.spawn().map_err(|e| e.to_string()));
        let (code, reason, start_error) = match spawned {
            Err(e) => {
                let detail = termination_message(ctx, &message_file, &log, log_start, 1);
                let message = if detail.trim().is_empty() {
                    e
                } else {
                    format!("{e}: {}", detail.trim())
                };
                (128, "StartError", Some(message))
            }
            Ok(mut child) => {
                let cs = ctx.container_status(
                    restarts,
                    json!({ "running": { "startedAt": since } }),
                    &last,
                    true,
                );
                let pid = child.id();
                let Some(_registered) = Registered::new(&ctx.groups, pid, grace) else {
                    // The server is stopping: this container goes at once.
                    signal_group(pid, libc::SIGKILL);
                    let _ = child.wait().await;
                    return;
                };
                ctx.report("Running", cs, true);
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                let code = loop {
                    tokio::select! {
                        r = child.wait() => break r.ok().and_then(|s| s.code()).unwrap_or(137),
                        _ = tick.tick() => {
                            volumes::refresh(&ctx.st, &ctx.o.data_dir, &ctx.pod);
                            if let Some(n) = net.as_mut() {
                                n.forward(&host_ports(ctx));
                            }
                        }
                        _ = kill.changed() => {
                            signal_group(pid, libc::SIGTERM);
                            if tokio::time::timeout(Duration::from_secs(grace), child.wait()).await.is_err() {
                                signal_group(pid, libc::SIGKILL);
                                let _ = child.wait().await;
                            }
                            // The container is over with its main process.
                            signal_group(pid, libc::SIGKILL);
                            return;
                        }
                    }
                };
                // Anything the container left running in its group goes with it.
                signal_group(pid, libc::SIGKILL);
                (code, if code == 0 { "Completed" } else { "Error" }, None)
            }
        };
        let finished = ctx.st.clock.now_rfc3339();
        let message = start_error
            .unwrap_or_else(|| termination_message(ctx, &message_file, &log, log_start, code));
        let mut terminated = json!({ "exitCode": code, "reason": reason, "startedAt": since, "finishedAt": finished,
            "containerID": format!("harness://{}", meta(&ctx.pod, "uid")) });
        if !message.is_empty() {
            terminated["message"] = json!(message);
        }
        let terminated = json!({ "terminated": terminated });
        let restart = match policy.as_str() {
            "Always" => true,
            "OnFailure" => code != 0,
            _ => false,
        };
        if !restart {
            let cs = ctx.container_status(restarts, terminated, &last, false);
            ctx.report(if code == 0 { "Succeeded" } else { "Failed" }, cs, false);
            return;
        }
        // The kubelet's back-off: the first restart at once, then the
        // initial delay doubling up to the maximum; reset after a run twice
        // the maximum long.
        let now = Instant::now();
        if last_exit.is_some_and(|t| now.duration_since(t) > ctx.o.backoff_max * 2) {
            backoff = None;
        }
        last_exit = Some(now);
        let delay = backoff.unwrap_or(Duration::ZERO);
        backoff = Some(backoff.map_or(ctx.o.backoff_initial, |d| (d * 2).min(ctx.o.backoff_max)));
        let cs = ctx.container_status(restarts, terminated.clone(), &last, false);
        ctx.report("Running", cs, false);
        last = Some(terminated);
        if !delay.is_zero() {
            let message = format!(
                "back-off {} restarting failed container={} pod={}_{}({})",
                go_duration(delay),
                ctx.cname(),
                ctx.name,
                ctx.ns,
                meta(&ctx.pod, "uid")
            );
            ctx.waiting(restarts, "CrashLoopBackOff", &message, &last);
            if pause(&mut kill, delay).await {
                return;
            }
        }
        restarts += 1;
    }
}
