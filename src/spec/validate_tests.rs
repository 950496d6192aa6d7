use std::time::Duration;

use super::*;
use crate::lake::StorageKind;
use crate::spec::CdcStream;
use crate::spec::{PasswordFrom, SecretKeyRef, load_yaml};

const ORDERS: &str = include_str!("../../tests/fixtures/manifests/orders.yaml");
const INVOICES: &str = include_str!("../../tests/fixtures/manifests/minimal-s3.yaml");

fn spec(text: &str) -> CdcStreamSpec {
    let loaded = load_yaml(text).unwrap();
    assert_eq!(loaded.unknown_fields, vec![], "fixture has unknown fields");
    loaded.stream.spec
}

fn errors(mutate: impl FnOnce(&mut CdcStreamSpec)) -> Vec<String> {
    let mut s = spec(ORDERS);
    mutate(&mut s);
    match s.validate() {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn the_issue_example_is_valid() {
    let config = spec(ORDERS).validate().unwrap();
    assert_eq!(config.app_id, "orders-v1");
    assert_eq!(
        config.source.table,
        TableName {
            schema: "dbo".into(),
            table: "orders".into()
        }
    );
    assert_eq!(
        config.source.capture_instance.as_ref().map(|c| c.as_str()),
        Some("dbo_orders")
    );
    assert_eq!(
        config.source.password,
        PasswordSource::Env("MSSQL_PASSWORD".into())
    );
    assert_eq!(
        config.trigger,
        Trigger::ProcessingTime(Duration::from_secs(10))
    );
    assert_eq!(config.max_commits_per_batch.get(), 10_000);
    assert_eq!(config.snapshot_mode, SnapshotMode::Initial);
    assert_eq!(config.target.location.kind(), StorageKind::Local);
    assert!(
        config
            .target
            .location
            .url()
            .as_str()
            .ends_with("/lake/bronze/orders/")
    );
}

#[test]
fn object_store_locations_and_secret_refs_are_valid() {
    let config = spec(INVOICES).validate().unwrap();
    assert_eq!(config.source.port, 1433);
    assert_eq!(config.source.encrypt, Encrypt::Off);
    assert_eq!(config.source.table.schema, "sales");
    assert_eq!(config.source.table.table, "invoices");
    assert_eq!(config.trigger, Trigger::AvailableNow);
    assert_eq!(config.snapshot_mode, SnapshotMode::Never);
    assert_eq!(
        [
            config.target.location.kind(),
            config.checkpoint.kind(),
            config.facts.location.kind()
        ],
        [StorageKind::S3, StorageKind::Azure, StorageKind::Azure]
    );
    assert_eq!(
        config.source.password,
        PasswordSource::SecretKeyRef {
            name: "mssql".into(),
            key: "password".into()
        }
    );
}

#[test]
fn each_invalid_value_is_named_with_its_field() {
    type Mutation = fn(&mut CdcStreamSpec);
    let cases: Vec<(Mutation, &str)> = vec![
        (|s| s.app_id = " ".into(), "spec.appId: must not be empty"),
        (
            |s| s.max_commits_per_batch = 0,
            "spec.maxCommitsPerBatch: must be > 0, got 0",
        ),
        (
            |s| s.snapshot.chunk_rows = 0,
            "spec.snapshot.chunkRows: must be > 0, got 0",
        ),
        (
            |s| s.source.port = 0,
            "spec.source.port: must be > 0, got 0",
        ),
        (
            |s| s.source.table = "orders".into(),
            "spec.source.table: expected schema.table, got \"orders\"",
        ),
        (
            |s| s.source.table = "shop.dbo.orders".into(),
            "spec.source.table: expected schema.table, got \"shop.dbo.orders\"",
        ),
        (
            |s| s.source.table = "dbo.".into(),
            "spec.source.table: expected schema.table, got \"dbo.\"",
        ),
        (
            |s| s.trigger.available_now = Some(true),
            "spec.trigger: processingTime and availableNow are exclusive",
        ),
        (
            |s| s.trigger.schedule = Some("@hourly".into()),
            "spec.trigger.schedule: needs availableNow: true, got \"@hourly\"",
        ),
        (
            |s| s.trigger.processing_time = Some("soon".into()),
            "spec.trigger.processingTime: ",
        ),
        (
            |s| s.trigger.processing_time = Some("0s".into()),
            "spec.trigger.processingTime: must be > 0, got \"0s\"",
        ),
        (
            |s| s.source.credentials.password_from = PasswordFrom::default(),
            "spec.source.credentials.passwordFrom: set exactly one of env, file, secretKeyRef, got none",
        ),
        (
            |s| {
                s.source.credentials.password_from.secret_key_ref = Some(SecretKeyRef {
                    name: "db".into(),
                    key: "pw".into(),
                })
            },
            "spec.source.credentials.passwordFrom: set exactly one of env, file, secretKeyRef, got env, secretKeyRef",
        ),
        (
            |s| s.source.columns = Some(vec![]),
            "spec.source.columns: must not be empty",
        ),
        (
            |s| s.source.columns = Some(vec!["id".into(), "ID".into()]),
            "spec.source.columns[1]: listed twice, got \"ID\"",
        ),
        (
            |s| s.source.capture_instance = Some(String::new()),
            "spec.source.captureInstance: expected 1 to 100 printable characters, got \"\"",
        ),
        (
            |s| s.target.location = "http://lake/x".into(),
            "spec.target.location: scheme http:// is not supported",
        ),
        (
            |s| s.facts.name = String::new(),
            "spec.facts.name: must not be empty",
        ),
        (
            |s| s.checkpoint = String::new(),
            "spec.checkpoint: empty, got \"\"",
        ),
    ];
    for (mutate, expected) in cases {
        let found = errors(mutate);
        assert_eq!(
            found.len(),
            1,
            "expected one error like {expected:?}, got {found:?}"
        );
        assert!(
            found[0].starts_with(expected),
            "{:?} does not start with {expected:?}",
            found[0]
        );
    }
}

#[test]
fn reports_every_problem_at_once() {
    let found = errors(|s| {
        s.app_id = String::new();
        s.max_commits_per_batch = 0;
        s.source.table = "orders".into();
    });
    assert_eq!(found.len(), 3, "{found:?}");
}

#[test]
fn durations_use_human_units() {
    let cases = [("10s", 10), ("5m", 300), ("1h 30m", 5400), ("250ms", 0)];
    for (text, seconds) in cases {
        let mut s = spec(ORDERS);
        s.trigger.processing_time = Some(text.into());
        let Trigger::ProcessingTime(interval) = s.validate().unwrap().trigger else {
            panic!("{text}: not a processing-time trigger");
        };
        assert_eq!(interval.as_secs(), seconds, "{text}");
    }
}

#[test]
fn trigger_defaults_to_ten_seconds() {
    let mut s = spec(ORDERS);
    s.trigger = Default::default();
    assert_eq!(
        s.validate().unwrap().trigger,
        Trigger::ProcessingTime(Duration::from_secs(10))
    );
    s.trigger.available_now = Some(false);
    assert_eq!(
        s.validate().unwrap().trigger,
        Trigger::ProcessingTime(Duration::from_secs(10))
    );
}

#[test]
fn crd_is_generated_from_the_same_types() {
    use kube::CustomResourceExt;
    let crd = CdcStream::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("cdcstreams.mssql-cdc.io")
    );
    assert_eq!(crd.spec.names.short_names, Some(vec!["cdcs".to_string()]));
    let yaml = serde_yaml::to_string(&crd).unwrap();
    for field in [
        "appId",
        "captureInstance",
        "passwordFrom",
        "secretKeyRef",
        "maxCommitsPerBatch",
    ] {
        assert!(yaml.contains(field), "CRD schema lacks {field}");
    }
}
