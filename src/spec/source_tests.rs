use super::*;
use crate::spec::{CdcStream, Manifests, load_documents, load_source_yaml, load_yaml};

const SALES: &str = r#"
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcSource
metadata: {name: sales}
spec:
  connection:
    host: sql.example
    port: 14330
    database: sales
    credentials: {username: cdc_reader, passwordFrom: {env: MSSQL_PASSWORD}}
    readers: 2
  trigger: {processingTime: 30s}
  concurrency: {reads: 8}
  defaults:
    facts: {name: ops.facts, location: /lake/ops/facts}
    onDataLoss: resnapshot
    maxCommitsPerBatch: 500
    storageOptions: {region: eu-north-1, endpoint: http://s3.local}
"#;

const ORDERS: &str = r#"
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {name: orders}
spec:
  appId: orders-v1
  sourceRef: {name: sales}
  source: {table: dbo.orders}
  target: {name: bronze.orders, location: /lake/bronze/orders}
  checkpoint: /lake/_checkpoints/orders
  storageOptions: {region: us-east-1}
"#;

fn source() -> CdcSource {
    load_source_yaml(SALES).unwrap()
}

fn orders() -> CdcStream {
    load_yaml(ORDERS).unwrap()
}

#[test]
fn a_table_of_a_source_takes_its_connection_and_defaults() {
    let config = stream_config("sales", &source().spec, "orders", &orders().spec).unwrap();
    assert_eq!(config.source.host, "sql.example");
    assert_eq!(config.source.port, 14330);
    assert_eq!(config.source.database, "sales");
    assert_eq!(config.source.username, "cdc_reader");
    assert_eq!(config.source.readers, 2);
    assert_eq!(config.source.table.to_string(), "dbo.orders");
    assert_eq!(config.facts.name, "ops.facts");
    assert_eq!(config.on_data_loss, OnDataLoss::Resnapshot);
    assert_eq!(config.max_commits_per_batch.get(), 500);
    assert_eq!(
        config.trigger,
        crate::spec::Trigger::ProcessingTime(std::time::Duration::from_secs(30))
    );
    // The stream's own key wins; the source's others stay.
    assert_eq!(config.storage_options["region"], "us-east-1");
    assert_eq!(config.storage_options["endpoint"], "http://s3.local");
    assert_eq!(config.source_name.as_deref(), Some("sales"));
    // What the checkpoint and the target record is the stream's own.
    assert_eq!(config.app_id, "orders-v1");
    assert_eq!(config.target.name, "bronze.orders");
}

#[test]
fn a_stream_field_replaces_the_default_whole() {
    let mut stream = orders();
    stream.spec.on_data_loss = Some(OnDataLoss::Skip);
    stream.spec.facts = Some(TableSpec {
        name: "ops.orders_facts".into(),
        location: "/lake/ops/orders_facts".into(),
    });
    let config = stream_config("sales", &source().spec, "orders", &stream.spec).unwrap();
    assert_eq!(config.on_data_loss, OnDataLoss::Skip);
    assert_eq!(config.facts.name, "ops.orders_facts");
}

#[test]
fn a_source_field_on_the_stream_is_refused_by_name() {
    type Mutation = fn(&mut CdcStreamSpec);
    let cases: [(Mutation, &str); 4] = [
        (|s| s.source.host = Some("other".into()), "spec.source.host"),
        (
            |s| s.source.database = Some("other".into()),
            "spec.source.database",
        ),
        (
            |s| s.trigger.processing_time = Some("1s".into()),
            "spec.trigger",
        ),
        (
            |s| {
                s.heartbeat = Some(HeartbeatSpec {
                    table: "dbo.hb".into(),
                    interval: None,
                })
            },
            "spec.heartbeat",
        ),
    ];
    for (mutate, field) in cases {
        let mut stream = orders();
        mutate(&mut stream.spec);
        let error = stream_config("sales", &source().spec, "orders", &stream.spec).unwrap_err();
        assert!(
            matches!(&error, SourceRefError::SourceField { field: f, .. } if *f == field),
            "{field}: {error}"
        );
        assert!(error.to_string().starts_with(field), "{error}");
    }
}

#[test]
fn a_stream_of_another_source_is_refused() {
    let error = stream_config("billing", &source().spec, "orders", &orders().spec).unwrap_err();
    assert_eq!(
        error.to_string(),
        "spec.sourceRef: orders names Some(\"sales\"), not CdcSource \"billing\""
    );
}

#[test]
fn a_table_of_a_source_alone_says_to_run_it_with_its_source() {
    let errors = orders().spec.validate().unwrap_err().to_string();
    assert!(
        errors.contains("spec.sourceRef: this stream is one table of that CdcSource"),
        "{errors}"
    );
}

#[test]
fn the_resolved_stream_is_checked_like_a_stream_of_its_own() {
    let mut sales = source();
    sales.spec.defaults.facts = None;
    let error = stream_config("sales", &sales.spec, "orders", &orders().spec).unwrap_err();
    assert_eq!(error.to_string(), "orders: spec.facts: must not be empty");
}

#[test]
fn a_file_holds_a_stream_or_a_source_with_its_streams() {
    let two = format!(
        "{SALES}\n---\n{ORDERS}\n---\n{}",
        ORDERS.replace("orders", "items")
    );
    match load_documents(&two).unwrap() {
        Manifests::Source { source, streams } => {
            assert_eq!(source.metadata.name.as_deref(), Some("sales"));
            let names: Vec<_> = streams
                .iter()
                .filter_map(|s| s.metadata.name.as_deref())
                .collect();
            assert_eq!(names, ["orders", "items"]);
        }
        other => panic!("expected a source, got {other:?}"),
    }
    let alone = ORDERS
        .replace("  sourceRef: {name: sales}\n", "")
        .replace(
            "source: {table: dbo.orders}",
            "source: {host: h, database: d, table: dbo.orders, credentials: {username: u, passwordFrom: {env: P}}}\n  facts: {name: f, location: /f}",
        );
    assert!(matches!(
        load_documents(&alone).unwrap(),
        Manifests::Stream(_)
    ));
    let error = load_documents(&format!("{ORDERS}\n---\n{ORDERS}")).unwrap_err();
    assert!(
        error.to_string().contains("2 CdcStreams and no CdcSource"),
        "{error}"
    );
}

#[test]
fn an_unknown_field_of_a_source_names_its_document_and_the_near_name() {
    let typo = SALES.replace("concurrency: {reads: 8}", "concurrency: {raeds: 8}");
    let error = load_documents(&format!("{ORDERS}\n---\n{typo}")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "document 2 of the file: invalid manifest: 1 unknown field (a misspelt field would \
         silently change what the stream does):\n  unknown field spec.concurrency.raeds (did \
         you mean reads?)"
    );
}

#[test]
fn the_crd_rules_make_source_ref_exclusive_with_the_connection() {
    use kube::CustomResourceExt;
    let crd = serde_json::to_string(&crate::spec::CdcStream::crd()).unwrap();
    assert!(crd.contains("!has(self.sourceRef) || (!has(self.source.host)"));
    let source = serde_json::to_value(CdcSource::crd()).unwrap();
    assert_eq!(source["spec"]["names"]["shortNames"][0], "cdcsrc");
    assert_eq!(source["spec"]["names"]["categories"][0], "mssql-cdc");
}

#[test]
fn a_member_may_set_only_the_storage_options_that_send_nothing_elsewhere() {
    for key in [
        "endpoint",
        "AWS_ENDPOINT_URL",
        "proxy_url",
        "aws_access_key_id",
        "aws_profile",
    ] {
        let mut stream = orders();
        stream
            .spec
            .storage_options
            .insert(key.into(), "http://attacker.example".into());
        let error = stream_config("sales", &source().spec, "orders", &stream.spec).unwrap_err();
        assert_eq!(error.reason(), "StorageOptionNotAllowed", "{key}: {error}");
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("spec.storageOptions.{key}: ")),
            "{message}"
        );
        assert!(
            !message.contains("attacker"),
            "the value never shows: {message}"
        );
    }
    let mut stream = orders();
    stream.spec.storage_options = BTreeMap::from([
        ("Region".into(), "eu-west-1".into()),
        ("timeout".into(), "30s".into()),
    ]);
    stream_config("sales", &source().spec, "orders", &stream.spec).expect("harmless keys pass");
}

