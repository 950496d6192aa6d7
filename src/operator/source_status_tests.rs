use chrono::TimeZone;

use super::*;
use crate::operator::conditions::{CAPTURE_HEALTHY, WORKER_RUNNING};
use crate::operator::source_conditions::{SOURCE_CONNECTED, wake_hash};
use crate::operator::test_fixtures::{source, source_stream};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap()
}

/// A stream of the fixture source whose status says `ready`, with a lag
/// and headroom.
fn table(name: &str, ready: bool, lag: f64, headroom: f64) -> CdcStream {
    let mut stream = source_stream(name);
    stream.status = Some(
        serde_json::from_value(serde_json::json!({
            "phase": "Streaming",
            "progress": {"ingestionLagSeconds": lag, "retentionHeadroomHours": headroom},
            "conditions": [{
                "type": "Ready", "status": if ready { "True" } else { "False" },
                "reason": "R", "message": "m", "lastTransitionTime": "2026-12-04T11:00:00Z"
            }],
        }))
        .unwrap(),
    );
    stream
}

fn running_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "shop-source-1"},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "worker", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-12-04T11:00:00Z"}}
        }]}
    }))
    .unwrap()
}

fn status_of(streams: &[&CdcStream], pods: &[Pod]) -> CdcSourceStatus {
    status_with(&source(serde_json::json!({})), streams, pods)
}

#[test]
fn every_table_ready_makes_the_source_ready_with_its_aggregates() {
    let (a, b, c) = (
        table("a", true, 2.2, 40.0),
        table("b", true, 7.1, 30.55),
        table("c", true, 1.0, 50.0),
    );
    let status = status_of(&[&a, &b, &c], &[running_pod()]);
    assert_eq!(status.tables_ready.as_deref(), Some("3/3"));
    let tables = status.tables.unwrap();
    assert_eq!((tables.total, tables.ready, tables.failed), (3, 3, 0));
    assert_eq!(status.max_ingestion_lag_seconds, Some(8.0));
    assert_eq!(status.min_headroom_hours, Some(30.5));
    assert_eq!(status.observed_generation, Some(1));
    let ready = condition(&status, READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Healthy")
    );
    assert_eq!(condition(&status, WORKER_RUNNING).unwrap().status, "True");
}

#[test]
fn a_table_not_ready_is_named_and_the_names_are_bounded() {
    let tables: Vec<CdcStream> = (0..15)
        .map(|i| table(&format!("t{i:02}"), i == 0, 1.0, 48.0))
        .collect();
    let refs: Vec<&CdcStream> = tables.iter().collect();
    let status = status_of(&refs, &[running_pod()]);
    assert_eq!(status.tables_ready.as_deref(), Some("1/15"));
    let ready = condition(&status, READY).unwrap();
    assert_eq!(ready.reason, "TablesNotReady");
    assert!(ready.message.contains("t01, t02"), "{}", ready.message);
    assert!(ready.message.contains("and 4 more"), "{}", ready.message);
    assert!(!ready.message.contains("t11"), "{}", ready.message);
    // Bounded: the status holds no entry per table.
    assert_eq!(status.conditions.len(), 5);
    assert_eq!(condition(&status, TABLES_DEGRADED).unwrap().status, "False");
}

#[test]
fn a_failed_table_degrades_the_source_and_is_counted() {
    let a = table("a", true, 1.0, 48.0);
    let mut b = table("b", false, 1.0, 48.0);
    if let Some(status) = b.status.as_mut() {
        status.phase = Some(Phase::Failed);
    }
    let status = status_of(&[&a, &b], &[running_pod()]);
    assert_eq!(status.tables.unwrap().failed, 1);
    let degraded = condition(&status, TABLES_DEGRADED).unwrap();
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "TablesFailed")
    );
    assert!(degraded.message.contains(": b;"), "{}", degraded.message);
    assert_eq!(condition(&status, READY).unwrap().reason, "TablesNotReady");
}

#[test]
fn a_table_whose_store_is_down_degrades_the_source_and_one_whose_source_is_down_does_not() {
    let waiting = |name: &str, reason: &str| {
        let mut stream = table(name, false, 1.0, 48.0);
        if let Some(status) = stream.status.as_mut() {
            status.worker = Some(crate::spec::WorkerStatus {
                state: WorkerState::Waiting,
                reason: reason.into(),
                message: "m".into(),
                since: now(),
                restarts: 0,
            });
        }
        stream
    };
    let store = waiting("orders", STORE_UNAVAILABLE);
    let source = waiting("items", crate::operator::failure::SOURCE_UNAVAILABLE);
    let status = status_of(&[&store, &source], &[running_pod()]);
    assert_eq!(status.tables.unwrap().failed, 1);
    let degraded = condition(&status, TABLES_DEGRADED).unwrap();
    assert_eq!(degraded.status, "True");
    assert!(
        degraded.message.contains(": orders;"),
        "{}",
        degraded.message
    );
}

