//! Streams a query's rows into bounded Arrow record batches on a task of its
//! own, so reading from SQL Server overlaps with Parquet encoding and memory
//! stays at a few batches whatever the result size.

use std::ops::DerefMut;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    Int64Builder, StringBuilder, TimestampMicrosecondBuilder, new_null_array,
};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::arrow::record_batch::RecordBatch;
use futures::{Stream, TryStreamExt};
use tiberius::ColumnData;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::SourceError;
use super::arrow_rows::{ColumnBuilder, naive_utc, wire_type};
use super::cdc::lsn_of;
use super::connection::SqlClient;
use super::time_zone::{CommitClock, RepeatedHour};
use super::types::{SqlColumn, ValueLimit};
use crate::domain::Lsn;
use crate::domain::change::{CDC_COLUMNS, Operation};

/// Rows per Arrow record batch handed to the writer.
pub const ROWS_PER_RECORD_BATCH: usize = 8192;

/// Bytes of values at which a record batch is handed over before it holds
/// [`ROWS_PER_RECORD_BATCH`] rows, so wide rows (long strings, binaries)
/// hold no more memory in flight than narrow ones.
pub const RECORD_BATCH_BYTES: u64 = 4 * 1024 * 1024;

/// What the result rows look like.
#[derive(Debug, Clone)]
pub enum RowShape {
    /// `__$start_lsn, __$seqval, __$operation, tran_end_time, columns...`
    Changes {
        /// How commit times become UTC.
        clock: CommitClock,
        /// The repeated hour of a clock change the read may cross.
        repeated: Option<RepeatedHour>,
    },
    /// `columns...`, all stamped with the snapshot's LSN and commit time.
    Snapshot {
        /// The snapshot LSN.
        lsn: Lsn,
        /// Its commit time (UTC).
        commit_ts: Option<DateTime<Utc>>,
        /// Positions of the key columns among `columns`.
        key_positions: Vec<usize>,
    },
}

/// One read to run.
pub struct ReadRequest {
    /// The query.
    pub sql: String,
    /// Its parameters `@P1...`.
    pub params: Vec<ColumnData<'static>>,
    /// The captured columns the rows carry.
    pub columns: Vec<SqlColumn>,
    /// The bronze schema the batches must have.
    pub schema: SchemaRef,
    /// Row layout.
    pub shape: RowShape,
    /// `_batch_id` of every row.
    pub batch_id: i64,
    /// The largest value the query lets SQL Server send; when it guards a
    /// column, each row ends with the two guard columns.
    pub value_limit: ValueLimit,
    /// Called after each record batch is handed over (progress, failpoints).
    pub on_batch: Option<Box<dyn FnMut(u64) + Send>>,
}

/// What a read saw: the facts table's read metrics and the rows' range.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadStats {
    /// Rows read.
    pub rows: u64,
    /// Bytes of values received.
    pub bytes: u64,
    /// Time spent waiting for SQL Server (not for the writer).
    pub read_time: Duration,
    /// Lowest `_lsn` read.
    pub min_lsn: Option<Lsn>,
    /// Highest `_lsn` read.
    pub max_lsn: Option<Lsn>,
    /// Lowest commit time read.
    pub min_commit_ts: Option<DateTime<Utc>>,
    /// Highest commit time read.
    pub max_commit_ts: Option<DateTime<Utc>>,
    /// Key values of the last row (snapshots only).
    pub last_key: Option<Vec<ColumnData<'static>>>,
}

impl ReadStats {
    /// Adds what another reader of the same batch or snapshot saw: counts,
    /// bytes and read time sum (task-seconds), the LSN and commit-time
    /// ranges widen. `last_key` stays this reader's.
    pub fn absorb(&mut self, other: &ReadStats) {
        fn widen<T: Copy + Ord>(a: Option<T>, b: Option<T>, pick: fn(T, T) -> T) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(pick(a, b)),
                (a, b) => a.or(b),
            }
        }
        self.rows += other.rows;
        self.bytes += other.bytes;
        self.read_time += other.read_time;
        self.min_lsn = widen(self.min_lsn, other.min_lsn, Ord::min);
        self.max_lsn = widen(self.max_lsn, other.max_lsn, Ord::max);
        self.min_commit_ts = widen(self.min_commit_ts, other.min_commit_ts, Ord::min);
        self.max_commit_ts = widen(self.max_commit_ts, other.max_commit_ts, Ord::max);
    }
}

