//! The finalization control table: one row per target saying up to which
//! instant the target is complete, so consumers know which periods they
//! may process. Many streams share one table; each upserts its own row with
//! a Delta MERGE keyed on `table_name`, and a commit that loses a race with
//! another stream's reloads the table and merges again. See
//! docs/finalization.md.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deltalake::arrow::array::{ArrayRef, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
use deltalake::kernel::transaction::TransactionError;
use deltalake::{DeltaTable, DeltaTableError};

use super::delta::open_or_create;
use super::schema::{arrow_schema, delta_fields};
use super::storage::{StorageLocation, StorageOptions};
use super::table_properties::{UnsafeTableProperty, commit_properties, refuse_unsafe};
use crate::domain::VerdictUpdate;
use crate::domain::columns::{Column, ColumnKind, col};
use crate::retry::{Backoff, Jitter, Policy};

const TABLE_COMMENT: &str =
    "mssql-cdc finalization verdicts: per table, the instant up to which it is complete";

use ColumnKind::{String as Str, TimestampNtz as Ts};

/// The control table's columns, in table order. Other readers (health,
/// freshness, silver jobs) depend on exactly these names and types.
pub const COLUMNS: [Column; 7] = [
    col(
        "table_name",
        Str,
        false,
        "The table the verdict is about (spec.target.name for bronze streams).",
    ),
    col(
        "app_id",
        Str,
        false,
        "appId of the stream that wrote the verdict.",
    ),
    col(
        "granularity",
        Str,
        false,
        "The period the verdict moves in: minute, hour or day.",
    ),
    col(
        "finalized_until",
        Ts,
        true,
        "UTC instant before which every source change is in the table, rounded down to the granularity; never moves back. NULL before the first verdict.",
    ),
    col(
        "updated_at",
        Ts,
        false,
        "When the writer last confirmed or moved the verdict, UTC.",
    ),
    col(
        "open_snapshot_lsn",
        Str,
        true,
        "LSN (0x + 20 hex digits) of the snapshot in progress that holds the verdict; NULL when none is open.",
    ),
    col(
        "applied_lsn",
        Str,
        true,
        "End LSN (0x + 20 hex digits) of the newest batch a silver table applied; never moves back. NULL for bronze targets.",
    ),
];

/// Merges attempted before a conflict is reported as an error.
const MAX_ATTEMPTS: u32 = 8;

/// The pauses after a conflict: up to 100 ms, doubling up to 10 s, never
/// less than half of that, so writers that collided do not collide again.
const CONFLICT_PAUSE: Policy = Policy::new(
    Duration::from_millis(100),
    Duration::from_secs(10),
    Jitter::Equal,
);

/// Why the control table could not be written. Cloned to every update a
/// failed group held.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FinalizationError {
    /// Encoding the row failed.
    #[error("finalization table {location}: cannot encode the row: {source}")]
    Encode {
        /// The table location.
        location: String,
        /// Arrow's or DataFusion's error.
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// The Delta table failed (after retries, for commit conflicts).
    #[error("finalization table {location}: {source}")]
    Delta {
        /// The table location.
        location: String,
        /// deltalake's error (shared by every update of a group).
        source: Arc<DeltaTableError>,
    },
    /// The table's properties would break exactly-once (refused at open).
    #[error(transparent)]
    UnsafeProperty(Box<UnsafeTableProperty>),
}

impl From<UnsafeTableProperty> for FinalizationError {
    fn from(refused: UnsafeTableProperty) -> Self {
        FinalizationError::UnsafeProperty(Box::new(refused))
    }
}

/// A finalization control table, possibly shared with other streams.
#[derive(Debug)]
pub struct FinalizationTable {
    table: DeltaTable,
    location: String,
}

