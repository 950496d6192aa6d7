//! The facts table's columns, in table order, with the comment each
//! carries in the Delta schema. The writer, the docs test and
//! [`super::FactRow`]'s serialised form all follow this one list.

use crate::domain::columns::ColumnKind::{Double, Long, String as Str, TimestampNtz as Ts};
use crate::domain::columns::{Column, col};

/// Every facts column, in table order.
pub const COLUMNS: [Column; 26] = [
    col(
        "target",
        Str,
        false,
        "Name of the Delta table the stream writes, e.g. bronze.orders.",
    ),
    col(
        "app_id",
        Str,
        false,
        "The stream's appId: the Delta txn id its bronze commits carry.",
    ),
    // Added after the first release: an older table gets it appended as
    // its last column on open (`lake::facts`); appends match by name.
    col(
        "source",
        Str,
        true,
        "Name of the CdcSource whose worker wrote the row; NULL for a stream of its own and in rows written before this column existed.",
    ),
    col(
        "batch_id",
        Long,
        true,
        "Micro-batch number within the stream's checkpoint; NULL on snapshot rows.",
    ),
    col(
        "event",
        Str,
        true,
        "NULL for a micro-batch; otherwise bootstrap, resnapshot, schema_change, capture_instance_switched or data_skipped.",
    ),
    col(
        "rows",
        Long,
        true,
        "Change rows written to the target by this row's batch or snapshot; 0 when nothing was written, NULL for a reused snapshot.",
    ),
    col(
        "capture_instance",
        Str,
        true,
        "CDC capture instance the rows were read from.",
    ),
    col(
        "min_lsn",
        Str,
        true,
        "Smallest commit LSN among the rows read (0x + 20 hex digits); the event's LSN on event rows.",
    ),
    col(
        "max_lsn",
        Str,
        true,
        "Largest commit LSN among the rows read; the event's LSN on event rows.",
    ),
    col(
        "end_lsn",
        Str,
        true,
        "LSN the batch read up to, even when no row of this table was committed there; the event's LSN on event rows.",
    ),
    col("min_commit_ts", Ts, true, "Commit time (UTC) of min_lsn."),
    col("max_commit_ts", Ts, true, "Commit time (UTC) of max_lsn."),
    col(
        "end_commit_ts",
        Ts,
        true,
        "Commit time (UTC) of end_lsn: the source time the target is complete up to after this batch.",
    ),
    col(
        "started_at",
        Ts,
        true,
        "When the batch (or the snapshot this run took) started, UTC; NULL on other event rows.",
    ),
    col(
        "duration_ms",
        Long,
        true,
        "Wall-clock milliseconds from started_at until the target commit finished.",
    ),
    col(
        "written_at",
        Ts,
        false,
        "When this facts row was written, UTC; the liveness clock of the stream.",
    ),
    col(
        "read_seconds",
        Double,
        true,
        "Seconds spent reading from SQL Server, summed over the read tasks (can exceed duration_ms when reads run in parallel).",
    ),
    col(
        "read_mb",
        Double,
        true,
        "Megabytes received from SQL Server for the batch, summed over the read tasks.",
    ),
    col(
        "source_rtt_ms",
        Double,
        true,
        "A measured client-to-SQL Server round trip in milliseconds; with parallel reads, the slowest reading session's.",
    ),
    col(
        "network_wait_ms",
        Long,
        true,
        "Milliseconds SQL Server waited on the client to consume results (ASYNC_NETWORK_IO of the reading sessions, summed); NULL when the login may not see session waits.",
    ),
    col(
        "retention_headroom_hours",
        Double,
        true,
        "Hours between what CDC cleanup has already removed and the batch's end position: how long the stream may stop before changes are lost.",
    ),
    col(
        "ingestion_lag_seconds",
        Double,
        true,
        "Seconds the batch's end position trails the newest change capture had processed when the batch was planned.",
    ),
    col(
        "capture_lag_seconds",
        Double,
        true,
        "Seconds between the wall clock (UTC) and the commit time of the source's newest captured change: how far CDC capture itself is behind.",
    ),
    col(
        "detail",
        Str,
        true,
        "JSON: the source change for schema_change and capture_instance_switched, the skipped LSNs for data_skipped, {\"warnings\": [...]} on micro-batches.",
    ),
    col(
        "lost_from_ts",
        Ts,
        true,
        "Start (UTC) of the commit-time range whose changes were purged before being read; resnapshot and data_skipped rows.",
    ),
    col(
        "lost_to_ts",
        Ts,
        true,
        "End (UTC) of the commit-time range whose changes were purged before being read; resnapshot and data_skipped rows.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::columns::ColumnKind;

    #[test]
    fn columns_are_the_documented_set_in_order() {
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(
            names.join(", "),
            "target, app_id, source, batch_id, event, rows, capture_instance, min_lsn, max_lsn, \
             end_lsn, min_commit_ts, max_commit_ts, end_commit_ts, started_at, duration_ms, \
             written_at, read_seconds, read_mb, source_rtt_ms, network_wait_ms, \
             retention_headroom_hours, ingestion_lag_seconds, capture_lag_seconds, detail, \
             lost_from_ts, lost_to_ts"
        );
    }

    #[test]
    fn every_column_has_a_comment_and_timestamps_are_ntz() {
        for c in COLUMNS {
            assert!(c.comment.len() > 10, "{} needs a comment", c.name);
            if c.name.ends_with("_ts") || c.name.ends_with("_at") {
                assert_eq!(c.kind, ColumnKind::TimestampNtz, "{}", c.name);
            }
            if c.name.ends_with("_lsn") {
                assert_eq!(c.kind, ColumnKind::String, "{}", c.name);
            }
        }
    }

    #[test]
    fn docs_list_every_column() {
        let doc = include_str!("../../../docs/facts.md");
        for c in COLUMNS {
            assert!(
                doc.contains(&format!("`{}`", c.name)),
                "docs/facts.md lacks {}",
                c.name
            );
        }
    }
}
