//! The lake side of a run, once open: the checkpoint, the target's bronze
//! table, the facts table and, when the manifest names one, the target's
//! row of the finalization control table. Every write of a run goes
//! through these.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::error::{EngineError, SchemaChangeRefused};
use super::identity;
use super::observer::Observer;
use super::source_writes::{SharedFacts, SharedFinalization, SourceWrites};
use super::store_outage::StoreOutage;
use crate::domain::FactRow;
use crate::domain::{Granularity, Lsn, VerdictUpdate, finalized_until};
use crate::lake::bronze::{BronzeOutcome, BronzeTable, Prepared, StagedFiles, bronze_schema};
use crate::lake::checkpoint::{
    BronzeMark, Checkpoint, CheckpointIdentity, CommittedBatch, CompletedSnapshot, PlannedBatch,
    PlannedSnapshot,
};
use crate::lake::claims::{NameClaim, claim_name};
use crate::lake::facts::{AppendOutcome, FactsKey, FactsTable};
use crate::lake::finalization::FinalizationTable;
use crate::lake::lease::LeaseGuard;
use crate::lake::retype::{Retype, delta_type_name, widenings_of};
use crate::lake::silver::{ApplyOutcome, Deletes, SilverError, SilverTable};
use crate::lake::txn::Txn;
use crate::retry::Backoff;
use crate::source::cdc::CaptureInfo;
use crate::spec::{SilverConfig, SilverDeletes, StreamConfig};

/// Attempts of one bronze commit after its first, with the files it
/// already uploaded, before the batch fails and is replayed, when what
/// fails is not the store (a lost commit race, say). A store that fails
/// is tried for as long as it fails, so its outage never re-uploads.
pub const COMMIT_ATTEMPTS: u32 = 5;

/// How a bronze commit the store failed is tried again in place.
#[derive(Clone)]
pub struct CommitRetry {
    /// The waits between attempts (the run's backoff).
    pub backoff: Backoff,
    /// Times the store's failures; the status names a long one.
    pub outage: Option<Arc<StoreOutage>>,
    /// Stops the retries (the worker was asked to stop).
    pub stop: CancellationToken,
}

impl Default for CommitRetry {
    fn default() -> Self {
        CommitRetry {
            backoff: Backoff::default(),
            outage: None,
            stop: CancellationToken::new(),
        }
    }
}

/// Where a run writes.
pub struct Sink {
    /// The offsets/commits log.
    pub checkpoint: Checkpoint,
    /// Who the checkpoint is; recorded in every commit.
    pub identity: CheckpointIdentity,
    /// The target.
    pub bronze: BronzeTable,
    /// The shared facts table.
    facts: FactsWriter,
    /// The silver table, when the manifest keeps one.
    silver: Option<SilverTable>,
    /// The target's verdict (and silver's), when the manifest keeps one.
    finalization: Option<Finalization>,
    /// Whether the checkpoint is still this process's.
    lease: LeaseGuard,
    /// The stream's newest bronze commit this run knows of; every marker
    /// carries it forward.
    bronze_mark: Option<BronzeMark>,
    /// The columns bronze gained when this run opened it.
    columns_added: Vec<String>,
    /// How a bronze commit the store failed is tried again in place: the
    /// run's backoff, outage and stop ([`Sink::retry_commits_with`]).
    commit_retry: CommitRetry,
}

/// Gives bronze the columns the run reads that it lacks. Bronze's columns
/// are fixed when it is created, so a column `spec.source.columns` names
/// later, or one a capture instance enabled again under its old name
/// brings, would otherwise never reach it. Returns their names.
async fn add_read_columns(
    bronze: &mut BronzeTable,
    fields: &[Field],
) -> Result<Vec<String>, EngineError> {
    Ok(bronze.add_missing_columns(fields).await?)
}

/// Claims the names this stream's rows carry in the shared tables: the
/// target's in the facts table, the target's and silver's in the
/// finalization table (`lake::claims`). Before anything is written, so a
/// stream whose name stands for another table there writes nothing.
async fn claim_names(
    config: &StreamConfig,
    env: &BTreeMap<String, String>,
) -> Result<(), EngineError> {
    let env = || env.clone().into_iter();
    let claim =
        |name: &str, location| NameClaim::new(name, location, &config.app_id, &config.checkpoint);
    let target = claim(&config.target.name, &config.target.location);
    let facts = &config.facts.location;
    claim_name(
        facts,
        &facts.options(&config.storage_options, env()),
        &target,
    )
    .await?;
    if let Some(finalization) = &config.finalization {
        let shared = &finalization.table.location;
        let options = shared.options(&config.storage_options, env());
        claim_name(shared, &options, &target).await?;
        if let Some(silver) = &config.silver {
            let silver = claim(&silver.table.name, &silver.table.location);
            claim_name(shared, &options, &silver).await?;
        }
    }
    Ok(())
}

