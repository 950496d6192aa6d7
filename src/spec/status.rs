//! What a `CdcStream` reports back: its phase, the worker's last batch and
//! the source's newest offset, the snapshot under way, capture's health,
//! the worker's own state, the finalization row and purged changes met.
//! The worker writes `progress`, `snapshot`, `capture`, `worker`,
//! `finalization` and `dataLoss`, the operator `phase` and `conditions`
//! (see `CdcStreamStatus`).

use chrono::{DateTime, Utc};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::domain::CopyShare;

/// Where a stream is in its life cycle.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Phase {
    /// Accepted; no worker has reported yet.
    Pending,
    /// The worker is copying the table's current rows.
    Snapshotting,
    /// The worker is reading changes.
    Streaming,
    /// `spec.suspend` is set: no worker runs.
    Suspended,
    /// The stream cannot run until its spec or environment is fixed.
    Failed,
}

/// The facts row of the worker's last micro-batch (or of its snapshot,
/// before the first batch), the measures of its last trigger, and the spec
/// it runs (see docs/facts.md for what each value means).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The `metadata.generation` of the spec the worker runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Hash of the spec fields the engine reads (the worker pod's
    /// `mssql-cdc.io/spec-hash`): equal to the spec's own when the worker
    /// runs what the spec says now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// Number of the batch; absent before the first one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub batch_id: Option<u64>,
    /// The LSN the batch read up to, `0x` and 20 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^0x[0-9A-F]{20}$"))]
    pub end_lsn: Option<String>,
    /// Commit time (UTC) of `endLsn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub end_commit_ts: Option<DateTime<Utc>>,
    /// When the batch's (or snapshot's) facts row was written (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub written_at: Option<DateTime<Utc>>,
    /// Change rows the batch wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Hours between the read position and what CDC cleanup has removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_headroom_hours: Option<f64>,
    /// Seconds between the source's newest commit and the read position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingestion_lag_seconds: Option<f64>,
    /// Seconds between the wall clock and the source's newest commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_lag_seconds: Option<f64>,
    /// The source's max LSN and its commit time, read on every trigger,
    /// idle ones included: how far capture has got (live capture lag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_offset: Option<LatestOffset>,
}

/// The source's newest offset, as the worker's last trigger read it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatestOffset {
    /// The database's max LSN, `0x` and 20 hex digits.
    #[schemars(regex(pattern = r"^0x[0-9A-F]{20}$"))]
    pub lsn: String,
    /// Its commit time (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub commit_ts: Option<DateTime<Utc>>,
    /// When the worker read it (UTC).
    #[schemars(schema_with = "date_time")]
    pub observed_at: DateTime<Utc>,
}

impl LatestOffset {
    /// Seconds from the commit of the max LSN to when it was read: the
    /// live capture lag at the worker's last trigger.
    pub fn capture_lag_seconds(&self) -> Option<f64> {
        let commit = self.commit_ts?;
        Some((self.observed_at - commit).num_milliseconds() as f64 / 1000.0)
    }
}

/// A snapshot the worker runs or ran last.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// Running while it copies, Done once its facts row is written.
    pub phase: SnapshotPhase,
    /// Rows copied so far.
    pub rows: u64,
    /// The table's row count as the catalog estimates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_rows: Option<u64>,
    /// Rows per second since the copy (or its resumption) started.
    pub rows_per_second: f64,
    /// When the copy should end at that rate (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub eta: Option<DateTime<Utc>>,
    /// Chunks committed so far.
    pub chunks: u64,
    /// When the snapshot was planned (UTC).
    #[schemars(schema_with = "date_time")]
    pub started_at: DateTime<Utc>,
    /// When this was last reported (UTC).
    #[schemars(schema_with = "date_time")]
    pub updated_at: DateTime<Utc>,
}

impl SnapshotStatus {
    /// How far the copy is against the table's estimate, said the same
    /// way as the console says it.
    pub fn share(&self) -> CopyShare {
        CopyShare::of(self.rows, self.estimated_rows)
    }
}

/// Where a snapshot is.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SnapshotPhase {
    /// Copying the table.
    Running,
    /// Copied; changes are streamed after it.
    Done,
}

