//! The bronze writer: one micro-batch becomes at most one Delta commit that
//! carries `txn(appId, batch_id)`, so a replayed batch is never written twice
//! (docs/adr/0002-exactly-once.md).

use std::sync::Arc;

use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafusion::prelude::{DataFrame, ParquetReadOptions, SessionContext, col, lit};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::{Action, Add};
use deltalake::kernel::{StructField, StructType, Transaction};
use deltalake::parquet::basic::Compression;
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::parquet::schema::types::ColumnPath;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::{DeltaTable, DeltaTableError};
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::delta::{add_missing_fields, open_or_create, table_exists, txn_version};
use super::retype::{Retype, rewrite_widened, widening_commit};
use super::schema::arrow_field;
use super::storage::{StorageLocation, StorageOptions};
use super::table_properties::{UnsafeTableProperty, commit_properties, refuse_unsafe};
use super::txn::Txn;
use crate::domain::Lsn;
use crate::domain::change::{CDC_COLUMNS, LSN, SEQVAL};

/// commitInfo keys naming the commit's `txn`, so its record can be found again.
const COMMIT_INFO_TXN_APP_ID: &str = "mssql_cdc.txn_app_id";
/// See [`COMMIT_INFO_TXN_APP_ID`].
const COMMIT_INFO_TXN_VERSION: &str = "mssql_cdc.txn_version";

/// A search of the log for a commit says how far it got every this many
/// versions, so a long one (a hint-less search of a table with a long
/// history) is never silent.
const SEARCH_PROGRESS_EVERY: u64 = 1000;

/// Parquet files written for one commit and not yet committed: what one
/// writer still holds open, and files already sealed (by several writers
/// when a batch is read in parts).
pub struct StagedFiles {
    writers: Vec<RecordBatchWriter>,
    sealed: Vec<Add>,
    rows: u64,
    location: String,
}

impl StagedFiles {
    /// Rows in the files.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Finishes the files written so far, so they are complete in storage
    /// (though referenced by no table version) and the writer's buffers
    /// are freed; the commit then only references them.
    pub async fn seal(&mut self) -> Result<(), BronzeError> {
        for writer in &mut self.writers {
            let adds = writer.flush().await.map_err(|source| BronzeError::Delta {
                location: self.location.clone(),
                source: Box::new(source),
            })?;
            self.sealed.extend(adds);
        }
        self.writers.clear();
        Ok(())
    }

    /// The files of several parts, to be committed as one.
    pub fn join(parts: Vec<StagedFiles>) -> Option<StagedFiles> {
        let mut parts = parts.into_iter();
        let mut joined = parts.next()?;
        for part in parts {
            joined.writers.extend(part.writers);
            joined.sealed.extend(part.sealed);
            joined.rows += part.rows;
        }
        Some(joined)
    }

    /// Abandons the files: open uploads are aborted, sealed files stay
    /// unreferenced until `VACUUM` removes them.
    fn discard(self) {
        for mut writer in self.writers {
            writer.reset();
        }
    }
}

/// A writer of staged files that owns what it needs, so a part of a
/// commit can be written on a task of its own.
pub struct Stager {
    writer: RecordBatchWriter,
    location: String,
}

impl Stager {
    /// Streams `batches` into Parquet files that no table version
    /// references yet (see [`BronzeTable::stage`]).
    pub async fn stage<S, E>(self, batches: S) -> Result<StagedFiles, BronzeError>
    where
        S: Stream<Item = Result<RecordBatch, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let Stager {
            mut writer,
            location,
        } = self;
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
                writer
                    .write(batch)
                    .await
                    .map_err(|source| BronzeError::Delta {
                        location: location.clone(),
                        source: Box::new(source),
                    })?;
            }
        }
        Ok(StagedFiles {
            writers: vec![writer],
            sealed: Vec::new(),
            rows,
            location,
        })
    }
}

/// Default size at which the writer rolls to a new Parquet file.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 * 1024 * 1024;