/// A running read: the batches, then the session back with the stats.
pub type ReadTask<C> = JoinHandle<(C, Result<ReadStats, SourceError>)>;

/// Starts `request` on its own task, so reading overlaps with what the
/// caller does with the batches. `client` is the session, owned or held
/// (a lock guard); the stream yields record batches (at most two are
/// buffered), and awaiting the task gives the client back with the stats.
pub fn spawn_read<C>(
    client: C,
    request: ReadRequest,
) -> (
    impl Stream<Item = Result<RecordBatch, SourceError>> + Send + 'static,
    ReadTask<C>,
)
where
    C: DerefMut<Target = SqlClient> + Send + 'static,
{
    let (sender, receiver) = mpsc::channel::<Result<Chunk, SourceError>>(2);
    let task = tokio::spawn(async move {
        let mut client = client;
        let result = read_rows(&mut client, request, &sender).await;
        if let Err(e) = &result {
            // The writer sees the failure in the stream; the caller gets it
            // in detail from the task.
            let _ = sender
                .send(Err(SourceError::ReadFailed {
                    reason: e.to_string(),
                    transient: e.is_transient(),
                }))
                .await;
        }
        (client, result)
    });
    // A stream that ends without `Chunk::End` (the task died) ends in an
    // error, so a partial batch is never committed.
    let stream = futures::stream::unfold(Some(receiver), |receiver| async move {
        let mut receiver = receiver?;
        match receiver.recv().await {
            Some(Ok(Chunk::Rows(batch))) => Some((Ok(batch), Some(receiver))),
            Some(Ok(Chunk::End)) => None,
            Some(Err(e)) => Some((Err(e), None)),
            None => Some((
                Err(SourceError::Missing(
                    "the read task (it stopped early)".into(),
                )),
                None,
            )),
        }
    });
    (stream, task)
}

/// What the read task hands the writer.
enum Chunk {
    Rows(RecordBatch),
    End,
}

async fn read_rows(
    client: &mut SqlClient,
    mut request: ReadRequest,
    sender: &mpsc::Sender<Result<Chunk, SourceError>>,
) -> Result<ReadStats, SourceError> {
    let mut stats = ReadStats::default();
    let started = Instant::now();
    let params: Vec<&dyn tiberius::ToSql> = request
        .params
        .iter()
        .map(|p| p as &dyn tiberius::ToSql)
        .collect();
    let context = "reading changes";
    let mut rows = client
        .query(request.sql.as_str(), &params)
        .await
        .map_err(SourceError::sql(context))?
        .into_row_stream();
    stats.read_time += started.elapsed();
    let mut batch = BatchBuilder::new(&request)?;
    let mut batch_started_at = stats.bytes;
    loop {
        let waited = Instant::now();
        let next = rows.try_next().await.map_err(SourceError::sql(context))?;
        stats.read_time += waited.elapsed();
        let Some(row) = next else { break };
        batch.push(row, &request, &mut stats)?;
        if batch.len >= ROWS_PER_RECORD_BATCH
            || stats.bytes - batch_started_at >= RECORD_BATCH_BYTES
        {
            batch_started_at = stats.bytes;
            let record_batch = batch.finish(&request)?;
            if sender.send(Ok(Chunk::Rows(record_batch))).await.is_err() {
                // The writer stopped; it reports why.
                return Ok(stats);
            }
            if let Some(on_batch) = request.on_batch.as_mut() {
                on_batch(stats.rows);
            }
        }
    }
    if batch.len > 0 {
        let record_batch = batch.finish(&request)?;
        let _ = sender.send(Ok(Chunk::Rows(record_batch))).await;
        if let Some(on_batch) = request.on_batch.as_mut() {
            on_batch(stats.rows);
        }
    }
    let _ = sender.send(Ok(Chunk::End)).await;
    Ok(stats)
}

struct BatchBuilder {
    columns: Vec<ColumnBuilder>,
    /// Whether each row ends with the value limit's guard columns (decided
    /// once per read, not per row).
    guarded: bool,
    lsn: StringBuilder,
    seqval: StringBuilder,
    operation: StringBuilder,
    commit_ts: TimestampMicrosecondBuilder,
    batch_id: Int64Builder,
    len: usize,
}

