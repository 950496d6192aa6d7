use chrono::TimeZone;

use super::*;
use crate::operator::conditions::WORKER_RUNNING;
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
    let observed = SourceObserved {
        streams,
        pods,
        failure: None,
        reconcile_error: None,
        workload_fault: None,
        now: now(),
    };
    source_status(&source(serde_json::json!({})), &observed)
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
    assert_eq!(status.conditions.len(), 3);
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
