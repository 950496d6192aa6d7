//! What a `CdcStream` reports back: its phase, the worker's last batch and
//! the finalization row. The worker writes `progress` and `finalization`,
//! the operator `phase` and `conditions` (see `CdcStreamStatus`).

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
}

/// An RFC 3339 instant, as Kubernetes writes times.
fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}
