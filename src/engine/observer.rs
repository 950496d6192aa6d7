//! What the engine reports while it runs, so the CLI, the demo and the
//! worker can each show it their own way.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::BatchId;
use crate::domain::FactRow;
use crate::domain::Lsn;
use crate::domain::VerdictUpdate;

use super::error::EngineError;
use super::source_health::SourceHealth;
use super::store_outage::StoreDown;

/// Where a snapshot stands.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotProgress {
    /// Rows copied so far.
    pub rows: u64,
    /// The table's estimated row count, when the catalog knows it.
    pub estimated_rows: Option<u64>,
    /// Rows per second since the snapshot (or its resumption) started.
    pub rows_per_second: f64,
    /// Time left at that rate, when the estimate allows it.
    pub eta: Option<Duration>,
    /// Chunks committed so far.
    pub chunks: u64,
    /// When the snapshot was planned (UTC).
    pub started_at: DateTime<Utc>,
}

/// What a trigger found at the source, idle ones included: the source's
/// newest offset and the stream's position measured against it, as a
/// batch row would measure them.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceCheck {
    /// When the source was read (UTC, local clock).
    pub observed_at: DateTime<Utc>,
    /// The database's max LSN.
    pub max_lsn: Lsn,
    /// Its commit time (UTC).
    pub max_commit_ts: Option<DateTime<Utc>>,
    /// The stream's position: everything up to it is in the target.
    pub position: Lsn,
    /// The position's measures, as docs/facts.md defines them.
    pub measures: PositionMeasures,
}

/// How far a position is from capture and from cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PositionMeasures {
    /// `retention_headroom_hours`.
    pub retention_headroom_hours: Option<f64>,
    /// `ingestion_lag_seconds`.
    pub ingestion_lag_seconds: Option<f64>,
    /// `capture_lag_seconds`.
    pub capture_lag_seconds: Option<f64>,
}

/// A silver table being filled from bronze (`Observer::silver_filling`).
#[derive(Debug, Clone)]
pub struct SilverFill {
    /// The silver table's name.
    pub table: String,
    /// The position the fill reaches: the newest batch's end (or the newest
    /// snapshot's LSN); the control table holds silver there meanwhile.
    pub lsn: Lsn,
}

/// Receives the engine's progress. Every method has a do-nothing default.
pub trait Observer: Send + Sync {
    /// A snapshot copied another part of the table.
    fn snapshot_progress(&self, _progress: &SnapshotProgress) {}
    /// A snapshot chunk's read has handed `rows` rows (over the whole
    /// snapshot) to bronze so far; called on the read task.
    fn snapshot_reading(&self, _rows: u64) {}
    /// A snapshot finished; `row` is its facts row.
    fn snapshot_done(&self, _row: &FactRow) {}
    /// A silver table added to a stream that already ran is being filled
    /// from bronze; its verdict is held until the fill commits.
    fn silver_filling(&self, _fill: &SilverFill) {}
    /// A trigger read the source's newest offset (every trigger, idle ones
    /// included, before any batch it plans runs).
    fn source_checked(&self, _check: &SourceCheck) {}
    /// A micro-batch starts reading its range from SQL Server.
    fn batch_started(&self, _batch_id: BatchId) {}
    /// A micro-batch's read handed `rows` rows (so far) to bronze; called
    /// on the read task while the read goes on.
    fn batch_reading(&self, _batch_id: BatchId, _rows: u64) {}
    /// A micro-batch finished; `row` is its facts row.
    fn batch_done(&self, _row: &FactRow) {}
    /// A micro-batch's event rows (schema_change, capture_instance_switched,
    /// data_skipped) are in the facts table; called before `batch_done`.
    fn events_recorded(&self, _rows: &[FactRow]) {}
    /// The target's row of the finalization control table was written.
    fn finalized(&self, _update: &VerdictUpdate) {}
    /// A transient error; the engine retries after `delay`.
    fn retrying(&self, _error: &EngineError, _attempt: u32, _delay: Duration) {}
    /// The run stopped on an error that retrying cannot fix.
    fn failed(&self, _error: &EngineError) {}
    /// The run is connected and its tables are open: it runs (again).
    fn running(&self) {}
    /// A source's rounds found the source up or down (a change of state
    /// only); told to each of its tables and to the source's own observer.
    fn source_health(&self, _health: &SourceHealth) {}
    /// The stream's object store has failed every attempt for longer than
    /// `storeOutageAfter` (`Some`, once), or answers again (`None`, once
    /// after a `Some`); the engine retries all the while.
    fn store_outage(&self, _down: Option<&StoreDown>) {}
}

/// An observer that shows nothing (the engine still logs through `tracing`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {}

/// Hands every event to each of several observers in turn (e.g. the
/// console and the metrics endpoint).
pub struct Fanout(pub Vec<Arc<dyn Observer>>);

impl Observer for Fanout {
    fn snapshot_progress(&self, progress: &SnapshotProgress) {
        self.0.iter().for_each(|o| o.snapshot_progress(progress));
    }
    fn snapshot_reading(&self, rows: u64) {
        self.0.iter().for_each(|o| o.snapshot_reading(rows));
    }
    fn snapshot_done(&self, row: &FactRow) {
        self.0.iter().for_each(|o| o.snapshot_done(row));
    }
    fn silver_filling(&self, fill: &SilverFill) {
        self.0.iter().for_each(|o| o.silver_filling(fill));
    }
    fn source_checked(&self, check: &SourceCheck) {
        self.0.iter().for_each(|o| o.source_checked(check));
    }
    fn batch_started(&self, batch_id: BatchId) {
        self.0.iter().for_each(|o| o.batch_started(batch_id));
    }
    fn batch_reading(&self, batch_id: BatchId, rows: u64) {
        self.0.iter().for_each(|o| o.batch_reading(batch_id, rows));
    }
    fn batch_done(&self, row: &FactRow) {
        self.0.iter().for_each(|o| o.batch_done(row));
    }
    fn events_recorded(&self, rows: &[FactRow]) {
        self.0.iter().for_each(|o| o.events_recorded(rows));
    }
    fn finalized(&self, update: &VerdictUpdate) {
        self.0.iter().for_each(|o| o.finalized(update));
    }
    fn retrying(&self, error: &EngineError, attempt: u32, delay: Duration) {
        self.0
            .iter()
            .for_each(|o| o.retrying(error, attempt, delay));
    }
    fn failed(&self, error: &EngineError) {
        self.0.iter().for_each(|o| o.failed(error));
    }
    fn running(&self) {
        self.0.iter().for_each(|o| o.running());
    }
    fn source_health(&self, health: &SourceHealth) {
        self.0.iter().for_each(|o| o.source_health(health));
    }
    fn store_outage(&self, down: Option<&StoreDown>) {
        self.0.iter().for_each(|o| o.store_outage(down));
    }
}