/// Whether bronze holds a commit for a batch or chunk silver is to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BronzeCommit {
    /// Bronze committed it (this run, or a crashed one): it must be found.
    Made,
    /// It had no rows, so bronze committed nothing.
    None,
    /// Unknown (a snapshot chunk a crashed run may have left empty): look,
    /// and apply it if it is there.
    Maybe,
}

/// How a run writes the facts table: its own handle, or, for a table of
/// a source, the source's one writer (`source_writes.rs`).
enum FactsWriter {
    Own(FactsTable),
    Shared {
        writer: SharedFacts,
        /// The checkpoint, recorded in the commits.
        origin: String,
    },
}

/// How a run writes the finalization table (as [`FactsWriter`]).
enum VerdictWriter {
    Own(FinalizationTable),
    Shared(SharedFinalization),
}

impl VerdictWriter {
    /// Upserts one table's rows, in one commit.
    async fn upsert(&mut self, updates: Vec<VerdictUpdate>) -> Result<(), EngineError> {
        match self {
            VerdictWriter::Own(table) => table.upsert_group(&updates).await?,
            VerdictWriter::Shared(writer) => writer.upsert(updates).await?,
        }
        Ok(())
    }
}

/// The target's row (and silver's) of the finalization control table.
struct Finalization {
    table: VerdictWriter,
    target: String,
    silver: Option<String>,
    app_id: String,
    granularity: Granularity,
}

impl Sink {
    /// Opens (creating where needed) the tables of `config`. A new bronze
    /// table gets the columns `info`'s instance captures. Before anything
    /// is written, the checkpoint and the target must belong together
    /// (`identity::establish`; `adopt` takes a foreign target over). A
    /// table of a source writes the shared tables through `writes`.
    pub async fn open(
        config: &StreamConfig,
        env: &BTreeMap<String, String>,
        checkpoint: Checkpoint,
        info: &CaptureInfo,
        adopt: bool,
        lease: LeaseGuard,
        writes: Option<&SourceWrites>,
    ) -> Result<Self, EngineError> {
        let env_vars = env;
        let env = || env_vars.clone().into_iter();
        let fields = info.arrow_fields()?;
        let schema = bronze_schema(&Schema::new(fields.clone()))?;
        claim_names(config, env_vars).await?;
        let target_options = config
            .target
            .location
            .options(&config.storage_options, env());
        let known = identity::refuse_missing_target(config, &checkpoint, async {
            Ok(BronzeTable::exists(&config.target.location, &target_options).await?)
        })
        .await?;
        let mut bronze =
            BronzeTable::open_or_create(&config.target.location, &target_options, &schema)
                .await?
                .with_unique_columns(&info.key_columns);
        let identity::Established {
            identity,
            bronze_mark,
        } = identity::establish(config, adopt, &checkpoint, &mut bronze, known).await?;
        let columns_added = add_read_columns(&mut bronze, &fields).await?;
        let facts_options = config
            .facts
            .location
            .options(&config.storage_options, env());
        let facts = match writes {
            Some(writes) => FactsWriter::Shared {
                writer: writes.facts(&config.facts.location, &facts_options).await?,
                origin: identity.id.clone(),
            },
            None => FactsWriter::Own(
                FactsTable::open_or_create(&config.facts.location, &facts_options)
                    .await?
                    .recording_origin(&identity.id),
            ),
        };
        let finalization = match &config.finalization {
            Some(spec) => {
                let options = spec.table.location.options(&config.storage_options, env());
                let table = match writes {
                    Some(writes) => VerdictWriter::Shared(
                        writes.finalization(&spec.table.location, &options).await?,
                    ),
                    None => VerdictWriter::Own(
                        FinalizationTable::open_or_create(&spec.table.location, &options).await?,
                    ),
                };
                Some(Finalization {
                    table,
                    target: config.target.name.clone(),
                    silver: config.silver.as_ref().map(|s| s.table.name.clone()),
                    app_id: config.app_id.clone(),
                    granularity: spec.granularity,
                })
            }
            None => None,
        };
        let silver = match &config.silver {
            Some(spec) => Some(open_silver(config, spec, info, env_vars).await?),
            None => None,
        };
        Ok(Sink {
            checkpoint,
            identity,
            silver,
            bronze,
            facts,
            finalization,
            lease,
            bronze_mark,
            columns_added,
            commit_retry: CommitRetry::default(),
        })
    }

