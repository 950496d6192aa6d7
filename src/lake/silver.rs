//! The silver table: the source table's current state, one row per key,
//! kept from the stream's own bronze commits. Each bronze commit (a batch
//! or a snapshot chunk) is applied with one MERGE: its changes reduced to
//! the last per key, ordered by LSN, then seqval, then operation; inserts,
//! update-afters and snapshot rows upsert, deletes remove the row (or mark
//! it `_deleted`), and so does an update's before-image when the update
//! moved the row to another key. A change older
//! than the row it would replace is ignored, and every MERGE carries its
//! own `txn`, so a replay applies nothing twice and nothing out of order.
//! A key column the source declares nullable is matched null-safely (a
//! unique index lets one row have NULL there), the others with `=`, which
//! lets the MERGE skip files by key range. See docs/silver.md.

use std::ops::Not;
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::datafusion::common::Column;
use deltalake::datafusion::logical_expr::{Operator, binary_expr};
use deltalake::datafusion::prelude::{DataFrame, Expr, SessionContext, lit, when};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{StructType, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};
use serde::Serialize;

use super::delta::{open_or_create_with, txn_version};
use super::retype::{Retype, rewrite_widened, widening_commit};
use super::storage::{StorageLocation, StorageOptions};
use super::table_properties::{self, UnsafeTableProperty, refuse_unsafe};
use super::txn::Txn;
use crate::domain::Lsn;
use crate::domain::change::{COMMIT_TS, LSN, OPERATION, Operation, SEQVAL};

/// `_deleted`: the row's key was deleted on the source (soft deletes only).
pub const DELETED: &str = "_deleted";

/// The table property that records silver's key columns (comma-separated),
/// so maintenance can cluster by them.
pub const KEYS_PROPERTY: &str = "mssql_cdc.keys";

const TABLE_COMMENT: &str = "mssql-cdc silver: the source table's current state, one row per key";

/// What a delete on the source does to silver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletes {
    /// The row goes.
    Hard,
    /// The row stays, `_deleted` and with the delete's LSN and commit time.
    Soft,
}

/// Why silver could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SilverError {
    /// The key columns are not all among the captured columns.
    #[error(
        "silver table {location}: key column {column} is not captured (captured: {captured}); \
         name existing columns in spec.silver.keys"
    )]
    UnknownKey {
        /// The table.
        location: String,
        /// The missing key column.
        column: String,
        /// The captured columns.
        captured: String,
    },
    /// The table exists with other key columns than the stream's.
    #[error(
        "silver table {location} is keyed by {recorded} but the stream's keys are {given}; a \
         silver table cannot change its key: see docs/runbooks.md, \"Silver key changed\""
    )]
    KeysChanged {
        /// The table.
        location: String,
        /// The keys the table was created with.
        recorded: String,
        /// The keys the stream has now.
        given: String,
    },
    /// A commit's record could not be written: the batch is not applied
    /// without it (bronze refuses the same way).
    #[error("silver table {location}: commit record: {reason}")]
    Record {
        /// The table location.
        location: String,
        /// Why the record could not be encoded.
        reason: String,
    },
    /// The Delta table failed.
    #[error("silver table {location}: {source}")]
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

impl From<UnsafeTableProperty> for SilverError {
    fn from(refused: UnsafeTableProperty) -> Self {
        SilverError::UnsafeProperty(Box::new(refused))
    }
}

/// What applying a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Merged as this table version.
    Applied {
        /// The silver table version.
        version: i64,
        /// Files of silver the MERGE had to read (and possibly rewrite).
        files_scanned: usize,
        /// Files its key range let it skip.
        files_skipped: usize,
    },
    /// The table already holds this commit: nothing done.
    AlreadyApplied,
}

/// The silver table of one stream.
pub struct SilverTable {
    table: DeltaTable,
    location: String,
    keys: Vec<String>,
    /// The keys matched with `IS NOT DISTINCT FROM`: those a source column
    /// declared nullable (once, by any capture instance).
    nullable_keys: Vec<String>,
    deletes: Deletes,
}

impl std::fmt::Debug for SilverTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SilverTable")
            .field("location", &self.location)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// The silver schema of captured columns `captured`: them, then `_lsn`,
/// `_commit_ts` and, with soft deletes, `_deleted`.
pub fn silver_schema(captured: &[Field], deletes: Deletes) -> SchemaRef {
    let mut fields: Vec<Field> = captured
        .iter()
        .map(|f| f.clone().with_nullable(true))
        .collect();
    fields.push(Field::new(LSN, DataType::Utf8, false));
    fields.push(Field::new(
        COMMIT_TS,
        DataType::Timestamp(TimeUnit::Microsecond, None),
        true,
    ));
    if deletes == Deletes::Soft {
        fields.push(Field::new(DELETED, DataType::Boolean, false));
    }
    Arc::new(Schema::new(fields))
}

