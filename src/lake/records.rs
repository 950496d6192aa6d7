//! What a bronze commit records beside its rows (in commitInfo), so a run
//! that replays after a crash finds exactly what the first run decided:
//! a micro-batch's facts rows, or how far a snapshot got. The field names
//! are the commitInfo keys, kept as existing tables hold them.

use serde::{Deserialize, Serialize};

use crate::domain::FactRow;

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
    }
}
