//! What a bronze commit records beside its rows (in commitInfo), so a run
//! that replays after a crash finds exactly what the first run decided:
//! a micro-batch's facts rows, or how far a snapshot got. The field names
//! are the commitInfo keys, kept as existing tables hold them.

use serde::{Deserialize, Serialize};

use super::checkpoint::PlannedSnapshot;
use crate::domain::{FactRow, Lsn};

/// A micro-batch's bronze commit: its facts row and its event rows, which
/// reach the facts table after the bronze commit (a replay writes these,
/// not new measurements).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// The batch's facts row (event NULL).
    #[serde(rename = "mssql_cdc.facts")]
    pub facts: FactRow,
    /// Its event rows (schema_change, capture_instance_switched, data_skipped).
    #[serde(rename = "mssql_cdc.events", default)]
    pub events: Vec<FactRow>,
    /// The checkpoint that planned the batch; `None` in commits of versions
    /// that did not record it.
    #[serde(
        rename = "mssql_cdc.checkpoint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub checkpoint: Option<String>,
    /// The planned range; `None` in commits of versions that did not record it.
    #[serde(
        rename = "mssql_cdc.range",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub range: Option<LsnRange>,
}

/// The LSNs a batch was planned to read, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LsnRange {
    /// First LSN.
    pub start: Lsn,
    /// Last LSN.
    pub end: Lsn,
}

/// Which checkpoint made a commit, whatever else it records: what the
/// start of a run reads to tell its own commits from another's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommitOrigin {
    /// The checkpoint of a micro-batch's commit.
    #[serde(rename = "mssql_cdc.checkpoint", default)]
    pub batch: Option<String>,
    /// The checkpoint of a snapshot chunk's commit.
    #[serde(rename = "mssql_cdc.snapshot", default)]
    pub chunk: Option<ChunkOrigin>,
}

impl CommitOrigin {
    /// The checkpoint that made the commit, if it recorded one.
    pub fn checkpoint(&self) -> Option<&str> {
        self.batch
            .as_deref()
            .or(self.chunk.as_ref().and_then(|c| c.checkpoint.as_deref()))
    }
}

/// The checkpoint field of a chunk's progress.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChunkOrigin {
    /// See [`ChunkProgress::checkpoint`].
    #[serde(default)]
    pub checkpoint: Option<String>,
}

impl BatchRecord {
    /// Every facts row of the batch: its own first, then the events.
    pub fn rows(&self) -> Vec<FactRow> {
        std::iter::once(self.facts.clone())
            .chain(self.events.iter().cloned())
            .collect()
    }
}

/// A snapshot chunk's bronze commit: where the snapshot stands after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkRecord {
    /// The progress, under its commitInfo key.
    #[serde(rename = "mssql_cdc.snapshot")]
    pub progress: ChunkProgress,
}

/// How far a snapshot got with its committed chunks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkProgress {
    /// Which snapshot of the stream (0 = the bootstrap).
    pub snapshot: u64,
    /// The chunk this commit holds, from 0.
    pub chunk: u64,
    /// Rows copied by this and every earlier chunk.
    pub rows: u64,
    /// Whether this was the last chunk.
    pub finished: bool,
    /// The key of the last row copied, one JSON value per key column (see
    /// `source::snapshot::key_to_json`); `None` for an unkeyed table.
    #[serde(default)]
    pub last_key: Option<Vec<serde_json::Value>>,
    /// The checkpoint that planned the snapshot; `None` in commits of
    /// versions that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// The snapshot's plan (its LSN and instance), so a run that adopts the
    /// target can resume it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlannedSnapshot>,
    /// A snapshot read in key ranges (its plan has key bounds): the range
    /// this chunk belongs to. `last_key` is then that range's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<usize>,
    /// A snapshot read in key ranges: where every range stands once this
    /// chunk is committed, so a restarted run resumes each after its own
    /// last key. `rows` and `finished` above are then the sums over them.
    /// Empty for a snapshot read in one range, as before ranges existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<RangeProgress>,
}

/// How far one key range of a snapshot got with its committed chunks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RangeProgress {
    /// Rows the range copied.
    pub rows: u64,
    /// Whether the range is done.
    pub finished: bool,
    /// The key of the range's last row copied; `None` before its first
    /// chunk (the range then starts after its lower bound).
    #[serde(default)]
    pub last_key: Option<Vec<serde_json::Value>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_record_reads_what_earlier_versions_wrote() {
        let written = serde_json::json!({
            "mssql_cdc.snapshot": {
                "snapshot": 0, "chunk": 4, "rows": 500, "finished": false,
                "last_key": [{"int": 500}]
            },
            "mssql_cdc.txn_app_id": "orders-v1/snapshot/0",
            "timestamp": 1_790_000_000_000i64
        });
        let record: ChunkRecord = serde_json::from_value(written).unwrap();
        assert_eq!(record.progress.chunk, 4);
        assert_eq!(
            record.progress.last_key,
            Some(vec![serde_json::json!({"int": 500})])
        );
        assert_eq!(record.progress.ranges, Vec::new(), "one range");
    }

    #[test]
    fn a_ranged_chunk_record_keeps_every_range() {
        let progress = ChunkProgress {
            snapshot: 0,
            chunk: 7,
            rows: 30,
            finished: false,
            last_key: Some(vec![serde_json::json!({"int": 90})]),
            checkpoint: None,
            plan: None,
            range: Some(1),
            ranges: vec![
                RangeProgress {
                    rows: 20,
                    finished: true,
                    last_key: Some(vec![serde_json::json!({"int": 50})]),
                },
                RangeProgress {
                    rows: 10,
                    finished: false,
                    last_key: Some(vec![serde_json::json!({"int": 90})]),
                },
                RangeProgress::default(),
            ],
        };
        let record = ChunkRecord { progress };
        let json = serde_json::to_value(&record).unwrap();
        let back: ChunkRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
    }
}
