use std::time::Duration;

use super::*;
use crate::domain::{Granularity, TableName};
use crate::lake::StorageKind;
use crate::spec::CdcStream;
use crate::spec::{HeartbeatSpec, OnDataLoss, PasswordFrom, SecretKeyRef, SnapshotSpec, load_yaml};

const ORDERS: &str = include_str!("../../tests/fixtures/manifests/orders.yaml");
const INVOICES: &str = include_str!("../../tests/fixtures/manifests/minimal-s3.yaml");

fn spec(text: &str) -> CdcStreamSpec {
    load_yaml(text).unwrap().spec
}

fn credentials(s: &mut CdcStreamSpec) -> &mut crate::spec::CredentialsSpec {
    s.source
        .credentials
        .get_or_insert_with(|| crate::spec::CredentialsSpec {
            username: "u".into(),
            password_from: PasswordFrom::default(),
        })
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
    assert_eq!(
        config.source.readers, 1,
        "one reader unless the manifest asks"
    );
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
            |s| s.max_commits_per_batch = Some(0),
            "spec.maxCommitsPerBatch: must be > 0, got 0",
        ),
        (
            |s| {
                s.snapshot = Some(SnapshotSpec {
                    chunk_rows: 0,
                    ..Default::default()
                })
            },
            "spec.snapshot.chunkRows: must be > 0, got 0",
        ),
        (
            |s| s.source.port = 0,
            "spec.source.port: must be > 0, got 0",
        ),
        (
            |s| s.source.readers = 0,
            "spec.source.readers: must be between 1 and 16, got 0",
        ),
        (
            |s| s.source.readers = 17,
            "spec.source.readers: must be between 1 and 16, got 17",
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
            |s| credentials(s).password_from = PasswordFrom::default(),
            "spec.source.credentials.passwordFrom: set exactly one of env, file, secretKeyRef, got none",
        ),
        (
            |s| {
                credentials(s).password_from.secret_key_ref = Some(SecretKeyRef {
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
            |s| {
                if let Some(facts) = &mut s.facts {
                    facts.name = String::new();
                }
            },
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
        s.max_commits_per_batch = Some(0);
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
        "onDataLoss",
        "heartbeat",
        "sourceTimeZone",
        "maxIngestionLag",
    ] {
        assert!(yaml.contains(field), "CRD schema lacks {field}");
    }
}

#[test]
fn source_change_options_default_and_validate() {
    let config = spec(ORDERS).validate().unwrap();
    assert_eq!(config.on_data_loss, OnDataLoss::Fail);
    assert_eq!(config.heartbeat, None);
    assert_eq!(config.source.source_time_zone, None);

    let mut s = spec(ORDERS);
    s.on_data_loss = Some(OnDataLoss::Skip);
    s.source.source_time_zone = Some("Europe/Oslo".into());
    s.heartbeat = Some(HeartbeatSpec {
        table: "dbo.mssql_cdc_heartbeat".into(),
        interval: None,
    });
    let config = s.validate().unwrap();
    assert_eq!(config.on_data_loss, OnDataLoss::Skip);
    assert_eq!(
        config.source.source_time_zone,
        Some(chrono_tz::Europe::Oslo)
    );
    let heartbeat = config.heartbeat.expect("a heartbeat");
    assert_eq!(heartbeat.table.table, "mssql_cdc_heartbeat");
    assert_eq!(heartbeat.interval, Duration::from_secs(10));

    let errors = errors(|s| {
        s.source.source_time_zone = Some("Mars/Olympus".into());
        s.heartbeat = Some(HeartbeatSpec {
            table: "heartbeat".into(),
            interval: Some("0s".into()),
        });
    });
    assert_eq!(
        errors,
        vec![
            "spec.source.sourceTimeZone: expected an IANA time zone name such as Europe/Oslo, or UTC, got \"Mars/Olympus\"",
            "spec.heartbeat.table: expected schema.table, got \"heartbeat\"",
            "spec.heartbeat.interval: must be > 0, got \"0s\"",
        ]
    );
    let errors = errors_of_interval("soon");
    assert!(
        errors[0].starts_with("spec.heartbeat.interval:"),
        "{errors:?}"
    );
}

fn errors_of_interval(interval: &'static str) -> Vec<String> {
    let mut s = spec(ORDERS);
    s.heartbeat = Some(HeartbeatSpec {
        table: "dbo.heartbeat".into(),
        interval: Some(interval.into()),
    });
    match s.validate() {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}
#[test]
fn finalization_defaults_to_hours_and_names_bad_values() {
    let with =
        |finalization: &str| ORDERS.replace("  facts:", &format!("{finalization}\n  facts:"));
    let config = spec(&with(
        "  finalization: {name: ops.table_finalization, location: /lake/ops/finalization}",
    ))
    .validate()
    .unwrap();
    let finalization = config.finalization.expect("finalization is configured");
    assert_eq!(finalization.granularity, Granularity::Hour);
    assert_eq!(finalization.table.name, "ops.table_finalization");
    assert_eq!(spec(ORDERS).validate().unwrap().finalization, None);

    let daily = spec(&with(
        "  finalization: {name: ops.f, location: /lake/f, granularity: day}",
    ));
    assert_eq!(
        daily
            .validate()
            .unwrap()
            .finalization
            .map(|f| f.granularity),
        Some(Granularity::Day)
    );

    let weekly = load_yaml(&with(
        "  finalization: {name: ops.f, location: /lake/f, granularity: weekly}",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        weekly.contains("spec.finalization.granularity") && weekly.contains("weekly"),
        "{weekly}"
    );

    let empty = errors(|s| {
        s.finalization = Some(FinalizationSpec {
            name: " ".into(),
            location: "ftp://nowhere/f".into(),
            granularity: Granularity::Minute,
        });
    });
    assert!(
        empty
            .iter()
            .any(|e| e.starts_with("spec.finalization.name")),
        "{empty:?}"
    );
    assert!(
        empty
            .iter()
            .any(|e| e.starts_with("spec.finalization.location") && e.contains("ftp://nowhere/f")),
        "{empty:?}"
    );
}

#[test]
fn options_that_cannot_take_effect_are_warned_about() {
    assert_eq!(
        spec(ORDERS).validate().unwrap().unusable_options(),
        Vec::<String>::new()
    );
    let mut s = spec(ORDERS);
    s.source.encrypt = Encrypt::Off;
    s.source.trust_server_certificate = true;
    let warnings = s.validate().unwrap().unusable_options();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("spec.source.trustServerCertificate"),
        "{warnings:?}"
    );
}

#[test]
fn alerts_default_to_the_health_limits_and_bad_ones_fail_the_manifest() {
    let config = spec(ORDERS).validate().unwrap();
    assert_eq!(config.alerts, crate::spec::AlertLimits::default());

    let errors = errors(|s| {
        s.alerts = Some(crate::spec::AlertsSpec {
            min_headroom: Some("two days".into()),
            ..Default::default()
        });
    });
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.alerts.minHeadroom:") && errors[0].contains("\"two days\""),
        "{errors:?}"
    );
}

#[test]
fn readers_from_one_to_the_most_are_accepted_and_the_schema_says_so() {
    for readers in [1, 4, MAX_READERS] {
        let mut s = spec(ORDERS);
        s.source.readers = readers;
        let config = s.validate().expect("valid");
        assert_eq!(config.source.readers, readers as usize);
    }
    let schema = serde_json::to_value(schemars::schema_for!(super::super::types::SourceSpec))
        .expect("schema");
    let readers = &schema["properties"]["readers"];
    assert_eq!(readers["minimum"], 1, "{readers}");
    assert_eq!(readers["maximum"], MAX_READERS, "{readers}");
    assert_eq!(readers["default"], 1, "{readers}");
}

#[test]
fn a_slash_in_the_app_id_or_target_name_is_refused_since_txn_ids_would_read_alike() {
    let said = errors(|s| s.app_id = "orders/v1".into());
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("spec.appId: may not contain '/'"),
        "{said:?}"
    );
    let said = errors(|s| s.target.name = "bronze/orders".into());
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("spec.target.name:"), "{said:?}");
    assert!(
        errors(|s| s.target.name = "bronze.orders".into()).is_empty(),
        "dots stay allowed"
    );
}

#[test]
fn a_location_inside_a_tables_directory_is_refused_unless_hidden_there() {
    let said = errors(|s| {
        s.target.location = "s3://lake/bronze/orders".into();
        s.checkpoint = "s3://lake/bronze/orders/checkpoint".into();
    });
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("spec.checkpoint:") && said[0].contains("spec.target.location"),
        "{said:?}"
    );
    let said = errors(|s| {
        s.target.location = "/lake/bronze/orders".into();
        s.facts.as_mut().expect("facts").location = "/lake/bronze/orders/facts".into();
    });
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("spec.facts.location:"), "{said:?}");
    assert!(
        errors(|s| {
            s.target.location = "s3://lake/bronze/orders".into();
            s.checkpoint = "s3://lake/bronze/orders/_checkpoint".into();
        })
        .is_empty(),
        "a folder starting with _ is never vacuumed"
    );
    assert!(
        errors(|s| {
            s.target.location = "s3://lake/bronze/orders".into();
            s.checkpoint = "s3://lake/bronze/orders-checkpoint".into();
        })
        .is_empty(),
        "a sibling whose name starts alike is not inside"
    );
}
