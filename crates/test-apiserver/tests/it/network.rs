//! One network per pod (`KubeletOptions::pod_network`): two pods listen
//! on one port, each at its own address; a pod's 127.0.0.1 is its own; it
//! reaches a test server on the host's 127.0.0.1 as
//! `host.harness.internal` and the API server in-cluster by
//! `kubernetes.default.svc`; its namespace and veth pair go with it.

use crate::common::{Env, eventually};
use crate::pods::{create, finished, pod, pod_when};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use mssql_cdc_test_apiserver::kubelet::network::{HOST_NAME, HostPorts};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

async fn start(ports: &HostPorts) -> Option<Env> {
    crate::pods::start_with(|k| {
        k.pod_network = true;
        k.host_ports = ports.clone();
    })
    .await
}

/// A server on the host's 127.0.0.1 that greets each connection.
async fn greeter() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = l.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.write_all(b"hello from the host\n").await;
        }
    });
    port
}

fn listener(port: u16) -> String {
    format!(
        "exec python3 -c 'import socket; s=socket.socket(); s.bind((\"0.0.0.0\", {port})); s.listen()\nwhile True:\n  c, _ = s.accept(); c.sendall(socket.gethostname().encode()); c.close()'"
    )
}

fn pod_ip(p: &Value) -> Option<String> {
    p.pointer("/status/podIP")?.as_str().map(String::from)
}

async fn read_from(ip: &str, port: u16) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut s = tokio::net::TcpStream::connect((ip, port)).await.ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    Some(out)
}

#[tokio::test]
async fn pods_have_networks_of_their_own_and_reach_the_host_by_name() {
    let ports = HostPorts::default();
    let Some(env) = start(&ports).await else {
        return;
    };
    let host_port = greeter().await;
    ports.add(host_port);

    // Two pods on one port, each at its own address.
    let pods = create(&env, pod("one", &listener(9100), json!({}), json!({}))).await;
    create(&env, pod("two", &listener(9100), json!({}), json!({}))).await;
    let mut ips = Vec::new();
    for name in ["one", "two"] {
        let p = pod_when(&pods, name, "the pod to run", |p| {
            p.pointer("/status/phase") == Some(&json!("Running"))
        })
        .await;
        let ip = pod_ip(&p).expect("a pod IP");
        assert!(ip.starts_with("10.244."), "{ip}");
        let said = eventually("the pod to answer on its address", || async {
            read_from(&ip, 9100).await.filter(|s| !s.is_empty())
        })
        .await;
        assert_eq!(said, name, "each address is its pod's");
        ips.push(ip);
    }
    assert_ne!(ips[0], ips[1]);

    // The host by name, its own loopback, the API server in-cluster.
    let script = format!(
        "python3 -c 'import socket; print(socket.create_connection((\"{HOST_NAME}\", {host_port})).recv(100).decode().strip())'; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {host_port}))' 2>/dev/null && echo shared-loopback || echo own-loopback; \
         echo $KUBERNETES_SERVICE_HOST; kubectl auth whoami -o jsonpath='{{.status.userInfo.username}}'"
    );
    let checker = create(
        &env,
        pod(
            "checker",
            &format!("( {script} ) > /dev/termination-log 2>&1"),
            json!({}),
            json!({}),
        ),
    )
    .await;
    let t = finished(&checker, "checker").await;
    let message = t["message"].as_str().unwrap_or_default();
    assert_eq!(
        message.lines().collect::<Vec<_>>(),
        [
            "hello from the host",
            "own-loopback",
            "kubernetes.default.svc",
            "system:serviceaccount:default:default"
        ],
        "{t}"
    );

    // The pod's namespace and host-side address go with it.
    let host_side = {
        let ip: std::net::Ipv4Addr = ips[0].parse().expect("ip");
        std::net::Ipv4Addr::from(u32::from(ip) - 1).to_string()
    };
    assert!(host_addresses().contains(&host_side));
    let api: Api<Pod> = Api::namespaced(env.client().await, "default");
    api.delete("one", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the pod's veth pair to go", || async {
        (!host_addresses().contains(&host_side)).then_some(())
    })
    .await;
}

fn host_addresses() -> String {
    std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}
