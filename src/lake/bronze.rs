//! The bronze writer: one micro-batch becomes at most one Delta commit that
//! carries `txn(appId, batch_id)`, so a replayed batch is never written twice
//! (docs/adr/0002-exactly-once.md).

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Action;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{StructType, Transaction};
use deltalake::parquet::basic::Compression;
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::{DeltaTable, DeltaTableError};
use futures::{Stream, StreamExt};

use super::delta::{open_or_create, txn_version};
use super::facts::FactRow;
use super::storage::{StorageLocation, StorageOptions};
use crate::source::BatchId;

/// Commit LSN of the change (`0x` + 20 hex digits, so text order is LSN order).
pub const LSN: &str = "_lsn";
/// Order of the change within its transaction (`__$seqval`, same text form).
pub const SEQVAL: &str = "_seqval";
/// What the row is: see [`Operation`].
pub const OPERATION: &str = "_operation";
/// Commit time of `_lsn`, UTC, TIMESTAMP_NTZ.
pub const COMMIT_TS: &str = "_commit_ts";
/// The micro-batch that wrote the row.
pub const BATCH_ID: &str = "_batch_id";

/// Key of the facts row in a bronze commit's commitInfo.
pub const COMMIT_INFO_FACTS: &str = "mssql_cdc.facts";

/// commitInfo keys naming the commit's `txn`, so its metadata can be found again.
pub const COMMIT_INFO_TXN_APP_ID: &str = "mssql_cdc.txn_app_id";
/// See [`COMMIT_INFO_TXN_APP_ID`].
pub const COMMIT_INFO_TXN_VERSION: &str = "mssql_cdc.txn_version";

/// How many recent commits [`BronzeTable::commit_metadata`] looks through.
const HISTORY_SEARCH_DEPTH: usize = 200;

/// Parquet files written for one commit and not yet committed.
pub struct StagedFiles {
    writer: RecordBatchWriter,
    rows: u64,
}

impl StagedFiles {
    /// Rows in the files.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

/// Default size at which the writer rolls to a new Parquet file.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 * 1024 * 1024;

/// Rows per Parquet row group. The writer streams files to storage but
/// keeps the open row group in memory, so this (not the batch size) bounds
/// what a batch holds; the Parquet default of about a million rows would
/// let memory grow with batches up to that size.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_created_by(format!("mssql-cdc {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build()
}

/// The kind of a bronze row (`_operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A row inserted on the source.
    Insert,
    /// A row deleted on the source (its last values).
    Delete,
    /// An updated row's values before the update.
    UpdateBefore,
    /// An updated row's values after the update.
    UpdateAfter,
    /// A row copied by a snapshot.
    Snapshot,
}

impl Operation {
    /// The `_operation` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Insert => "insert",
            Operation::Delete => "delete",
            Operation::UpdateBefore => "update_before",
            Operation::UpdateAfter => "update_after",
            Operation::Snapshot => "snapshot",
        }
    }

    /// Maps CDC's `__$operation` code (1 delete, 2 insert, 3 and 4 the two
    /// images of an update).
    pub fn from_cdc_code(code: i32) -> Option<Self> {
        match code {
            1 => Some(Operation::Delete),
            2 => Some(Operation::Insert),
            3 => Some(Operation::UpdateBefore),
            4 => Some(Operation::UpdateAfter),
            _ => None,
        }
    }
}

/// The CDC columns appended after the captured columns.
pub fn cdc_fields() -> Vec<Field> {
    vec![
        Field::new(LSN, DataType::Utf8, false),
        Field::new(SEQVAL, DataType::Utf8, false),
        Field::new(OPERATION, DataType::Utf8, false),
        Field::new(
            COMMIT_TS,
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new(BATCH_ID, DataType::Int64, false),
    ]
}

/// The bronze schema: the captured columns, then [`cdc_fields`].
pub fn bronze_schema(captured: &Schema) -> Result<SchemaRef, BronzeError> {
    let cdc = cdc_fields();
    if let Some(clash) = captured
        .fields()
        .iter()
        .find(|f| cdc.iter().any(|c| c.name().eq_ignore_ascii_case(f.name())))
    {
        return Err(BronzeError::ReservedColumn(clash.name().clone()));
    }
    let mut fields: Vec<Field> = captured
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend(cdc);
    Ok(Arc::new(Schema::new(fields)))
}

/// What writing a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BronzeOutcome {
    /// The rows are in this table version.
    Committed {
        /// The bronze table version.
        version: i64,
        /// Rows written.
        rows: u64,
    },
    /// The table already holds this batch (a replay): nothing written.
    AlreadyCommitted {
        /// The batch the table's `txn` for the appId is at.
        committed: BatchId,
    },
    /// The batch had no rows: nothing written, no commit.
    Empty,
}

