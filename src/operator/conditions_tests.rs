use chrono::TimeZone;
use serde_json::{Value, json};

use super::*;
use crate::operator::test_fixtures;

/// The conditions without pods or reconcile errors, as most cases need.
fn conditions(
    stream: &CdcStream,
    phase: Phase,
    failure: Option<&BuildError>,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    super::conditions(
        stream,
        phase,
        &Observed {
            pods: &[],
            failure,
            reconcile_error: None,
            workload_fault: None,
            runner: super::Runner::Own,
            now,
            allowance: std::time::Duration::ZERO,
        },
    )
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

/// `minutes` before [`now`], as the API server writes times.
fn ago(minutes: i64) -> String {
    (now() - chrono::Duration::minutes(minutes)).to_rfc3339()
}

/// Progress written `minutes` ago with the given metrics.
fn progress(minutes: i64, headroom: Option<f64>, ingestion: f64, capture: f64) -> Value {
    let mut p = json!({
        "batchId": 7,
        "writtenAt": ago(minutes),
        "endCommitTs": ago(minutes + 1),
        "ingestionLagSeconds": ingestion,
        "captureLagSeconds": capture,
    });
    if let Some(h) = headroom {
        p["retentionHeadroomHours"] = json!(h);
    }
    p
}

fn healthy() -> Value {
    progress(1, Some(72.0), 2.0, 5.0)
}

fn stream(spec: Value, status: Value) -> CdcStream {
    test_fixtures::stream(json!({"spec": spec, "status": status}))
}

/// (type, status, reason) of each condition, in order.
fn summary(conditions: &[Condition]) -> Vec<(String, String, String)> {
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn find<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {:?}", summary(conditions)))
}

fn finalization_spec() -> Value {
    json!({"finalization": {"name": "ops.finalization", "location": "/lake/control"}})
}

#[test]
fn without_progress_only_the_phase_and_data_loss_are_known() {
    let got = conditions(&stream(json!({}), json!({})), Phase::Pending, None, now());
    let expected = [
        (READY, "False", "Pending"),
        (LIVE, "Unknown", "NoProgress"),
        (WORKER_RUNNING, "Unknown", "NoWorkerPod"),
        (PROGRESSING, "True", "WorkerStarting"),
        (RETENTION_HEADROOM, "Unknown", "NoProgress"),
        (INGESTION_LAG, "Unknown", "NoProgress"),
        (CAPTURE_LAG, "Unknown", "NoProgress"),
        (CAPTURE_CURRENT, "Unknown", "NoProgress"),
        (CAPTURE_HEALTHY, "Unknown", "NotMonitored"),
        (METRICS_AVAILABLE, "Unknown", "NoProgress"),
        (DATA_LOSS, "False", "NoneReported"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(t, s, r)| (t.to_string(), s.to_string(), r.to_string()))
        .collect();
    assert_eq!(summary(&got), expected);
    for condition in &got {
        assert_eq!(
            condition.observed_generation, None,
            "{}: no worker runs a spec yet",
            condition.type_
        );
        assert_eq!(condition.last_transition_time, metav1_time(now()));
    }
}

/// A scenario: spec patch, status, phase, then the expected
/// (type, status, reason) of the conditions named.
type Case = (
    &'static str,
    Value,
    Value,
    Phase,
    Vec<(&'static str, &'static str, &'static str)>,
);

#[test]
fn each_condition_follows_its_health_verdict() {
    let none = json!({});
    let cases: Vec<Case> = vec![
        (
            "healthy stream",
            none.clone(),
            json!({"progress": healthy()}),
            Phase::Streaming,
            vec![
                (READY, "True", "Healthy"),
                (LIVE, "True", "BatchesReported"),
                (RETENTION_HEADROOM, "True", "HeadroomSufficient"),
                (INGESTION_LAG, "True", "WithinLimit"),
                (CAPTURE_LAG, "True", "WithinLimit"),
                (METRICS_AVAILABLE, "True", "MetricsReported"),
                (DATA_LOSS, "False", "NoneReported"),
            ],
        ),
        (
            "silent for 16 minutes",
            none.clone(),
            json!({"progress": progress(16, Some(72.0), 2.0, 5.0)}),
            Phase::Streaming,
            vec![
                (READY, "False", "FactsStopped"),
                (LIVE, "False", "FactsStopped"),
            ],
        ),
        (
            "headroom below a day",
            none.clone(),
            json!({"progress": progress(1, Some(20.0), 2.0, 5.0)}),
            Phase::Streaming,
            vec![
                (READY, "False", "RetentionHeadroomLow"),
                (LIVE, "True", "BatchesReported"),
                (RETENTION_HEADROOM, "False", "RetentionHeadroomLow"),
            ],
        ),
        (
            "no metrics",
            none.clone(),
            json!({"progress": {"batchId": 7, "writtenAt": ago(1)}}),
            Phase::Streaming,
            vec![
                (READY, "False", "MetricsMissing"),
                (RETENTION_HEADROOM, "Unknown", "MetricsMissing"),
                (INGESTION_LAG, "Unknown", "NotMeasured"),
                (METRICS_AVAILABLE, "False", "MetricsMissing"),
            ],
        ),
        (
            "ingestion two hours behind",
            none.clone(),
            json!({"progress": progress(1, Some(72.0), 7200.0, 5.0)}),
            Phase::Streaming,
            vec![
                (READY, "False", "IngestionLagHigh"),
                (INGESTION_LAG, "False", "IngestionLagHigh"),
                (CAPTURE_LAG, "True", "WithinLimit"),
            ],
        ),
        (
            "capture 15 minutes behind",
            none.clone(),
            json!({"progress": progress(1, Some(72.0), 2.0, 900.0)}),
            Phase::Streaming,
            vec![
                (READY, "False", "CaptureLagHigh"),
                (CAPTURE_LAG, "False", "CaptureLagHigh"),
            ],
        ),
        (
            "spec.alerts tightens the lag and loosens the silence",
            json!({"alerts": {"silence": "2h", "maxIngestionLag": "1m"}}),
            json!({"progress": progress(30, Some(72.0), 120.0, 5.0)}),
            Phase::Streaming,
            vec![
                (LIVE, "True", "BatchesReported"),
                (INGESTION_LAG, "False", "IngestionLagHigh"),
            ],
        ),
        (
            "a bad spec.alerts value",
            json!({"alerts": {"silence": "soon"}}),
            json!({"progress": healthy()}),
            Phase::Streaming,
            vec![
                (READY, "False", "InvalidSpec"),
                (LIVE, "True", "BatchesReported"),
            ],
        ),
        (
            "suspended",
            none.clone(),
            json!({"progress": healthy()}),
            Phase::Suspended,
            vec![(READY, "False", "Suspended"), (LIVE, "False", "Suspended")],
        ),
        (
            "snapshotting before the first batch",
            none.clone(),
            json!({"snapshot": {
                "phase": "Running", "rows": 500, "estimatedRows": 2000, "rowsPerSecond": 100.0,
                "chunks": 5, "startedAt": ago(1), "updatedAt": ago(0)
            }}),
            Phase::Snapshotting,
            vec![
                (READY, "False", "Snapshotting"),
                (LIVE, "True", "Snapshotting"),
            ],
        ),
        (
            "a snapshot that stopped reporting",
            none.clone(),
            json!({"snapshot": {
                "phase": "Running", "rows": 500, "rowsPerSecond": 100.0,
                "chunks": 5, "startedAt": ago(40), "updatedAt": ago(20)
            }}),
            Phase::Snapshotting,
            vec![
                (READY, "False", "SnapshotStalled"),
                (LIVE, "False", "SnapshotStalled"),
            ],
        ),
        (
            "snapshot done on a quiet table, one idle trigger since",
            none.clone(),
            json!({
                "snapshot": {"phase": "Done", "rows": 2000, "rowsPerSecond": 100.0,
                             "chunks": 20, "startedAt": ago(3), "updatedAt": ago(1)},
                "progress": {"writtenAt": ago(1), "endCommitTs": ago(2),
                             "retentionHeadroomHours": 72.0, "ingestionLagSeconds": 0.0,
                             "captureLagSeconds": 5.0,
                             "latestOffset": {"lsn": "0x00000001000000100001", "commitTs": ago(2),
                                              "observedAt": ago(0)}}
            }),
            Phase::Streaming,
            vec![
                (READY, "True", "Healthy"),
                (CAPTURE_CURRENT, "True", "CaptureCurrent"),
            ],
        ),
        (
            "capture stopped: live capture lag past the limit, the stream still live",
            none.clone(),
            json!({"progress": {
                "batchId": 7, "writtenAt": ago(5), "endCommitTs": ago(12),
                "retentionHeadroomHours": 72.0, "ingestionLagSeconds": 0.0, "captureLagSeconds": 5.0,
                "latestOffset": {"lsn": "0x00000001000000100001", "commitTs": ago(12), "observedAt": ago(0)}
            }}),
            Phase::Streaming,
            vec![
                (READY, "False", "CaptureBehind"),
                (LIVE, "True", "BatchesReported"),
                (CAPTURE_CURRENT, "False", "CaptureBehind"),
            ],
        ),
        (
            "finalization configured, not reported yet",
            finalization_spec(),
            json!({"progress": healthy()}),
            Phase::Streaming,
            vec![
                (READY, "True", "Healthy"),
                (FINALIZED, "Unknown", "NotReported"),
            ],
        ),
        (
            "a fresh verdict",
            finalization_spec(),
            json!({"progress": healthy(), "finalization": {"finalizedUntil": ago(60), "updatedAt": ago(1)}}),
            Phase::Streaming,
            vec![
                (READY, "True", "Healthy"),
                (FINALIZED, "True", "VerdictFresh"),
            ],
        ),
        (
            "a verdict held by an open snapshot is expected",
            finalization_spec(),
            json!({"progress": healthy(), "finalization": {
                "finalizedUntil": ago(300), "updatedAt": ago(1),
                "openSnapshotLsn": "0x00000010000000200001"}}),
            Phase::Snapshotting,
            vec![
                (READY, "True", "Healthy"),
                (FINALIZED, "False", "SnapshotHoldsVerdict"),
            ],
        ),
        (
            "a verdict that fell behind",
            finalization_spec(),
            json!({"progress": healthy(), "finalization": {"finalizedUntil": ago(300), "updatedAt": ago(1)}}),
            Phase::Streaming,
            vec![
                (READY, "False", "VerdictNotAdvanced"),
                (FINALIZED, "False", "VerdictNotAdvanced"),
            ],
        ),
        (
            "changes skipped: reported, the stream goes on",
            none.clone(),
            json!({"progress": healthy(), "dataLoss": {"action": "Skipped", "detectedAt": ago(5), "lostFromTs": ago(4000), "lostToTs": ago(3000)}}),
            Phase::Streaming,
            vec![
                (READY, "True", "Healthy"),
                (DATA_LOSS, "True", "ChangesSkipped"),
            ],
        ),
        (
            "data loss stopped the worker",
            none.clone(),
            json!({"progress": healthy(), "dataLoss": {"action": "Stopped", "detectedAt": ago(1)}}),
            Phase::Streaming,
            vec![
                (READY, "False", "DataLossStopped"),
                (DATA_LOSS, "True", "DataLossStopped"),
            ],
        ),
    ];
    for (name, spec, status, phase, expected) in cases {
        let got = conditions(&stream(spec, status), phase, None, now());
        for (type_, status, reason) in expected {
            let c = find(&got, type_);
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                (status, reason),
                "{name}: {type_}: {}",
                c.message
            );
        }
    }
}

#[test]
fn finalized_is_absent_without_a_finalization_table() {
    let got = conditions(
        &stream(json!({}), json!({"progress": healthy()})),
        Phase::Streaming,
        None,
        now(),
    );
    assert!(
        got.iter().all(|c| c.type_ != FINALIZED),
        "{:?}",
        summary(&got)
    );
    assert_eq!(got.len(), 11);
    let with = conditions(
        &stream(finalization_spec(), json!({"progress": healthy()})),
        Phase::Streaming,
        None,
        now(),
    );
    assert_eq!(with.len(), 12);
}

#[test]
fn messages_say_what_to_do_and_name_the_limits() {
    let got = conditions(
        &stream(
            json!({"alerts": {"silence": "soon"}}),
            json!({"progress": progress(16, Some(20.0), 2.0, 5.0)}),
        ),
        Phase::Streaming,
        None,
        now(),
    );
    let ready = find(&got, READY);
    assert!(
        ready.message.contains("spec.alerts.silence"),
        "{}",
        ready.message
    );
    assert!(ready.message.ends_with("fix the spec"), "{}", ready.message);
    let live = find(&got, LIVE);
    assert!(
        live.message.starts_with("last batch 16m ago (limit 15m); "),
        "{}",
        live.message
    );
    assert!(
        live.message.contains(Alert::FactsStopped.message()),
        "{}",
        live.message
    );
    let headroom = find(&got, RETENTION_HEADROOM);
    assert!(
        headroom.message.contains("(limit 1day)"),
        "{}",
        headroom.message
    );
}

#[test]
fn transition_time_moves_only_when_the_status_changes() {
    let earlier = metav1_time(now() - chrono::Duration::hours(3));
    let old = json!([
        {"type": "Live", "status": "True", "reason": "BatchesReported", "message": "",
         "lastTransitionTime": earlier.0.to_string()},
        {"type": "Ready", "status": "True", "reason": "Healthy", "message": "",
         "lastTransitionTime": earlier.0.to_string()},
    ]);
    let healthy_now = conditions(
        &stream(
            json!({}),
            json!({"progress": progress(14, Some(72.0), 2.0, 5.0), "conditions": old}),
        ),
        Phase::Streaming,
        None,
        now(),
    );
    assert_eq!(find(&healthy_now, LIVE).last_transition_time, earlier);
    assert_eq!(find(&healthy_now, READY).last_transition_time, earlier);
    assert_eq!(ready_changed(&find_list(&old), &healthy_now), None);

    let stopped = conditions(
        &stream(
            json!({}),
            json!({"progress": progress(16, Some(72.0), 2.0, 5.0), "conditions": old}),
        ),
        Phase::Streaming,
        None,
        now(),
    );
    assert_eq!(
        find(&stopped, LIVE).last_transition_time,
        metav1_time(now())
    );
    let changed = ready_changed(&find_list(&old), &stopped).map(|c| c.reason.as_str());
    assert_eq!(changed, Some("FactsStopped"));
    assert_eq!(
        ready_changed(&[], &stopped),
        None,
        "a new stream is not ready yet"
    );
    assert_eq!(
        ready_changed(&[], &healthy_now).map(|c| c.reason.as_str()),
        Some("Healthy"),
        "a first Ready that is True is news"
    );
    let event = ready_event(find(&stopped, READY));
    assert_eq!((event.reason, event.warning), ("NotReady", true));
    assert!(event.note.starts_with("FactsStopped: "), "{}", event.note);
    assert_eq!(ready_event(find(&healthy_now, READY)).reason, "Ready");
}

fn find_list(value: &Value) -> Vec<Condition> {
    serde_json::from_value(value.clone()).unwrap()
}

#[test]
fn a_healthy_stream_keeps_the_same_conditions_from_batch_to_batch() {
    let judge =
        |status: Value| conditions(&stream(json!({}), status), Phase::Streaming, None, now());
    let first = judge(json!({"progress": progress(0, Some(72.0), 2.0, 5.0)}));
    let next = judge(json!({"progress": progress(0, Some(71.9), 3.4, 7.2)}));
    assert_eq!(first, next, "nothing to write after a healthy batch");
    let lagging = judge(json!({"progress": progress(0, Some(72.0), 4000.0, 5.0)}));
    let message = &find(&lagging, INGESTION_LAG).message;
    assert!(message.starts_with("4000 s (limit 1h); "), "{message}");
}

#[test]
fn a_refused_worker_makes_ready_say_why_whatever_else_is_wrong() {
    let refusal = crate::operator::policy::WorkerPolicy::default()
        .admit_image("evil.io/miner:1", "mssql-cdc:1")
        .unwrap_err();
    let refused = BuildError::NotAllowed(refusal);
    for spec in [json!({}), json!({"alerts": {"silence": "soon"}})] {
        let got = conditions(
            &stream(spec.clone(), json!({})),
            Phase::Failed,
            Some(&refused),
            now(),
        );
        let ready = find(&got, READY);
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "ImageNotAllowed"),
            "{spec}"
        );
        assert!(
            ready.message.contains("\"evil.io/miner:1\" is not allowed")
                && ready.message.contains("--worker-images"),
            "{}",
            ready.message
        );
    }
    let invalid = BuildError::PasswordNotFromSecret;
    let got = conditions(
        &stream(json!({}), json!({})),
        Phase::Failed,
        Some(&invalid),
        now(),
    );
    let ready = find(&got, READY);
    assert_eq!(ready.reason, "InvalidSpec");
    assert!(ready.message.contains("secretKeyRef"), "{}", ready.message);
}

