//! SQL Server behind the engine's seam: `ChangeSource` for the adapter
//! `source::SourceSession` and `PartSession` for its pooled `SqlReader`.
//! Each method hands the question to the adapter and records the warnings
//! it raised; the queries are the adapter's (`src/source/`). It sits here,
//! not in `source/`, because the layers run one way: `source` is below the
//! engine and does not know its traits.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::change_source::{ChangeSource, PartSession};
use super::error::EngineError;
use super::warnings::Warnings;
use crate::domain::{CaptureInstance, Lsn};
use crate::lake::bronze::Stager;
use crate::source::cdc::{CaptureInfo, Commit, DdlEvent, InstanceEntry};
use crate::source::lsn_parts::CommitChanges;
use crate::source::parts::{ChunkPart, PartOutput, PartRead, SqlReader};
use crate::source::session::Raised;
use crate::source::session_stats::NetworkWait;
use crate::source::snapshot::KeyValues;
use crate::source::time_zone::{CommitClock, RepeatedHour};
use crate::source::unique_keys::UniqueKey;
use crate::source::{SourceError, SourceSession};

/// Records what an adapter call raised.
fn record(raised: Raised, warnings: &mut Warnings) {
    for warning in raised {
        warnings.raise(warning);
    }
}

#[async_trait]
impl ChangeSource for SourceSession {
    type Reader = SqlReader;

    fn info(&self) -> &CaptureInfo {
        SourceSession::info(self)
    }

    fn read_instance(&mut self, info: CaptureInfo) {
        SourceSession::read_instance(self, info);
    }

    async fn discover(&mut self, instance: &CaptureInstance) -> Result<CaptureInfo, EngineError> {
        Ok(SourceSession::discover(self, instance).await?)
    }

    fn commit_clock(&self) -> CommitClock {
        SourceSession::commit_clock(self)
    }

    async fn repeated_hour(
        &mut self,
        until: Lsn,
        around: Option<DateTime<Utc>>,
    ) -> Result<Option<RepeatedHour>, EngineError> {
        Ok(SourceSession::repeated_hour(self, until, around).await?)
    }

    async fn refresh_clock(&mut self, warnings: &mut Warnings) -> Result<(), EngineError> {
        let mut raised = Raised::new();
        SourceSession::refresh_clock(self, &mut raised).await?;
        record(raised, warnings);
        Ok(())
    }

    async fn lsn_time(&mut self, lsn: Lsn) -> Result<Option<DateTime<Utc>>, EngineError> {
        Ok(SourceSession::lsn_time(self, lsn).await?)
    }

    async fn time_from(&mut self, lsn: Lsn) -> Result<Option<DateTime<Utc>>, EngineError> {
        Ok(SourceSession::time_from(self, lsn).await?)
    }

    async fn max_lsn(&mut self) -> Result<Lsn, EngineError> {
        Ok(SourceSession::max_lsn(self).await?)
    }

    async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, EngineError> {
        Ok(SourceSession::min_lsn(self, instance).await?)
    }

    fn retention_minutes(&self) -> Option<i64> {
        SourceSession::retention_minutes(self)
    }

    fn pinned(&self) -> bool {
        SourceSession::pinned(self)
    }

    async fn capture_instances(&mut self) -> Result<Vec<InstanceEntry>, EngineError> {
        Ok(SourceSession::capture_instances(self).await?)
    }

    async fn commits(
        &mut self,
        from: Lsn,
        upper: Lsn,
        max: u64,
    ) -> Result<Vec<Commit>, EngineError> {
        Ok(SourceSession::commits(self, from, upper, max).await?)
    }

    async fn ddl_events(
        &mut self,
        change_table_id: i32,
        from: Lsn,
        upper: Lsn,
    ) -> Result<Vec<DdlEvent>, EngineError> {
        Ok(SourceSession::ddl_events(self, change_table_id, from, upper).await?)
    }

    async fn enabled_again(&mut self) -> Result<bool, EngineError> {
        Ok(SourceSession::enabled_again(self).await?)
    }

    fn take_replaced(&mut self) -> Option<CaptureInfo> {
        SourceSession::take_replaced(self)
    }

    async fn warn_left_out_columns(
        &mut self,
        info: &CaptureInfo,
        warnings: &mut Warnings,
    ) -> Result<(), EngineError> {
        let mut raised = Raised::new();
        SourceSession::warn_left_out_columns(self, info, &mut raised).await?;
        record(raised, warnings);
        Ok(())
    }

    async fn may_read_waits(&mut self, warnings: &mut Warnings) -> Result<bool, EngineError> {
        let mut raised = Raised::new();
        let may = SourceSession::may_read_waits(self, &mut raised).await?;
        record(raised, warnings);
        Ok(may)
    }

    async fn round_trip(&mut self) -> Result<Duration, EngineError> {
        Ok(SourceSession::round_trip(self).await?)
    }

    async fn sessions(&mut self, n: usize) -> Result<Vec<SqlReader>, EngineError> {
        Ok(SourceSession::sessions(self, n).await?)
    }

    async fn change_counts(
        &mut self,
        from: Lsn,
        to: Lsn,
    ) -> Result<Vec<CommitChanges>, EngineError> {
        Ok(SourceSession::change_counts(self, from, to).await?)
    }

    async fn key_bounds(
        &mut self,
        paged: &CaptureInfo,
        ranges: usize,
    ) -> Result<Vec<Vec<serde_json::Value>>, EngineError> {
        Ok(SourceSession::key_bounds(self, paged, ranges).await?)
    }

    async fn estimated_rows(&mut self) -> Option<u64> {
        SourceSession::estimated_rows(self).await
    }

    async fn unique_keys(&self) -> Result<Vec<UniqueKey>, EngineError> {
        Ok(SourceSession::unique_keys(self).await?)
    }
}

#[async_trait]
impl PartSession for SqlReader {
    async fn round_trip(&mut self) -> Result<Duration, SourceError> {
        SqlReader::round_trip(self).await
    }

    async fn network_wait(&mut self) -> Result<NetworkWait, SourceError> {
        SqlReader::network_wait(self).await
    }

    async fn read(&mut self, read: PartRead, stager: Stager) -> PartOutput {
        SqlReader::read(self, read, stager).await
    }

    async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, SourceError> {
        SqlReader::min_lsn(self, instance).await
    }

    async fn has_rows_after(
        &mut self,
        chunk: &ChunkPart,
        after: Option<&KeyValues>,
    ) -> Result<bool, SourceError> {
        SqlReader::has_rows_after(self, chunk, after).await
    }
}
