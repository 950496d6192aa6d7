//! Pods under the harness kubelet as a cluster would run them: each
//! container in its own mount namespace (read-only root, volumes at their
//! mount paths), claims bound by the stand-in provisioner, in-cluster
//! identity, and the status a kubelet reports (termination messages,
//! CrashLoopBackOff, unschedulable pods). The container binary is
//! `/bin/sh`, so `command: [sh, -c, SCRIPT]` runs SCRIPT.

use crate::common::{self, Env, eventually};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use mssql_cdc_test_apiserver::{KubeletOptions, ServerOptions, kubelet};
use serde_json::{Value, json};
use std::time::Duration;

/// A server whose kubelet runs `/bin/sh`; `None` (with a printed notice)
/// when containers cannot get mount namespaces here.
pub(crate) async fn start() -> Option<Env> {
    start_with(|_| {}).await
}

/// Like [`start`], with kubelet options changed by `tune`.
pub(crate) async fn start_with(tune: impl FnOnce(&mut KubeletOptions)) -> Option<Env> {
    if !kubelet::isolation_available() {
        println!("skipped: the harness kubelet has no mount namespaces here (not root?)");
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir").keep();
    let mut k = KubeletOptions::new("/bin/sh".into(), dir.join("logs"));
    k.backoff_initial = Duration::from_secs(2);
    tune(&mut k);
    Some(
        common::start_with(ServerOptions {
            kubelet: Some(k),
            ..Default::default()
        })
        .await,
    )
}

pub(crate) fn pod(name: &str, script: &str, extra_spec: Value, container: Value) -> Pod {
    let mut c = json!({ "name": "main", "image": "busybox", "command": ["sh", "-c", script] });
    if let (Some(c), Some(extra)) = (c.as_object_mut(), container.as_object()) {
        c.extend(extra.clone());
    }
    let mut spec = json!({ "restartPolicy": "Never", "containers": [c] });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(json!({ "metadata": { "name": name }, "spec": spec })).expect("pod")
}

pub(crate) async fn create(env: &Env, p: Pod) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(env.client().await, "default");
    pods.create(&PostParams::default(), &p)
        .await
        .expect("create pod");
    pods
}

/// The pod once `check` holds for its JSON.
pub(crate) async fn pod_when(
    pods: &Api<Pod>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let check = &check;
    eventually(what, || async move {
        let p = serde_json::to_value(pods.get(name).await.ok()?).ok()?;
        check(&p).then_some(p)
    })
    .await
}

pub(crate) fn phase(p: &Value) -> &str {
    p.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `state.terminated` of the pod's container once it finished.
pub(crate) async fn finished(pods: &Api<Pod>, name: &str) -> Value {
    let p = pod_when(pods, name, "the pod to finish", |p| {
        matches!(phase(p), "Succeeded" | "Failed")
    })
    .await;
    p.pointer("/status/containerStatuses/0/state/terminated")
        .cloned()
        .expect("terminated state")
}

#[tokio::test]
async fn writes_outside_volumes_fail_on_a_read_only_root_and_the_status_says_why() {
    let Some(env) = start().await else { return };
    let marker = format!("/etc/harness-ro-{}", uuid_like());
    let script = format!("echo fine > /scratch/ok && cat /scratch/ok && echo no > {marker}");
    let p = pod(
        "ro",
        &script,
        json!({ "volumes": [{ "name": "scratch", "emptyDir": {} }] }),
        json!({
            "securityContext": { "readOnlyRootFilesystem": true },
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [{ "name": "scratch", "mountPath": "/scratch" }],
        }),
    );
    let pods = create(&env, p).await;
    let t = finished(&pods, "ro").await;
    assert_ne!(t["exitCode"], 0, "{t}");
    assert_eq!(t["reason"], "Error");
    let message = t["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("fine"),
        "the volume was writable: {message}"
    );
    assert!(message.contains("Read-only file system"), "{message}");
    assert!(
        !std::path::Path::new(&marker).exists(),
        "nothing reached the host"
    );
    assert_eq!(
        phase(
            &pods
                .get("ro")
                .await
                .map(|p| serde_json::to_value(p).unwrap_or_default())
                .unwrap_or_default()
        ),
        "Failed"
    );

    // A message the container writes wins over the logs.
    let p = pod(
        "msg",
        "echo 'disk full' > /dev/termination-log; exit 3",
        json!({}),
        json!({ "securityContext": { "readOnlyRootFilesystem": true } }),
    );
    let pods = create(&env, p).await;
    let t = finished(&pods, "msg").await;
    assert_eq!(
        (t["exitCode"].clone(), t["message"].clone()),
        (json!(3), json!("disk full\n"))
    );
}

/// Creates a 1Gi ReadWriteOnce claim of `class` (the default class when `None`).
pub(crate) async fn claim(env: &Env, name: &str, class: Option<&str>) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client().await, "default");
    let mut claim = json!({ "metadata": { "name": name }, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } } });
    if let Some(class) = class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(claim).expect("pvc"),
        )
        .await
        .expect("pvc");
}

