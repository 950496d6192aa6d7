//! The real `kubectl` binary against the server: CRDs with CEL and printer
//! columns, apply/get/patch/delete, 422s, server-side apply conflicts,
//! `get -w` and `explain`.

use crate::common::{self, Env, within};
use std::process::{Output, Stdio};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Fails loudly if kubectl is not installed: this test must not pass vacuously.
pub(crate) fn kubectl_path() -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "command -v kubectl"])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => panic!(
            "kubectl is not on PATH: install kubectl (client 1.32) to run the kubectl acceptance test"
        ),
    }
}

pub(crate) fn cmd(env: &Env, args: &[&str]) -> Command {
    let mut c = Command::new(kubectl_path());
    c.env("KUBECONFIG", &env.kubeconfig)
        .env("HOME", env.dir.path())
        .arg("--cache-dir")
        .arg(env.dir.path().join("kube-cache"))
        .args(args)
        .kill_on_drop(true);
    c
}

pub(crate) async fn run(env: &Env, args: &[&str]) -> Output {
    within(
        &format!("kubectl {}", args.join(" ")),
        cmd(env, args).output(),
    )
    .await
    .expect("spawn kubectl")
}

pub(crate) async fn ok(env: &Env, args: &[&str]) -> String {
    let out = run(env, args).await;
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "kubectl {} failed:\n{so}\n{se}",
        args.join(" ")
    );
    so.into_owned()
}

pub(crate) async fn fails(env: &Env, args: &[&str]) -> String {
    let out = run(env, args).await;
    assert!(
        !out.status.success(),
        "kubectl {} should fail",
        args.join(" ")
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn write(env: &Env, name: &str, yaml: &str) -> String {
    let p = env.dir.path().join(name);
    std::fs::write(&p, yaml).expect("write manifest");
    p.display().to_string()
}

#[tokio::test]
async fn kubectl_end_to_end() {
    let env = common::start().await;
    let crd = common::fixture("widgets-crd.yaml").display().to_string();
    assert!(ok(&env, &["apply", "-f", &crd]).await.contains("created"));
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

    let a = common::fixture("widget-a.yaml").display().to_string();
    assert!(
        ok(&env, &["apply", "-f", &a])
            .await
            .contains("widget.example.com/a created")
    );
    assert!(ok(&env, &["apply", "-f", &a]).await.contains("unchanged"));

    // Printer columns.
    let table = ok(&env, &["get", "widgets"]).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "SIZE", "COLOR", "PHASE", "AGE"], "{table}");
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["a", "3", "red"], "{table}");

    ok(
        &env,
        &[
            "patch",
            "widget",
            "a",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":4}}"#,
        ],
    )
    .await;
    assert_eq!(
        ok(&env, &["get", "wd", "a", "-o", "jsonpath={.spec.size}"]).await,
        "4"
    );

    // 422 from a CEL rule, a transition rule and the OpenAPI schema.
    let cel = fails(
        &env,
        &[
            "patch",
            "widget",
            "a",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":20}}"#,
        ],
    )
    .await;
    assert!(
        cel.contains("is invalid") && cel.contains("size must not exceed maxSize"),
        "{cel}"
    );
    let immutable = fails(
        &env,
        &[
            "patch",
            "widget",
            "a",
            "--type=merge",
            "-p",
            r#"{"spec":{"color":"blue"}}"#,
        ],
    )
    .await;
    assert!(immutable.contains("color is immutable"), "{immutable}");
    let schema = fails(
        &env,
        &[
            "patch",
            "widget",
            "a",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/size","value":-1}]"#,
        ],
    )
    .await;
    assert!(
        schema.contains("is invalid") && schema.contains("should be greater than or equal to 0"),
        "{schema}"
    );
    let bad = write(
        &env,
        "bad.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  size: 1\n  color: pink\n",
    );
    let enum_err = fails(&env, &["apply", "-f", &bad]).await;
    assert!(
        enum_err.contains("Unsupported value: \"pink\""),
        "{enum_err}"
    );

    // Server-side apply conflicts between two managers, then force.
    let m1 = write(
        &env,
        "b1.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: b\nspec:\n  size: 2\n  owner: alice\n",
    );
    let m2 = write(
        &env,
        "b2.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: b\nspec:\n  size: 5\n",
    );
    ok(
        &env,
        &["apply", "--server-side", "--field-manager=mgr-a", "-f", &m1],
    )
    .await;
    let conflict = fails(
        &env,
        &["apply", "--server-side", "--field-manager=mgr-b", "-f", &m2],
    )
    .await;
    assert!(
        conflict.contains("conflict with \"mgr-a\"") && conflict.contains(".spec.size"),
        "{conflict}"
    );
    ok(
        &env,
        &[
            "apply",
            "--server-side",
            "--field-manager=mgr-b",
            "--force-conflicts",
            "-f",
            &m2,
        ],
    )
    .await;
    assert_eq!(
        ok(
            &env,
            &[
                "get",
                "wd",
                "b",
                "-o",
                "jsonpath={.spec.size}/{.spec.owner}"
            ]
        )
        .await,
        "5/alice"
    );

    // get -w sees a new object.
    let mut watch = cmd(&env, &["get", "widgets", "-w", "--no-headers"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn watch");
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    within("initial watch output", async {
        while let Some(l) = lines.next_line().await.expect("read") {
            if l.starts_with("b ") {
                break;
            }
        }
    })
    .await;
    let c = write(
        &env,
        "c.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: c\nspec:\n  size: 7\n",
    );
    ok(&env, &["apply", "-f", &c]).await;
    within("watch event for c", async {
        while let Some(l) = lines.next_line().await.expect("read") {
            if l.starts_with("c ") {
                assert!(l.contains(" 7 "), "{l}");
                break;
            }
        }
    })
    .await;
    let _ = watch.kill().await;

    let explain = ok(&env, &["explain", "widgets.spec.size"]).await;
    assert!(explain.contains("How big the widget is."), "{explain}");

    assert!(
        ok(&env, &["delete", "widget", "a"])
            .await
            .contains("deleted")
    );
    let nf = fails(&env, &["get", "widget", "a"]).await;
    assert!(nf.contains("NotFound") || nf.contains("not found"), "{nf}");
}

/// Client-side apply stores the object's JSON in an annotation, and the
/// API server allows 256 KiB of annotations: a large object is refused by
/// `kubectl apply` and accepted by `kubectl create`, as in a real cluster.
#[tokio::test]
async fn client_side_apply_of_a_large_object_passes_the_annotation_limit() {
    let env = common::start().await;
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big, namespace: default}}\ndata:\n  blob: {}\n",
        "x".repeat(300 * 1024)
    );
    let file = write(&env, "big.yaml", &big);
    let err = fails(&env, &["apply", "-f", &file]).await;
    assert!(
        err.contains("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{err}"
    );
    assert!(ok(&env, &["create", "-f", &file]).await.contains("created"));

    let small = big
        .replace(&"x".repeat(300 * 1024), "x")
        .replace("big", "small");
    let file = write(&env, "small.yaml", &small);
    ok(&env, &["apply", "-f", &file]).await;
    let stored = ok(
        &env,
        &[
            "get",
            "configmap",
            "small",
            "-o",
            "jsonpath={.metadata.annotations}",
        ],
    )
    .await;
    assert!(
        stored.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{stored}"
    );
}