/// Why bronze could not be written.
#[derive(Debug, thiserror::Error)]
pub enum BronzeError {
    /// A captured column uses a name the CDC columns need.
    #[error(
        "source column {0} clashes with a bronze CDC column (_lsn, _seqval, _operation, _commit_ts, _batch_id)"
    )]
    ReservedColumn(String),
    /// The source stream failed while the batch was written.
    #[error("reading the batch failed: {0}")]
    Source(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The Delta table failed.
    #[error("bronze table {location}: {source}")]
    Delta {
        /// The table location.
        location: String,
        /// deltalake's error.
        source: Box<DeltaTableError>,
    },
}

/// The bronze table of one stream.
#[derive(Debug)]
pub struct BronzeTable {
    table: DeltaTable,
    app_id: String,
    location: String,
    target_file_size: u64,
}

impl BronzeTable {
    /// Opens the table, creating it with `schema` (see [`bronze_schema`]) if
    /// needed. `app_id` is the stream's appId, the `txn` id of its commits.
    pub async fn open_or_create(
        location: &StorageLocation,
        options: &StorageOptions,
        schema: &Schema,
        app_id: impl Into<String>,
    ) -> Result<Self, BronzeError> {
        let delta_error = |source| BronzeError::Delta {
            location: location.to_string(),
            source: Box::new(source),
        };
        let kernel: StructType = schema
            .try_into_kernel()
            .map_err(|e| delta_error(DeltaTableError::from(e)))?;
        let fields = kernel.fields().cloned().collect();
        let comment = "mssql-cdc bronze: every captured change, append-only";
        let table = open_or_create(location, options, fields, comment)
            .await
            .map_err(delta_error)?;
        Ok(BronzeTable {
            table,
            app_id: app_id.into(),
            location: location.to_string(),
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
        })
    }

    /// Sets the Parquet file size at which the writer rolls a new file.
    pub fn with_target_file_size(mut self, bytes: u64) -> Self {
        self.target_file_size = bytes;
        self
    }

    /// The underlying Delta table (for readers and tests).
    pub fn delta_table(&self) -> &DeltaTable {
        &self.table
    }

    /// The table's current schema, as Arrow.
    pub fn arrow_schema(&self) -> Result<SchemaRef, BronzeError> {
        let state = self.table.snapshot().map_err(|e| self.delta_error(e))?;
        Ok(state.snapshot().arrow_schema())
    }

    /// Schema evolution for a newer capture instance: adds the `columns` the
    /// table lacks as nullable columns after the existing ones (nothing
    /// already written is rewritten; older rows read them as NULL), and
    /// returns the table's schema.
    pub async fn add_missing_columns(
        &mut self,
        columns: &[Field],
    ) -> Result<SchemaRef, BronzeError> {
        let current = self.arrow_schema()?;
        let missing: Vec<Field> = columns
            .iter()
            .filter(|f| {
                !current
                    .fields()
                    .iter()
                    .any(|c| c.name().eq_ignore_ascii_case(f.name()))
            })
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect();
        if missing.is_empty() {
            return Ok(current);
        }
        let kernel: StructType = (&Schema::new(missing))
            .try_into_kernel()
            .map_err(|e| self.delta_error(DeltaTableError::from(e)))?;
        self.table = self
            .table
            .clone()
            .add_columns()
            .with_fields(kernel.fields().cloned().collect::<Vec<_>>())
            .await
            .map_err(|e| self.delta_error(e))?;
        self.arrow_schema()
    }

    /// The newest batch the table holds for this appId.
    pub async fn committed_batch(&mut self) -> Result<Option<BatchId>, BronzeError> {
        let app_id = self.app_id.clone();
        let version = self.committed_version(&app_id).await?;
        version
            .map(BatchId::from_txn_version)
            .transpose()
            .map_err(|e| self.delta_error(DeltaTableError::Generic(e.to_string())))
    }

    /// The newest `txn.version` committed under `txn_app_id`.
    pub async fn committed_version(
        &mut self,
        txn_app_id: &str,
    ) -> Result<Option<i64>, BronzeError> {
        txn_version(&mut self.table, txn_app_id)
            .await
            .map_err(|e| self.delta_error(e))
    }

