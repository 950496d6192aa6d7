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
            "REASON",
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
        cells(orders)[..7],
        [
            "orders",
            "Streaming",
            "True",
            "Healthy",
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
        (
            stream(
                "tmpvol",
                "{}",
                "  worker: {volumes: [{name: tmp, emptyDir: {}}]}\n",
            ),
            "the volume name tmp is the operator's own emptyDir",
        ),
        (
            stream(
                "tmpmount",
                "{}",
                "  worker: {volumes: [{name: lake, emptyDir: {}}], \
                 volumeMounts: [{name: lake, mountPath: /tmp}]}\n",
            ),
            "/tmp is the operator's own emptyDir",
        ),
        (
            stream(
                "label",
                "{}",
                "  worker: {podLabels: {mssql-cdc.io/stream: other}}\n",
            ),
            "podLabels cannot set app.kubernetes.io/name or mssql-cdc.io/stream",
        ),
        (
            stream(
                "skew",
                "{}",
                "  worker: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, \
                 whenUnsatisfiable: Sometimes}]}\n",
            ),
            "Unsupported value: \"Sometimes\"",
        ),
        (
            stream("slash", "{}", "").replace("appId: slash-v1", "appId: slash/v1"),
            "appId may not contain '/'",
        ),
        (
            stream("tslash", "{}", "").replace("name: bronze.tslash", "name: bronze/tslash"),
            "target.name may not contain '/'",
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

/// A worker with one volume of each common source, an affinity with every
/// kind of term and a topology spread constraint with every field.
const CLOSED_WORKER: &str = "  worker:
    volumes:
      - {name: lake, persistentVolumeClaim: {claimName: lake, readOnly: false}}
      - {name: scratch, emptyDir: {medium: Memory, sizeLimit: 1Gi}}
      - {name: conf, configMap: {name: conf, items: [{key: a, path: a.conf, mode: 420}], optional: true}}
      - {name: ca, secret: {secretName: ca, defaultMode: 292}}
      - name: blob
        csi: {driver: blob.csi.azure.com, volumeAttributes: {containerName: lake}, nodePublishSecretRef: {name: blob}}
      - name: identity
        projected:
          defaultMode: 420
          sources:
            - serviceAccountToken: {audience: sts.amazonaws.com, expirationSeconds: 3600, path: token}
            - configMap: {name: conf, items: [{key: a, path: a}]}
            - secret: {name: ca, optional: true}
            - downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}
      - name: meta
        downwardAPI: {items: [{path: cpu, resourceFieldRef: {containerName: worker, resource: limits.cpu, divisor: 1m}}]}
      - {name: host, hostPath: {path: /var/lake, type: DirectoryOrCreate}}
      - name: claim
        ephemeral:
          volumeClaimTemplate:
            metadata: {labels: {app: lake}, annotations: {note: scratch}}
            spec: {accessModes: [ReadWriteOnce], storageClassName: fast, resources: {requests: {storage: 10Gi}}}
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]
        preferredDuringSchedulingIgnoredDuringExecution:
          - {weight: 10, preference: {matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]}}
      podAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 5
            podAffinityTerm: {topologyKey: zone, labelSelector: {matchLabels: {app: sql}}, namespaces: [db]}
      podAntiAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, matchLabelKeys: [pod-template-hash], namespaceSelector: {}}
    topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: zone
        whenUnsatisfiable: ScheduleAnyway
        labelSelector: {matchExpressions: [{key: app, operator: Exists}]}
        matchLabelKeys: [pod-template-hash]
        minDomains: 2
        nodeAffinityPolicy: Honor
        nodeTaintsPolicy: Ignore
";

