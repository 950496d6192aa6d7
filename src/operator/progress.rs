//! `status.progress`: what the worker reports so the operator can judge
//! health without reading Delta: the newest facts row (a batch's, or the
//! snapshot's before the first batch), the measures and the source's
//! newest offset from every trigger, and the spec it runs.

use crate::domain::FactRow;
use crate::engine::SourceCheck;
use crate::spec::{LatestOffset, Progress};

/// `progress` after the batch row `row`; `false` (nothing changed) for
/// rows without a batch (events such as `schema_change`), which leave the
/// last progress standing.
pub fn record_batch(progress: &mut Progress, row: &FactRow) -> bool {
    let Some(batch_id) = row.batch_id else {
        return false;
    };
    progress.batch_id = Some(batch_id.txn_version().unsigned_abs());
    progress.rows = row.rows;
    progress.retention_headroom_hours = row.retention_headroom_hours;
    progress.ingestion_lag_seconds = row.ingestion_lag_seconds;
    progress.capture_lag_seconds = row.capture_lag_seconds;
    record_row(progress, row);
    true
}

/// `progress` after a snapshot's row: the stream's newest facts row and
/// position until the first batch after it.
pub fn record_snapshot(progress: &mut Progress, row: &FactRow) {
    record_row(progress, row);
}

fn record_row(progress: &mut Progress, row: &FactRow) {
    progress.end_lsn = row.end_lsn.map(|lsn| lsn.to_string());
    progress.end_commit_ts = row.end_commit_ts;
    progress.written_at = Some(row.written_at);
}

/// `progress` after a trigger looked at the source: its newest offset,
/// and the position's measures as they stand now (a batch that follows
/// replaces them with its row's).
pub fn record_check(progress: &mut Progress, check: &SourceCheck) {
    progress.latest_offset = Some(LatestOffset {
        lsn: check.max_lsn.to_string(),
        commit_ts: check.max_commit_ts,
        observed_at: check.observed_at,
    });
    let m = check.measures;
    progress.retention_headroom_hours = m.retention_headroom_hours;
    progress.ingestion_lag_seconds = m.ingestion_lag_seconds;
    progress.capture_lag_seconds = m.capture_lag_seconds;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{BatchId, FactEvent, Lsn};
    use crate::engine::PositionMeasures;
    use chrono::{TimeZone, Utc};

    #[test]
    fn batches_snapshots_and_triggers_each_update_their_part() {
        let written = Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 5).unwrap();
        let committed = Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 0).unwrap();
        let lsn = "0x0000002A000001F00003".parse::<Lsn>().unwrap();
        let mut progress = Progress {
            generation: Some(3),
            ..Progress::default()
        };

        let mut snapshot = FactRow::new(
            "bronze.orders",
            "orders-v1",
            None,
            Some(FactEvent::Bootstrap),
            written,
        );
        snapshot.end_lsn = Some(lsn);
        snapshot.end_commit_ts = Some(committed);
        record_snapshot(&mut progress, &snapshot);
        assert_eq!(progress.batch_id, None);
        assert_eq!(progress.written_at, Some(written));
        assert_eq!(progress.end_lsn.as_deref(), Some("0x0000002A000001F00003"));

        record_check(
            &mut progress,
            &SourceCheck {
                observed_at: written,
                max_lsn: lsn,
                max_commit_ts: Some(committed),
                position: lsn,
                measures: PositionMeasures {
                    retention_headroom_hours: Some(72.0),
                    ingestion_lag_seconds: Some(0.0),
                    capture_lag_seconds: Some(5.0),
                },
            },
        );
        let latest = progress.latest_offset.clone().unwrap();
        assert_eq!(latest.capture_lag_seconds(), Some(5.0));
        assert_eq!(progress.retention_headroom_hours, Some(72.0));

        let mut row = FactRow::new(
            "bronze.orders",
            "orders-v1",
            Some(BatchId::new(42).unwrap()),
            None,
            written,
        );
        row.rows = Some(17);
        row.retention_headroom_hours = Some(70.25);
        row.ingestion_lag_seconds = Some(1.5);
        row.capture_lag_seconds = Some(3.0);
        assert!(record_batch(&mut progress, &row));
        assert_eq!(progress.batch_id, Some(42));
        assert_eq!(progress.rows, Some(17));
        assert_eq!(progress.retention_headroom_hours, Some(70.25));
        assert_eq!(progress.ingestion_lag_seconds, Some(1.5));
        assert_eq!(progress.capture_lag_seconds, Some(3.0));
        assert_eq!(progress.generation, Some(3), "the spec it runs stays");
        assert!(progress.latest_offset.is_some());

        let event = FactRow::new("bronze.orders", "orders-v1", None, None, written);
        assert!(!record_batch(&mut progress, &event));
    }
}