#[test]
fn a_running_snapshot_never_reads_as_done() {
    let running = |rows: u64, estimated_rows: Option<u64>, chunks: u64| SnapshotStatus {
        phase: SnapshotPhase::Running,
        rows,
        estimated_rows,
        rows_per_second: 800.0,
        eta: None,
        chunks,
        started_at: now(),
        updated_at: now(),
    };
    let cases = [
        (
            1200,
            Some(5000),
            2,
            "24% of ~5000 rows (1200 rows, 2 chunks), 800 rows/s",
        ),
        (
            4998,
            Some(5000),
            2,
            "99% of ~5000 rows (4998 rows, 2 chunks), 800 rows/s",
        ),
        (
            4,
            Some(3),
            2,
            "past the estimate of ~3 rows (4 rows, 2 chunks), 800 rows/s",
        ),
        (
            1,
            Some(5000),
            1,
            "0% of ~5000 rows (1 row, 1 chunk), 800 rows/s",
        ),
        // Without an estimate the share is the row count, said once.
        (4, None, 2, "4 rows (2 chunks), 800 rows/s"),
        (1, None, 1, "1 row (1 chunk), 800 rows/s"),
    ];
    for (rows, estimate, chunks, expected) in cases {
        assert_eq!(snapshot_words(&running(rows, estimate, chunks)), expected);
    }
}

