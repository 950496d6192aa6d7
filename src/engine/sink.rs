//! The lake side of a run, once open: the checkpoint, the target's bronze
//! table, the facts table and, when the manifest names one, the target's
//! row of the finalization control table. Every write of a run goes
//! through these.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use deltalake::arrow::datatypes::{Field, Schema};
use serde::Serialize;

use super::error::EngineError;
use super::identity;
use super::observer::Observer;
use crate::domain::FactRow;
use crate::domain::{Granularity, Lsn, VerdictUpdate, finalized_until};
use crate::lake::bronze::{BronzeOutcome, BronzeTable, StagedFiles, bronze_schema};
use crate::lake::checkpoint::{
    Checkpoint, CheckpointIdentity, CommittedBatch, CompletedSnapshot, PlannedBatch,
    PlannedSnapshot,
};
use crate::lake::facts::{AppendOutcome, FactsKey, FactsTable};
use crate::lake::finalization::FinalizationTable;
use crate::lake::lease::LeaseGuard;
use crate::lake::txn::Txn;
use crate::source::cdc::CaptureInfo;
use crate::spec::StreamConfig;

/// Where a run writes.
pub struct Sink {
    /// The offsets/commits log.
    pub checkpoint: Checkpoint,
    /// Who the checkpoint is; recorded in every commit.
    pub identity: CheckpointIdentity,
    /// The target.
    pub bronze: BronzeTable,
    /// The shared facts table.
    pub facts: FactsTable,
    /// The target's verdict, when the manifest keeps one.
    finalization: Option<Finalization>,
    /// Whether the checkpoint is still this process's.
    lease: LeaseGuard,
}

/// The target's row of the finalization control table.
struct Finalization {
    table: FinalizationTable,
    table_name: String,
    app_id: String,
    granularity: Granularity,
}

impl Sink {
    /// Opens (creating where needed) the tables of `config`. A new bronze
    /// table gets the columns `info`'s instance captures. Before anything
    /// is written, the checkpoint and the target must belong together
    /// (`identity::establish`; `adopt` takes a foreign target over).
    pub async fn open(
        config: &StreamConfig,
        env: &BTreeMap<String, String>,
        checkpoint: Checkpoint,
        info: &CaptureInfo,
        adopt: bool,
        lease: LeaseGuard,
    ) -> Result<Self, EngineError> {
        let env = || env.clone().into_iter();
        let fields = info.arrow_fields()?;
        let schema = bronze_schema(&Schema::new(fields))?;
        let target_options = config
            .target
            .location
            .options(&config.storage_options, env());
        let mut bronze =
            BronzeTable::open_or_create(&config.target.location, &target_options, &schema).await?;
        let identity = identity::establish(config, adopt, &checkpoint, &mut bronze).await?;
        let facts_options = config
            .facts
            .location
            .options(&config.storage_options, env());
        let facts = FactsTable::open_or_create(&config.facts.location, &facts_options)
            .await?
            .recording_origin(&identity.id);
        let finalization = match &config.finalization {
            Some(spec) => {
                let options = spec.table.location.options(&config.storage_options, env());
                Some(Finalization {
                    table: FinalizationTable::open_or_create(&spec.table.location, &options)
                        .await?,
                    table_name: config.target.name.clone(),
                    app_id: config.app_id.clone(),
                    granularity: spec.granularity,
                })
            }
            None => None,
        };
        Ok(Sink {
            checkpoint,
            identity,
            bronze,
            facts,
            finalization,
            lease,
        })
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
    pub async fn commit_to_bronze<R: Serialize>(
        &mut self,
        txn: &Txn,
        staged: StagedFiles,
        record: &R,
    ) -> Result<BronzeOutcome, EngineError> {
        self.fence()?;
        Ok(self.bronze.commit_batch(txn, staged, record).await?)
    }

    /// Adds the columns bronze lacks (a newer capture instance's).
    pub async fn add_columns(&mut self, fields: &[Field]) -> Result<(), EngineError> {
        self.fence()?;
        self.bronze.add_missing_columns(fields).await?;
        Ok(())
    }

    /// Appends facts rows under `key`, unless the facts table holds them.
    pub async fn append_facts(
        &mut self,
        key: &FactsKey,
        rows: &[FactRow],
    ) -> Result<AppendOutcome, EngineError> {
        self.fence()?;
        Ok(self.facts.append(key, rows).await?)
    }

    /// Marks a batch done in the checkpoint.
    pub async fn mark_done(&self, done: &CommittedBatch) -> Result<(), EngineError> {
        self.fence()?;
        self.checkpoint.commit(done).await?;
        Ok(())
    }

    /// Marks a snapshot complete in the checkpoint.
    pub async fn complete_snapshot(&self, done: &CompletedSnapshot) -> Result<(), EngineError> {
        self.fence()?;
        self.checkpoint.complete_snapshot(done).await?;
        Ok(())
    }

    /// After a batch or a completed snapshot: the target holds every change
    /// committed up to `end_commit_ts`.
    pub async fn advance_verdict(
        &mut self,
        end_commit_ts: Option<DateTime<Utc>>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let Some(granularity) = self.finalization.as_ref().map(|f| f.granularity) else {
            return Ok(());
        };
        let until = end_commit_ts.map(|ts| finalized_until(granularity, ts));
        self.write_verdict(until, None, observer).await
    }

    /// While a snapshot taken at `lsn` is open: the row names it and the
    /// verdict stays where it was.
    pub async fn hold_verdict(
        &mut self,
        lsn: Lsn,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        self.write_verdict(None, Some(lsn), observer).await
    }

    async fn write_verdict(
        &mut self,
        finalized_until: Option<DateTime<Utc>>,
        open_snapshot_lsn: Option<Lsn>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        self.fence()?;
        let Some(finalization) = &mut self.finalization else {
            return Ok(());
        };
        let update = VerdictUpdate {
            table_name: finalization.table_name.clone(),
            app_id: finalization.app_id.clone(),
            granularity: finalization.granularity,
            finalized_until,
            updated_at: Utc::now(),
            open_snapshot_lsn,
        };
        finalization.table.upsert(&update).await?;
        observer.finalized(&update);
        Ok(())
    }
}