/// `volumes`, `affinity` and `topologySpreadConstraints` have closed
/// schemas: every valid field is kept, a misspelt one is refused (not
/// silently dropped by the operator's types), and a volume needs exactly
/// one source (a name-only volume would become an emptyDir).
#[tokio::test]
async fn worker_volumes_affinity_and_spread_refuse_unknown_fields() {
    let env = KubeEnv::start().await;
    env.install_crd().await;

    let file = env.write("closed.yaml", &stream("closed", "{}", CLOSED_WORKER));
    env.kubectl_ok(&["apply", "-f", &file]).await;
    let stored = env
        .kubectl_ok(&["get", "cdcs", "closed", "-o", "json"])
        .await;
    let stored: serde_json::Value = serde_json::from_str(&stored).expect("json");
    let sent: serde_json::Value =
        serde_yaml::from_str(&stream("closed", "{}", CLOSED_WORKER)).expect("yaml");
    assert_eq!(
        stored["spec"]["worker"], sent["spec"]["worker"],
        "the API server pruned a valid field"
    );

    let worker = |yaml: &str| stream("typo", "{}", &format!("  worker:\n{yaml}"));
    let rejected = [
        (
            worker("    volumes: [{name: checkpoint, persistentVolumeClam: {claimName: x}}]\n"),
            "unknown field \"spec.worker.volumes[0].persistentVolumeClam\"",
        ),
        (
            worker("    volumes: [{name: checkpoint, persistentVolumeClaim: {claimNam: x}}]\n"),
            "unknown field \"spec.worker.volumes[0].persistentVolumeClaim.claimNam\"",
        ),
        (
            worker(
                "    volumes: [{name: id, projected: {sources: [{serviceAccountTokn: {path: t}}]}}]\n",
            ),
            "unknown field \"spec.worker.volumes[0].projected.sources[0].serviceAccountTokn\"",
        ),
        (
            worker("    volumes: [{name: checkpoint}]\n"),
            "a volume needs exactly one source",
        ),
        (
            worker("    volumes: [{name: two, emptyDir: {}, secret: {secretName: s}}]\n"),
            "a volume needs exactly one source",
        ),
        (
            worker(
                "    affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: \
                 {nodeSelectorTerm: [{matchExpressions: [{key: a, operator: In}]}]}}}\n",
            ),
            "unknown field \"spec.worker.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerm\"",
        ),
        (
            worker(
                "    affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: \
                 [{topologyKey: zone, labelSelecter: {}}]}}\n",
            ),
            "unknown field \"spec.worker.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelecter\"",
        ),
        (
            worker(
                "    topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, \
                 whenUnsatisfiable: DoNotSchedule, minDomain: 2}]\n",
            ),
            "unknown field \"spec.worker.topologySpreadConstraints[0].minDomain\"",
        ),
        (
            worker(
                "    topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, \
                 whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Ignored}]\n",
            ),
            "Unsupported value: \"Ignored\"",
        ),
    ];
    for (i, (manifest, message)) in rejected.iter().enumerate() {
        let file = env.write(&format!("typo-{i}.yaml"), manifest);
        let err = env.kubectl_fails(&["apply", "-f", &file]).await;
        assert!(err.contains(message), "expected {message:?} in:\n{err}");
        let listed = env.kubectl_ok(&["get", "cdcs", "-o", "name"]).await;
        assert!(!listed.contains("typo"), "{listed}");
    }

    // Without strict validation the API server prunes the misspelt source:
    // the volume is then name-only, and the exactly-one rule refuses it.
    let file = env.write("typo-lax.yaml", &rejected[0].0);
    let err = env
        .kubectl_fails(&["apply", "--validate=false", "-f", &file])
        .await;
    assert!(
        err.contains("a volume needs exactly one source"),
        "expected the exactly-one rule in:\n{err}"
    );
}