#[test]
fn no_tables_or_no_worker_pod_is_not_ready_and_says_what_to_do() {
    let status = status_of(&[], &[running_pod()]);
    let ready = condition(&status, READY).unwrap();
    assert_eq!(ready.reason, "NoTables");
    assert!(ready.message.contains("spec.sourceRef.name: shop"));
    let a = table("a", true, 1.0, 48.0);
    let status = status_of(&[&a], &[]);
    let ready = condition(&status, READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NoWorkerPod")
    );
}

#[test]
fn a_refused_worker_is_what_ready_reports() {
    let refused = BuildError::PasswordNotFromSecret;
    let observed = SourceObserved {
        streams: &[],
        pods: &[],
        failure: Some(&refused),
        reconcile_error: None,
        workload_fault: None,
        now: now(),
    };
    let status = source_status(&source(serde_json::json!({})), &observed);
    let ready = condition(&status, READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(ready.message.contains("fix the spec"), "{}", ready.message);
}

#[test]
fn finalized_until_is_the_earliest_once_every_finalizing_table_reports() {
    let finalizing = |name: &str, until: Option<&str>| {
        let mut stream = table(name, true, 1.0, 48.0);
        stream.spec.finalization = Some(
            serde_json::from_value(serde_json::json!({"name": "ops.f", "location": "/f"})).unwrap(),
        );
        if let (Some(status), Some(until)) = (stream.status.as_mut(), until) {
            status.finalization = Some(
                serde_json::from_value(serde_json::json!({
                    "finalizedUntil": until, "updatedAt": until
                }))
                .unwrap(),
            );
        }
        stream
    };
    let a = finalizing("a", Some("2026-12-04T10:00:00Z"));
    let b = finalizing("b", Some("2026-12-04T09:00:00Z"));
    let c = finalizing("c", None);
    let status = status_of(&[&a, &b], &[running_pod()]);
    assert_eq!(
        status.finalized_until.as_deref(),
        Some("2026-12-04T09:00:00Z")
    );
    assert_eq!(
        status_of(&[&a, &b, &c], &[running_pod()]).finalized_until,
        None
    );
}

#[test]
fn a_condition_keeps_its_transition_time_while_its_status_holds() {
    let a = table("a", true, 1.0, 48.0);
    let mut src = source(serde_json::json!({}));
    let observed = SourceObserved {
        streams: &[&a],
        pods: &[running_pod()],
        failure: None,
        reconcile_error: None,
        workload_fault: None,
        now: now(),
    };
    src.status = Some(source_status(&src, &observed));
    let later = SourceObserved {
        now: now() + chrono::Duration::minutes(5),
        ..observed
    };
    let again = source_status(&src, &later);
    assert!(shows(&src, &again));
}

/// The fixture source with what its worker reported of SQL Server.
fn reported(connection: serde_json::Value, spec: serde_json::Value) -> CdcSource {
    let mut source = source(serde_json::json!({"spec": spec}));
    source.status = Some(
        serde_json::from_value(serde_json::json!({"connection": connection})).expect("a status"),
    );
    source
}

/// The fixture source (with `spec`) whose worker reads SQL Server.
fn connected(spec: serde_json::Value) -> CdcSource {
    reported(
        serde_json::json!({"connected": true, "reason": "Connected", "message": "m",
            "since": "2026-12-04T11:00:00Z"}),
        spec,
    )
}

fn status_with(source: &CdcSource, streams: &[&CdcStream], pods: &[Pod]) -> CdcSourceStatus {
    let observed = SourceObserved {
        streams,
        pods,
        failure: None,
        reconcile_error: None,
        workload_fault: None,
        now: now(),
    };
    source_status(source, &observed)
}

fn said(status: &CdcSourceStatus, type_: &str) -> (String, String) {
    let c = condition(status, type_).unwrap_or_else(|| panic!("{type_}"));
    (c.status.clone(), c.reason.clone())
}

#[test]
fn a_source_sql_server_refuses_is_not_connected_and_not_ready_without_failing_a_table() {
    let refused = reported(
        serde_json::json!({"connected": false, "reason": "LoginFailed",
            "message": "SQL Server: login to db:1433: Login failed for user 'reader'; check the password",
            "since": "2026-12-04T11:50:00Z"}),
        serde_json::json!({}),
    );
    let mut waiting = table("a", false, 1.0, 40.0);
    if let Some(status) = waiting.status.as_mut() {
        status.worker = Some(
            serde_json::from_value(serde_json::json!({"state": "Waiting",
                "reason": "SourceUnavailable", "message": "LoginFailed: ...",
                "since": "2026-12-04T11:50:00Z", "restarts": 0}))
            .unwrap(),
        );
    }
    let status = status_with(&refused, &[&waiting], &[running_pod()]);
    assert_eq!(
        said(&status, SOURCE_CONNECTED),
        ("False".into(), "LoginFailed".into())
    );
    let connected = condition(&status, SOURCE_CONNECTED).unwrap();
    assert!(connected.message.contains("Login failed for user 'reader'"));
    assert!(connected.message.contains("SourceUnavailable"));
    // Ready says the source's reason, not the tables'.
    assert_eq!(said(&status, READY), ("False".into(), "LoginFailed".into()));
    // Waiting for the source is not a table's own failure.
    assert_eq!(said(&status, TABLES_DEGRADED).0, "False");
    assert_eq!(status.tables.map(|t| t.failed), Some(0));
    // The operator's status leaves the worker's fields to the worker.
    assert!(status.connection.is_none() && status.capture.is_none());
}

#[test]
fn a_connected_source_with_ready_tables_is_ready() {
    let up = connected(serde_json::json!({}));
    let a = table("a", true, 1.0, 40.0);
    let status = status_with(&up, &[&a], &[running_pod()]);
    assert_eq!(
        said(&status, SOURCE_CONNECTED),
        ("True".into(), "Connected".into())
    );
    assert_eq!(said(&status, READY), ("True".into(), "Healthy".into()));
    // Without a monitoring login capture's own health is not known.
    assert_eq!(
        said(&status, CAPTURE_HEALTHY),
        ("Unknown".into(), "NotMonitored".into())
    );
    // What the worker reported stays out of the operator's comparison.
    let mut applied = up.clone();
    let mut with_worker = status.clone();
    with_worker.connection = up.status.as_ref().and_then(|s| s.connection.clone());
    applied.status = Some(with_worker);
    assert!(shows(&applied, &status));
}

#[test]
fn a_report_of_a_worker_that_does_not_run_is_not_trusted() {
    let up = connected(serde_json::json!({}));
    let a = table("a", true, 1.0, 40.0);
    let status = status_with(&up, &[&a], &[]);
    assert_eq!(
        said(&status, SOURCE_CONNECTED),
        ("Unknown".into(), "WorkerNotRunning".into())
    );
}

#[test]
fn capture_health_is_judged_once_for_the_source_from_the_monitoring_login() {
    let mut source = connected(
        serde_json::json!({"connection": {"monitoring": {"credentials": {"username": "monitor",
            "passwordFrom": {"secretKeyRef": {"name": "mon", "key": "password"}}}}}}),
    );
    let a = table("a", true, 1.0, 40.0);
    let status = status_with(&source, &[&a], &[running_pod()]);
    assert_eq!(
        said(&status, CAPTURE_HEALTHY),
        ("Unknown".into(), "NotReported".into())
    );
    if let Some(status) = source.status.as_mut() {
        status.capture = Some(crate::spec::CaptureStatus {
            observed_at: Some(now()),
            last_scan_at: Some(now() - chrono::Duration::seconds(10)),
            job_running: Some(false),
            ..Default::default()
        });
    }
    let stopped = status_with(&source, &[&a], &[running_pod()]);
    let (state, reason) = said(&stopped, CAPTURE_HEALTHY);
    assert_eq!(state, "False", "{reason}");
}

#[test]
fn the_operator_wakes_for_a_new_connection_state_not_for_capture_numbers() {
    let at = |connected: bool, latency: i64| {
        let mut source = reported(
            serde_json::json!({"connected": connected, "reason": if connected { "Connected" } else { "SourceUnreachable" },
                "message": "m", "since": "2026-12-04T11:00:00Z"}),
            serde_json::json!({}),
        );
        if let Some(status) = source.status.as_mut() {
            status.capture = Some(crate::spec::CaptureStatus {
                job_running: Some(true),
                scan_latency_seconds: Some(latency),
                ..Default::default()
            });
        }
        wake_hash(&source)
    };
    assert_eq!(at(true, 1), at(true, 5), "a moving number");
    assert_ne!(at(true, 1), at(false, 1), "the source went down");
}

#[test]
fn the_workers_discovery_is_neither_written_nor_compared_by_the_operator() {
    let a = table("a", true, 1.0, 48.0);
    let status = status_of(&[&a], &[running_pod()]);
    assert_eq!(status.discovery, None, "the operator's apply leaves it out");
    let patch = source_status_patch("shop", &status);
    assert!(patch["status"].get("discovery").is_none(), "{patch}");
    let mut src = source(serde_json::json!({}));
    src.status = Some(CdcSourceStatus {
        discovery: Some(crate::spec::DiscoveryStatus {
            count: 1,
            tables: vec!["dbo.new".into()],
        }),
        ..status.clone()
    });
    assert!(shows(&src, &status), "no write for the worker's field");
}
