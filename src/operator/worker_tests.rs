use chrono::{DateTime, TimeZone};

use super::*;
use crate::domain::{BatchId, Granularity, Lsn};

fn at(hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, hour, 0, 0).unwrap()
}

fn update(until: Option<u32>, snapshot: Option<&str>) -> VerdictUpdate {
    VerdictUpdate {
        table_name: "bronze.orders".into(),
        app_id: "orders-v1".into(),
        granularity: Granularity::Hour,
        finalized_until: until.map(at),
        updated_at: at(12),
        open_snapshot_lsn: snapshot.map(|s| s.parse::<Lsn>().unwrap()),
        applied_lsn: None,
    }
}

/// The fixture stream with a finalization table and the status a previous
/// worker left: progress and a verdict until `hour`.
fn reported_until(hour: u32) -> CdcStream {
    crate::operator::test_fixtures::stream(serde_json::json!({
        "spec": {"finalization": {"name": "ops.finalization", "location": "/lake/control"}},
        "status": {
            "progress": {"batchId": 4, "writtenAt": at(hour)},
            "finalization": {"finalizedUntil": at(hour), "updatedAt": at(hour)},
        },
    }))
}

fn fresh() -> CdcStream {
    crate::operator::test_fixtures::stream(serde_json::json!({}))
}

#[test]
fn a_run_starts_from_what_the_last_worker_reported() {
    let (_, latest) = StatusObserver::new(&reported_until(9));
    let report = latest.borrow().clone();
    assert_eq!(report.progress.and_then(|p| p.batch_id), Some(4));
    assert_eq!(
        report.finalization.and_then(|f| f.finalized_until),
        Some(at(9))
    );

    let mut without_table = reported_until(9);
    without_table.spec.finalization = None;
    let (_, latest) = StatusObserver::new(&without_table);
    assert_eq!(
        latest.borrow().finalization,
        None,
        "no control table, no row"
    );
    assert!(latest.borrow().progress.is_some());
}

#[test]
fn a_held_verdict_keeps_the_finalized_instant_the_table_keeps() {
    let (observer, latest) = StatusObserver::new(&reported_until(9));
    let lsn = "0x00000010000000200001";
    observer.finalized(&update(None, Some(lsn)));
    let held = latest.borrow().finalization.clone().unwrap();
    assert_eq!(
        held.finalized_until,
        Some(at(9)),
        "kept from the earlier status"
    );
    assert_eq!(held.open_snapshot_lsn.as_deref(), Some(lsn));

    observer.finalized(&update(Some(11), None));
    observer.finalized(&update(Some(10), None));
    let moved = latest.borrow().finalization.clone().unwrap();
    assert_eq!(moved.finalized_until, Some(at(11)), "never moves back");
    assert_eq!(moved.open_snapshot_lsn, None);
    assert_eq!(moved.updated_at, at(12));
}

#[test]
fn purged_changes_are_reported_with_what_the_stream_did() {
    let (observer, latest) = StatusObserver::new(&fresh());
    let mut skipped = FactRow::new(
        "bronze.orders",
        "orders-v1",
        Some(BatchId::new(5).unwrap()),
        Some(FactEvent::DataSkipped),
        at(12),
    );
    skipped.lost_from_ts = Some(at(3));
    skipped.lost_to_ts = Some(at(4));
    let schema_change = FactRow::new(
        "bronze.orders",
        "orders-v1",
        Some(BatchId::new(5).unwrap()),
        Some(FactEvent::SchemaChange),
        at(12),
    );
    observer.events_recorded(std::slice::from_ref(&schema_change));
    assert_eq!(
        latest.borrow().data_loss,
        None,
        "a schema change loses nothing"
    );
    observer.events_recorded(&[schema_change, skipped]);
    assert_eq!(
        latest.borrow().data_loss,
        Some(DataLossStatus {
            action: DataLossAction::Skipped,
            detected_at: at(12),
            lost_from_ts: Some(at(3)),
            lost_to_ts: Some(at(4)),
        })
    );

    let mut resnapshot = FactRow::new(
        "bronze.orders",
        "orders-v1",
        None,
        Some(FactEvent::Resnapshot),
        at(13),
    );
    resnapshot.lost_from_ts = Some(at(5));
    observer.snapshot_done(&resnapshot);
    let loss = latest.borrow().data_loss.clone().unwrap();
    assert_eq!(
        (loss.action, loss.lost_from_ts),
        (DataLossAction::Resnapshotted, Some(at(5)))
    );
}