/// Every `enum` under `spec` reachable through objects: (path, values).
fn spec_enums() -> Vec<(Vec<String>, Vec<serde_json::Value>)> {
    fn walk(
        node: &serde_json::Value,
        path: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, Vec<serde_json::Value>)>,
    ) {
        if let Some(values) = node["enum"].as_array() {
            out.push((path.clone(), values.clone()));
        }
        for (name, child) in node["properties"].as_object().into_iter().flatten() {
            path.push(name.clone());
            walk(child, path, out);
            path.pop();
        }
    }
    let crd = serde_json::to_value(mssql_cdc::operator::crd::crd()).expect("json");
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut out = Vec::new();
    walk(spec, &mut Vec::new(), &mut out);
    out
}

#[tokio::test]
async fn kubectl_applies_crds_then_a_stream_with_each_enum_value() {
    let env = KubeEnv::start().await;
    // The folder, as the docs say: kubectl reads it as YAML 1.1. It applies
    // without a warning (an unknown schema format would print one).
    let applied = env.kubectl(&["apply", "-f", &repo_file("crds/")]).await;
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(applied.status.success(), "kubectl apply -f crds/: {stderr}");
    assert_eq!(
        stderr, "",
        "kubectl apply -f crds/ prints nothing on stderr"
    );
    // What it would print for a format the API server does not know.
    let old = std::fs::read_to_string(repo_file("crds/cdcstreams.yaml"))
        .expect("crds/cdcstreams.yaml")
        .replace("cdcstreams.mssql-cdc.io", "olds.mssql-cdc.io")
        .replace("plural: cdcstreams", "plural: olds")
        .replace("singular: cdcstream", "singular: old")
        .replace("kind: CdcStream", "kind: Old")
        .replace("listKind: CdcStreamList", "listKind: OldList")
        .replace("      - cdcs\n", "      - olds\n")
        .replacen(
            "                    port:\n",
            "                    port:\n                      format: uint16\n",
            1,
        );
    let old_file = env.write("old-crd.yaml", &old);
    let warned = env.kubectl(&["create", "-f", &old_file]).await;
    let warned = String::from_utf8_lossy(&warned.stderr);
    assert!(
        warned.contains("Warning: unrecognized format \"uint16\""),
        "a schema format the API server does not know warns: {warned}"
    );
    // Client-side apply stored the CRD's JSON in an annotation, well
    // within the 256 KiB the API server allows (the test API server
    // refuses more, as kube-apiserver does).
    let crd = env
        .kubectl_ok(&["get", "crd", "cdcstreams.mssql-cdc.io", "-o", "json"])
        .await;
    let crd: serde_json::Value = serde_json::from_str(&crd).expect("json");
    let key = "kubectl.kubernetes.io/last-applied-configuration";
    let stored = crd["metadata"]["annotations"][key]
        .as_str()
        .expect("kubectl apply stores the applied object")
        .len();
    assert!(
        key.len() + stored < 256 * 1024 * 3 / 4,
        "the CRD takes {stored} bytes of last-applied annotation"
    );
    env.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/cdcstreams.mssql-cdc.io",
        "--timeout=20s",
    ])
    .await;
    let base: serde_json::Value = serde_yaml::from_str(&stream(
        "base",
        "{processingTime: 5s}",
        "  finalization: {name: ops.finalization, location: /lake/control}\n  \
         silver: {name: silver.base, location: /lake/silver}\n",
    ))
    .expect("base stream");
    let enums = spec_enums();
    let paths: Vec<String> = enums.iter().map(|(p, _)| p.join(".")).collect();
    for expected in [
        "source.encrypt",
        "snapshot.mode",
        "onDataLoss",
        "finalization.granularity",
    ] {
        assert!(paths.contains(&expected.to_string()), "{paths:?}");
    }
    let mut applied = 0;
    for (path, values) in enums {
        for value in values {
            let name = format!("enum-{applied}");
            let mut manifest = base.clone();
            manifest["metadata"]["name"] = name.clone().into();
            manifest["spec"]["appId"] = format!("{name}-v1").into();
            let mut node = &mut manifest["spec"];
            for key in &path {
                node = &mut node[key.as_str()];
            }
            *node = value.clone();
            // Written as the project writes YAML (quoted where YAML 1.1
            // would read a bool), applied by kubectl.
            let yaml = mssql_cdc::operator::yaml::to_yaml(&manifest);
            let file = env.write(&format!("{name}.yaml"), &yaml);
            env.kubectl_ok(&["apply", "-f", &file]).await;
            let jsonpath = format!("jsonpath={{.spec.{}}}", path.join("."));
            let stored = env
                .kubectl_ok(&["get", "cdcs", &name, "-o", &jsonpath])
                .await;
            assert_eq!(
                stored,
                value.as_str().unwrap_or_default(),
                "spec.{}",
                path.join(".")
            );
            applied += 1;
        }
    }
    assert!(applied >= 11, "only {applied} enum values");
    // `encrypt: "off"` as a user writes it, quoted.
    let off = stream("encrypt-off", "{processingTime: 5s}", "")
        .replace("    credentials:", "    encrypt: \"off\"\n    credentials:");
    env.kubectl_ok(&["apply", "-f", &env.write("off.yaml", &off)])
        .await;
    // The category lists the streams.
    let listed = env.kubectl_ok(&["get", "mssql-cdc", "-o", "name"]).await;
    assert!(
        listed.contains("cdcstream.mssql-cdc.io/encrypt-off"),
        "{listed}"
    );
}