    /// Tries a bronze commit the store failed again with the run's
    /// backoff, outage tracker and stop, instead of the defaults.
    pub fn retry_commits_with(&mut self, retry: CommitRetry) {
        self.commit_retry = retry;
    }

    /// The columns this run reads that bronze lacked when it opened, and
    /// that it was given then (`spec.source.columns` was widened, or the
    /// capture instance was enabled again with more columns).
    pub fn columns_added(&self) -> &[String] {
        &self.columns_added
    }

    /// Fails once the checkpoint may be another process's (its lease could
    /// not be renewed in time, or was taken over). Every write below asks
    /// first; docs/adr/0002-exactly-once.md lists what else protects each.
    pub fn fence(&self) -> Result<(), EngineError> {
        Ok(self.lease.check()?)
    }

    /// Plans a batch in the checkpoint (create-only).
    pub async fn plan(&self, plan: &PlannedBatch) -> Result<(), EngineError> {
        self.fence()?;
        Ok(self.checkpoint.plan(plan).await?)
    }

    /// Plans a snapshot in the checkpoint (create-only).
    pub async fn plan_snapshot(&self, plan: &PlannedSnapshot) -> Result<(), EngineError> {
        self.fence()?;
        Ok(self.checkpoint.plan_snapshot(plan).await?)
    }

    /// Commits staged rows to bronze under `txn`, unless bronze holds it.
    /// A commit that fails on a transient error is tried again with the
    /// files already uploaded (after the run's backoff, the lease checked
    /// before each), rather than failing the batch, whose replay would
    /// read and upload them again and leave the first copy behind: for as
    /// long as the store fails (until the run is stopped), any other
    /// transient error up to [`COMMIT_ATTEMPTS`] times.
    pub async fn commit_to_bronze<R: Serialize>(
        &mut self,
        txn: &Txn,
        staged: StagedFiles,
        record: &R,
    ) -> Result<BronzeOutcome, EngineError> {
        self.fence()?;
        let commit = match self.bronze.prepare(txn, staged, record).await? {
            Prepared::Done(outcome) => return Ok(outcome),
            Prepared::Ready(commit) => commit,
        };
        let CommitRetry {
            mut backoff,
            outage,
            stop,
        } = self.commit_retry.clone();
        backoff.reset();
        let mut other_failures = 0;
        let outcome = loop {
            let error = match self.bronze.commit_prepared(&commit).await {
                Ok(outcome) => break outcome,
                Err(error) => EngineError::from(error),
            };
            if !error.is_transient() || stop.is_cancelled() {
                return Err(error);
            }
            if error.is_store_failure() {
                if let Some(outage) = &outage {
                    outage.failed(&error);
                }
            } else {
                other_failures += 1;
                if other_failures > COMMIT_ATTEMPTS {
                    return Err(error);
                }
            }
            let (attempt, delay) = backoff.next_delay();
            tracing::warn!(
                %error,
                attempt,
                delay_s = delay.as_secs_f64(),
                "the bronze commit failed; it is tried again with the files already uploaded"
            );
            tokio::select! {
                () = stop.cancelled() => return Err(error),
                () = tokio::time::sleep(delay) => {}
            }
            self.fence()?;
            if self.bronze.holds(&commit.txn).await? {
                break BronzeOutcome::AlreadyCommitted;
            }
        };
        if let BronzeOutcome::Committed { version, .. } = outcome {
            self.saw_bronze_commit(txn, version);
        }
        Ok(outcome)
    }