impl SilverTable {
    /// Opens the table, creating it with `captured`'s columns when needed.
    /// `keys` must be among them, and an existing table must have the same.
    /// A key whose field in `captured` is nullable is matched null-safely.
    pub async fn open_or_create(
        location: &StorageLocation,
        options: &StorageOptions,
        captured: &[Field],
        keys: Vec<String>,
        deletes: Deletes,
    ) -> Result<Self, SilverError> {
        let where_ = location.to_string();
        let delta_error = |source: DeltaTableError| SilverError::Delta {
            location: where_.clone(),
            source: Box::new(source),
        };
        if let Some(missing) = keys
            .iter()
            .find(|k| !captured.iter().any(|c| c.name().eq_ignore_ascii_case(k)))
        {
            return Err(SilverError::UnknownKey {
                location: where_,
                column: missing.clone(),
                captured: captured
                    .iter()
                    .map(|c| c.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        // The keys as the columns spell them.
        let keys: Vec<String> = keys
            .iter()
            .filter_map(|k| {
                captured
                    .iter()
                    .find(|c| c.name().eq_ignore_ascii_case(k))
                    .map(|c| c.name().clone())
            })
            .collect();
        let nullable_keys = nullable_among(captured, &keys);
        let schema = silver_schema(captured, deletes);
        let kernel: StructType = schema
            .as_ref()
            .try_into_kernel()
            .map_err(|e| delta_error(DeltaTableError::from(e)))?;
        let table = open_or_create_with(
            location,
            options,
            kernel.fields().cloned().collect(),
            TABLE_COMMENT,
            &[(KEYS_PROPERTY, keys.join(","))],
        )
        .await
        .map_err(delta_error)?;
        refuse_unsafe(&table, &where_)?;
        let silver = SilverTable {
            table,
            location: where_,
            keys,
            nullable_keys,
            deletes,
        };
        if let Some(recorded) = silver.recorded_keys()?
            && !recorded.eq_ignore_ascii_case(&silver.keys.join(","))
        {
            return Err(SilverError::KeysChanged {
                location: silver.location.clone(),
                recorded,
                given: silver.keys.join(","),
            });
        }
        Ok(silver)
    }

    /// Where the table is.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The newest version of the commit sequence `app_id` applied here.
    pub async fn applied_version(&mut self, app_id: &str) -> Result<Option<i64>, SilverError> {
        txn_version(&mut self.table, app_id)
            .await
            .map_err(|e| self.delta_error(e))
    }

    /// The key columns.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The underlying Delta table (for readers and tests).
    pub fn delta_table(&self) -> &DeltaTable {
        &self.table
    }

    fn recorded_keys(&self) -> Result<Option<String>, SilverError> {
        let snapshot = self.table.snapshot().map_err(|e| self.delta_error(e))?;
        Ok(snapshot
            .metadata()
            .configuration()
            .get(KEYS_PROPERTY)
            .cloned())
    }

    /// Whether the table holds the commit `txn`.
    pub async fn holds(&mut self, txn: &Txn) -> Result<bool, SilverError> {
        let version = txn_version(&mut self.table, &txn.app_id)
            .await
            .map_err(|e| self.delta_error(e))?;
        Ok(txn.is_done(version))
    }

    /// Adds the columns silver lacks (a newer capture instance's). A key
    /// column `columns` declares nullable is matched null-safely from now on.
    pub async fn add_missing_columns(&mut self, columns: &[Field]) -> Result<(), SilverError> {
        for key in nullable_among(columns, &self.keys) {
            if !self.nullable_keys.contains(&key) {
                self.nullable_keys.push(key);
            }
        }
        let current = self
            .table
            .snapshot()
            .map_err(|e| self.delta_error(e))?
            .snapshot()
            .arrow_schema();
        let missing: Vec<Field> = columns
            .iter()
            .filter(|f| {
                !current
                    .fields()
                    .iter()
                    .any(|c| c.name().eq_ignore_ascii_case(f.name()))
            })
            .map(|f| f.clone().with_nullable(true))
            .collect();
        if missing.is_empty() {
            return Ok(());
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
        Ok(())
    }

    /// The table's current schema, as Arrow.
    pub fn arrow_schema(&self) -> Result<SchemaRef, SilverError> {
        let state = self.table.snapshot().map_err(|e| self.delta_error(e))?;
        Ok(state.snapshot().arrow_schema())
    }

    /// Follows source columns widened by `ALTER COLUMN`, key columns
    /// included (the MERGE matches on the wider type from then on).
    pub async fn widen_columns(&mut self, retypes: &[Retype]) -> Result<(), SilverError> {
        rewrite_widened(&mut self.table, retypes, widening_commit(retypes))
            .await
            .map_err(|e| self.delta_error(e))
    }

    /// Carries each renamed column's value (`from`, `to`) into its new name
    /// where that is NULL and the old one is not. Run at a switch to a
    /// capture instance that renamed columns, before the switch batch's
    /// MERGE: silver is then the table as it was just before the switch,
    /// whose old column holds what the rename kept, so the new column is
    /// right in every row and not only in rows changed since (the MERGE
    /// overwrites those). Idempotent: a row it filled, or one changed
    /// after the switch (old column NULL), does not match again, so a
    /// replay after a crash changes nothing twice. A pair whose columns
    /// silver lacks, or whose types differ, is left as it is. Rewrites the
    /// files holding such rows: once per rename.
    pub async fn carry_renamed(&mut self, renamed: &[(String, String)]) -> Result<(), SilverError> {
        let schema = self.arrow_schema()?;
        let same_type =
            |from: &str, to: &str| match (schema.field_with_name(from), schema.field_with_name(to))
            {
                (Ok(a), Ok(b)) => a.data_type() == b.data_type(),
                _ => false,
            };
        let pairs: Vec<&(String, String)> = renamed
            .iter()
            .filter(|(from, to)| same_type(from, to))
            .collect();
        for (from, to) in pairs {
            let predicate = Expr::Column(named(to))
                .is_null()
                .and(Expr::Column(named(from)).is_not_null());
            let properties = table_properties::commit_properties().with_metadata([(
                "mssql_cdc.renamed".to_string(),
                serde_json::json!({"from": from, "to": to}),
            )]);
            let (table, _) = self
                .table
                .clone()
                .update()
                .with_predicate(predicate)
                .with_update(to.as_str(), Expr::Column(named(from)))
                .with_commit_properties(properties)
                .await
                .map_err(|e| self.delta_error(e))?;
            self.table = table;
        }
        Ok(())
    }

    /// Applies `changes` (rows of one bronze commit, with the CDC columns)
    /// as one MERGE carrying `txn` and `record`, unless silver holds `txn`.
    pub async fn apply<R: Serialize>(
        &mut self,
        txn: &Txn,
        changes: DataFrame,
        record: &R,
    ) -> Result<ApplyOutcome, SilverError> {
        if self.holds(txn).await? {
            return Ok(ApplyOutcome::AlreadyApplied);
        }
        self.merge(changes, commit_properties(&self.location, txn, record)?)
            .await
    }

    /// Fills the table from `rows`, every bronze row of a stream that ran
    /// before silver was added to it, as one MERGE carrying `done`; nothing
    /// when silver holds `done`. After a resnapshot at `resnapshot`, a key
    /// whose last change is older than it was not in that snapshot: it is
    /// left out (or marked `_deleted`), as [`SilverTable::drop_older_than`]
    /// did when the resnapshot ended. A crash makes the next run fill
    /// again, which changes nothing twice (the MERGE ignores a change older
    /// than its row).
    pub async fn fill<R: Serialize>(
        &mut self,
        done: &Txn,
        rows: DataFrame,
        resnapshot: Option<Lsn>,
        record: &R,
    ) -> Result<ApplyOutcome, SilverError> {
        if self.holds(done).await? {
            return Ok(ApplyOutcome::AlreadyApplied);
        }
        let mut latest = self.reduce(rows).await?;
        if let Some(lsn) = resnapshot {
            let older = Expr::Column(named(LSN)).lt(lit(lsn.to_string()));
            latest = match self.deletes {
                Deletes::Hard => latest.filter(older.not()),
                Deletes::Soft => {
                    let operation = when(older, lit(Operation::Delete.as_str()))
                        .otherwise(Expr::Column(named(OPERATION)))
                        .map_err(|e| self.delta_error(e.into()))?;
                    latest.with_column(OPERATION, operation)
                }
            }
            .map_err(|e| self.delta_error(e.into()))?;
        }
        let before = self.version();
        let outcome = self
            .merge(latest, commit_properties(&self.location, done, record)?)
            .await?;
        if self.version() == before {
            // Nothing to write (an empty source): a commit of the txn alone
            // records that the fill is done.
            self.commit_txn_only(commit_properties(&self.location, done, record)?)
                .await?;
        }
        Ok(outcome)
    }

    /// A commit with no data: its `txn` and record only.
    async fn commit_txn_only(&mut self, properties: CommitProperties) -> Result<(), SilverError> {
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let snapshot = self.table.snapshot().map_err(|e| self.delta_error(e))?;
        let finalized = CommitBuilder::from(properties)
            .with_actions(Vec::new())
            .build(Some(snapshot), self.table.log_store(), operation)
            .await
            .map_err(|e| self.delta_error(e))?;
        self.table.state = Some(finalized.snapshot());
        Ok(())
    }

    /// The table's current version (0 before the first commit is read).
    fn version(&self) -> i64 {
        self.table
            .version()
            .and_then(|v| i64::try_from(v).ok())
            .unwrap_or_default()
    }

    /// The MERGE of `changes` reduced to the last per key.
    async fn merge(
        &mut self,
        changes: DataFrame,
        properties: CommitProperties,
    ) -> Result<ApplyOutcome, SilverError> {
        crate::failpoint::panic_at("silver_merge", &self.location);
        let latest = self.reduce(changes).await?;
        let columns = self.columns()?;
        let on_keys = on_keys(&self.keys, &self.nullable_keys);
        let newer = side("source", LSN).gt_eq(side("target", LSN));
        // A before-image that is its key's last change left the key: an
        // update of a manifest key column that is not the capture index
        // (an update of the index is captured as a delete and an insert).
        let is_delete = side("source", OPERATION).in_list(
            vec![
                lit(Operation::Delete.as_str()),
                lit(Operation::UpdateBefore.as_str()),
            ],
            false,
        );
        let soft = self.deletes == Deletes::Soft;
        let mut merge = self
            .table
            .clone()
            .merge(latest, on_keys)
            .with_source_alias("source")
            .with_target_alias("target")
            .with_commit_properties(properties)
            .when_matched_update(|u| {
                let u = columns
                    .iter()
                    .fold(u, |u, c| u.update(named(c), side("source", c)));
                let u = if soft {
                    u.update(named(DELETED), lit(false))
                } else {
                    u
                };
                u.predicate(newer.clone().and(is_delete.clone().not()))
            })
            .map_err(|e| self.delta_error(e))?;
        merge = if soft {
            merge
                .when_matched_update(|u| {
                    let u = columns
                        .iter()
                        .fold(u, |u, c| u.update(named(c), side("source", c)));
                    u.update(named(DELETED), lit(true))
                        .predicate(newer.clone().and(is_delete.clone()))
                })
                .map_err(|e| self.delta_error(e))?
        } else {
            merge
                .when_matched_delete(|d| d.predicate(newer.clone().and(is_delete.clone())))
                .map_err(|e| self.delta_error(e))?
        };
        let (table, metrics) = merge
            .when_not_matched_insert(|i| {
                let i = columns
                    .iter()
                    .fold(i, |i, c| i.set(named(c), side("source", c)));
                if soft {
                    i.set(named(DELETED), is_delete.clone())
                } else {
                    i.predicate(is_delete.clone().not())
                }
            })
            .map_err(|e| self.delta_error(e))?
            .await
            .map_err(|e| self.delta_error(e))?;
        self.table = table;
        Ok(ApplyOutcome::Applied {
            version: self.version(),
            files_scanned: metrics.num_target_files_scanned,
            files_skipped: metrics.num_target_files_skipped_during_scan,
        })
    }

    /// After a resnapshot at `lsn`: rows older than it were not in the new
    /// snapshot (it rewrote every key it saw), so their keys are gone.
    /// Idempotent.
    pub async fn drop_older_than(&mut self, lsn: Lsn) -> Result<(), SilverError> {
        let older = Expr::Column(named(LSN)).lt(lit(lsn.to_string()));
        let table = match self.deletes {
            Deletes::Hard => {
                let (table, _metrics) = self
                    .table
                    .clone()
                    .delete()
                    .with_predicate(older)
                    .await
                    .map_err(|e| self.delta_error(e))?;
                table
            }
            Deletes::Soft => {
                let not_deleted = Expr::Column(named(DELETED)).not();
                let (table, _metrics) = self
                    .table
                    .clone()
                    .update()
                    .with_predicate(older.and(not_deleted))
                    .with_update(named(DELETED), lit(true))
                    .await
                    .map_err(|e| self.delta_error(e))?;
                table
            }
        };
        self.table = table;
        Ok(())
    }

    /// The columns a MERGE sets: every column of the table but `_deleted`.
    fn columns(&self) -> Result<Vec<String>, SilverError> {
        let schema = self
            .table
            .snapshot()
            .map_err(|e| self.delta_error(e))?
            .snapshot()
            .arrow_schema();
        Ok(schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| n != DELETED)
            .collect())
    }

    /// The last change per key of `changes`: ordered by LSN, then seqval,
    /// then operation (an update's after-image over its before-image, an
    /// insert over a delete, so a key updated within one transaction ends
    /// inserted). Before-images lose to the after-image of their own key,
    /// so they only remain where the update moved the row off that key.
    async fn reduce(&self, changes: DataFrame) -> Result<DataFrame, SilverError> {
        let ctx = SessionContext::new();
        ctx.register_table("changes", changes.into_view())
            .map_err(|e| self.delta_error(e.into()))?;
        let keys: Vec<String> = self.keys.iter().map(|k| quote(k)).collect();
        let rank = |op: Operation, rank: u8| format!("WHEN '{}' THEN {rank}", op.as_str());
        let sql = format!(
            "SELECT * EXCLUDE (mssql_cdc_rank) FROM ( \
               SELECT *, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {lsn} DESC, {seqval} DESC, \
                 CASE {op} {after} {insert} {snapshot} {delete} {before} ELSE 0 END DESC \
               ) AS mssql_cdc_rank \
               FROM changes \
             ) WHERE mssql_cdc_rank = 1",
            keys = keys.join(", "),
            lsn = quote(LSN),
            seqval = quote(SEQVAL),
            op = quote(OPERATION),
            after = rank(Operation::UpdateAfter, 5),
            insert = rank(Operation::Insert, 4),
            snapshot = rank(Operation::Snapshot, 3),
            delete = rank(Operation::Delete, 2),
            before = rank(Operation::UpdateBefore, 1),
        );
        ctx.sql(&sql).await.map_err(|e| self.delta_error(e.into()))
    }

    fn delta_error(&self, source: DeltaTableError) -> SilverError {
        SilverError::Delta {
            location: self.location.clone(),
            source: Box::new(source),
        }
    }
}

/// The MERGE's match of a target row and a source row: every key equal,
/// NULL equal to NULL in `nullable` keys (SQL Server's unique indexes treat
/// NULLs as equal, so such a key names one row). `=` elsewhere: deltalake
/// turns it into a key range that skips files, which it cannot do for
/// `IS NOT DISTINCT FROM`.
/// The properties of a commit: its `txn`, and `record` in its commitInfo.
/// A record that is not a JSON object is refused, as bronze refuses it.
fn commit_properties<R: Serialize>(
    location: &str,
    txn: &Txn,
    record: &R,
) -> Result<CommitProperties, SilverError> {
    let refused = |reason: String| SilverError::Record {
        location: location.to_string(),
        reason,
    };
    let metadata = match serde_json::to_value(record) {
        Ok(serde_json::Value::Object(entries)) => entries,
        Ok(other) => {
            return Err(refused(format!(
                "a commit record must be a JSON object, got {other}"
            )));
        }
        Err(e) => return Err(refused(e.to_string())),
    };
    Ok(table_properties::commit_properties()
        .with_application_transaction(Transaction::new(&txn.app_id, txn.version))
        .with_metadata(metadata))
}

fn on_keys(keys: &[String], nullable: &[String]) -> Expr {
    keys.iter()
        .map(|k| {
            let (target, source) = (side("target", k), side("source", k));
            if nullable.contains(k) {
                binary_expr(target, Operator::IsNotDistinctFrom, source)
            } else {
                target.eq(source)
            }
        })
        .reduce(Expr::and)
        .unwrap_or_else(|| lit(false))
}

/// The `keys` (as the columns spell them) whose field in `fields` is
/// nullable.
fn nullable_among(fields: &[Field], keys: &[String]) -> Vec<String> {
    keys.iter()
        .filter(|k| {
            fields
                .iter()
                .any(|f| f.name().eq_ignore_ascii_case(k) && f.is_nullable())
        })
        .cloned()
        .collect()
}

/// `relation.name`, exactly as spelled.
fn side(relation: &str, name: &str) -> Expr {
    Expr::Column(Column::new(Some(relation), name))
}

/// The column `name` exactly as spelled, dots and case included (a string
/// would be parsed as `relation.column`).
fn named(name: &str) -> Column {
    Column::new_unqualified(name)
}

/// `name` as a SQL identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
#[path = "silver_tests.rs"]
mod tests;
