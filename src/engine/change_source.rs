//! The engine's seam to the database it streams from: what step, batch and
//! snapshot ask of the source (marks and LSN times, the changes of a range,
//! snapshot chunks, session measures), in the stream's terms. SQL Server
//! implements it (`source::SourceSession` and its pooled `SqlReader`, tied
//! in by `sql_server`); the engine's unit tests implement it in memory.
//! Every method answers one question, so an implementation holds no
//! planning logic: `marks` composes them.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::error::EngineError;
use super::warnings::Warnings;
use crate::domain::{CaptureInstance, Lsn};
use crate::lake::bronze::Stager;
use crate::source::SourceError;
use crate::source::cdc::{CaptureInfo, Commit, DdlEvent, InstanceEntry};
use crate::source::lsn_parts::CommitChanges;
use crate::source::parts::{ChunkPart, PartOutput, PartRead};
use crate::source::session_stats::NetworkWait;
use crate::source::snapshot::KeyValues;
use crate::source::time_zone::{CommitClock, RepeatedHour};
use crate::source::unique_keys::UniqueKey;

/// The connected source of a run: one session, the capture instance read
/// and its columns, and the pool of sessions parallel reads run on.
#[async_trait]
pub trait ChangeSource: Send + Sync {
    /// A session of the reader pool.
    type Reader: PartSession;

    /// The capture instance read and its columns.
    fn info(&self) -> &CaptureInfo;

    /// Makes `info` the instance read (a switch).
    fn read_instance(&mut self, info: CaptureInfo);

    /// The instance and columns of `instance` (not made the one read).
    async fn discover(&mut self, instance: &CaptureInstance) -> Result<CaptureInfo, EngineError>;

    /// Makes `instance` the one read (a plan or snapshot names it). One
    /// the table no longer has (disabled) is read as gone: planning then
    /// moves on from it.
    async fn use_instance(&mut self, instance: &CaptureInstance) -> Result<(), EngineError> {
        if &self.info().instance != instance {
            let listed = self
                .capture_instances()
                .await?
                .iter()
                .any(|entry| &entry.name == instance);
            let info = if listed {
                self.discover(instance).await?
            } else {
                CaptureInfo::gone(instance.clone())
            };
            self.read_instance(info);
        }
        Ok(())
    }

    /// How commit times become UTC.
    fn commit_clock(&self) -> CommitClock;

    /// Re-reads the server's offset when that is all commit times are
    /// converted with (a daylight-saving change shows).
    async fn refresh_clock(&mut self, warnings: &mut Warnings) -> Result<(), EngineError>;

    /// The repeated hour of a fall-back change a read up to `until`
    /// (committed at `around`) may cross, with where its second pass
    /// starts; `None` away from such a change.
    async fn repeated_hour(
        &mut self,
        until: Lsn,
        around: Option<DateTime<Utc>>,
    ) -> Result<Option<RepeatedHour>, EngineError>;

    /// The commit time (UTC) of `lsn`, or of the nearest mapped LSN before it.
    async fn lsn_time(&mut self, lsn: Lsn) -> Result<Option<DateTime<Utc>>, EngineError>;

    /// The commit time (UTC) of the first mapped LSN at or after `lsn`.
    async fn time_from(&mut self, lsn: Lsn) -> Result<Option<DateTime<Utc>>, EngineError>;

    /// The database's max LSN.
    async fn max_lsn(&mut self) -> Result<Lsn, EngineError>;

    /// The lowest LSN `instance` still holds.
    async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, EngineError>;

    /// The lowest LSN `instance` holds, when cleanup has moved it past
    /// `from` (it ran after the batch was planned, or while it read).
    async fn purged_past(
        &mut self,
        instance: &CaptureInstance,
        from: Lsn,
    ) -> Result<Option<Lsn>, EngineError> {
        let min = self.min_lsn(instance).await?;
        Ok((min > from).then_some(min))
    }

    /// The cleanup job's retention in minutes, when it could be read.
    fn retention_minutes(&self) -> Option<i64>;

    /// Whether the manifest pins the instance read (no switch to a newer one).
    fn pinned(&self) -> bool;

    /// The table's capture instances.
    async fn capture_instances(&mut self) -> Result<Vec<InstanceEntry>, EngineError>;

    /// The first mapped commits (the whole database's) in `[from, upper]`,
    /// oldest first, at most `max` of them.
    async fn commits(
        &mut self,
        from: Lsn,
        upper: Lsn,
        max: u64,
    ) -> Result<Vec<Commit>, EngineError>;

    /// The DDL recorded for change table `change_table_id` in `[from, upper]`.
    async fn ddl_events(
        &mut self,
        change_table_id: i32,
        from: Lsn,
        upper: Lsn,
    ) -> Result<Vec<DdlEvent>, EngineError>;

    /// Whether the instance read was disabled and enabled again under its
    /// name; if so the new one is read from now on and `take_replaced`
    /// returns the old one.
    async fn enabled_again(&mut self) -> Result<bool, EngineError>;

    /// The instance read before the one of the same name read now, once.
    fn take_replaced(&mut self) -> Option<CaptureInfo>;

    /// Warns about columns `info`'s instance captures that the manifest's
    /// `columns` leaves out.
    async fn warn_left_out_columns(
        &mut self,
        info: &CaptureInfo,
        warnings: &mut Warnings,
    ) -> Result<(), EngineError>;

    /// Whether the login may read its sessions' wait counters (asked once;
    /// raises the warning when it may not).
    async fn may_read_waits(&mut self, warnings: &mut Warnings) -> Result<bool, EngineError>;

    /// A round trip to the server on this session.
    async fn round_trip(&mut self) -> Result<Duration, EngineError>;

    /// `n` sessions (at least one) for a parallel read, this one first.
    async fn sessions(&mut self, n: usize) -> Result<Vec<Self::Reader>, EngineError>;

    /// The read instance's change rows per commit in `[from, to]`.
    async fn change_counts(
        &mut self,
        from: Lsn,
        to: Lsn,
    ) -> Result<Vec<CommitChanges>, EngineError>;

    /// Keys that split the table (paged by `paged`'s key) into at most
    /// `ranges` ranges; empty when it cannot be split.
    async fn key_bounds(
        &mut self,
        paged: &CaptureInfo,
        ranges: usize,
    ) -> Result<Vec<Vec<serde_json::Value>>, EngineError>;

    /// The table's row count as the catalog estimates it (for progress).
    async fn estimated_rows(&mut self) -> Option<u64>;

    /// The table's primary key, unique constraints and unique indexes.
    async fn unique_keys(&self) -> Result<Vec<UniqueKey>, EngineError>;
}

/// A session of the reader pool, lent to one part at a time.
#[async_trait]
pub trait PartSession: Send + 'static {
    /// A round trip on this session.
    async fn round_trip(&mut self) -> Result<Duration, SourceError>;

    /// This session's network wait counter.
    async fn network_wait(&mut self) -> Result<NetworkWait, SourceError>;

    /// Reads `read` into files of `stager`'s (not sealed yet).
    async fn read(&mut self, read: PartRead, stager: Stager) -> PartOutput;

    /// The lowest LSN `instance` still holds, asked after a read.
    async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, SourceError>;

    /// Whether `chunk`'s key range holds rows after `after` (else after
    /// the chunk's own start).
    async fn has_rows_after(
        &mut self,
        chunk: &ChunkPart,
        after: Option<&KeyValues>,
    ) -> Result<bool, SourceError>;
}