#[test]
fn every_location_of_a_member_lies_under_the_sources_allowed_locations() {
    let mut sales = source();
    sales.spec.allowed_locations = vec!["/lake/bronze".into(), "/lake/ops/".into()];
    let mut stream = orders();
    stream.spec.checkpoint = "/lake/bronze/_checkpoints/orders".into();
    stream_config("sales", &sales.spec, "orders", &stream.spec).expect("all under the prefixes");
    type Mutation = fn(&mut CdcStreamSpec);
    let cases: [(Mutation, &str); 5] = [
        (
            |s| s.target.location = "/lake/bronze-other/orders".into(),
            "spec.target.location",
        ),
        (
            |s| s.target.location = "/lake/bronze/../private/orders".into(),
            "spec.target.location",
        ),
        (
            |s| s.checkpoint = "/elsewhere/orders".into(),
            "spec.checkpoint",
        ),
        (
            |s| {
                s.facts = Some(TableSpec {
                    name: "x.facts".into(),
                    location: "/tmp/facts".into(),
                })
            },
            "spec.facts.location",
        ),
        (
            |s| {
                s.finalization = Some(FinalizationSpec {
                    name: "x.fin".into(),
                    location: "s3://other-bucket/fin".into(),
                    granularity: Default::default(),
                })
            },
            "spec.finalization.location",
        ),
    ];
    for (mutate, field) in cases {
        let mut stream = orders();
        stream.spec.checkpoint = "/lake/bronze/_checkpoints/orders".into();
        mutate(&mut stream.spec);
        let error = stream_config("sales", &sales.spec, "orders", &stream.spec).unwrap_err();
        assert_eq!(error.reason(), "LocationNotAllowed", "{field}: {error}");
        assert!(error.to_string().starts_with(field), "{error}");
    }
    // A default the source sets is held to the same prefixes.
    sales.spec.allowed_locations = vec!["/lake/bronze".into()];
    let error = stream_config("sales", &sales.spec, "orders", &stream.spec).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("spec.facts.location: file:///lake/ops/facts/"),
        "{error}"
    );
}