fn uuid_like() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

#[tokio::test]
async fn a_claim_keeps_its_data_for_the_next_pod() {
    let Some(env) = start().await else { return };
    let client = env.client().await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    claim(&env, "data", None).await;
    let volume = json!({ "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": "data" } }] });
    let mounts = |sub: &str| {
        json!({
            "securityContext": { "readOnlyRootFilesystem": true },
            "volumeMounts": [{ "name": "data", "mountPath": "/var/lib/lake", "subPath": sub }],
        })
    };
    let pods = create(
        &env,
        pod(
            "writer",
            "echo hello > /var/lib/lake/greeting",
            volume.clone(),
            mounts("app"),
        ),
    )
    .await;
    assert_eq!(finished(&pods, "writer").await["exitCode"], 0);
    pods.delete("writer", &DeleteParams::default())
        .await
        .expect("delete");
    let pods = create(
        &env,
        pod(
            "reader",
            "cat /var/lib/lake/greeting > /dev/termination-log",
            volume,
            mounts("app"),
        ),
    )
    .await;
    let t = finished(&pods, "reader").await;
    assert_eq!(
        (t["exitCode"].clone(), t["message"].clone()),
        (json!(0), json!("hello\n"))
    );
    let pvc = claims.get("data").await.expect("pvc");
    assert_eq!(pvc.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    assert_eq!(
        pvc.spec.and_then(|s| s.storage_class_name).as_deref(),
        Some("standard")
    );
}

#[tokio::test]
async fn an_unbound_claim_keeps_the_pod_pending_until_a_volume_binds() {
    let Some(env) = start().await else { return };
    let client = env.client().await;
    claim(&env, "manual", Some("manual")).await;
    let p = pod(
        "waits",
        "ls /data > /dev/termination-log",
        json!({ "volumes": [{ "name": "d", "persistentVolumeClaim": { "claimName": "manual" } }] }),
        json!({ "volumeMounts": [{ "name": "d", "mountPath": "/data" }] }),
    );
    let pods = create(&env, p).await;
    let pending = pod_when(&pods, "waits", "PodScheduled=False", |p| {
        p.pointer("/status/conditions/0/status") == Some(&json!("False"))
    })
    .await;
    assert_eq!(phase(&pending), "Pending");
    let cond = &pending["status"]["conditions"][0];
    assert_eq!(
        (cond["type"].as_str(), cond["reason"].as_str()),
        (Some("PodScheduled"), Some("Unschedulable"))
    );
    assert!(
        cond["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unbound immediate PersistentVolumeClaims"),
        "{cond}"
    );

    // A matching static volume binds the claim, and the pod runs.
    let host = env.dir.path().join("static-pv");
    std::fs::create_dir_all(&host).expect("dir");
    std::fs::write(host.join("seeded"), "x").expect("seed");
    let pv = json!({ "apiVersion": "v1", "kind": "PersistentVolume", "metadata": { "name": "static" }, "spec": {
        "storageClassName": "manual", "capacity": { "storage": "2Gi" }, "accessModes": ["ReadWriteOnce"],
        "hostPath": { "path": host.display().to_string() } } });
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(client);
    pvs.create(
        &PostParams::default(),
        &serde_json::from_value(pv).expect("pv"),
    )
    .await
    .expect("pv");
    let t = finished(&pods, "waits").await;
    assert_eq!(t["message"], "seeded\n");
}