impl BatchBuilder {
    fn new(request: &ReadRequest) -> Result<Self, SourceError> {
        let capacity = ROWS_PER_RECORD_BATCH;
        let columns = request
            .columns
            .iter()
            .map(|c| ColumnBuilder::new(c.kind()?, capacity))
            .collect::<Result<_, _>>()?;
        Ok(BatchBuilder {
            columns,
            guarded: request.value_limit.guards_any(&request.columns),
            lsn: StringBuilder::with_capacity(capacity, capacity * 22),
            seqval: StringBuilder::with_capacity(capacity, capacity * 22),
            operation: StringBuilder::with_capacity(capacity, capacity * 8),
            commit_ts: TimestampMicrosecondBuilder::with_capacity(capacity),
            batch_id: Int64Builder::with_capacity(capacity),
            len: 0,
        })
    }

    fn push(
        &mut self,
        row: tiberius::Row,
        request: &ReadRequest,
        stats: &mut ReadStats,
    ) -> Result<(), SourceError> {
        let mut values = row.into_iter();
        let (lsn, seqval, operation, commit_ts) = match &request.shape {
            RowShape::Changes { clock, repeated } => {
                let lsn = next_value(&mut values, "__$start_lsn")?;
                let lsn = lsn_of(&lsn, "__$start_lsn")?.ok_or_else(|| missing("__$start_lsn"))?;
                let seqval = next_value(&mut values, "__$seqval")?;
                let seqval = lsn_of(&seqval, "__$seqval")?.ok_or_else(|| missing("__$seqval"))?;
                let code = match next_value(&mut values, "__$operation")? {
                    ColumnData::I32(Some(code)) => code,
                    ColumnData::I16(Some(code)) => i32::from(code),
                    ColumnData::U8(Some(code)) => i32::from(code),
                    other => {
                        return Err(SourceError::UnexpectedValue {
                            column: "__$operation".into(),
                            sql_type: "int".into(),
                            found: wire_type(&other).to_string(),
                            row: change_row(lsn, seqval),
                        });
                    }
                };
                let operation =
                    Operation::from_cdc_code(code).ok_or_else(|| SourceError::UnexpectedValue {
                        column: "__$operation".into(),
                        sql_type: "int".into(),
                        found: format!("operation code {code} (CDC has 1 to 4)"),
                        row: change_row(lsn, seqval),
                    })?;
                let time = next_value(&mut values, "tran_end_time")?;
                let commit_ts =
                    naive_utc(&time).map(|t| clock.commit(t.naive_utc(), lsn, repeated.as_ref()));
                (lsn, seqval, operation, commit_ts)
            }
            RowShape::Snapshot { lsn, commit_ts, .. } => {
                (*lsn, *lsn, Operation::Snapshot, *commit_ts)
            }
        };
        let mut key = Vec::new();
        for (position, (column, builder)) in request
            .columns
            .iter()
            .zip(self.columns.iter_mut())
            .enumerate()
        {
            let value = next_value(&mut values, &column.name)?;
            stats.bytes += value_bytes(&value);
            if let RowShape::Snapshot { key_positions, .. } = &request.shape
                && key_positions.contains(&position)
            {
                key.push(value.clone());
            }
            builder
                .append(value, &column.name, &column.type_name)
                .map_err(|e| {
                    e.in_row(|| match &request.shape {
                        RowShape::Changes { .. } => change_row(lsn, seqval),
                        RowShape::Snapshot { .. } => {
                            format!("snapshot at LSN {lsn}, row {} of this read", stats.rows + 1)
                        }
                    })
                })?;
        }
        if self.guarded {
            let column = next_value(&mut values, "the guard column")?;
            let bytes = next_value(&mut values, "the guard's size column")?;
            if let ColumnData::String(Some(column)) = column {
                let bytes = match bytes {
                    ColumnData::I64(Some(n)) => u64::try_from(n).unwrap_or(0),
                    ColumnData::I32(Some(n)) => u64::try_from(n).unwrap_or(0),
                    _ => 0,
                };
                return Err(SourceError::ValueTooLarge {
                    column: column.into_owned(),
                    bytes,
                    limit: request.value_limit.bytes(),
                    row: match &request.shape {
                        RowShape::Changes { .. } => change_row(lsn, seqval),
                        RowShape::Snapshot { .. } => {
                            format!("snapshot at LSN {lsn}, row {} of this read", stats.rows + 1)
                        }
                    },
                });
            }
        }
        if !key.is_empty() {
            stats.last_key = Some(key);
        }
        self.lsn.append_value(lsn.text().as_str());
        self.seqval.append_value(seqval.text().as_str());
        self.operation.append_value(operation.as_str());
        self.commit_ts
            .append_option(commit_ts.map(|t| t.timestamp_micros()));
        self.batch_id.append_value(request.batch_id);
        self.len += 1;
        stats.rows += 1;
        stats.bytes += 30;
        stats.min_lsn = Some(stats.min_lsn.map_or(lsn, |m| m.min(lsn)));
        stats.max_lsn = Some(stats.max_lsn.map_or(lsn, |m| m.max(lsn)));
        if let Some(ts) = commit_ts {
            stats.min_commit_ts = Some(stats.min_commit_ts.map_or(ts, |m| m.min(ts)));
            stats.max_commit_ts = Some(stats.max_commit_ts.map_or(ts, |m| m.max(ts)));
        }
        Ok(())
    }

