//! The facts Delta table: one row per micro-batch of every stream, plus one
//! per snapshot and per change of the source; created on first use,
//! appended idempotently.
//!
//! Each append is one Delta commit carrying a `txn` action whose appId names
//! the stream (target + app_id) and the kind of sequence, and whose version
//! is the batch id (or the snapshot number). A commit whose version is
//! already recorded is skipped, so a replay never adds a second row for the
//! same (target, app_id, batch_id, event). See docs/adr/0002-exactly-once.md.

use std::collections::HashSet;
use std::sync::Arc;

use deltalake::arrow::error::ArrowError;
use deltalake::arrow::json::ReaderBuilder;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::Transaction;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::{DeltaTable, DeltaTableError};

use super::delta::{add_missing_fields, open_or_create};
use super::schema::{arrow_schema, delta_fields};
use super::storage::{StorageLocation, StorageOptions};
use super::table_properties::{UnsafeTableProperty, commit_properties, refuse_unsafe};
use super::txn::{FactSequence, Txn};
use crate::domain::facts::COLUMNS;
use crate::domain::{BatchId, FactEvent, FactRow};

/// commitInfo key of the checkpoint that made a facts commit.
const COMMIT_INFO_CHECKPOINT: &str = "mssql_cdc.checkpoint";
/// commitInfo key of the checkpoints that made a group commit.
const COMMIT_INFO_CHECKPOINTS: &str = "mssql_cdc.checkpoints";

const TABLE_COMMENT: &str =
    "mssql-cdc ingestion facts: one row per micro-batch and per snapshot or source change";

/// The idempotency key of one facts commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactsKey {
    /// The stream's target table name.
    pub target: String,
    /// The stream's appId.
    pub app_id: String,
    /// The batch or snapshot.
    pub sequence: FactSequence,
}

impl FactsKey {
    /// The Delta `txn` of this key's commit.
    pub fn txn(&self) -> Txn {
        Txn::facts(&self.target, &self.app_id, self.sequence)
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The rows were committed as this table version.
    Written {
        /// The facts table version.
        version: i64,
    },
    /// An earlier run already committed this key; nothing was written.
    AlreadyWritten,
}

/// Why facts could not be written. Cloned to every append a failed group
/// commit held.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FactsError {
    /// The rows do not belong to the key they are written under.
    #[error("facts for {key}: {reason}")]
    KeyMismatch {
        /// The key, as `target/app_id/sequence`.
        key: String,
        /// What does not match.
        reason: String,
    },
    /// Encoding the rows failed.
    #[error("facts: cannot encode rows: {0}")]
    Encode(Arc<ArrowError>),
    /// The Delta table failed.
    #[error("facts table {location}: {source}")]
    Delta {
        /// The table location.
        location: String,
        /// deltalake's error (shared by every append of a group commit).
        source: Arc<DeltaTableError>,
    },
    /// The table's properties would break exactly-once (refused at open).
    #[error(transparent)]
    UnsafeProperty(Box<UnsafeTableProperty>),
}

impl From<UnsafeTableProperty> for FactsError {
    fn from(refused: UnsafeTableProperty) -> Self {
        FactsError::UnsafeProperty(Box::new(refused))
    }
}

impl From<ArrowError> for FactsError {
    fn from(error: ArrowError) -> Self {
        FactsError::Encode(Arc::new(error))
    }
}

/// One key's rows in a group append ([`FactsTable::append_group`]).
#[derive(Debug, Clone, Copy)]
pub struct FactsAppend<'a> {
    /// The key the rows are written under.
    pub key: &'a FactsKey,
    /// Its rows.
    pub rows: &'a [FactRow],
    /// The checkpoint that wrote them, recorded in the commit.
    pub origin: Option<&'a str>,
}

/// The commitInfo entry naming the checkpoints whose rows a commit holds:
/// `mssql_cdc.checkpoint` for one (as a commit of a single stream has
/// always said), `mssql_cdc.checkpoints` listing them for several.
fn origin_metadata(origins: &[&str]) -> Option<(String, serde_json::Value)> {
    match origins {
        [] => None,
        [one] => Some((COMMIT_INFO_CHECKPOINT.to_string(), (*one).into())),
        several => Some((
            COMMIT_INFO_CHECKPOINTS.to_string(),
            serde_json::Value::from(several.to_vec()),
        )),
    }
}

/// The facts table of one or more streams.
#[derive(Debug)]
pub struct FactsTable {
    table: DeltaTable,
    location: String,
    origin: Option<String>,
}

