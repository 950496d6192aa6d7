//! The facts rows a stream writes, built from what a batch planned and
//! measured: pure functions, so each column's rule is stated and tested in
//! one place (docs/facts.md says what each column means).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::observer::PositionMeasures;
use super::plan::Watermarks;
use crate::domain::facts::EventDetail;
use crate::domain::{FactEvent, FactRow, Lsn};
use crate::lake::checkpoint::{PlannedBatch, PlannedEvent, PlannedSnapshot};
use crate::source::reader::ReadStats;

/// Which stream a row belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Stream<'a> {
    /// The target table's name.
    pub target: &'a str,
    /// The stream's appId.
    pub app_id: &'a str,
    /// The CdcSource whose worker runs the stream, if any: every row
    /// carries it, so a database's tables can be judged together.
    pub source: Option<&'a str>,
}

impl Stream<'_> {
    /// A row of this stream with only its identity and `written_at` set.
    fn row(
        self,
        batch_id: Option<crate::domain::BatchId>,
        event: Option<FactEvent>,
        written_at: DateTime<Utc>,
    ) -> FactRow {
        let mut row = FactRow::new(self.target, self.app_id, batch_id, event, written_at);
        row.source = self.source.map(str::to_string);
        row
    }
}

/// What running a micro-batch measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchMeasures {
    /// When the batch started (UTC).
    pub started_at: DateTime<Utc>,
    /// How long it took up to its facts row.
    pub duration: Duration,
    /// What the read saw.
    pub read: ReadStats,
    /// A round trip to the source before the read.
    pub source_rtt_ms: f64,
    /// The reader session's ASYNC_NETWORK_IO wait during the read; `None`
    /// without permission to read it.
    pub network_wait_ms: Option<i64>,
}

/// The row of one micro-batch (event NULL). `end_commit_ts` is the plan's,
/// or looked up when the plan could not know it; `detail` carries the
/// run's pending warnings.
pub fn batch_row(
    stream: Stream<'_>,
    plan: &PlannedBatch,
    end_commit_ts: Option<DateTime<Utc>>,
    measures: &BatchMeasures,
    marks: &Watermarks,
    detail: Option<String>,
    written_at: DateTime<Utc>,
) -> FactRow {
    let read = &measures.read;
    let mut row = stream.row(Some(plan.batch_id), None, written_at);
    row.rows = Some(read.rows);
    row.capture_instance = Some(plan.capture_instance.clone());
    row.min_lsn = read.min_lsn;
    row.max_lsn = read.max_lsn;
    row.end_lsn = Some(plan.end_lsn);
    row.min_commit_ts = read.min_commit_ts;
    row.max_commit_ts = read.max_commit_ts;
    row.end_commit_ts = end_commit_ts;
    row.started_at = Some(measures.started_at);
    row.duration_ms = Some(millis(measures.duration));
    row.read_seconds = Some(read.read_time.as_secs_f64());
    row.read_mb = Some(read.bytes as f64 / 1_000_000.0);
    row.source_rtt_ms = Some(measures.source_rtt_ms);
    row.network_wait_ms = measures.network_wait_ms;
    let measures = position_measures(end_commit_ts, marks);
    row.retention_headroom_hours = measures.retention_headroom_hours;
    row.ingestion_lag_seconds = measures.ingestion_lag_seconds;
    row.capture_lag_seconds = measures.capture_lag_seconds;
    row.detail = detail;
    row
}

/// How far a position whose commit time is `position_commit_ts` is from
/// capture and from cleanup, when the source showed `marks`.
pub fn position_measures(
    position_commit_ts: Option<DateTime<Utc>>,
    marks: &Watermarks,
) -> PositionMeasures {
    PositionMeasures {
        retention_headroom_hours: retention_headroom_hours(position_commit_ts, marks),
        // How far the position is behind what capture has mapped.
        ingestion_lag_seconds: seconds_between(position_commit_ts, marks.max_commit_ts),
        // How far capture is behind the wall clock.
        capture_lag_seconds: seconds_between(marks.max_commit_ts, Some(marks.observed_at)),
    }
}

