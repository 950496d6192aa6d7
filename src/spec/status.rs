//! What a `CdcStream` reports back: its phase, the worker's last batch,
//! the finalization row and purged changes met. The worker writes
//! `progress`, `finalization` and `dataLoss`, the operator `phase` and
//! `conditions` (see `CdcStreamStatus`).

use chrono::{DateTime, Utc};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// Where a stream is in its life cycle.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
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

/// The facts row of the worker's last micro-batch (see docs/facts.md for
/// what each value means).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Number of the batch.
    #[schemars(range(min = 0))]
    pub batch_id: u64,
    /// The LSN the batch read up to, `0x` and 20 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^0x[0-9A-F]{20}$"))]
    pub end_lsn: Option<String>,
    /// Commit time (UTC) of `endLsn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub end_commit_ts: Option<DateTime<Utc>>,
    /// When the batch's facts row was written (UTC).
    #[schemars(schema_with = "date_time")]
    pub written_at: DateTime<Utc>,
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
fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}