#[tokio::test]
async fn pods_get_in_cluster_identity_unless_they_opt_out() {
    let Some(env) = start().await else { return };
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    // kubectl inside the container: in-cluster config only (no kubeconfig),
    // over TLS with the projected ca.crt.
    let script = format!(
        "echo \"$(cat {sa}/namespace) $KUBERNETES_SERVICE_HOST $(kubectl auth whoami -o jsonpath='{{.status.userInfo.username}}')\" > /dev/termination-log"
    );
    let pods = create(
        &env,
        pod(
            "identity",
            &script,
            json!({}),
            json!({ "securityContext": { "readOnlyRootFilesystem": true } }),
        ),
    )
    .await;
    let t = finished(&pods, "identity").await;
    assert_eq!(
        t["message"], "default 127.0.0.1 system:serviceaccount:default:default\n",
        "{t}"
    );

    let script = format!("test ! -e {sa}/token && echo none > /dev/termination-log");
    let pods = create(
        &env,
        pod(
            "anonymous",
            &script,
            json!({ "automountServiceAccountToken": false }),
            json!({}),
        ),
    )
    .await;
    let t = finished(&pods, "anonymous").await;
    assert_eq!(
        (t["exitCode"].clone(), t["message"].clone()),
        (json!(0), json!("none\n"))
    );

    // A pod of an account that does not exist is refused at admission.
    let p = pod(
        "ghost",
        "true",
        json!({ "serviceAccountName": "ghost" }),
        json!({}),
    );
    let err = Api::<Pod>::namespaced(env.client().await, "default")
        .create(&PostParams::default(), &p)
        .await
        .expect_err("forbidden");
    assert!(
        err.to_string()
            .contains("serviceaccount \"ghost\" not found"),
        "{err}"
    );
    // Admission runs before a name is generated: a refusal names the pod
    // by its prefix, so a ReplicaSet's repeated refusals read the same.
    let mut p = p;
    p.metadata.name = None;
    p.metadata.generate_name = Some("ghost-".into());
    let err = Api::<Pod>::namespaced(env.client().await, "default")
        .create(&PostParams::default(), &p)
        .await
        .expect_err("forbidden");
    assert!(
        err.to_string().contains("pods \"ghost-\" is forbidden"),
        "{err}"
    );
}

#[tokio::test]
async fn secret_and_config_map_volumes_honour_items_and_modes() {
    let Some(env) = start().await else { return };
    let client = env.client().await;
    let cm = json!({ "metadata": { "name": "cfg" }, "data": { "a": "alpha", "b": "beta" } });
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(cm).expect("cm"),
        )
        .await
        .expect("cm");
    let secret = json!({ "metadata": { "name": "sec" }, "stringData": { "password": "s3cret" } });
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client, "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret).expect("secret"),
        )
        .await
        .expect("secret");
    let script = "echo \"$(cat /cfg/nested/b) $(stat -L -c %a /cfg/nested/b) $(ls /cfg | tr '\\n' ,) $(cat /sec/password) $(stat -L -c %a /sec/password)\" > /dev/termination-log";
    let p = pod(
        "files",
        script,
        json!({ "volumes": [
            { "name": "cfg", "configMap": { "name": "cfg", "items": [{ "key": "b", "path": "nested/b", "mode": 0o600 }] } },
            { "name": "sec", "secret": { "secretName": "sec", "defaultMode": 0o400 } },
        ]}),
        json!({ "volumeMounts": [{ "name": "cfg", "mountPath": "/cfg" }, { "name": "sec", "mountPath": "/sec" }] }),
    );
    let pods = create(&env, p).await;
    let t = finished(&pods, "files").await;
    assert_eq!(t["message"], "beta 600 nested, s3cret 400\n", "{t}");

    // A missing Secret keeps the pod in ContainerCreating.
    let p = pod(
        "nosecret",
        "true",
        json!({ "volumes": [{ "name": "s", "secret": { "secretName": "absent" } }] }),
        json!({ "volumeMounts": [{ "name": "s", "mountPath": "/s" }] }),
    );
    let pods = create(&env, p).await;
    let waiting = pod_when(&pods, "nosecret", "ContainerCreating", |p| {
        p.pointer("/status/containerStatuses/0/state/waiting/reason")
            == Some(&json!("ContainerCreating"))
    })
    .await;
    assert_eq!(phase(&waiting), "Pending");
}

#[tokio::test]
async fn a_failing_container_backs_off_in_crash_loop() {
    let Some(env) = start().await else { return };
    let mut p = pod(
        "crash",
        "echo boom; exit 2",
        json!({ "restartPolicy": "Always" }),
        json!({}),
    );
    if let Some(spec) = p.spec.as_mut() {
        spec.restart_policy = Some("Always".into());
    }
    let pods = create(&env, p).await;
    let crashing = pod_when(&pods, "crash", "CrashLoopBackOff", |p| {
        p.pointer("/status/containerStatuses/0/state/waiting/reason")
            == Some(&json!("CrashLoopBackOff"))
    })
    .await;
    let cs = &crashing["status"]["containerStatuses"][0];
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 2, "{cs}");
    assert!(
        cs["state"]["waiting"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("back-off 2s restarting failed container=main"),
        "{cs}"
    );
    assert_eq!(
        cs["restartCount"], 1,
        "the first restart is immediate, the second waits: {cs}"
    );
}