/// Hours until cleanup can reach the position: its commit time plus the
/// cleanup job's retention, less now on the server's clock (the commit
/// time of the newest change capture mapped, so that a skewed clock on
/// either side does not move it; the local clock when that is unknown);
/// 0 or less once the low-water mark has passed it. Without the
/// retention, the older measure: from the low-water mark's commit time to
/// the position's (which on a database younger than its retention is only
/// the database's age).
pub fn retention_headroom_hours(
    position_commit_ts: Option<DateTime<Utc>>,
    marks: &Watermarks,
) -> Option<f64> {
    let position = position_commit_ts?;
    let from_watermark = seconds_between(marks.min_commit_ts, Some(position)).map(|s| s / 3600.0);
    let Some(minutes) = marks.retention_minutes else {
        return from_watermark;
    };
    if let Some(behind) = from_watermark.filter(|h| *h < 0.0) {
        return Some(behind);
    }
    let cleanup_reaches = position + chrono::Duration::minutes(minutes);
    let now = marks.max_commit_ts.unwrap_or(marks.observed_at);
    seconds_between(Some(now), Some(cleanup_reaches)).map(|s| s / 3600.0)
}

/// The event rows a batch records, from its plan: each sits at its own
/// LSN, reads no rows, and carries its detail.
pub fn event_rows(
    stream: Stream<'_>,
    plan: &PlannedBatch,
    events: &[PlannedEvent],
    written_at: DateTime<Utc>,
) -> Vec<FactRow> {
    events
        .iter()
        .map(|planned| {
            let mut row = stream.row(Some(plan.batch_id), Some(planned.event), written_at);
            row.rows = Some(0);
            row.capture_instance = Some(planned.capture_instance.clone());
            at_point(&mut row, planned.lsn, planned.commit_ts);
            row.detail = Some(planned.detail.to_text());
            row.lost_from_ts = planned.lost_from_ts;
            row.lost_to_ts = planned.lost_to_ts;
            row
        })
        .collect()
}

/// What a finished snapshot copied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SnapshotMeasures {
    /// Rows copied, over every chunk (resumed ones included).
    pub rows: u64,
    /// Time spent waiting for SQL Server in this run.
    pub read_time: Duration,
    /// Bytes received in this run.
    pub read_bytes: u64,
}

/// The row of a finished snapshot: `bootstrap` for the first, else
/// `resnapshot` with the commit times whose changes were lost. It sits at
/// the snapshot's LSN, and has no batch id.
pub fn snapshot_row(
    stream: Stream<'_>,
    plan: &PlannedSnapshot,
    measures: &SnapshotMeasures,
    written_at: DateTime<Utc>,
) -> FactRow {
    let event = if plan.snapshot == 0 {
        FactEvent::Bootstrap
    } else {
        FactEvent::Resnapshot
    };
    let mut row = stream.row(None, Some(event), written_at);
    row.rows = Some(measures.rows);
    row.capture_instance = Some(plan.capture_instance.clone());
    at_point(&mut row, plan.lsn, plan.commit_ts);
    row.started_at = Some(plan.started_at);
    row.duration_ms = Some((written_at - plan.started_at).num_milliseconds());
    row.read_seconds = Some(measures.read_time.as_secs_f64());
    row.read_mb = Some(measures.read_bytes as f64 / 1_000_000.0);
    row.lost_from_ts = plan.lost_from_ts;
    row.lost_to_ts = plan.lost_to_ts;
    row.detail = plan
        .switched
        .clone()
        .map(|switch| EventDetail::Switched(switch).to_text());
    row
}

/// A row about one instant of the log (an event, a snapshot): its range
/// starts and ends at `lsn`.
fn at_point(row: &mut FactRow, lsn: Lsn, commit_ts: Option<DateTime<Utc>>) {
    row.min_lsn = Some(lsn);
    row.max_lsn = Some(lsn);
    row.end_lsn = Some(lsn);
    row.min_commit_ts = commit_ts;
    row.max_commit_ts = commit_ts;
    row.end_commit_ts = commit_ts;
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Seconds from `from` to `to` (negative when `to` is earlier); `None`
/// when either is unknown.
fn seconds_between(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> Option<f64> {
    Some((to? - from?).num_milliseconds() as f64 / 1000.0)
}

#[cfg(test)]
#[path = "facts_row_tests.rs"]
mod tests;