    fn finish(&mut self, request: &ReadRequest) -> Result<RecordBatch, SourceError> {
        let mut arrays: Vec<_> = self.columns.iter_mut().map(ColumnBuilder::finish).collect();
        arrays.push(Arc::new(self.lsn.finish()));
        arrays.push(Arc::new(self.seqval.finish()));
        arrays.push(Arc::new(self.operation.finish()));
        arrays.push(Arc::new(self.commit_ts.finish()));
        arrays.push(Arc::new(self.batch_id.finish()));
        let rows = self.len;
        self.len = 0;
        let names: Vec<&str> = request
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .chain(CDC_COLUMNS.iter().map(|c| c.name))
            .collect();
        let fields = request.schema.fields();
        let in_order =
            fields.len() == names.len() && fields.iter().zip(&names).all(|(f, n)| f.name() == n);
        if in_order {
            return Ok(RecordBatch::try_new(request.schema.clone(), arrays)?);
        }
        // The bronze schema has columns this capture instance does not
        // capture (dropped on the source, or added by a newer instance):
        // they stay, NULL.
        let arrays = fields
            .iter()
            .map(|field| {
                names
                    .iter()
                    .position(|n| n.eq_ignore_ascii_case(field.name()))
                    .and_then(|i| arrays.get(i).cloned())
                    .unwrap_or_else(|| new_null_array(field.data_type(), rows))
            })
            .collect();
        Ok(RecordBatch::try_new(request.schema.clone(), arrays)?)
    }
}

/// A change row by its change-table key, which holds no column's value.
fn change_row(lsn: Lsn, seqval: Lsn) -> String {
    format!("the change at __$start_lsn {lsn}, __$seqval {seqval}")
}

fn next_value(
    values: &mut impl Iterator<Item = ColumnData<'static>>,
    column: &str,
) -> Result<ColumnData<'static>, SourceError> {
    values.next().ok_or_else(|| missing(column))
}

fn missing(column: &str) -> SourceError {
    SourceError::Missing(format!("column {column} of a change row"))
}

/// Bytes a value took on the wire, near enough for `read_mb`.
fn value_bytes(value: &ColumnData<'_>) -> u64 {
    match value {
        ColumnData::U8(_) | ColumnData::Bit(_) => 1,
        ColumnData::I16(_) => 2,
        ColumnData::I32(_) | ColumnData::F32(_) | ColumnData::Date(_) => 4,
        ColumnData::I64(_) | ColumnData::F64(_) | ColumnData::DateTime(_) => 8,
        ColumnData::SmallDateTime(_) => 4,
        ColumnData::Guid(_) | ColumnData::Numeric(_) => 17,
        ColumnData::Time(_) => 5,
        ColumnData::DateTime2(_) => 8,
        ColumnData::DateTimeOffset(_) => 10,
        ColumnData::String(s) => s.as_ref().map_or(0, |s| s.len() as u64 * 2),
        ColumnData::Binary(b) => b.as_ref().map_or(0, |b| b.len() as u64),
        ColumnData::Xml(x) => x
            .as_ref()
            .map_or(0, |x| x.as_ref().to_string().len() as u64 * 2),
    }
}