    /// Writes one micro-batch as one commit. `batches` are streamed to
    /// Parquet files as they arrive (memory stays near the target file size);
    /// the commit carries `txn(appId, batch_id)` and `facts` in commitInfo.
    pub async fn write_batch<S, E>(
        &mut self,
        batch_id: BatchId,
        batches: S,
        facts: &FactRow,
    ) -> Result<BronzeOutcome, BronzeError>
    where
        S: Stream<Item = Result<RecordBatch, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if let Some(committed) = self.committed_batch().await?
            && committed >= batch_id
        {
            return Ok(BronzeOutcome::AlreadyCommitted { committed });
        }
        let staged = self.stage(batches).await?;
        let app_id = self.app_id.clone();
        self.commit(
            staged,
            &app_id,
            batch_id.txn_version(),
            vec![(COMMIT_INFO_FACTS.to_string(), facts.to_json())],
        )
        .await
    }

    /// Streams `batches` into Parquet files that no table version references
    /// yet. Nothing is visible until [`BronzeTable::commit`].
    pub async fn stage<S, E>(&mut self, batches: S) -> Result<StagedFiles, BronzeError>
    where
        S: Stream<Item = Result<RecordBatch, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut writer = RecordBatchWriter::for_table(&self.table)
            .map_err(|e| self.delta_error(e))?
            .with_target_file_size(self.target_file_size)
            .with_writer_properties(writer_properties());
        let mut rows = 0u64;
        let mut batches = std::pin::pin!(batches);
        while let Some(next) = batches.next().await {
            let batch = match next {
                Ok(batch) => batch,
                Err(e) => {
                    writer.reset();
                    return Err(BronzeError::Source(e.into()));
                }
            };
            rows += batch.num_rows() as u64;
            if batch.num_rows() > 0 {
                writer.write(batch).await.map_err(|e| self.delta_error(e))?;
            }
        }
        Ok(StagedFiles { writer, rows })
    }

    /// Commits staged files as one table version carrying
    /// `txn(txn_app_id, version)` and `metadata` in commitInfo. Staged files
    /// with no rows commit nothing ([`BronzeOutcome::Empty`]).
    pub async fn commit(
        &mut self,
        staged: StagedFiles,
        txn_app_id: &str,
        version: i64,
        metadata: Vec<(String, serde_json::Value)>,
    ) -> Result<BronzeOutcome, BronzeError> {
        let StagedFiles { mut writer, rows } = staged;
        if rows == 0 {
            writer.reset();
            return Ok(BronzeOutcome::Empty);
        }
        let adds: Vec<Action> = writer
            .flush()
            .await
            .map_err(|e| self.delta_error(e))?
            .into_iter()
            .map(Action::Add)
            .collect();
        crate::failpoint::hit("before_bronze_commit");
        let mut metadata = metadata;
        metadata.push((COMMIT_INFO_TXN_APP_ID.to_string(), txn_app_id.into()));
        metadata.push((COMMIT_INFO_TXN_VERSION.to_string(), version.into()));
        let properties = CommitProperties::default()
            .with_application_transaction(Transaction::new(txn_app_id, version))
            .with_metadata(metadata);
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let snapshot = self.table.snapshot().map_err(|e| self.delta_error(e))?;
        let finalized = CommitBuilder::from(properties)
            .with_actions(adds)
            .build(Some(snapshot), self.table.log_store(), operation)
            .await
            .map_err(|e| self.delta_error(e))?;
        let table_version = finalized.version();
        self.table
            .update_state()
            .await
            .map_err(|e| self.delta_error(e))?;
        Ok(BronzeOutcome::Committed {
            version: i64::try_from(table_version).unwrap_or(i64::MAX),
            rows,
        })
    }

    /// The commitInfo entries of the commit that recorded
    /// `txn(txn_app_id, version)`, searched among the newest commits.
    pub async fn commit_metadata(
        &mut self,
        txn_app_id: &str,
        version: i64,
    ) -> Result<Option<HashMap<String, serde_json::Value>>, BronzeError> {
        self.table
            .update_state()
            .await
            .map_err(|e| self.delta_error(e))?;
        let mut history = self.table.history(Some(HISTORY_SEARCH_DEPTH));
        while let Some(info) = history.next().await {
            let info = info.map_err(|e| BronzeError::Delta {
                location: self.location.clone(),
                source: Box::new(e),
            })?;
            let matches = info
                .info
                .get(COMMIT_INFO_TXN_APP_ID)
                .and_then(|v| v.as_str())
                == Some(txn_app_id)
                && info
                    .info
                    .get(COMMIT_INFO_TXN_VERSION)
                    .and_then(|v| v.as_i64())
                    == Some(version);
            if matches {
                return Ok(Some(info.info));
            }
        }
        Ok(None)
    }

    fn delta_error(&self, source: DeltaTableError) -> BronzeError {
        BronzeError::Delta {
            location: self.location.clone(),
            source: Box::new(source),
        }
    }
}

#[cfg(test)]
#[path = "bronze_tests.rs"]
mod tests;
