//! Pods do not outlive their server: dropping it, shutting it down, or
//! killing the process it lives in stops every container its kubelet
//! started (SIGTERM to the process group, SIGKILL after the grace
//! period), and their ports are free again.

use crate::common::{self, eventually, within};
use crate::pods::{create, pod, pod_when, start};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mssql_cdc_test_apiserver::kubelet::{self, groups::alive};
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// A pod that starts a second process in its group, writes the group's
/// id to `/out/pgid` and then runs `main` (with SIGTERM ignored when
/// `stubborn`, so only SIGKILL ends it).
fn group_pod(name: &str, main: &str, stubborn: bool, out: Value) -> Pod {
    let trap = if stubborn { "trap '' TERM; " } else { "" };
    let script =
        format!("{trap}sleep 1000 & echo $$ > /out/pgid.tmp && mv /out/pgid.tmp /out/pgid; {main}");
    let mut volume = json!({ "name": "out" });
    if let (Some(v), Some(source)) = (volume.as_object_mut(), out.as_object()) {
        v.extend(source.clone());
    }
    pod(
        name,
        &script,
        json!({ "terminationGracePeriodSeconds": 1, "volumes": [volume] }),
        json!({ "volumeMounts": [{ "name": "out", "mountPath": "/out" }] }),
    )
}

async fn pgid_in(dir: &Path) -> i32 {
    let file = dir.join("pgid");
    eventually("the pod to write its process group", || async {
        std::fs::read_to_string(&file).ok()?.trim().parse().ok()
    })
    .await
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::test]
async fn dropping_the_server_stops_its_pods_and_frees_their_ports() {
    let Some(env) = start().await else { return };
    let port = free_port();
    let listen = format!(
        "exec python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); time.sleep(1000)'"
    );
    let pods = create(
        &env,
        group_pod("stubborn", &listen, true, json!({ "emptyDir": {} })),
    )
    .await;
    pod_when(&pods, "stubborn", "the pod to run", |p| {
        p.pointer("/status/phase") == Some(&json!("Running"))
    })
    .await;
    let out = env
        .server
        .pod_volume_path("default", "stubborn", "out")
        .expect("the pod's volume");
    let pgid = pgid_in(&out).await;
    eventually("the pod to listen", || async {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    })
    .await;

    drop(env);
    assert!(
        !alive(pgid),
        "a container process outlived the dropped server"
    );
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the pod's port is free again");
}

#[tokio::test]
async fn shutting_the_server_down_lets_pods_stop_on_sigterm() {
    let Some(env) = start().await else { return };
    let graceful = "trap 'echo bye > /out/bye; kill $!; exit 0' TERM; sleep 1000 & wait";
    let pods = create(
        &env,
        group_pod("graceful", graceful, false, json!({ "emptyDir": {} })),
    )
    .await;
    let out = eventually("the pod's volume", || async {
        env.server.pod_volume_path("default", "graceful", "out")
    })
    .await;
    let pgid = pgid_in(&out).await;
    drop(pods);
    let common::Env { server, dir, .. } = env;
    within("the shutdown", server.shutdown()).await;
    assert!(
        !alive(pgid),
        "a container process outlived the shut down server"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("bye")).ok().as_deref(),
        Some("bye\n"),
        "the container got SIGTERM first"
    );
    drop(dir);
}

/// The crate's standalone server, which serves until it is stopped.
fn serve_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_test-apiserver"))
}

#[tokio::test]
async fn killing_the_process_of_the_server_stops_its_pods() {
    if !kubelet::isolation_available() {
        println!("skipped: the harness kubelet has no mount namespaces here (not root?)");
        return;
    }
    common::install_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut server = std::process::Command::new(serve_binary())
        .args(["--kubelet-binary", "/bin/sh", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--log-dir")
        .arg(dir.path().join("logs"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the server process");
    let stdout = server.stdout.take().expect("stdout");
    let ready = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.starts_with("test-apiserver serving on"))
    });
    assert!(
        within("the server process", ready).await.unwrap_or(false),
        "the server never got ready"
    );
    let yaml = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&yaml).expect("kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let pods: Api<Pod> = Api::namespaced(kube::Client::try_from(cfg).expect("client"), "default");
    let out = dir.path().join("out");
    let volume =
        json!({ "hostPath": { "path": out.display().to_string(), "type": "DirectoryOrCreate" } });
    pods.create(
        &PostParams::default(),
        &group_pod("orphan", "wait", true, volume),
    )
    .await
    .expect("create pod");
    let pgid = pgid_in(&out).await;

    // SIGKILL: no destructor of the server's process runs.
    server.kill().expect("kill the server process");
    let _ = server.wait();
    eventually("the orphaned pod to be stopped", || async {
        (!alive(pgid)).then_some(())
    })
    .await;
}
