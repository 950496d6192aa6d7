//! `status.progress` from the facts row of a batch: what the worker reports
//! after every batch, so the operator can judge health without reading Delta.

use crate::domain::FactRow;
use crate::spec::Progress;

/// The progress a facts row reports; `None` for rows without a batch
/// (events such as `schema_change`), which leave the last progress standing.
pub fn progress_of(row: &FactRow) -> Option<Progress> {
    let batch_id = row.batch_id?;
    Some(Progress {
        batch_id: batch_id.txn_version().unsigned_abs(),
        end_lsn: row.end_lsn.map(|lsn| lsn.to_string()),
        end_commit_ts: row.end_commit_ts,
        written_at: row.written_at,
        rows: row.rows,
        retention_headroom_hours: row.retention_headroom_hours,
        ingestion_lag_seconds: row.ingestion_lag_seconds,
        capture_lag_seconds: row.capture_lag_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{BatchId, Lsn};
    use chrono::{TimeZone, Utc};

    #[test]
    fn a_batch_row_becomes_progress_and_an_event_row_does_not() {
        let written = Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 5).unwrap();
        let committed = Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 0).unwrap();
        let mut row = FactRow::new(
            "bronze.orders",
            "orders-v1",
            Some(BatchId::new(42).unwrap()),
            None,
            written,
        );
        row.end_lsn = Some("0x0000002A000001F00003".parse::<Lsn>().unwrap());
        row.end_commit_ts = Some(committed);
        row.rows = Some(17);
        row.retention_headroom_hours = Some(70.25);
        row.ingestion_lag_seconds = Some(1.5);
        row.capture_lag_seconds = Some(3.0);
        let progress = progress_of(&row).unwrap();
        assert_eq!(progress.batch_id, 42);
        assert_eq!(progress.end_lsn.as_deref(), Some("0x0000002A000001F00003"));
        assert_eq!(progress.end_commit_ts, Some(committed));
        assert_eq!(progress.written_at, written);
        assert_eq!(progress.rows, Some(17));
        assert_eq!(progress.retention_headroom_hours, Some(70.25));
        assert_eq!(progress.ingestion_lag_seconds, Some(1.5));
        assert_eq!(progress.capture_lag_seconds, Some(3.0));

        let event = FactRow::new("bronze.orders", "orders-v1", None, None, written);
        assert_eq!(progress_of(&event), None);
    }
}
