//! The facts rows' columns, case by case.

use chrono::TimeZone;

use super::*;
use crate::domain::facts::EventDetail;
use crate::domain::facts::detail::SkipDetail;
use crate::domain::{BatchId, CaptureInstance, Lsn};

const STREAM: Stream<'static> = Stream {
    target: "bronze.orders",
    app_id: "orders-v1",
    source: None,
};

fn lsn(n: u8) -> Lsn {
    Lsn::from_low_byte(n)
}

/// Noon plus `minutes`.
fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
        .single()
        .unwrap()
        + chrono::Duration::minutes(minutes)
}

fn plan() -> PlannedBatch {
    PlannedBatch {
        batch_id: BatchId::new(7).unwrap(),
        start_lsn: lsn(11),
        end_lsn: lsn(30),
        capture_instance: CaptureInstance::new("dbo_orders").unwrap(),
        end_commit_ts: Some(at(0)),
        planned_at: at(1),
        events: Vec::new(),
        parts: Vec::new(),
        columns: Vec::new(),
    }
}

fn measures(rows: u64) -> BatchMeasures {
    BatchMeasures {
        started_at: at(1),
        duration: Duration::from_millis(2500),
        read: ReadStats {
            rows,
            bytes: 3_000_000,
            read_time: Duration::from_millis(1500),
            min_lsn: Some(lsn(12)),
            max_lsn: Some(lsn(29)),
            min_commit_ts: Some(at(-5)),
            max_commit_ts: Some(at(-1)),
            last_key: None,
        },
        source_rtt_ms: 0.8,
        network_wait_ms: Some(40),
    }
}

/// Capture mapped up to `max` minutes, cleanup kept from `min` minutes,
/// looked at `observed` minutes after noon.
fn marks(min: Option<i64>, max: Option<i64>, observed: i64) -> Watermarks {
    Watermarks {
        max_lsn: lsn(40),
        max_commit_ts: max.map(at),
        min_commit_ts: min.map(at),
        observed_at: at(observed),
        retention_minutes: None,
    }
}

#[test]
fn lag_and_headroom_columns() {
    // (case, end commit, min kept, max mapped, observed, headroom h, ingestion s, capture s)
    type Case = (
        &'static str,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        i64,
        Option<f64>,
        Option<f64>,
        Option<f64>,
    );
    let cases: [Case; 5] = [
        (
            "current stream",
            Some(0),
            Some(-3 * 60),
            Some(0),
            1,
            Some(3.0),
            Some(0.0),
            Some(60.0),
        ),
        (
            "stream behind capture",
            Some(0),
            Some(-60),
            Some(30),
            30,
            Some(1.0),
            Some(1800.0),
            Some(0.0),
        ),
        (
            "capture behind the clock",
            Some(0),
            Some(-60),
            Some(0),
            20,
            Some(1.0),
            Some(0.0),
            Some(1200.0),
        ),
        (
            "unknown end commit",
            None,
            Some(-60),
            Some(0),
            1,
            None,
            None,
            Some(60.0),
        ),
        (
            "cleanup passed the position",
            Some(0),
            Some(10),
            Some(10),
            10,
            Some(-10.0 / 60.0),
            Some(600.0),
            Some(0.0),
        ),
    ];
    for (case, end, min, max, observed, headroom, ingestion, capture) in cases {
        let row = batch_row(
            STREAM,
            &plan(),
            end.map(at),
            &measures(3),
            &marks(min, max, observed),
            None,
            at(2),
        );
        assert_eq!(row.retention_headroom_hours, headroom, "{case}");
        assert_eq!(row.ingestion_lag_seconds, ingestion, "{case}");
        assert_eq!(row.capture_lag_seconds, capture, "{case}");
    }
}