/// Rows per Parquet row group. The writer streams files to storage but
/// keeps the open row group in memory, so this (not the batch size) bounds
/// what a batch holds; the Parquet default of about a million rows would
/// let memory grow with batches up to that size.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Encoded bytes at which a row group is closed before it reaches
/// [`ROW_GROUP_ROWS`]: wide rows (long strings, binaries) would otherwise
/// hold many times what narrow ones do, so memory follows bytes, not rows.
pub const ROW_GROUP_BYTES: usize = 32 * 1024 * 1024;

/// Bronze's Parquet settings. Columns whose values hardly repeat (`_seqval`
/// and the captured `unique` ones, the table's key) are written without a
/// dictionary: it would hash every value only to hold each once more, while
/// the other columns keep the dictionary that suits their repeated values.
fn writer_properties(unique: &[String]) -> WriterProperties {
    std::iter::once(SEQVAL)
        .chain(unique.iter().map(String::as_str))
        .fold(WriterProperties::builder(), |builder, column| {
            builder.set_column_dictionary_enabled(ColumnPath::new(vec![column.to_string()]), false)
        })
        .set_created_by(format!("mssql-cdc {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .build()
}

/// The bronze schema: the captured columns, then the CDC columns
/// ([`crate::domain::change::CDC_COLUMNS`]).
pub fn bronze_schema(captured: &Schema) -> Result<SchemaRef, BronzeError> {
    if let Some(clash) = captured.fields().iter().find(|f| {
        CDC_COLUMNS
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(f.name()))
    }) {
        return Err(BronzeError::ReservedColumn(clash.name().clone()));
    }
    let mut fields: Vec<Field> = captured
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend(CDC_COLUMNS.iter().map(arrow_field));
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
    /// The table already holds this commit (a replay): nothing written.
    AlreadyCommitted,
    /// The batch had no rows: nothing written, no commit.
    Empty,
}

/// What [`BronzeTable::prepare`] found.
pub enum Prepared {
    /// Nothing to commit: the table holds the commit, or it has no rows.
    Done(BronzeOutcome),
    /// The commit to make.
    Ready(PreparedCommit),
}

/// A batch's sealed files and the commit that adds them, to be committed
/// (again, after a transient error) without uploading them again.
pub struct PreparedCommit {
    /// The commit's `txn`.
    pub txn: Txn,
    adds: Vec<Action>,
    metadata: serde_json::Map<String, serde_json::Value>,
    rows: u64,
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
    /// A commit's record could not be written or read back.
    #[error("bronze commit record: {0}")]
    Record(String),
    /// The Delta table failed.
    #[error("bronze table {location}: {source}")]
    Delta {
        /// The table location.
        location: String,
        /// deltalake's error.
        source: Box<DeltaTableError>,
    },
    /// The table's properties would break exactly-once (refused at open).
    #[error(transparent)]
    UnsafeProperty(Box<UnsafeTableProperty>),
}

impl From<UnsafeTableProperty> for BronzeError {
    fn from(refused: UnsafeTableProperty) -> Self {
        BronzeError::UnsafeProperty(Box::new(refused))
    }
}

/// The bronze table of one stream.
#[derive(Debug)]
pub struct BronzeTable {
    table: DeltaTable,
    location: String,
    target_file_size: u64,
    /// Captured columns written without a Parquet dictionary, as `_seqval`
    /// always is (see [`BronzeTable::with_unique_columns`]).
    unique_columns: Vec<String>,
}

impl BronzeTable {
    /// Where the table is, for errors.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Opens the table, creating it with `schema` (see [`bronze_schema`]) if
    /// needed.
    pub async fn open_or_create(
        location: &StorageLocation,
        options: &StorageOptions,
        schema: &Schema,
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
        refuse_unsafe(&table, &location.to_string())?;
        Ok(BronzeTable {
            table,
            location: location.to_string(),
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
            unique_columns: Vec::new(),
        })
    }

    /// Whether a table is at `location` already, so a run can refuse a
    /// target that should exist and does not, before creating one there.
    pub async fn exists(
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<bool, BronzeError> {
        table_exists(location, options)
            .await
            .map_err(|source| BronzeError::Delta {
                location: location.to_string(),
                source: Box::new(source),
            })
    }

    /// Names the captured columns whose values hardly repeat (the table's
    /// key): they are written without a Parquet dictionary, like `_seqval`.
    /// Encoding a dictionary of unique values costs a hash per value and
    /// makes the file larger.
    pub fn with_unique_columns(mut self, columns: &[String]) -> Self {
        self.unique_columns = columns.to_vec();
        self
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
    /// returns the names of those it added.
    pub async fn add_missing_columns(
        &mut self,
        columns: &[Field],
    ) -> Result<Vec<String>, BronzeError> {
        let kernel: StructType = (&Schema::new(columns.to_vec()))
            .try_into_kernel()
            .map_err(|e| self.delta_error(DeltaTableError::from(e)))?;
        let fields: Vec<StructField> = kernel.fields().cloned().collect();
        add_missing_fields(&mut self.table, &fields)
            .await
            .map_err(|e| self.delta_error(e))
    }

    /// Follows source columns widened by `ALTER COLUMN` (see
    /// [`crate::lake::retype`]): one rewrite of the table in the new types.
    pub async fn widen_columns(&mut self, retypes: &[Retype]) -> Result<(), BronzeError> {
        rewrite_widened(&mut self.table, retypes, widening_commit(retypes))
            .await
            .map_err(|e| self.delta_error(e))
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

    /// Whether the table holds the commit `txn` (see [`Txn::is_done`]).
    pub async fn holds(&mut self, txn: &Txn) -> Result<bool, BronzeError> {
        Ok(txn.is_done(self.committed_version(&txn.app_id).await?))
    }

    /// Streams `batches` into Parquet files that no table version references
    /// yet. Nothing is visible until [`BronzeTable::commit_batch`].
    pub async fn stage<S, E>(&mut self, batches: S) -> Result<StagedFiles, BronzeError>
    where
        S: Stream<Item = Result<RecordBatch, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.stager()?.stage(batches).await
    }

    /// A writer for one part of a commit, to run apart from the table.
    pub fn stager(&self) -> Result<Stager, BronzeError> {
        let writer = RecordBatchWriter::for_table(&self.table)
            .map_err(|e| self.delta_error(e))?
            .with_target_file_size(self.target_file_size)
            .with_writer_properties(writer_properties(&self.unique_columns));
        Ok(Stager {
            writer,
            location: self.location.clone(),
        })
    }

    /// The one way rows reach bronze: commits staged files as one table
    /// version carrying `txn` and `record` (in commitInfo), unless the table
    /// already holds `txn`. A replayed batch or chunk is therefore never
    /// written twice. Staged files with no rows commit nothing
    /// ([`BronzeOutcome::Empty`]). [`BronzeTable::prepare`] and
    /// [`BronzeTable::commit_prepared`] are its two halves, for a caller
    /// that retries a failed commit with the files it already uploaded.
    pub async fn commit_batch<R: Serialize>(
        &mut self,
        txn: &Txn,
        staged: StagedFiles,
        record: &R,
    ) -> Result<BronzeOutcome, BronzeError> {
        match self.prepare(txn, staged, record).await? {
            Prepared::Done(outcome) => Ok(outcome),
            Prepared::Ready(commit) => self.commit_prepared(&commit).await,
        }
    }

    /// Seals the staged files and builds their commit, unless the table
    /// already holds `txn` or there is nothing to commit.
    pub async fn prepare<R: Serialize>(
        &mut self,
        txn: &Txn,
        staged: StagedFiles,
        record: &R,
    ) -> Result<Prepared, BronzeError> {
        if self.holds(txn).await? {
            staged.discard();
            return Ok(Prepared::Done(BronzeOutcome::AlreadyCommitted));
        }
        let rows = staged.rows;
        if rows == 0 {
            staged.discard();
            return Ok(Prepared::Done(BronzeOutcome::Empty));
        }
        let mut staged = staged;
        staged.seal().await?;
        let adds: Vec<Action> = staged.sealed.into_iter().map(Action::Add).collect();
        let mut metadata = match serde_json::to_value(record) {
            Ok(serde_json::Value::Object(entries)) => entries,
            Ok(other) => {
                return Err(BronzeError::Record(format!(
                    "a commit record must be a JSON object, got {other}"
                )));
            }
            Err(e) => return Err(BronzeError::Record(e.to_string())),
        };
        metadata.insert(COMMIT_INFO_TXN_APP_ID.into(), txn.app_id.clone().into());
        metadata.insert(COMMIT_INFO_TXN_VERSION.into(), txn.version.into());
        Ok(Prepared::Ready(PreparedCommit {
            txn: txn.clone(),
            adds,
            metadata,
            rows,
        }))
    }

    /// Commits a prepared batch. After a transient error it may be called
    /// again, the files staying uploaded; ask [`BronzeTable::holds`] first,
    /// as the failed attempt may have landed with its answer lost.
    pub async fn commit_prepared(
        &mut self,
        commit: &PreparedCommit,
    ) -> Result<BronzeOutcome, BronzeError> {
        crate::failpoint::hit("before_bronze_commit");
        let properties = commit_properties()
            .with_application_transaction(Transaction::new(&commit.txn.app_id, commit.txn.version))
            .with_metadata(commit.metadata.clone());
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let snapshot = self.table.snapshot().map_err(|e| self.delta_error(e))?;
        let finalized = CommitBuilder::from(properties)
            .with_actions(commit.adds.clone())
            .build(Some(snapshot), self.table.log_store(), operation)
            .await
            .map_err(|e| self.delta_error(e))?;
        let table_version = finalized.version();
        // The commit already brought its snapshot up to the new version;
        // loading the log again would replay it a second time.
        self.table.state = Some(finalized.snapshot());
        Ok(BronzeOutcome::Committed {
            version: i64::try_from(table_version).unwrap_or(i64::MAX),
            rows: commit.rows,
        })
    }

    /// The record the commit of `txn` carried; `None` when the log holds
    /// no such commit (see [`BronzeTable::find_commit`]).
    pub async fn record<R: DeserializeOwned>(
        &mut self,
        txn: &Txn,
    ) -> Result<Option<R>, BronzeError> {
        Ok(self.record_at(txn, None).await?.map(|(record, _)| record))
    }

    /// [`BronzeTable::record`], looking first at the version `hint` names,
    /// and with the table version the commit made.
    pub async fn record_at<R: DeserializeOwned>(
        &mut self,
        txn: &Txn,
        hint: Option<i64>,
    ) -> Result<Option<(R, i64)>, BronzeError> {
        let Some(found) = self.find_commit(txn, hint).await? else {
            return Ok(None);
        };
        let version = found.version;
        serde_json::from_value(serde_json::Value::Object(found.info))
            .map(|record| Some((record, version)))
            .map_err(|e| {
                BronzeError::Record(format!(
                    "the commit of {}/{} carries an unreadable record: {e}",
                    txn.app_id, txn.version
                ))
            })
    }

    /// The commit that recorded `txn`: its version, its commitInfo and the
    /// files it added. `hint` is the version a checkpoint recorded for it
    /// (one read when right). Otherwise the log is read newest first, as
    /// far back as it goes, however many versions that is: the commits a
    /// stream looks for are its newest, so the search reads the versions
    /// made after them (maintenance, a snapshot's chunks), never a fixed
    /// number. It ends at the first version whose log entry is gone (Delta
    /// removes expired entries oldest first, so none older are left).
    pub async fn find_commit(
        &mut self,
        txn: &Txn,
        hint: Option<i64>,
    ) -> Result<Option<FoundCommit>, BronzeError> {
        self.table
            .update_state()
            .await
            .map_err(|e| self.delta_error(e))?;
        let Some(latest) = self.table.version() else {
            return Ok(None);
        };
        if let Some(hint) = hint.and_then(|h| u64::try_from(h).ok())
            && hint <= latest
            && let Some(found) = self.read_commit(hint).await?.and_then(|c| c.found(txn))
        {
            return Ok(Some(found));
        }
        for (read, version) in (0..=latest).rev().enumerate() {
            if read > 0 && (read as u64).is_multiple_of(SEARCH_PROGRESS_EVERY) {
                tracing::info!(
                    table = %self.location,
                    txn_app_id = %txn.app_id,
                    txn_version = txn.version,
                    versions_read = read,
                    at_version = version,
                    "still searching the bronze log for a commit"
                );
            }
            let Some(commit) = self.read_commit(version).await? else {
                break;
            };
            if let Some(found) = commit.found(txn) {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The commits after `version`, oldest first, as far as the log holds
    /// them: what a run reads to see what happened to the table since its
    /// checkpoint's newest commit.
    pub async fn commits_after(&mut self, version: i64) -> Result<Vec<LoggedCommit>, BronzeError> {
        self.table
            .update_state()
            .await
            .map_err(|e| self.delta_error(e))?;
        let Some(latest) = self.table.version() else {
            return Ok(Vec::new());
        };
        let first = u64::try_from(version.saturating_add(1)).unwrap_or(0);
        let mut commits = Vec::new();
        for v in first..=latest {
            if let Some(commit) = self.read_commit(v).await? {
                commits.push(commit);
            }
        }
        Ok(commits)
    }

    /// The table's newest version (`None` before its first commit).
    pub fn version(&self) -> Option<i64> {
        self.table.version().and_then(|v| i64::try_from(v).ok())
    }

    /// The log entry of `version`, parsed; `None` when it is gone.
    pub async fn read_commit(&self, version: u64) -> Result<Option<LoggedCommit>, BronzeError> {
        let bytes = self
            .table
            .log_store()
            .read_commit_entry(version)
            .await
            .map_err(|e| self.delta_error(e))?;
        Ok(bytes.map(|b| parse_commit(&b, version)))
    }

    /// The rows of a commit, as one DataFrame with the table's current
    /// schema (columns a file lacks read as NULL).
    pub async fn commit_rows(&self, commit: &FoundCommit) -> Result<DataFrame, BronzeError> {
        let ctx = SessionContext::new();
        self.table
            .update_datafusion_session(&ctx.state())
            .map_err(|e| self.delta_error(e))?;
        let root = self.table.table_url().to_string();
        let root = if root.ends_with('/') {
            root
        } else {
            format!("{root}/")
        };
        let files: Vec<String> = commit.files.iter().map(|f| format!("{root}{f}")).collect();
        let schema = self.arrow_schema()?;
        let options = ParquetReadOptions::default().schema(schema.as_ref());
        let frame = if files.is_empty() {
            ctx.read_empty().map_err(|e| self.delta_error(e.into()))?
        } else {
            ctx.read_parquet(files, options)
                .await
                .map_err(|e| self.delta_error(e.into()))?
        };
        Ok(frame)
    }

    /// Every row the table holds now whose LSN is `from` or later (all of
    /// them without `from`), as one DataFrame: what a silver table added to
    /// a stream that already ran is filled from. It reads the table's
    /// current files, so compaction and expired log entries lose nothing.
    pub async fn rows_from(&self, from: Option<Lsn>) -> Result<DataFrame, BronzeError> {
        let ctx = SessionContext::new();
        self.table
            .update_datafusion_session(&ctx.state())
            .map_err(|e| self.delta_error(e))?;
        let provider = self
            .table
            .table_provider()
            .await
            .map_err(|e| self.delta_error(e.into()))?;
        let frame = ctx
            .read_table(provider)
            .map_err(|e| self.delta_error(e.into()))?;
        match from {
            Some(lsn) => frame
                .filter(col(LSN).gt_eq(lit(lsn.to_string())))
                .map_err(|e| self.delta_error(e.into())),
            None => Ok(frame),
        }
    }

    fn delta_error(&self, source: DeltaTableError) -> BronzeError {
        BronzeError::Delta {
            location: self.location.clone(),
            source: Box::new(source),
        }
    }
}

/// A commit found by its `txn`.
#[derive(Debug, Clone)]
pub struct FoundCommit {
    /// The table version it made.
    pub version: i64,
    /// Its commitInfo entries.
    pub info: serde_json::Map<String, serde_json::Value>,
    /// The data files it added, relative to the table.
    pub files: Vec<String>,
}

/// One version of the log, as far as a stream needs to know it.
#[derive(Debug, Clone, Default)]
pub struct LoggedCommit {
    /// The table version.
    pub version: i64,
    /// Its `txn` actions: application id and version.
    pub txns: Vec<(String, i64)>,
    /// commitInfo's `operation` (`WRITE`, `OPTIMIZE`, `RESTORE`, ...).
    pub operation: Option<String>,
    /// For a `RESTORE`: the version it restored, when it names one.
    pub restored_version: Option<i64>,
    /// Its commitInfo entries.
    pub info: serde_json::Map<String, serde_json::Value>,
    /// The data files it added, relative to the table.
    pub files: Vec<String>,
}

impl LoggedCommit {
    /// Whether this commit carries `txn`.
    pub fn carries(&self, txn: &Txn) -> bool {
        self.txns
            .iter()
            .any(|(app_id, version)| *app_id == txn.app_id && *version == txn.version)
    }

    /// Whether the commit rolled the table back to a version older than
    /// `version` (a `RESTORE` that names no version counts: it may have).
    pub fn restores_before(&self, version: i64) -> bool {
        self.operation.as_deref() == Some("RESTORE")
            && self
                .restored_version
                .is_none_or(|restored| restored < version)
    }

    fn found(self, txn: &Txn) -> Option<FoundCommit> {
        let carries = self.carries(txn);
        carries.then_some(FoundCommit {
            version: self.version,
            info: self.info,
            files: self.files,
        })
    }
}

/// `bytes` (one commit's JSON lines) as a [`LoggedCommit`].
fn parse_commit(bytes: &[u8], version: u64) -> LoggedCommit {
    let mut commit = LoggedCommit {
        version: i64::try_from(version).unwrap_or(i64::MAX),
        ..LoggedCommit::default()
    };
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(serde_json::Value::Object(action)) = serde_json::from_slice(line) else {
            continue;
        };
        if let Some(t) = action.get("txn") {
            if let (Some(app_id), Some(v)) = (
                t.get("appId").and_then(|v| v.as_str()),
                t.get("version").and_then(|v| v.as_i64()),
            ) {
                commit.txns.push((app_id.to_string(), v));
            }
        } else if let Some(serde_json::Value::Object(i)) = action.get("commitInfo") {
            commit.operation = i
                .get("operation")
                .and_then(|o| o.as_str())
                .map(String::from);
            commit.restored_version = i
                .get("operationParameters")
                .and_then(|p| p.get("version"))
                .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()));
            commit.info = i.clone();
        } else if let Some(path) = action
            .get("add")
            .and_then(|a| a.get("path"))
            .and_then(|p| p.as_str())
        {
            // Delta stores paths URL-encoded.
            commit.files.push(percent_decode(path));
        }
    }
    commit
}

/// Undoes the `%XX` escapes of a Delta log path.
fn percent_decode(path: &str) -> String {
    url::form_urlencoded::parse(format!("p={}", path.replace('+', "%2B")).as_bytes())
        .next()
        .map_or_else(|| path.to_string(), |(_, v)| v.into_owned())
}

#[cfg(test)]
#[path = "bronze_tests.rs"]
mod tests;