    /// The record bronze's commit of `txn` carried, when bronze holds it.
    /// The commit is looked for first where the checkpoint says it is.
    pub async fn bronze_record<R: serde::de::DeserializeOwned>(
        &mut self,
        txn: &Txn,
    ) -> Result<Option<R>, EngineError> {
        let hint = self.hint_for(txn);
        match self.bronze.record_at::<R>(txn, hint).await? {
            Some((record, version)) => {
                self.saw_bronze_commit(txn, version);
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    /// The version the checkpoint recorded for bronze's commit of `txn`.
    fn hint_for(&self, txn: &Txn) -> Option<i64> {
        self.bronze_mark
            .as_ref()
            .filter(|m| m.txn_app_id == txn.app_id && m.txn_version == txn.version)
            .map(|m| m.table_version)
    }

    /// Remembers bronze's commit of `txn` at `version` when it is the
    /// newest this run knows of.
    fn saw_bronze_commit(&mut self, txn: &Txn, version: i64) {
        if self
            .bronze_mark
            .as_ref()
            .is_none_or(|m| m.table_version < version)
        {
            self.bronze_mark = Some(BronzeMark {
                txn_app_id: txn.app_id.clone(),
                txn_version: txn.version,
                table_version: version,
            });
        }
    }

    /// Adds the columns bronze lacks (a newer capture instance's).
    pub async fn add_columns(&mut self, fields: &[Field]) -> Result<(), EngineError> {
        self.fence()?;
        self.bronze.add_missing_columns(fields).await?;
        Ok(())
    }

    /// Follows the captured columns' current types (`wanted`: name, Arrow
    /// type, SQL Server's type name) in bronze and silver. Every table is
    /// checked before any is rewritten, so a refused change writes
    /// nothing. Returns bronze's widenings.
    pub async fn follow_types(
        &mut self,
        table: &str,
        wanted: &[(String, DataType, String)],
    ) -> Result<Vec<Retype>, EngineError> {
        let asked: Vec<(String, DataType)> = wanted
            .iter()
            .map(|(name, ty, _)| (name.clone(), ty.clone()))
            .collect();
        let refused = |target: &str, (retype, reason): (Retype, &'static str)| {
            let source_type = wanted
                .iter()
                .find(|(name, ..)| name.eq_ignore_ascii_case(&retype.column))
                .map(|(.., sql)| sql.clone())
                .unwrap_or_default();
            EngineError::SchemaChangeRefused(Box::new(SchemaChangeRefused {
                table: table.to_string(),
                column: retype.column,
                source_type,
                target: target.to_string(),
                target_type: delta_type_name(&retype.from),
                reason,
            }))
        };
        let bronze = widenings_of(self.bronze.arrow_schema()?.as_ref(), &asked)
            .map_err(|r| refused(self.bronze.location(), r))?;
        let silver = match &self.silver {
            Some(silver) => widenings_of(silver.arrow_schema()?.as_ref(), &asked)
                .map_err(|r| refused(silver.location(), r))?,
            None => Vec::new(),
        };
        if bronze.is_empty() && silver.is_empty() {
            return Ok(Vec::new());
        }
        self.fence()?;
        if !bronze.is_empty() {
            tracing::warn!(target = %self.bronze.location(), columns = ?bronze, "rewriting bronze in the widened column types");
            self.bronze.widen_columns(&bronze).await?;
        }
        if let Some(table) = self.silver.as_mut().filter(|_| !silver.is_empty()) {
            tracing::warn!(target = %table.location(), columns = ?silver, "rewriting silver in the widened column types");
            table.widen_columns(&silver).await?;
        }
        Ok(bronze)
    }

    /// Appends facts rows under `key`, unless the facts table holds them.
    pub async fn append_facts(
        &mut self,
        key: &FactsKey,
        rows: &[FactRow],
    ) -> Result<AppendOutcome, EngineError> {
        self.fence()?;
        let outcome = match &mut self.facts {
            FactsWriter::Own(table) => table.append(key, rows).await?,
            FactsWriter::Shared { writer, origin } => writer.append(key, rows, origin).await?,
        };
        Ok(outcome)
    }

    /// Marks a batch done in the checkpoint.
    /// The marker records the newest bronze commit the run knows of.
    pub async fn mark_done(&self, done: &CommittedBatch) -> Result<(), EngineError> {
        self.fence()?;
        let done = CommittedBatch {
            bronze_mark: self.bronze_mark.clone(),
            ..done.clone()
        };
        self.checkpoint.commit(&done).await?;
        Ok(())
    }

    /// Marks a snapshot complete in the checkpoint.
    /// The marker records the newest bronze commit the run knows of.
    pub async fn complete_snapshot(&self, done: &CompletedSnapshot) -> Result<(), EngineError> {
        self.fence()?;
        let done = CompletedSnapshot {
            bronze_mark: self.bronze_mark.clone(),
            ..done.clone()
        };
        self.checkpoint.complete_snapshot(&done).await?;
        Ok(())
    }

    /// Applies bronze's commit `bronze` (a batch's or a snapshot chunk's)
    /// to silver as the commit `silver`, unless silver holds it. Nothing
    /// without silver, or when bronze made no commit (`BronzeCommit::None`,
    /// which costs no read). A commit bronze made but that cannot be found
    /// stops the stream: going on would move silver's `txn` past it.
    pub async fn apply_to_silver(
        &mut self,
        bronze: &Txn,
        silver: &Txn,
        made: BronzeCommit,
    ) -> Result<(), EngineError> {
        if self.silver.is_none() || made == BronzeCommit::None {
            return Ok(());
        }
        self.fence()?;
        let hint = self.hint_for(bronze);
        let Some(commit) = self.bronze.find_commit(bronze, hint).await? else {
            if made == BronzeCommit::Made {
                return Err(EngineError::BronzeCommitMissing {
                    target: self.bronze.location().to_string(),
                    commit: bronze.describe(),
                    txn_app_id: bronze.app_id.clone(),
                    txn_version: bronze.version,
                });
            }
            return Ok(());
        };
        let rows = self.bronze.commit_rows(&commit).await?;
        let record = SilverRecord {
            checkpoint: self.identity.id.clone(),
            bronze_version: commit.version,
        };
        if let Some(table) = &mut self.silver {
            crate::failpoint::hit("before_silver_commit");
            table.apply(silver, rows, &record).await?;
            crate::failpoint::hit("after_silver_commit");
        }
        Ok(())
    }

    /// The newest version silver applied of the commit sequence `app_id`
    /// (`None` without silver, or before the first).
    pub async fn silver_applied(&mut self, app_id: &str) -> Result<Option<i64>, EngineError> {
        match &mut self.silver {
            Some(table) => Ok(table.applied_version(app_id).await?),
            None => Ok(None),
        }
    }

    /// Fills silver from bronze's rows from `floor` on (the stream's
    /// bootstrap LSN) as the commit `done`, leaving out the keys the
    /// resnapshot at `resnapshot` did not see (`SilverTable::fill`).
    /// Nothing without silver. Returns whether the fill was made now.
    pub async fn fill_silver(
        &mut self,
        done: &Txn,
        floor: Option<Lsn>,
        resnapshot: Option<Lsn>,
    ) -> Result<bool, EngineError> {
        self.fence()?;
        let Some(table) = &mut self.silver else {
            return Ok(false);
        };
        let rows = self.bronze.rows_from(floor).await?;
        let record = SilverRecord {
            checkpoint: self.identity.id.clone(),
            bronze_version: self.bronze.version().unwrap_or_default(),
        };
        let outcome = table.fill(done, rows, resnapshot, &record).await?;
        Ok(outcome != ApplyOutcome::AlreadyApplied)
    }

    /// Whether the stream keeps a silver table.
    pub fn has_silver(&self) -> bool {
        self.silver.is_some()
    }

    /// After a resnapshot at `lsn`: silver drops the keys it no longer saw.
    pub async fn silver_after_resnapshot(&mut self, lsn: Lsn) -> Result<(), EngineError> {
        self.fence()?;
        if let Some(table) = &mut self.silver {
            table.drop_older_than(lsn).await?;
        }
        Ok(())
    }

    /// Adds a newer capture instance's columns to silver. A silver table
    /// keyed by the instance's index refuses an instance with other keys.
    pub async fn silver_follows(
        &mut self,
        info: &CaptureInfo,
        manifest_keys: bool,
    ) -> Result<(), EngineError> {
        self.fence()?;
        let Some(table) = &mut self.silver else {
            return Ok(());
        };
        let same_keys = info.key_columns.len() == table.keys().len()
            && info
                .key_columns
                .iter()
                .zip(table.keys())
                .all(|(a, b)| a.eq_ignore_ascii_case(b));
        if !manifest_keys && !same_keys {
            return Err(EngineError::Silver(SilverError::KeysChanged {
                location: table.location().to_string(),
                recorded: table.keys().join(","),
                given: info.key_columns.join(","),
            }));
        }
        table.add_missing_columns(&info.declared_fields()?).await?;
        Ok(())
    }

    /// Silver's new names of renamed columns take the old names' values
    /// ([`SilverTable::carry_renamed`]); nothing without silver.
    pub async fn silver_carry_renamed(
        &mut self,
        renamed: &[(String, String)],
    ) -> Result<(), EngineError> {
        self.fence()?;
        if let Some(table) = &mut self.silver {
            table.carry_renamed(renamed).await?;
        }
        Ok(())
    }

    /// After a batch or a completed snapshot: the target holds every change
    /// committed up to `end_commit_ts`, and silver has applied them up to
    /// `applied` (a batch's end LSN; `None` after a snapshot).
    pub async fn advance_verdict(
        &mut self,
        end_commit_ts: Option<DateTime<Utc>>,
        applied: Option<Lsn>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let Some(granularity) = self.finalization.as_ref().map(|f| f.granularity) else {
            return Ok(());
        };
        let until = end_commit_ts.map(|ts| finalized_until(granularity, ts));
        self.write_verdicts(until, None, applied, observer).await
    }

    /// While a snapshot taken at `lsn` is open: the rows name it and the
    /// verdicts stay where they were.
    pub async fn hold_verdict(
        &mut self,
        lsn: Lsn,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        self.write_verdicts(None, Some(lsn), None, observer).await
    }

    /// While silver is filled from bronze up to `lsn`: silver's row names
    /// it as its open snapshot and its verdict stays where it was; the
    /// target's row is not touched.
    pub async fn hold_silver_verdict(
        &mut self,
        lsn: Lsn,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        self.fence()?;
        let Some(finalization) = &mut self.finalization else {
            return Ok(());
        };
        let Some(silver) = finalization.silver.clone() else {
            return Ok(());
        };
        let update = VerdictUpdate {
            table_name: silver,
            app_id: finalization.app_id.clone(),
            granularity: finalization.granularity,
            finalized_until: None,
            updated_at: Utc::now(),
            open_snapshot_lsn: Some(lsn),
            applied_lsn: None,
        };
        finalization.table.upsert(vec![update.clone()]).await?;
        observer.finalized(&update);
        Ok(())
    }

    async fn write_verdicts(
        &mut self,
        finalized_until: Option<DateTime<Utc>>,
        open_snapshot_lsn: Option<Lsn>,
        applied: Option<Lsn>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        self.fence()?;
        let Some(finalization) = &mut self.finalization else {
            return Ok(());
        };
        let target = VerdictUpdate {
            table_name: finalization.target.clone(),
            app_id: finalization.app_id.clone(),
            granularity: finalization.granularity,
            finalized_until,
            updated_at: Utc::now(),
            open_snapshot_lsn,
            applied_lsn: None,
        };
        // The target's row and silver's, in one commit.
        let mut updates = vec![target.clone()];
        if let Some(silver) = finalization.silver.clone() {
            updates.push(VerdictUpdate {
                table_name: silver,
                applied_lsn: applied,
                ..target
            });
        }
        finalization.table.upsert(updates.clone()).await?;
        for update in &updates {
            observer.finalized(update);
        }
        Ok(())
    }
}

/// What a silver commit records: which checkpoint applied which bronze
/// commit.
#[derive(Debug, Serialize)]
struct SilverRecord {
    #[serde(rename = "mssql_cdc.checkpoint")]
    checkpoint: String,
    #[serde(rename = "mssql_cdc.bronze_version")]
    bronze_version: i64,
}

/// Opens the stream's silver table: keyed by the manifest's keys, else by
/// the capture instance's index columns.
async fn open_silver(
    config: &StreamConfig,
    spec: &SilverConfig,
    info: &CaptureInfo,
    env: &BTreeMap<String, String>,
) -> Result<SilverTable, EngineError> {
    let keys = super::silver_keys::keys(spec, info)?;
    let deletes = match spec.deletes {
        SilverDeletes::Hard => Deletes::Hard,
        SilverDeletes::Soft => Deletes::Soft,
    };
    let options = spec
        .table
        .location
        .options(&config.storage_options, env.clone());
    let fields = info.declared_fields()?;
    let mut table =
        SilverTable::open_or_create(&spec.table.location, &options, &fields, keys, deletes).await?;
    // Like bronze, silver takes the columns it lacks (add_read_columns).
    table.add_missing_columns(&fields).await?;
    Ok(table)
}