#[test]
fn the_patch_carries_only_what_was_reported() {
    let (observer, latest) = StatusObserver::new(&fresh());
    let mut row = FactRow::new(
        "bronze.orders",
        "orders-v1",
        Some(BatchId::new(3).unwrap()),
        None,
        at(12),
    );
    row.rows = Some(2);
    observer.batch_done(&row);
    let patch = report_patch("orders", &latest.borrow());
    assert_eq!(patch["kind"], "CdcStream");
    let status = patch["status"].as_object().unwrap();
    assert_eq!(
        status.keys().collect::<Vec<_>>(),
        vec!["progress", "worker"]
    );
    assert_eq!(status["progress"]["batchId"], 3);
}

fn refused() -> ReportError {
    let status: kube::core::Status = serde_json::from_value(serde_json::json!({
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": "cdcstreams.mssql-cdc.io \"orders\" is forbidden: cannot patch resource \"cdcstreams/status\"",
    }))
    .unwrap();
    ReportError::Patch {
        name: "orders".into(),
        source: kube::Error::Api(Box::new(status)),
    }
}

/// The value of `series` in the worker's exposition.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn refused_reports_are_counted_and_shown_in_the_workers_metrics() {
    let reports = Arc::new(StatusReports::default());
    let exposition = WorkerMetrics {
        stream: Arc::new(crate::metrics::Metrics::new()),
        reports: Arc::clone(&reports),
    };
    reports.record(Ok(()));
    reports.record(Err(refused()));
    reports.record(Err(refused()));
    assert!(reports.failing());
    let text = exposition.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"mssql_cdc_worker_status_reports_total{result="failed"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "mssql_cdc_worker_status_report_failing"),
        Some(1.0)
    );
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.ends_with("# EOF\n"));

    reports.record(Ok(()));
    assert!(!reports.failing());
    let text = exposition.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"mssql_cdc_worker_status_reports_total{result="applied"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "mssql_cdc_worker_status_report_failing"),
        Some(0.0)
    );
    assert!(
        exposition.failures().is_empty(),
        "the probe stays healthy: the stream runs"
    );
}

/// A batch row of `rows` rows written at `written`.
fn batch(id: u64, rows: u64, written: DateTime<Utc>) -> FactRow {
    let mut row = FactRow::new(
        "bronze.orders",
        "orders-v1",
        Some(BatchId::new(id).unwrap()),
        None,
        written,
    );
    row.rows = Some(rows);
    row.retention_headroom_hours = Some(72.0);
    row.ingestion_lag_seconds = Some(1.0);
    row.capture_lag_seconds = Some(1.0);
    row
}

#[test]
fn moving_numbers_wait_for_the_interval_and_a_new_verdict_goes_at_once() {
    let stream = fresh();
    let interval = Duration::from_secs(30);
    let allowance = crate::operator::verdict::report_allowance(interval);
    let (observer, latest) = StatusObserver::new(&stream);
    let first = latest.borrow().clone();
    let start = Instant::now();
    let wall = at(12);
    let pace_at = |applied: &(WorkerReport, Instant), report: &WorkerReport, secs: u64| {
        let now = (
            start + Duration::from_secs(secs),
            wall + chrono::Duration::seconds(secs as i64),
        );
        pace(&stream, Some(applied), report, now, interval, allowance)
    };
    assert_eq!(
        pace(&stream, None, &first, (start, wall), interval, allowance),
        Pace::Now,
        "the first report goes at once"
    );

    // The first batch moves the phase from Pending to Streaming.
    observer.batch_done(&batch(1, 3, wall));
    let streaming = latest.borrow().clone();
    let applied = (first, start);
    assert_eq!(pace_at(&applied, &streaming, 1), Pace::Now);

    // More batches only move numbers: they wait for the interval.
    let applied = (streaming, start + Duration::from_secs(1));
    observer.batch_done(&batch(2, 500, wall + chrono::Duration::seconds(3)));
    let busier = latest.borrow().clone();
    assert_eq!(
        pace_at(&applied, &busier, 3),
        Pace::At(start + Duration::from_secs(31))
    );
    assert_eq!(pace_at(&applied, &busier, 31), Pace::Now);
    assert_eq!(pace_at(&applied, &applied.0, 40), Pace::Nothing);

    // The worker fails: WorkerRunning and Ready change, so it goes at once.
    observer.worker_state(
        WorkerState::Failed,
        Some(&Failure::new("LoginFailed", "login failed for reader")),
    );
    let failed = latest.borrow().clone();
    assert_eq!(pace_at(&applied, &failed, 4), Pace::Now);
}