impl FinalizationTable {
    /// Opens the table, creating it (with every column comment) if needed.
    pub async fn open_or_create(
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<Self, FinalizationError> {
        let table = open_or_create(location, options, delta_fields(&COLUMNS), TABLE_COMMENT)
            .await
            .map_err(|source| FinalizationError::Delta {
                location: location.to_string(),
                source: Arc::new(source),
            })?;
        refuse_unsafe(&table, &location.to_string())?;
        Ok(FinalizationTable {
            table,
            location: location.to_string(),
        })
    }

    /// The underlying Delta table (for readers and tests).
    pub fn delta_table(&self) -> &DeltaTable {
        &self.table
    }

    /// Where the table is.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Inserts or updates `update.table_name`'s row. `finalized_until`
    /// never moves back; `applied_lsn` is left as it is. A commit conflict
    /// with another writer reloads the table and merges again, a bounded
    /// number of times.
    pub async fn upsert(&mut self, update: &VerdictUpdate) -> Result<(), FinalizationError> {
        self.upsert_group(std::slice::from_ref(update)).await
    }

    /// Upserts the rows of several tables (those of one source that
    /// finished a step together) in one MERGE, so one commit, as
    /// [`upsert`](Self::upsert) does one. Two updates of the same row
    /// cannot be one MERGE's source: the later goes in a MERGE after the
    /// earlier's, in order.
    pub async fn upsert_group(
        &mut self,
        updates: &[VerdictUpdate],
    ) -> Result<(), FinalizationError> {
        for merge in distinct_rows(updates) {
            self.merge_rows(&merge).await?;
        }
        Ok(())
    }

    async fn merge_rows(&mut self, updates: &[&VerdictUpdate]) -> Result<(), FinalizationError> {
        let encode_error =
            |source: Arc<dyn std::error::Error + Send + Sync>| FinalizationError::Encode {
                location: self.location.clone(),
                source,
            };
        if let Some(update) = updates
            .iter()
            .find(|u| crate::failpoint::poisoned("finalization_encode", &u.table_name))
        {
            return Err(encode_error(Arc::new(std::io::Error::other(format!(
                "failpoint finalization_encode: the verdict of {} is poisoned",
                update.table_name
            )))));
        }
        let batch = source_batch(updates).map_err(|e| encode_error(Arc::new(e)))?;
        let source = SessionContext::new()
            .read_batch(batch)
            .map_err(|e| encode_error(Arc::new(e)))?;
        let mut pauses = Backoff::with_policy(CONFLICT_PAUSE);
        let mut attempt = 1;
        loop {
            match self.merge(source.clone()).await {
                Ok(table) => {
                    self.table = table;
                    return Ok(());
                }
                Err(error) if is_conflict(&error) && attempt < MAX_ATTEMPTS => {
                    tracing::debug!(%error, attempt, "finalization table: commit conflict; retrying");
                    tokio::time::sleep(pauses.next_delay().1).await;
                    attempt += 1;
                    self.table
                        .update_state()
                        .await
                        .map_err(|e| self.delta_error(e))?;
                }
                Err(error) => return Err(self.delta_error(error)),
            }
        }
    }

    /// One MERGE of the one-row `source` against the latest version.
    async fn merge(&mut self, source: DataFrame) -> Result<DeltaTable, DeltaTableError> {
        self.table.update_state().await?;
        let kept_or_newer = "CASE \
             WHEN source.finalized_until IS NULL THEN target.finalized_until \
             WHEN target.finalized_until IS NULL THEN source.finalized_until \
             WHEN source.finalized_until > target.finalized_until THEN source.finalized_until \
             ELSE target.finalized_until END";
        let (table, _metrics) = self
            .table
            .clone()
            .merge(source, "target.table_name = source.table_name")
            .with_source_alias("source")
            .with_target_alias("target")
            // Conflicts come back to `upsert`, which reloads before retrying.
            .with_commit_properties(commit_properties().with_max_retries(0))
            .when_matched_update(|u| {
                u.update("app_id", "source.app_id")
                    .update("granularity", "source.granularity")
                    .update("finalized_until", kept_or_newer)
                    .update("updated_at", "source.updated_at")
                    .update("open_snapshot_lsn", "source.open_snapshot_lsn")
                    .update(
                        "applied_lsn",
                        "CASE WHEN source.applied_lsn IS NULL THEN target.applied_lsn \
                         WHEN target.applied_lsn IS NULL OR source.applied_lsn > target.applied_lsn \
                         THEN source.applied_lsn ELSE target.applied_lsn END",
                    )
            })?
            .when_not_matched_insert(|i| {
                COLUMNS
                    .iter()
                    .fold(i, |i, c| i.set(c.name, format!("source.{}", c.name)))
            })?
            .await?;
        Ok(table)
    }

    fn delta_error(&self, source: DeltaTableError) -> FinalizationError {
        FinalizationError::Delta {
            location: self.location.clone(),
            source: Arc::new(source),
        }
    }
}

/// `updates` in MERGEs whose rows name each table once, in order: an
/// update goes in the first MERGE after the last one naming its table.
fn distinct_rows(updates: &[VerdictUpdate]) -> Vec<Vec<&VerdictUpdate>> {
    let mut merges: Vec<Vec<&VerdictUpdate>> = Vec::new();
    for update in updates {
        let after = merges
            .iter()
            .rposition(|m| m.iter().any(|u| u.table_name == update.table_name))
            .map_or(0, |last| last + 1);
        match merges.get_mut(after) {
            Some(merge) => merge.push(update),
            None => merges.push(vec![update]),
        }
    }
    merges
}

/// The MERGE source: one row per update.
fn source_batch(
    updates: &[&VerdictUpdate],
) -> Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    let text = |f: &dyn Fn(&VerdictUpdate) -> Option<String>| {
        Arc::new(StringArray::from(
            updates.iter().map(|u| f(u)).collect::<Vec<_>>(),
        )) as ArrayRef
    };
    let time = |f: &dyn Fn(&VerdictUpdate) -> Option<DateTime<Utc>>| {
        Arc::new(TimestampMicrosecondArray::from(
            updates
                .iter()
                .map(|u| f(u).map(|t| t.timestamp_micros()))
                .collect::<Vec<_>>(),
        )) as ArrayRef
    };
    RecordBatch::try_new(
        arrow_schema(&COLUMNS),
        vec![
            text(&|u| Some(u.table_name.clone())),
            text(&|u| Some(u.app_id.clone())),
            text(&|u| Some(u.granularity.as_str().to_string())),
            time(&|u| u.finalized_until),
            time(&|u| Some(u.updated_at)),
            text(&|u| u.open_snapshot_lsn.map(|l| l.to_string())),
            text(&|u| u.applied_lsn.map(|l| l.to_string())),
        ],
    )
}

/// Whether another writer's commit got in first.
fn is_conflict(error: &DeltaTableError) -> bool {
    matches!(
        error,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::VersionAlreadyExists(_)
                    | TransactionError::CommitConflict(_)
                    | TransactionError::MaxCommitAttempts(_)
            }
    )
}

#[cfg(test)]
#[path = "finalization_tests.rs"]
mod tests;
