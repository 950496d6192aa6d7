//! Aggregated discovery: the raw `APIGroupDiscoveryList` shape, and kubectl
//! using it (`kubectl api-resources` with a CRD's short name).

use crate::common::{self, within};
use crate::kubectl::{ok, run};
use http_body_util::BodyExt;
use serde_json::Value;

const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// One GET through the admin's client (TLS, client certificate); returns
/// (content type, body).
async fn raw_get(client: &kube::Client, path: &str, accept: &str) -> (String, Value) {
    within(&format!("GET {path}"), async {
        let req = axum::http::Request::get(path)
            .header("Accept", accept)
            .body(kube::client::Body::empty())
            .expect("request");
        let resp = client.send(req).await.expect("GET");
        assert_eq!(resp.status(), 200, "GET {path}");
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        (ct, serde_json::from_slice(&body).expect("JSON body"))
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
    let client = env.client().await;
    let addr = &client;

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
