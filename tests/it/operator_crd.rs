//! The generated CdcStream CRD under the real kubectl against the test API
//! server: the examples are valid, `get` shows the printer columns,
//! `explain` describes the fields, and the CEL rules reject what they must.

use crate::support::kube::{KubeEnv, cells, repo_file};

const EXAMPLES: [&str; 4] = [
    "examples/kubernetes/orders-continuous.yaml",
    "examples/kubernetes/orders-hourly.yaml",
    "examples/kubernetes/invoices-s3.yaml",
    "examples/kubernetes/invoices-adls.yaml",
];

#[tokio::test]
async fn examples_apply_and_get_shows_health_columns() {
    let env = KubeEnv::start().await;
    env.install_crd().await;
    for example in EXAMPLES {
        let out = env.kubectl_ok(&["apply", "-f", &repo_file(example)]).await;
        assert!(out.contains("cdcstream.mssql-cdc.io/"), "{example}: {out}");
    }

    let status = r#"{"status":{"phase":"Streaming",
        "conditions":[
          {"type":"Live","status":"True","reason":"BatchesArriving","message":"ok","lastTransitionTime":"2026-11-29T10:00:00Z"},
          {"type":"Ready","status":"True","reason":"Healthy","message":"ok","lastTransitionTime":"2026-11-29T10:00:00Z"}],
        "progress":{"batchId":42,"endLsn":"0x0000002A000001F00003","writtenAt":"2026-11-29T10:00:05Z","ingestionLagSeconds":1.5,"retentionHeadroomHours":70.25},
        "finalization":{"finalizedUntil":"2026-11-29T10:00:00Z","updatedAt":"2026-11-29T10:00:05Z"}}}"#;
    env.kubectl_ok(&[
        "patch",
        "cdcs",
        "orders",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ])
    .await;

    let table = env.kubectl_ok(&["get", "cdcstreams"]).await;
    println!("{table}");
    let mut lines = table.lines();
    assert_eq!(
        cells(lines.next().unwrap_or_default()),
        [
            "NAME",
            "PHASE",
            "READY",
            "LAG",
            "HEADROOM",
            "FINALIZED",
            "AGE"
        ],
        "{table}"
    );
    let orders = table
        .lines()
        .find(|l| l.starts_with("orders "))
        .unwrap_or_default();
    assert_eq!(
        cells(orders)[..6],
        [
            "orders",
            "Streaming",
            "True",
            "1",
            "70",
            "2026-11-29T10:00:00Z"
        ],
        "{table}"
    );
    assert_eq!(table.lines().count(), 1 + EXAMPLES.len(), "{table}");
}

#[tokio::test]
async fn explain_describes_fields_and_secrets_only_passwords() {
    let env = KubeEnv::start().await;
    env.install_crd().await;
    let trigger = env
        .kubectl_ok(&["explain", "cdcstreams.spec.trigger"])
        .await;
    for text in [
        "availableNow",
        "processingTime",
        "schedule",
        "When micro-batches run",
    ] {
        assert!(trigger.contains(text), "no {text:?} in:\n{trigger}");
    }
    let password = env
        .kubectl_ok(&["explain", "cdcstreams.spec.source.credentials.passwordFrom"])
        .await;
    assert!(password.contains("secretKeyRef"), "{password}");
    assert!(
        !password.contains("env\t") && !password.contains("file\t"),
        "{password}"
    );
    let progress = env
        .kubectl_ok(&[
            "explain",
            "cdcstreams.status.progress.retentionHeadroomHours",
        ])
        .await;
    assert!(progress.contains("cleanup"), "{progress}");
}

/// A CdcStream in YAML with `extra` appended under `spec:`.
fn stream(name: &str, trigger: &str, extra: &str) -> String {
    format!(
        "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: {name}}}\nspec:\n  \
         appId: {name}-v1\n  source:\n    host: sql\n    database: shop\n    table: dbo.orders\n    \
         credentials:\n      username: r\n      passwordFrom: {{secretKeyRef: {{name: s, key: p}}}}\n  \
         target: {{name: bronze.{name}, location: /lake/{name}}}\n  checkpoint: /ckpt/{name}\n  \
         facts: {{name: ops.facts, location: /lake/facts}}\n  trigger: {trigger}\n{extra}"
    )
}

#[tokio::test]
async fn cel_rules_reject_invalid_and_immutable_changes() {
    let env = KubeEnv::start().await;
    env.install_crd().await;

    let rejected = [
        (
            stream("both", "{processingTime: 5s, availableNow: true}", ""),
            "processingTime and availableNow are exclusive",
        ),
        (
            stream("sched", "{processingTime: 5s, schedule: '@hourly'}", ""),
            "trigger.schedule needs availableNow: true",
        ),
        (
            stream("enc", "{}", "  snapshot: {mode: sometimes}\n"),
            "Unsupported value: \"sometimes\"",
        ),
        (
            stream("tbl", "{}", "").replace("dbo.orders", "orders"),
            "spec.source.table",
        ),
        (
            stream("envpw", "{}", "").replace("{secretKeyRef: {name: s, key: p}}", "{env: PW}"),
            "unknown field \"spec.source.credentials.passwordFrom.env\"",
        ),
    ];
    for (i, (manifest, message)) in rejected.iter().enumerate() {
        let file = env.write(&format!("bad-{i}.yaml"), manifest);
        let err = env.kubectl_fails(&["apply", "-f", &file]).await;
        assert!(err.contains(message), "expected {message:?} in:\n{err}");
    }

    let file = env.write("good.yaml", &stream("good", "{processingTime: 5s}", ""));
    env.kubectl_ok(&["apply", "-f", &file]).await;
    let immutable = [
        (r#"{"spec":{"appId":"other"}}"#, "appId is immutable"),
        (
            r#"{"spec":{"checkpoint":"/elsewhere"}}"#,
            "checkpoint is immutable",
        ),
        (
            r#"{"spec":{"target":{"location":"/lake/moved"}}}"#,
            "target.location is immutable",
        ),
        (
            r#"{"spec":{"target":{"name":"bronze.renamed"}}}"#,
            "target.name is immutable",
        ),
        (
            r#"{"spec":{"facts":{"location":"/lake/other-facts"}}}"#,
            "facts.location is immutable",
        ),
        (
            r#"{"spec":{"source":{"host":"other-sql"}}}"#,
            "source.host is immutable",
        ),
        (
            r#"{"spec":{"source":{"database":"other"}}}"#,
            "source.database is immutable",
        ),
        (
            r#"{"spec":{"source":{"table":"dbo.other"}}}"#,
            "source.table is immutable",
        ),
    ];
    for (patch, message) in immutable {
        let err = env
            .kubectl_fails(&["patch", "cdcs", "good", "--type=merge", "-p", patch])
            .await;
        assert!(err.contains(message), "expected {message:?} in:\n{err}");
    }
    // What may change does.
    env.kubectl_ok(&[
        "patch",
        "cdcs",
        "good",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true,"trigger":{"processingTime":"1m"}}}"#,
    ])
    .await;
    let suspended = env
        .kubectl_ok(&["get", "cdcs", "good", "-o", "jsonpath={.spec.suspend}"])
        .await;
    assert_eq!(suspended, "true");
}