#[test]
fn a_status_about_to_look_stale_is_not_held_back() {
    // The last write carries a batch 16 min 30 s old: past the 15-minute
    // silence and its one-minute allowance, so the operator judges the
    // stream stopped until the new batch reaches the status.
    let stream = fresh();
    let interval = Duration::from_secs(30);
    let allowance = crate::operator::verdict::report_allowance(interval);
    let (observer, latest) = StatusObserver::new(&stream);
    let wall = at(12);
    observer.batch_done(&batch(1, 3, wall - chrono::Duration::seconds(16 * 60 + 30)));
    let old = latest.borrow().clone();
    observer.batch_done(&batch(2, 3, wall));
    let new = latest.borrow().clone();
    let start = Instant::now();
    let applied = (old, start);
    assert_eq!(
        pace(
            &stream,
            Some(&applied),
            &new,
            (start, wall),
            interval,
            allowance
        ),
        Pace::Now,
        "the old batch is already past the limit with its allowance"
    );
}

#[test]
fn a_table_waits_while_its_source_is_down_and_says_again_what_it_said_before() {
    use crate::engine::SourceDown;
    use crate::source::SourceOutage;
    let (status, latest) = StatusObserver::new(&fresh());
    let failure = Failure::new("ColumnNotCaptured", "column nope is not captured");
    status.worker_state(WorkerState::Failed, Some(&failure));
    let down = SourceHealth::Down(SourceDown {
        outage: SourceOutage::LoginFailed,
        error: "Login failed for user 'reader'".into(),
        since: at(10),
    });
    status.source_health(&down);
    let worker = latest.borrow().worker.clone().expect("reported");
    assert_eq!(worker.state, WorkerState::Waiting);
    assert_eq!(worker.reason, SOURCE_UNAVAILABLE);
    assert!(
        worker
            .message
            .starts_with("LoginFailed: Login failed for user 'reader'")
    );
    assert_eq!(worker.since, at(10));
    // Down another way: still waiting, what it said before kept.
    status.source_health(&SourceHealth::Down(SourceDown {
        outage: SourceOutage::Unreachable,
        error: "refused".into(),
        since: at(11),
    }));
    status.source_health(&SourceHealth::Up { since: at(12) });
    let worker = latest.borrow().worker.clone().expect("reported");
    assert_eq!(
        (worker.state, worker.reason.as_str()),
        (WorkerState::Failed, "ColumnNotCaptured"),
        "the table's own failure is its again"
    );
}

#[test]
fn a_table_whose_store_stays_down_says_so_and_then_what_it_said_before() {
    let (status, latest) = StatusObserver::new(&fresh());
    status.worker_state(WorkerState::Running, None);
    let down = crate::engine::StoreDown {
        since: at(10),
        answer: "Generic S3 error: HTTP status server error (503 Service Unavailable)".into(),
    };
    status.store_outage(Some(&down));
    let worker = latest.borrow().worker.clone().expect("reported");
    assert_eq!(
        (worker.state, worker.reason.as_str()),
        (WorkerState::Waiting, STORE_UNAVAILABLE)
    );
    assert_eq!(worker.since, at(10));
    assert!(
        worker.message.contains("503 Service Unavailable"),
        "{}",
        worker.message
    );
    assert!(
        worker.message.contains("loses nothing"),
        "{}",
        worker.message
    );
    status.store_outage(None);
    let worker = latest.borrow().worker.clone().expect("reported");
    assert_eq!(
        (worker.state, worker.reason.as_str()),
        (WorkerState::Running, "Running"),
        "the store back, the table runs as before"
    );
}