impl FactsTable {
    /// Opens the table, creating it (with every column comment) if needed.
    /// A table created before a column existed (`source`) gets it added,
    /// nullable and last: appends match columns by name, and its older
    /// rows read NULL there.
    pub async fn open_or_create(
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<Self, FactsError> {
        let delta_error = |source| FactsError::Delta {
            location: location.to_string(),
            source: Arc::new(source),
        };
        let fields = delta_fields(&COLUMNS);
        let mut table = open_or_create(location, options, fields.clone(), TABLE_COMMENT)
            .await
            .map_err(delta_error)?;
        refuse_unsafe(&table, &location.to_string())?;
        add_missing_fields(&mut table, &fields)
            .await
            .map_err(delta_error)?;
        Ok(FactsTable {
            table,
            location: location.to_string(),
            origin: None,
        })
    }

    /// Records checkpoint `id` in every commit from now on (what wrote
    /// each row stays readable in the table's history).
    pub fn recording_origin(mut self, id: &str) -> Self {
        self.origin = Some(id.to_string());
        self
    }

    /// The underlying Delta table (for readers and tests).
    pub fn delta_table(&self) -> &DeltaTable {
        &self.table
    }

    /// Where the table is.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Appends `rows` in one commit unless `key` was already committed.
    pub async fn append(
        &mut self,
        key: &FactsKey,
        rows: &[FactRow],
    ) -> Result<AppendOutcome, FactsError> {
        let origin = self.origin.clone();
        let group = [FactsAppend {
            key,
            rows,
            origin: origin.as_deref(),
        }];
        let mut outcomes = self.append_group(&group).await?;
        Ok(outcomes.pop().unwrap_or(AppendOutcome::AlreadyWritten))
    }

    /// Appends the rows of several keys (the tables of one source that
    /// finished a step together) in **one** commit, carrying every key's
    /// `txn`; the keys already committed are left out. One outcome per
    /// append, in order. Each append's rows are checked against its key
    /// first, so one bad append fails the group before anything is written.
    pub async fn append_group(
        &mut self,
        group: &[FactsAppend<'_>],
    ) -> Result<Vec<AppendOutcome>, FactsError> {
        for append in group {
            check_rows(append.key, append.rows)?;
        }
        self.table
            .update_state()
            .await
            .map_err(|e| self.delta_error(e))?;
        let log_store = self.table.log_store();
        let mut todo = Vec::with_capacity(group.len());
        for (index, append) in group.iter().enumerate() {
            let txn = append.key.txn();
            let done = self
                .table
                .snapshot()
                .map_err(|e| self.delta_error(e))?
                .transaction_version(log_store.as_ref(), &txn.app_id)
                .await
                .map_err(|e| self.delta_error(e))?;
            if !txn.is_done(done) {
                todo.push((index, txn));
            }
        }
        let mut outcomes = vec![AppendOutcome::AlreadyWritten; group.len()];
        if todo.is_empty() {
            return Ok(outcomes);
        }
        let rows: Vec<&FactRow> = todo
            .iter()
            .flat_map(|(index, _)| group[*index].rows)
            .collect();
        if let Some(row) = rows
            .iter()
            .find(|row| crate::failpoint::poisoned("facts_encode", &row.target))
        {
            return Err(FactsError::Encode(Arc::new(
                ArrowError::InvalidArgumentError(format!(
                    "failpoint facts_encode: the rows of {} are poisoned",
                    row.target
                )),
            )));
        }
        let batch = to_record_batch(&rows)?;
        let mut origins: Vec<&str> = todo
            .iter()
            .filter_map(|(index, _)| group[*index].origin)
            .collect();
        origins.dedup();
        let mut properties = commit_properties().with_application_transactions(
            todo.iter()
                .map(|(_, txn)| Transaction::new(txn.app_id.clone(), txn.version))
                .collect(),
        );
        if let Some(metadata) = origin_metadata(&origins) {
            properties = properties.with_metadata([metadata]);
        }
        let mut writer = RecordBatchWriter::for_table(&self.table)
            .map_err(|e| self.delta_error(e))?
            .with_commit_properties(properties);
        writer.write(batch).await.map_err(|e| self.delta_error(e))?;
        let version = writer
            .flush_and_commit(&mut self.table)
            .await
            .map_err(|e| self.delta_error(e))?;
        let version = i64::try_from(version).unwrap_or(i64::MAX);
        for (index, _) in todo {
            outcomes[index] = AppendOutcome::Written { version };
        }
        Ok(outcomes)
    }

    fn delta_error(&self, source: DeltaTableError) -> FactsError {
        FactsError::Delta {
            location: self.location.clone(),
            source: Arc::new(source),
        }
    }
}

/// Encodes rows as one Arrow batch with the facts schema, through their
/// serialised form (the same one a bronze commit's record carries).
pub fn to_record_batch<R: serde::Serialize>(rows: &[R]) -> Result<RecordBatch, ArrowError> {
    let mut decoder = ReaderBuilder::new(arrow_schema(&COLUMNS))
        .with_batch_size(rows.len().max(1))
        .build_decoder()?;
    decoder.serialize(rows)?;
    decoder
        .flush()?
        .ok_or_else(|| ArrowError::JsonError("no facts rows to encode".into()))
}

/// Every row must carry the key's identity, and no (batch_id, event) twice.
pub fn check_rows(key: &FactsKey, rows: &[FactRow]) -> Result<(), FactsError> {
    let fail = |reason: String| FactsError::KeyMismatch {
        key: format!("{}/{}/{:?}", key.target, key.app_id, key.sequence),
        reason,
    };
    if rows.is_empty() {
        return Err(fail("no rows".into()));
    }
    let mut events: HashSet<Option<FactEvent>> = HashSet::new();
    for row in rows {
        if row.target != key.target || row.app_id != key.app_id {
            return Err(fail(format!("row of {}/{}", row.target, row.app_id)));
        }
        let fits = match key.sequence {
            FactSequence::Batch(id) => {
                row.batch_id == Some(id) && !row.event.is_some_and(FactEvent::is_snapshot)
            }
            FactSequence::Snapshot(_) => {
                row.batch_id.is_none() && row.event.is_some_and(FactEvent::is_snapshot)
            }
        };
        if !fits {
            return Err(fail(format!(
                "row with batch_id {:?} and event {:?} does not belong here",
                row.batch_id.map(BatchId::get),
                row.event.map(FactEvent::as_str)
            )));
        }
        if !events.insert(row.event) {
            return Err(fail(format!(
                "two rows with event {:?}",
                row.event.map(FactEvent::as_str)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "facts_tests.rs"]
mod tests;
