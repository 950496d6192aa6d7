//! Keeps the target's row in the finalization control table (when the
//! manifest names one): the verdict after each batch, held while a
//! snapshot of the target is open, and tells the observer each row written.
//! The rules are in `crate::lake::finalization`; this only feeds them the
//! stream's state.

use chrono::{DateTime, Utc};

use super::EngineError;
use super::observer::Observer;
use super::stream::StreamRun;
use crate::lake::finalization::{FinalizationTable, VerdictUpdate, finalized_until};
use crate::source::Lsn;

impl StreamRun {
    /// After a batch or a completed snapshot: the target holds every change
    /// committed up to `end_commit_ts`.
    pub(super) async fn advance_verdict(
        &mut self,
        end_commit_ts: Option<DateTime<Utc>>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let Some(granularity) = self.config.finalization.as_ref().map(|f| f.granularity) else {
            return Ok(());
        };
        let until = end_commit_ts.map(|ts| finalized_until(granularity, ts));
        self.write_verdict(until, None, observer).await
    }

    /// While a snapshot taken at `lsn` is open: the row names it and the
    /// verdict stays where it was.
    pub(super) async fn hold_verdict(
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
        let Some(config) = self.config.finalization.clone() else {
            return Ok(());
        };
        let update = VerdictUpdate {
            table_name: self.config.target.name.clone(),
            app_id: self.config.app_id.clone(),
            granularity: config.granularity,
            finalized_until,
            updated_at: Utc::now(),
            open_snapshot_lsn,
        };
        let table = match &mut self.finalization {
            Some(table) => table,
            None => {
                let options = &self.finalization_options;
                let table =
                    FinalizationTable::open_or_create(&config.table.location, options).await?;
                self.finalization.insert(table)
            }
        };
        table.upsert(&update).await?;
        observer.finalized(&update);
        Ok(())
    }
}