/// What the worker last said about itself: running, or why it stopped.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    /// Running, Failed (it exits on an error retrying cannot fix), Stopped
    /// (asked to), Completed (an availableNow run caught up) or Waiting (a
    /// table of a CdcSource whose SQL Server cannot be read).
    pub state: WorkerState,
    /// The kind of error when Failed (e.g. `LoginFailed`), else the state.
    pub reason: String,
    /// One line: what happened and what to do. Never a secret.
    pub message: String,
    /// When the worker entered this state (UTC).
    #[schemars(schema_with = "date_time")]
    pub since: DateTime<Utc>,
    /// Failed runs in a row before this one (0 after a run that did not fail).
    pub restarts: u32,
}

/// The worker's own state.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum WorkerState {
    /// The engine runs.
    Running,
    /// Stopped on an error that retrying cannot fix.
    Failed,
    /// Stopped when asked (SIGTERM).
    Stopped,
    /// An availableNow run caught up and ended.
    Completed,
    /// A table of a `CdcSource` waits for its source: the source's worker
    /// runs, but SQL Server cannot be read (the reason says so); the table
    /// goes on by itself when the source is back.
    Waiting,
}

/// Capture's health as SQL Server reports it to the monitoring login
/// (`spec.source.monitoring`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaptureStatus {
    /// When the worker last read it (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub observed_at: Option<DateTime<Utc>>,
    /// When the newest log scan session ended (or started, while it runs), UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub last_scan_at: Option<DateTime<Utc>>,
    /// The newest scan's latency: seconds between a commit and its capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_latency_seconds: Option<i64>,
    /// Rows of sys.dm_cdc_errors newer than what the worker had seen.
    #[serde(default)]
    pub new_errors: u64,
    /// The newest capture error, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<CaptureErrorStatus>,
    /// Whether the capture job runs; absent when the login may not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_running: Option<bool>,
    /// The cleanup job's retention in minutes, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_minutes: Option<i64>,
    /// What the monitoring login could not read, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One row of sys.dm_cdc_errors.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaptureErrorStatus {
    /// When SQL Server logged it (UTC).
    #[schemars(schema_with = "date_time")]
    pub entry_time: DateTime<Utc>,
    /// SQL Server's error number.
    pub number: i32,
    /// Its message.
    pub message: String,
}

/// The target's row of the finalization control table.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinalizationStatus {
    /// Everything committed before this instant (UTC) is in the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub finalized_until: Option<DateTime<Utc>>,
    /// When the row was last written (UTC).
    #[schemars(schema_with = "date_time")]
    pub updated_at: DateTime<Utc>,
    /// While a snapshot is open, the LSN it started at; finalization waits
    /// for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^0x[0-9A-F]{20}$"))]
    pub open_snapshot_lsn: Option<String>,
    /// A silver table's: the end LSN of the newest batch it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^0x[0-9A-F]{20}$"))]
    pub applied_lsn: Option<String>,
}

/// The last time the worker met changes CDC cleanup had purged before it
/// read them (see `spec.onDataLoss`). Reported by the running worker only:
/// the facts table's `resnapshot` and `data_skipped` rows are the lasting
/// record.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataLossStatus {
    /// What the stream did about it.
    pub action: DataLossAction,
    /// When the worker met it (UTC).
    #[schemars(schema_with = "date_time")]
    pub detected_at: DateTime<Utc>,
    /// Commit time (UTC) from which changes are missing, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub lost_from_ts: Option<DateTime<Utc>>,
    /// Commit time (UTC) of the oldest change still kept, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub lost_to_ts: Option<DateTime<Utc>>,
}

/// What `spec.onDataLoss` made the stream do about purged changes.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DataLossAction {
    /// `fail`: the worker stopped; nothing past the gap is written.
    Stopped,
    /// `resnapshot`: the table was copied again; deletes in the gap are lost.
    Resnapshotted,
    /// `skip`: streaming went on past the gap; its changes are missing.
    Skipped,
}

/// An RFC 3339 instant, as Kubernetes writes times.
pub(super) fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}