#[test]
fn a_table_waiting_for_its_source_is_not_live_for_the_source_s_reason() {
    let waiting = stream(
        json!({}),
        json!({"progress": healthy(), "worker": {"state": "Waiting",
            "reason": "SourceUnavailable",
            "message": "SourceUnreachable: cannot connect to SQL Server at db:1433: refused",
            "since": ago(1), "restarts": 0}}),
    );
    let all = conditions(&waiting, Phase::Streaming, None, now());
    let live = find(&all, LIVE);
    assert_eq!(
        (live.status.as_str(), live.reason.as_str()),
        ("False", "SourceUnavailable")
    );
    assert!(
        live.message.starts_with("SourceUnreachable"),
        "{}",
        live.message
    );
    assert_eq!(find(&all, READY).status, "False");
}

/// A healthy stream's conditions read the same whatever the batch's age
/// while it is well within the limits: a message that counted minutes
/// would make the operator write the status on every look (issue 31's
/// steady state).
#[test]
fn a_healthy_streams_conditions_do_not_move_with_the_clock() {
    let at = |minutes: i64| {
        conditions(
            &stream(
                json!({}),
                json!({"progress": progress(minutes, Some(72.0), 2.0, 5.0)}),
            ),
            Phase::Streaming,
            None,
            now(),
        )
    };
    let (fresh, older) = (at(0), at(4));
    assert_eq!(find(&fresh, LIVE).status, "True");
    // Past half the silence limit (15m) the minutes are told, still True.
    let late = at(10);
    assert_eq!(find(&late, LIVE).status, "True");
    assert!(
        find(&late, LIVE)
            .message
            .starts_with("last batch 10m ago, within"),
        "{}",
        find(&late, LIVE).message
    );
    assert_eq!(
        fresh
            .iter()
            .map(|c| (&c.type_, &c.status, &c.reason, &c.message))
            .collect::<Vec<_>>(),
        older
            .iter()
            .map(|c| (&c.type_, &c.status, &c.reason, &c.message))
            .collect::<Vec<_>>()
    );
}