#[tokio::test]
async fn a_source_applies_and_get_cdcsrc_shows_its_tables() {
    let env = KubeEnv::start().await;
    env.kubectl_ok(&["apply", "-f", &repo_file("crds/")]).await;
    env.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/cdcsources.mssql-cdc.io",
        "--timeout=20s",
    ])
    .await;
    let source = env.write(
        "source.yaml",
        "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcSource\nmetadata: {name: sales}\nspec:\n  \
         connection:\n    host: sql.example.internal\n    database: sales\n    credentials:\n      \
         username: cdc_reader\n      passwordFrom: {secretKeyRef: {name: sales-sql, key: password}}\n  \
         concurrency: {reads: 8}\n  idleCommitInterval: 5m\n",
    );
    let out = env.kubectl_ok(&["apply", "-f", &source]).await;
    assert!(
        out.contains("cdcsource.mssql-cdc.io/sales created"),
        "{out}"
    );
    let status = r#"{"status":{"tables":{"total":3,"ready":3,"snapshotting":0,"failed":0,"suspended":0},
        "tablesReady":"3/3","maxIngestionLagSeconds":2.5,"minHeadroomHours":70.25,
        "finalizedUntil":"2026-11-29T10:00:00Z"}}"#;
    env.kubectl_ok(&[
        "patch",
        "cdcsrc",
        "sales",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ])
    .await;
    let table = env.kubectl_ok(&["get", "cdcsrc"]).await;
    let mut lines = table.lines();
    assert_eq!(
        cells(lines.next().unwrap_or_default()),
        [
            "NAME",
            "DATABASE",
            "TABLES",
            "FAILED",
            "MAX",
            "LAG",
            "MIN",
            "HEADROOM",
            "FINALIZED",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(
        cells(lines.next().unwrap_or_default())[..7],
        [
            "sales",
            "sales",
            "3/3",
            "0",
            "2",
            "70",
            "2026-11-29T10:00:00Z"
        ],
        "{table}"
    );
    // The category lists sources with the streams.
    let all = env.kubectl_ok(&["get", "mssql-cdc"]).await;
    assert!(all.contains("cdcsource.mssql-cdc.io/sales"), "{all}");
    // The database cannot change under its streams' checkpoints.
    let moved = env.write(
        "moved.yaml",
        &std::fs::read_to_string(&source)
            .expect("source file")
            .replace("database: sales", "database: other"),
    );
    let refused = env.kubectl(&["apply", "-f", &moved]).await;
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a new database is refused");
    assert!(said.contains("connection.database is immutable"), "{said}");
}