#[test]
fn a_stream_joins_a_source_with_members_only_when_its_labels_match() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    let mut sales = source();
    sales.spec.members = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("team".into(), "sales".into())])),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: "NotIn".into(),
            values: Some(vec!["restricted".into()]),
        }]),
    });
    let mut stream = orders();
    let refused = match membership(&sales, &stream) {
        Membership::Refused(error) => error,
        other => panic!("an unlabelled stream joined: {other:?}"),
    };
    assert_eq!(refused.reason(), "NotAMemberOfSource");
    let message = refused.to_string();
    assert!(
        message.contains("team=sales") && message.contains("tier notin (restricted)"),
        "the selector is named: {message}"
    );
    stream.metadata.labels = Some(BTreeMap::from([("team".into(), "sales".into())]));
    assert!(matches!(membership(&sales, &stream), Membership::Member));
    stream
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("tier".into(), "restricted".into());
    assert!(matches!(
        membership(&sales, &stream),
        Membership::Refused(_)
    ));
    stream.spec.source_ref = None;
    assert!(matches!(membership(&sales, &stream), Membership::Elsewhere));
    sales.spec.members = None;
    stream.spec.source_ref = orders().spec.source_ref;
    assert!(
        matches!(membership(&sales, &stream), Membership::Member),
        "without spec.members any stream naming the source joins"
    );
}
