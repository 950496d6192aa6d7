//! What one part of a parallel read asks SQL Server, said in the stream's
//! terms (a batch's LSN range, a snapshot chunk's key window) and turned
//! into SQL here, and the pooled session that runs it (`SqlReader`). The
//! engine plans the parts and commits what they staged; it never sees the
//! query text or its TDS parameters.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deltalake::arrow::datatypes::SchemaRef;
use tiberius::ColumnData;
use tokio::sync::Mutex;
use tokio::task::JoinError;

use super::cdc::{self, CaptureInfo};
use super::reader::{ReadRequest, ReadStats, RowShape, spawn_read};
use super::session_stats::{self, NetworkWait};
use super::snapshot::{KeyValues, KeyWindow, chunk_query, has_rows_within};
use super::time_zone::{CommitClock, RepeatedHour};
use super::types::ValueLimit;
use super::{SourceError, SqlClient};
use crate::domain::{CaptureInstance, Lsn, TableName};
use crate::lake::bronze::{StagedFiles, Stager};
use crate::lake::records::LsnRange;

/// The changes of one LSN range of a batch.
#[derive(Debug, Clone)]
pub struct ChangesPart {
    /// The instance read and its columns.
    pub info: CaptureInfo,
    /// The range, both ends included.
    pub range: LsnRange,
    /// How commit times become UTC.
    pub clock: CommitClock,
    /// The repeated hour of a clock change the range may cross.
    pub repeated: Option<RepeatedHour>,
}

/// One chunk of a snapshot's key range.
#[derive(Debug, Clone)]
pub struct ChunkPart {
    /// The table.
    pub table: TableName,
    /// Its columns and the key the snapshot pages by (none: one chunk).
    pub paged: CaptureInfo,
    /// The key the chunk reads after (none: from the range's start).
    pub after: Option<KeyValues>,
    /// The range's last key (none: to the end of the table).
    pub upto: Option<KeyValues>,
    /// Rows the chunk asks for.
    pub chunk_rows: u64,
    /// The snapshot's LSN, stamped on every row.
    pub lsn: Lsn,
    /// Its commit time.
    pub commit_ts: Option<DateTime<Utc>>,
    /// Where the key columns are among the columns read.
    pub key_positions: Vec<usize>,
}

/// What a part reads.
#[derive(Debug, Clone)]
pub enum PartQuery {
    /// A range of a batch's changes.
    Changes(ChangesPart),
    /// A snapshot chunk.
    Chunk(ChunkPart),
}

/// One part's read: the query and what its rows become.
pub struct PartRead {
    /// What it reads.
    pub query: PartQuery,
    /// The bronze schema the rows take.
    pub schema: SchemaRef,
    /// `_batch_id` of every row.
    pub batch_id: i64,
    /// The largest value SQL Server may send (`spec.maxValueBytes`).
    pub value_limit: ValueLimit,
    /// Called after each record batch is handed over (progress, failpoints).
    pub on_batch: Option<Box<dyn FnMut(u64) + Send>>,
}

impl PartRead {
    /// The SQL Server read: query text, TDS parameters, row shape.
    fn request(self) -> ReadRequest {
        let PartRead {
            query,
            schema,
            batch_id,
            value_limit,
            on_batch,
        } = self;
        let (sql, params, columns, shape) = match query {
            PartQuery::Changes(part) => (
                cdc::changes_query(&part.info, value_limit),
                vec![
                    ColumnData::Binary(Some(part.range.start.to_bytes().to_vec().into())),
                    ColumnData::Binary(Some(part.range.end.to_bytes().to_vec().into())),
                ],
                part.info.columns,
                RowShape::Changes {
                    clock: part.clock,
                    repeated: part.repeated,
                },
            ),
            PartQuery::Chunk(part) => {
                let window = KeyWindow {
                    after: part.after.as_deref(),
                    upto: part.upto.as_deref(),
                };
                (
                    chunk_query(
                        &part.table,
                        &part.paged,
                        part.chunk_rows,
                        window,
                        value_limit,
                    ),
                    window.params(),
                    part.paged.columns.clone(),
                    RowShape::Snapshot {
                        lsn: part.lsn,
                        commit_ts: part.commit_ts,
                        key_positions: part.key_positions,
                    },
                )
            }
        };
        ReadRequest {
            sql,
            params,
            columns,
            schema,
            shape,
            batch_id,
            value_limit,
            on_batch,
        }
    }
}

/// What a part's read gave: its files (not sealed yet) and, from the read
/// task, what it read; `Err(JoinError)` when that task died.
pub struct PartOutput {
    /// The files the rows went to.
    pub staged: Result<StagedFiles, crate::lake::bronze::BronzeError>,
    /// The read's measures, or the read's error, or the task's.
    pub stats: Result<Result<ReadStats, SourceError>, JoinError>,
}

/// A session of the reader pool (`spec.source.readers`), lent to one part
/// at a time; the first is the run's own session.
#[derive(Clone)]
pub struct SqlReader {
    client: Arc<Mutex<SqlClient>>,
}

impl SqlReader {
    /// A pooled handle on `client`.
    pub fn new(client: Arc<Mutex<SqlClient>>) -> Self {
        SqlReader { client }
    }

    /// A round trip on this session.
    pub async fn round_trip(&mut self) -> Result<Duration, SourceError> {
        session_stats::round_trip(&mut *self.client.lock().await).await
    }

    /// The session's network wait counter.
    pub async fn network_wait(&mut self) -> Result<NetworkWait, SourceError> {
        session_stats::network_wait(&mut *self.client.lock().await).await
    }

    /// Reads `read` into files of `stager`'s, the rows streaming from a
    /// task of their own while they are written.
    pub async fn read(&mut self, read: PartRead, stager: Stager) -> PartOutput {
        let client = Arc::clone(&self.client).lock_owned().await;
        let (batches, task) = spawn_read(client, read.request());
        let staged = stager.stage(batches).await;
        let stats = task.await.map(|(_client, stats)| stats);
        PartOutput { staged, stats }
    }

    /// The lowest LSN `instance` still holds.
    pub async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, SourceError> {
        cdc::min_lsn(&mut *self.client.lock().await, instance).await
    }

    /// Whether `chunk`'s key range holds rows after `after` (else after
    /// the chunk's own start).
    pub async fn has_rows_after(
        &mut self,
        chunk: &ChunkPart,
        after: Option<&KeyValues>,
    ) -> Result<bool, SourceError> {
        let window = KeyWindow {
            after: after.or(chunk.after.as_ref()).map(Vec::as_slice),
            upto: chunk.upto.as_deref(),
        };
        has_rows_within(
            &mut *self.client.lock().await,
            &chunk.table,
            &chunk.paged,
            window,
        )
        .await
    }
}