#[test]
fn a_batch_row_reports_its_range_and_read_measures() {
    let row = batch_row(
        STREAM,
        &plan(),
        Some(at(0)),
        &measures(3),
        &marks(Some(-60), Some(0), 1),
        Some(r#"{"warnings":["w"]}"#.into()),
        at(2),
    );
    assert_eq!(
        (
            row.target.as_str(),
            row.app_id.as_str(),
            row.batch_id,
            row.event
        ),
        ("bronze.orders", "orders-v1", BatchId::new(7).ok(), None)
    );
    assert_eq!(row.rows, Some(3));
    assert_eq!(
        (row.min_lsn, row.max_lsn, row.end_lsn),
        (Some(lsn(12)), Some(lsn(29)), Some(lsn(30)))
    );
    assert_eq!(
        (row.min_commit_ts, row.max_commit_ts),
        (Some(at(-5)), Some(at(-1)))
    );
    assert_eq!((row.started_at, row.written_at), (Some(at(1)), at(2)));
    assert_eq!(row.duration_ms, Some(2500));
    assert_eq!(row.read_seconds, Some(1.5));
    assert_eq!(row.read_mb, Some(3.0));
    assert_eq!(
        (row.source_rtt_ms, row.network_wait_ms),
        (Some(0.8), Some(40))
    );
    assert_eq!(row.detail.as_deref(), Some(r#"{"warnings":["w"]}"#));
    assert_eq!(
        row.capture_instance.as_ref().map(CaptureInstance::as_str),
        Some("dbo_orders")
    );
}

#[test]
fn an_empty_batch_still_has_its_end() {
    let mut empty = measures(0);
    empty.read.min_lsn = None;
    empty.read.max_lsn = None;
    empty.read.min_commit_ts = None;
    empty.read.max_commit_ts = None;
    empty.network_wait_ms = None;
    let row = batch_row(
        STREAM,
        &plan(),
        Some(at(0)),
        &empty,
        &marks(Some(-60), Some(0), 1),
        None,
        at(2),
    );
    assert_eq!(
        (row.rows, row.min_lsn, row.end_lsn),
        (Some(0), None, Some(lsn(30)))
    );
    assert_eq!(row.network_wait_ms, None);
}

/// A `data_skipped` event at LSN 20, having lost the hour before it.
fn skipped_event() -> PlannedEvent {
    PlannedEvent {
        event: FactEvent::DataSkipped,
        lsn: lsn(20),
        commit_ts: Some(at(-30)),
        capture_instance: CaptureInstance::new("dbo_orders").unwrap(),
        detail: EventDetail::Skipped(SkipDetail {
            skipped_from_lsn: lsn(11),
            skipped_to_lsn: lsn(19),
            resumed_at_lsn: lsn(20),
            certain: true,
        }),
        lost_from_ts: Some(at(-90)),
        lost_to_ts: Some(at(-30)),
    }
}

#[test]
fn event_rows_sit_at_their_own_lsn() {
    let skipped = skipped_event();
    let rows = event_rows(STREAM, &plan(), &[skipped], at(2));
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (row.event, row.batch_id, row.rows),
        (Some(FactEvent::DataSkipped), BatchId::new(7).ok(), Some(0))
    );
    assert_eq!(
        (row.min_lsn, row.max_lsn, row.end_lsn),
        (Some(lsn(20)), Some(lsn(20)), Some(lsn(20)))
    );
    assert_eq!(row.end_commit_ts, Some(at(-30)));
    assert_eq!(
        (row.lost_from_ts, row.lost_to_ts),
        (Some(at(-90)), Some(at(-30)))
    );
    let detail: serde_json::Value = serde_json::from_str(row.detail.as_deref().unwrap()).unwrap();
    assert_eq!(detail["resumed_at_lsn"], "0x00000000000000000014");
    assert_eq!(detail["certain"], true);
    assert!(event_rows(STREAM, &plan(), &[], at(2)).is_empty());
}

#[test]
fn snapshot_rows_name_bootstrap_or_resnapshot() {
    let snapshot = |n: u64, lost: Option<i64>| PlannedSnapshot {
        snapshot: n,
        lsn: lsn(30),
        capture_instance: CaptureInstance::new("dbo_orders").unwrap(),
        commit_ts: Some(at(0)),
        started_at: at(1),
        lost_from_ts: lost.map(at),
        lost_to_ts: lost.map(|m| at(m + 60)),
        key_bounds: Vec::new(),
        switched: None,
        columns: Vec::new(),
    };
    let measured = SnapshotMeasures {
        rows: 1000,
        read_time: Duration::from_secs(2),
        read_bytes: 500_000,
    };
    // (case, snapshot number, lost range start, expected event)
    let cases = [
        ("the bootstrap", 0, None, FactEvent::Bootstrap),
        (
            "a resnapshot after purged changes",
            1,
            Some(-120),
            FactEvent::Resnapshot,
        ),
        ("a later resnapshot", 4, Some(-30), FactEvent::Resnapshot),
    ];
    for (case, n, lost, event) in cases {
        let row = snapshot_row(STREAM, &snapshot(n, lost), &measured, at(3));
        assert_eq!(row.event, Some(event), "{case}");
        assert_eq!((row.batch_id, row.rows), (None, Some(1000)), "{case}");
        assert_eq!(
            (row.min_lsn, row.end_lsn),
            (Some(lsn(30)), Some(lsn(30))),
            "{case}"
        );
        assert_eq!(row.duration_ms, Some(120_000), "{case}");
        assert_eq!(row.read_mb, Some(0.5), "{case}");
        assert_eq!(row.lost_from_ts, lost.map(at), "{case}");
        assert_eq!(row.lost_to_ts, lost.map(|m| at(m + 60)), "{case}");
    }
}

#[test]
fn headroom_with_the_retention_is_the_time_until_cleanup_reaches_the_position() {
    // (case, position commit, low-water mark, newest commit, expected
    // hours); the retention is three days, times are minutes after noon.
    let three_days = 3 * 24 * 60;
    let cases: [(&str, i64, i64, i64, f64); 4] = [
        // The watermark is the first change ever captured, an hour before
        // the position: the old measure said 1 h; cleanup is days away.
        ("young database, current stream", 0, -60, 0, 72.0),
        ("a stream a day behind capture", 0, -60, 24 * 60, 48.0),
        ("watermark at the position", 0, 0, 60, 71.0),
        ("cleanup passed the position", 0, 90, 90, -1.5),
    ];
    for (case, position, watermark, newest, hours) in cases {
        // The local clock is a day off: it does not count.
        let mut marks = marks(Some(watermark), Some(newest), newest + 24 * 60);
        marks.retention_minutes = Some(three_days);
        let got = super::retention_headroom_hours(Some(at(position)), &marks);
        assert_eq!(got, Some(hours), "{case}");
    }
    // Without the retention: the watermark's measure, as before.
    let old = super::retention_headroom_hours(Some(at(0)), &marks(Some(-60), Some(0), 0));
    assert_eq!(old, Some(1.0));
}

#[test]
fn every_kind_of_row_names_the_source_the_stream_runs_in() {
    let event = skipped_event();
    let snapshot = PlannedSnapshot {
        snapshot: 0,
        lsn: lsn(30),
        capture_instance: CaptureInstance::new("dbo_orders").unwrap(),
        commit_ts: Some(at(0)),
        started_at: at(1),
        lost_from_ts: None,
        lost_to_ts: None,
        key_bounds: Vec::new(),
        switched: None,
        columns: Vec::new(),
    };
    let measured = SnapshotMeasures {
        rows: 1,
        read_time: Duration::from_secs(1),
        read_bytes: 1,
    };
    let marks = marks(Some(-60), Some(0), 1);
    // (case, the stream's source, what its rows carry)
    let cases = [
        ("a stream of the sales source", Some("sales"), Some("sales")),
        ("a stream of its own", None, None),
    ];
    for (case, source, expected) in cases {
        let stream = Stream { source, ..STREAM };
        let mut rows = vec![
            batch_row(
                stream,
                &plan(),
                Some(at(0)),
                &measures(1),
                &marks,
                None,
                at(2),
            ),
            snapshot_row(stream, &snapshot, &measured, at(3)),
        ];
        rows.extend(event_rows(
            stream,
            &plan(),
            std::slice::from_ref(&event),
            at(2),
        ));
        assert_eq!(rows.len(), 3, "{case}");
        for row in rows {
            assert_eq!(row.source.as_deref(), expected, "{case}: {:?}", row.event);
        }
    }
}
