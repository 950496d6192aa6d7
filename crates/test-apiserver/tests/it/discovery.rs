//! Aggregated discovery: the raw `APIGroupDiscoveryList` shape, and kubectl
//! using it (`kubectl api-resources` with a CRD's short name).

use crate::common::{self, within};
use crate::kubectl::{ok, run};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// One HTTP/1.1 GET over a plain socket; returns (content type, body).
async fn raw_get(addr: std::net::SocketAddr, path: &str, accept: &str) -> (String, Value) {
    within(&format!("GET {path}"), async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.expect("write request");
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.expect("read response");
        let text = String::from_utf8(buf).expect("utf-8 response");
        let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let ct = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        (ct, serde_json::from_str(body).expect("JSON body"))
    })
    .await
}

fn find<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|a| {
            a.iter()
                .find(|x| x.pointer(key) == Some(&Value::from(name)))
        })
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

#[tokio::test]
async fn aggregated_discovery_shape_and_kubectl() {
    let env = common::start().await;
    let crd = common::fixture("widgets-crd.yaml").display().to_string();
    ok(&env, &["apply", "-f", &crd]).await;
    ok(
        &env,
        &[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=20s",
        ],
    )
    .await;
    let addr = env.server.addr();

    // /api: the core group, with subresources and short names.
    let (ct, core) = raw_get(addr, "/api", V2).await;
    assert!(ct.starts_with(V2), "{ct}");
    assert_eq!(core["kind"], "APIGroupDiscoveryList");
    assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
    let items = core["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{core}");
    let v1 = find(&items[0]["versions"], "/version", "v1");
    assert_eq!(v1["freshness"], "Current");
    let pods = find(&v1["resources"], "/resource", "pods");
    assert_eq!(pods["scope"], "Namespaced");
    assert_eq!(pods["singularResource"], "pod");
    assert_eq!(pods["responseKind"]["kind"], "Pod");
    assert_eq!(pods["shortNames"][0], "po");
    assert_eq!(pods["categories"][0], "all");
    assert!(
        pods["verbs"]
            .as_array()
            .expect("verbs")
            .contains(&"watch".into())
    );
    find(&pods["subresources"], "/subresource", "status");
    find(&pods["subresources"], "/subresource", "log");
    let ns = find(&v1["resources"], "/resource", "namespaces");
    assert_eq!(ns["scope"], "Cluster");

    // /apis: named groups only, the CRD's group included.
    let (ct, apis) = raw_get(addr, "/apis", &format!("{V2BETA1},application/json")).await;
    assert!(ct.starts_with(V2BETA1), "{ct}");
    assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    let example = find(&apis["items"], "/metadata/name", "example.com");
    let wv1 = find(&example["versions"], "/version", "v1");
    let widgets = find(&wv1["resources"], "/resource", "widgets");
    assert_eq!(widgets["shortNames"][0], "wd");
    assert_eq!(widgets["responseKind"]["group"], "example.com");
    find(&widgets["subresources"], "/subresource", "status");
    let apps = find(&apis["items"], "/metadata/name", "apps");
    let deploy = find(
        &apps["versions"][0]["resources"],
        "/resource",
        "deployments",
    );
    assert_eq!(deploy["shortNames"][0], "deploy");
    assert!(
        apis["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|g| g["metadata"]["name"] != ""),
        "the core group belongs to /api only"
    );

    // A plain JSON Accept still gets the legacy documents.
    let (ct, legacy) = raw_get(addr, "/apis", "application/json").await;
    assert_eq!(ct, "application/json");
    assert_eq!(legacy["kind"], "APIGroupList");

    // kubectl prefers aggregated discovery when offered; with it, the only
    // discovery requests are /api and /apis.
    let res = run(&env, &["api-resources", "-v=6"]).await;
    let (out, log) = (
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr),
    );
    assert!(res.status.success(), "{out}\n{log}");
    assert!(
        !log.contains("/apis/example.com/v1"),
        "legacy discovery used:\n{log}"
    );
    let row = out
        .lines()
        .find(|l| l.starts_with("widgets "))
        .unwrap_or_else(|| panic!("widgets not listed:\n{out}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cols,
        ["widgets", "wd", "example.com/v1", "true", "Widget"],
        "{out}"
    );
}
