//! kubectl against built-in kinds: `kubectl create` (which sends protobuf),
//! `kubectl explain` from the built-in OpenAPI schemas, and the table
//! columns a real server prints for deployments and pods.

use crate::common;
use crate::kubectl::{fails, ok, run, write};
use serde_json::Value;

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn words(line: Option<&str>) -> Vec<String> {
    line.unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn kubectl_create_sends_protobuf() {
    let env = common::start().await;

    let out = run(
        &env,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
            "-v=8",
        ],
    )
    .await;
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl did not send protobuf, so this test proves nothing:\n{log}"
    );
    let d = json(&ok(&env, &["get", "deployment", "web", "-o", "json"]).await);
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web", "{d}");
    assert_eq!(
        d["spec"]["template"]["metadata"]["labels"]["app"], "web",
        "{d}"
    );
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["name"], "nginx", "{d}");
    assert_eq!(c["image"], "nginx:1.27", "{d}");

    // A command after `--`, and an explicit zero replica count (a pointer
    // field, so the zero must survive decoding).
    ok(
        &env,
        &[
            "create",
            "deployment",
            "idle",
            "--image=busybox",
            "--replicas=0",
            "--",
            "sleep",
            "60",
        ],
    )
    .await;
    let d = json(&ok(&env, &["get", "deployment", "idle", "-o", "json"]).await);
    assert_eq!(d["spec"]["replicas"], 0, "{d}");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], serde_json::json!(["sleep", "60"]), "{d}");

    ok(
        &env,
        &[
            "create",
            "configmap",
            "cfg",
            "--from-literal=mode=fast",
            "--from-literal=n=1",
        ],
    )
    .await;
    let cm = json(&ok(&env, &["get", "configmap", "cfg", "-o", "json"]).await);
    assert_eq!(cm["data"], serde_json::json!({ "mode": "fast", "n": "1" }));

    ok(
        &env,
        &[
            "create",
            "secret",
            "generic",
            "pw",
            "--from-literal=pw=hunter2",
        ],
    )
    .await;
    let s = json(&ok(&env, &["get", "secret", "pw", "-o", "json"]).await);
    assert_eq!(s["data"]["pw"], "aHVudGVyMg==", "{s}");
    assert_eq!(s["type"], "Opaque", "{s}");

    ok(&env, &["create", "namespace", "team-a"]).await;
    ok(&env, &["create", "serviceaccount", "bot", "-n", "team-a"]).await;
    let sa = json(
        &ok(
            &env,
            &["get", "serviceaccount", "bot", "-n", "team-a", "-o", "json"],
        )
        .await,
    );
    assert_eq!(sa["metadata"]["namespace"], "team-a", "{sa}");

    // A kind without a protobuf table gets a clear 415, not a wrong object.
    let err = fails(&env, &["create", "job", "j", "--image=busybox"]).await;
    assert!(err.contains("send JSON instead"), "{err}");
}

#[tokio::test]
async fn kubectl_explain_builtin() {
    let env = common::start().await;
    let out = ok(&env, &["explain", "deployment.spec.replicas"]).await;
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("FIELD: replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods"), "{out}");
    let out = ok(&env, &["explain", "pods.spec.containers.image"]).await;
    assert!(out.contains("FIELD: image <string>"), "{out}");
}

#[tokio::test]
async fn kubectl_get_builtin_tables() {
    let env = common::start().await;
    ok(
        &env,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ],
    )
    .await;
    ok(
        &env,
        &[
            "patch",
            "deployment",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":2,"readyReplicas":1,"updatedReplicas":2,"availableReplicas":1}}"#,
        ],
    )
    .await;
    let table = ok(&env, &["get", "deployments"]).await;
    let mut lines = table.lines();
    assert_eq!(
        words(lines.next()),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{table}"
    );
    assert_eq!(
        words(lines.next())[..4],
        ["web", "1/2", "2", "1"],
        "{table}"
    );
    let wide = ok(&env, &["get", "deployments", "-o", "wide"]).await;
    let mut lines = wide.lines();
    assert_eq!(
        words(lines.next())[5..],
        ["CONTAINERS", "IMAGES", "SELECTOR"],
        "{wide}"
    );
    assert_eq!(
        words(lines.next())[5..],
        ["nginx", "nginx", "app=web"],
        "{wide}"
    );

    let pod = write(
        &env,
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: busybox\n  - name: b\n    image: busybox\n",
    );
    ok(&env, &["apply", "-f", &pod]).await;
    let table = ok(&env, &["get", "pods"]).await;
    let mut lines = table.lines();
    assert_eq!(
        words(lines.next()),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{table}"
    );
    assert_eq!(
        words(lines.next())[..4],
        ["p", "0/2", "Pending", "0"],
        "{table}"
    );
    ok(
        &env,
        &[
            "patch",
            "pod",
            "p",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running","containerStatuses":[
                {"name":"a","ready":true,"restartCount":3,"image":"busybox","imageID":"","state":{"running":{}}},
                {"name":"b","ready":false,"restartCount":1,"image":"busybox","imageID":"","state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}"#,
        ],
    )
    .await;
    let table = ok(&env, &["get", "pods"]).await;
    assert_eq!(
        words(table.lines().nth(1))[..4],
        ["p", "1/2", "CrashLoopBackOff", "4"],
        "{table}"
    );
}
