//! The SQL Server adapter of a run, once connected: the session, the
//! capture instance read and its columns, and the server's UTC offset. A
//! `SourceSession` exists only when all of these are known; a broken
//! connection drops it and the run opens a new one. The engine reads it
//! through its `engine::ChangeSource` seam (implemented for this type in
//! `engine::sql_server`); the warnings a call raises come back as strings
//! the engine records.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use secrecy::SecretString;
use tokio::sync::Mutex;

use super::cdc::{self, CaptureInfo, Commit, DdlEvent, InstanceEntry};
use super::changed_tables::{self, ChangeWindow, ChangedTables};
use super::key_ranges::{bounds, sample_for, sample_keys};
use super::lsn_parts::{CommitChanges, change_counts};
use super::parts::SqlReader;
use super::retention;
use super::session_stats::{self, NetworkWait};
use super::snapshot::estimated_rows;
use super::time_zone::{
    CommitClock, Fold, RepeatedHour, offset_warning, second_pass_start, unknown_zone_warning,
};
use super::unique_keys::{UniqueKey, unique_keys};
use super::{SourceError, SqlClient, connect, heartbeat};
use crate::domain::{CaptureInstance, Lsn};
use crate::spec::{HeartbeatConfig, SourceConfig};

/// Warnings an adapter call raised, for the engine to record.
pub type Raised = Vec<String>;

/// A connected source.
pub struct SourceSession {
    /// The session, lent to a read task while a batch reads; `None` while
    /// parked (`park`), until the next call opens a new one.
    client: Mutex<Option<Arc<Mutex<SqlClient>>>>,
    /// More sessions for parallel reads (`spec.source.readers`), opened the
    /// first time a read needs them and kept for the next ones.
    extra: Vec<Arc<Mutex<SqlClient>>>,
    /// To open them.
    password: SecretString,
    /// The capture instance read and its columns.
    info: CaptureInfo,
    source: SourceConfig,
    /// How commit times become UTC.
    clock: CommitClock,
    /// Asked once, at the first connect.
    server_major_version: Option<u32>,
    /// The fall-back changes a read came near, with what their commits
    /// showed so far (see [`SourceSession::repeated_hour`]).
    folds: Vec<FoldScan>,
    wait_access: WaitAccess,
    /// The cleanup job's retention in minutes, once read (`read_retention`).
    retention_minutes: Option<i64>,
    /// The instance read before it was found disabled and enabled again
    /// under the same name (a new change table), until the step has given
    /// bronze the new one's columns (`take_replaced`).
    replaced: Option<CaptureInfo>,
}

/// Whether this session may read its own waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum WaitAccess {
    /// Not tried yet.
    #[default]
    Unknown,
    /// Readable.
    Granted,
    /// Refused; the warning was raised, the session stops asking.
    Denied,
}

impl SourceSession {
    /// Connects and finds the capture instance: the manifest's, else the
    /// one `previous` read (after a reconnect, the run goes on with the
    /// instance, columns and UTC offset it had), else the table's newest.
    /// Raises the warnings about what the stream cannot read.
    pub async fn open(
        source: &SourceConfig,
        password: &SecretString,
        heartbeat: Option<&HeartbeatConfig>,
        previous: Option<&SourceSession>,
        warnings: &mut Raised,
    ) -> Result<Self, SourceError> {
        let reading = previous.map(|p| &p.info);
        let mut client = connect(source, password).await?;
        let named = source
            .capture_instance
            .as_ref()
            .or(reading.map(|info| &info.instance));
        let discovered =
            cdc::discover(&mut client, &source.table, named, source.columns.as_deref()).await;
        let found = match (discovered, reading) {
            // The instance read was disabled while the run went on: what is
            // known of it is kept, and planning, finding it gone, moves on
            // to the table's other instance.
            (Err(SourceError::NotCaptured(_)), Some(known))
                if source.capture_instance.is_none() =>
            {
                known.clone()
            }
            (other, _) => other?,
        };
        let mut replaced = None;
        let info = match reading {
            // Same name, new change table: enabled again, with the columns
            // it has now.
            Some(known) if known.change_table_id != found.change_table_id => {
                replaced = Some(known.clone());
                found
            }
            Some(known) if known != &found => {
                tracing::warn!(
                    capture_instance = %found.instance,
                    "the capture instance or its columns changed while the stream ran; continuing with the columns it started with"
                );
                known.clone()
            }
            _ => found,
        };
        let mut session = SourceSession {
            client: Mutex::new(Some(Arc::new(Mutex::new(client)))),
            extra: Vec::new(),
            password: password.clone(),
            info,
            source: source.clone(),
            clock: previous.map_or(CommitClock::Fixed(0), |p| p.clock),
            server_major_version: previous.and_then(|p| p.server_major_version),
            folds: previous.map(|p| p.folds.clone()).unwrap_or_default(),
            wait_access: previous.map_or(WaitAccess::Unknown, |p| p.wait_access),
            retention_minutes: previous.and_then(|p| p.retention_minutes),
            replaced: replaced.or_else(|| previous.and_then(|p| p.replaced.clone())),
        };
        session
            .take_clock(previous.map(|p| p.clock), warnings)
            .await?;
        session.check_columns(warnings).await?;
        if let Some(heartbeat) = heartbeat {
            session.check_heartbeat(heartbeat, warnings).await?;
        }
        Ok(session)
    }

    /// Reads the cleanup job's retention, which the retention headroom is
    /// measured with: as the reader, else as the monitoring login. With
    /// neither, the headroom falls back to the low-water mark's measure and
    /// the run's next facts row says so, once.
    pub async fn read_retention(
        &mut self,
        monitoring: Option<&SecretString>,
        warnings: &mut Raised,
    ) -> Result<(), SourceError> {
        let read = retention::read(
            &mut *self.live().await?.lock().await,
            &self.source,
            monitoring,
        )
        .await?;
        match read {
            Ok(minutes) => self.retention_minutes = minutes,
            Err(warning) => warnings.push(warning),
        }
        Ok(())
    }

    /// The session, connected again if it was parked. What the session
    /// knows (the instance read, its columns, the server's offset) was
    /// kept, as it is across a session that stays open: planning finds a
    /// changed instance the same way either way.
    async fn live(&self) -> Result<Arc<Mutex<SqlClient>>, SourceError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(Arc::clone(client));
        }
        let client = Arc::new(Mutex::new(connect(&self.source, &self.password).await?));
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    /// Closes the connections while the table waits for a change, keeping
    /// what the session knows; the next call opens a new one. A source's
    /// quiet tables then hold no SQL Server session between their idle
    /// commits: 1,000 tables are not 1,000 open sessions.
    pub fn park(&mut self) {
        *self.client.get_mut() = None;
        self.extra.clear();
    }

    /// The capture instance read and its columns.
    pub fn info(&self) -> &CaptureInfo {
        &self.info
    }

    /// The source table's primary key, unique constraints and unique
    /// indexes: what silver's key is checked against at start.
    pub async fn unique_keys(&self) -> Result<Vec<UniqueKey>, SourceError> {
        let live = self.live().await?;
        let mut client = live.lock().await;
        unique_keys(&mut client, &self.source.table).await
    }

    /// How commit times become UTC.
    pub fn commit_clock(&self) -> CommitClock {
        self.clock
    }

    /// The instance and columns of `instance` (not made the one read).
    pub async fn discover(
        &mut self,
        instance: &CaptureInstance,
    ) -> Result<CaptureInfo, SourceError> {
        let live = self.live().await?;
        let source = &self.source;
        let mut client = live.lock().await;
        cdc::discover(
            &mut client,
            &source.table,
            Some(instance),
            source.columns.as_deref(),
        )
        .await
    }

    /// Makes `info` the instance read (a switch).
    pub fn read_instance(&mut self, info: CaptureInfo) {
        self.info = info;
    }

    /// Makes `instance` the one read (a plan or snapshot names it).
    pub async fn use_instance(&mut self, instance: &CaptureInstance) -> Result<(), SourceError> {
        if &self.info.instance != instance {
            self.info = self.discover(instance).await?;
        }
        Ok(())
    }

    /// Re-reads the server's offset when that is all commit times are
    /// converted with (an older server without `sourceTimeZone`): a
    /// daylight-saving change then shows from the next batch on.
    pub async fn refresh_clock(&mut self, warnings: &mut Raised) -> Result<(), SourceError> {
        match self.clock {
            CommitClock::Fixed(_) => self.take_clock(Some(self.clock), warnings).await,
            CommitClock::Zone(_) => Ok(()),
        }
    }

    async fn take_clock(
        &mut self,
        previous: Option<CommitClock>,
        warnings: &mut Raised,
    ) -> Result<(), SourceError> {
        if let Some(zone) = self.source.source_time_zone {
            self.clock = CommitClock::Zone(zone);
            return Ok(());
        }
        if let Some(CommitClock::Zone(zone)) = previous {
            self.clock = CommitClock::Zone(zone);
            return Ok(());
        }
        let live = self.live().await?;
        let mut client = live.lock().await;
        let major = match self.server_major_version {
            Some(major) => major,
            None => *self
                .server_major_version
                .insert(cdc::product_major_version(&mut client).await?),
        };
        let unknown = match previous {
            // Asked at the first connect: the zone a server runs in does
            // not change while it runs.
            None => match cdc::server_zone(&mut client, major).await? {
                Some(Ok(zone)) => {
                    self.clock = CommitClock::Zone(zone);
                    return Ok(());
                }
                Some(Err(name)) => Some(name),
                None => None,
            },
            Some(_) => None,
        };
        let offset = cdc::utc_offset_minutes(&mut client).await?;
        let before = match previous {
            Some(CommitClock::Fixed(minutes)) => Some(minutes),
            _ => None,
        };
        self.clock = CommitClock::Fixed(offset);
        let warning = match unknown {
            Some(name) => Some(unknown_zone_warning(&name, offset)),
            None => offset_warning(before, offset, major, Utc::now()),
        };
        warnings.extend(warning);
        Ok(())
    }

    /// The fall-back change a read up to `until` (committed at `around`)
    /// may cross, with where its second pass starts among the commits, so
    /// the read gives the repeated hour's changes their true instants.
    /// Asked of the server only near such a change, and then only for the
    /// commits it has not seen: once a year per zone, for a few batches.
    pub async fn repeated_hour(
        &mut self,
        until: Lsn,
        around: Option<DateTime<Utc>>,
    ) -> Result<Option<RepeatedHour>, SourceError> {
        let Some(around) = around else {
            return Ok(None);
        };
        let lookback = chrono::Duration::minutes(
            self.retention_minutes
                .unwrap_or(DEFAULT_RETENTION_MINUTES)
                .max(DEFAULT_RETENTION_MINUTES),
        );
        let Some(fold) = self.clock.fold_near(around, lookback) else {
            return Ok(None);
        };
        // A read that ends before the hour's first pass has no commit in it.
        if around < fold.at - (fold.ends_at - fold.at) {
            return Ok(None);
        }
        let known = self.folds.iter().position(|scan| scan.fold == fold);
        let mut scan = known
            .and_then(|index| self.folds.get(index).cloned())
            .unwrap_or_else(|| FoldScan::new(fold));
        if scan.wants(until) {
            let live = self.live().await?;
            let commits = cdc::fold_commits(
                &mut *live.lock().await,
                scan.scanned_to,
                until,
                fold.first,
                fold.end,
            )
            .await?;
            scan.second_pass_from = second_pass_start(&commits, &mut scan.seen);
            scan.scanned_to = Some(until);
            // A read that ends after the second pass has seen all of it.
            scan.complete = around >= fold.ends_at;
            match known.and_then(|index| self.folds.get_mut(index)) {
                Some(slot) => *slot = scan.clone(),
                None => self.folds.push(scan.clone()),
            }
        }
        Ok(Some(RepeatedHour {
            fold,
            second_pass_from: scan.second_pass_from,
        }))
    }

    /// The commit time (UTC) of `lsn`, or of the nearest mapped LSN before it.
    pub async fn lsn_time(&mut self, lsn: Lsn) -> Result<Option<DateTime<Utc>>, SourceError> {
        let clock = self.clock;
        cdc::lsn_time(&mut *self.live().await?.lock().await, lsn, clock).await
    }

    /// The commit time (UTC) of the first mapped LSN at or after `lsn`.
    pub async fn time_from(&mut self, lsn: Lsn) -> Result<Option<DateTime<Utc>>, SourceError> {
        let clock = self.clock;
        cdc::first_time_from(&mut *self.live().await?.lock().await, lsn, clock).await
    }

    /// The database's max LSN.
    pub async fn max_lsn(&mut self) -> Result<Lsn, SourceError> {
        cdc::max_lsn(&mut *self.live().await?.lock().await).await
    }

    /// Which of `windows` have a change row up to `upto` (the round's max
    /// LSN), asked on this session in one statement per chunk of windows,
    /// so a worker of many tables finds the few that changed in a constant
    /// number of round trips; the tables SQL Server refused are in
    /// `failed` (see [`changed_tables::changed_tables`]).
    pub async fn changed_tables(
        &mut self,
        windows: &[ChangeWindow],
        upto: Lsn,
    ) -> Result<ChangedTables, SourceError> {
        changed_tables::changed_tables(&mut *self.live().await?.lock().await, windows, upto).await
    }

    /// The lowest LSN `instance` still holds.
    pub async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, SourceError> {
        cdc::min_lsn(&mut *self.live().await?.lock().await, instance).await
    }

    /// The lowest LSN `instance` holds, when cleanup has moved it past
    /// `from` (it ran after the batch was planned, or while it read).
    pub async fn purged_past(
        &mut self,
        instance: &CaptureInstance,
        from: Lsn,
    ) -> Result<Option<Lsn>, SourceError> {
        let min = self.min_lsn(instance).await?;
        Ok((min > from).then_some(min))
    }

    /// The cleanup job's retention in minutes, once read (`read_retention`).
    pub fn retention_minutes(&self) -> Option<i64> {
        self.retention_minutes
    }

    /// Whether the manifest pins the capture instance read.
    pub fn pinned(&self) -> bool {
        self.source.capture_instance.is_some()
    }

    /// The table's capture instances.
    pub async fn capture_instances(&mut self) -> Result<Vec<InstanceEntry>, SourceError> {
        cdc::capture_instances(&mut *self.live().await?.lock().await, &self.source.table).await
    }

    /// The first mapped commits (the whole database's) in `[from, upper]`,
    /// oldest first, at most `max` of them.
    pub async fn commits(
        &mut self,
        from: Lsn,
        upper: Lsn,
        max: u64,
    ) -> Result<Vec<Commit>, SourceError> {
        let clock = self.clock;
        cdc::commits(
            &mut *self.live().await?.lock().await,
            from,
            upper,
            max,
            clock,
        )
        .await
    }

    /// The DDL recorded for change table `change_table_id` in `[from, upper]`.
    pub async fn ddl_events(
        &mut self,
        change_table_id: i32,
        from: Lsn,
        upper: Lsn,
    ) -> Result<Vec<DdlEvent>, SourceError> {
        let clock = self.clock;
        cdc::ddl_events(
            &mut *self.live().await?.lock().await,
            change_table_id,
            from,
            upper,
            clock,
        )
        .await
    }

    /// Whether the instance read was disabled and enabled again under its
    /// name (its change table is another one now). If so, the new one is
    /// read from now on, and `take_replaced` returns the old one. Changes
    /// made while it was off are not in CDC: the position lies before the
    /// new instance's start, and the data-loss policy decides.
    pub async fn enabled_again(&mut self) -> Result<bool, SourceError> {
        let instances =
            cdc::capture_instances(&mut *self.live().await?.lock().await, &self.source.table)
                .await?;
        let now = instances.iter().find(|i| i.name == self.info.instance);
        let Some(entry) = now.filter(|i| i.change_table_id != self.info.change_table_id) else {
            return Ok(false);
        };
        tracing::warn!(
            capture_instance = %entry.name,
            old_change_table = self.info.change_table_id,
            new_change_table = entry.change_table_id,
            "the capture instance was disabled and enabled again; reading the new one"
        );
        let new = self.discover(&entry.name.clone()).await?;
        let old = std::mem::replace(&mut self.info, new);
        self.replaced = Some(old);
        Ok(true)
    }

    /// The instance read before the one of the same name read now, once:
    /// the caller gives bronze the new one's columns.
    pub fn take_replaced(&mut self) -> Option<CaptureInfo> {
        self.replaced.take()
    }

    /// A round trip to the server on this session.
    pub async fn round_trip(&mut self) -> Result<Duration, SourceError> {
        session_stats::round_trip(&mut *self.live().await?.lock().await).await
    }

    /// Whether the login may read its sessions' wait counters: asked once
    /// per session (raising the warning when it may not), so the readers
    /// of a batch measure `network_wait_ms` only when they can.
    pub async fn may_read_waits(&mut self, warnings: &mut Raised) -> Result<bool, SourceError> {
        if self.wait_access == WaitAccess::Unknown {
            self.network_wait(warnings).await?;
        }
        Ok(self.wait_access == WaitAccess::Granted)
    }

    async fn network_wait(&mut self, warnings: &mut Raised) -> Result<(), SourceError> {
        if self.wait_access == WaitAccess::Denied {
            return Ok(());
        }
        match session_stats::network_wait(&mut *self.live().await?.lock().await).await? {
            NetworkWait::Millis(_) => {
                self.wait_access = WaitAccess::Granted;
                Ok(())
            }
            NetworkWait::Denied(message) => {
                self.wait_access = WaitAccess::Denied;
                warnings.push(format!(
                    "network_wait_ms is NULL: login {} may not read sys.dm_exec_session_wait_stats \
                     (grant VIEW SERVER PERFORMANCE STATE on SQL Server 2022 and later, VIEW SERVER \
                     STATE before); SQL Server said: {message}",
                    self.source.username
                ));
                Ok(())
            }
        }
    }

    /// `n` sessions (at least one) for a parallel read: this one first,
    /// then others of the same login, opened the first time they are
    /// needed.
    pub async fn sessions(&mut self, n: usize) -> Result<Vec<SqlReader>, SourceError> {
        let wanted = n.max(1) - 1;
        while self.extra.len() < wanted {
            let client = connect(&self.source, &self.password).await?;
            self.extra.push(Arc::new(Mutex::new(client)));
        }
        Ok(std::iter::once(self.live().await?)
            .chain(self.extra.iter().take(wanted).cloned())
            .map(SqlReader::new)
            .collect())
    }

    /// The read instance's change rows per commit in `[from, to]`, to split
    /// a batch into parts.
    pub async fn change_counts(
        &mut self,
        from: Lsn,
        to: Lsn,
    ) -> Result<Vec<CommitChanges>, SourceError> {
        let info = self.info.clone();
        change_counts(&mut *self.live().await?.lock().await, &info, from, to).await
    }

    /// The keys that split the table (paged by `paged`'s key) into at most
    /// `ranges` ranges of about equal size, from a sample of the key; empty
    /// when the table cannot be split (too small, or of unknown size).
    pub async fn key_bounds(
        &mut self,
        paged: &CaptureInfo,
        ranges: usize,
    ) -> Result<Vec<Vec<serde_json::Value>>, SourceError> {
        let Some(sample) = sample_for(self.estimated_rows().await) else {
            return Ok(Vec::new());
        };
        let table = self.source.table.clone();
        let keys =
            sample_keys(&mut *self.live().await?.lock().await, &table, paged, sample).await?;
        Ok(bounds(&keys, ranges))
    }

    /// The table's row count, as the catalog estimates it (for progress).
    pub async fn estimated_rows(&mut self) -> Option<u64> {
        estimated_rows(
            &mut *self.live().await.ok()?.lock().await,
            &self.source.table,
        )
        .await
    }

    /// The warnings about what the stream does not read: computed columns
    /// (CDC does not capture them) and captured columns
    /// `spec.source.columns` leaves out.
    async fn check_columns(&mut self, warnings: &mut Raised) -> Result<(), SourceError> {
        let table = self.source.table.clone();
        let computed = cdc::computed_columns(&mut *self.live().await?.lock().await, &table).await?;
        if !computed.is_empty() {
            warnings.push(format!(
                "{table}: computed columns are not captured by CDC and are left out of bronze: {}",
                computed.join(", ")
            ));
        }
        let info = self.info.clone();
        self.warn_left_out_columns(&info, warnings).await
    }

    /// Warns about columns `info`'s instance captures that the manifest's
    /// `columns` leaves out.
    pub async fn warn_left_out_columns(
        &mut self,
        info: &CaptureInfo,
        warnings: &mut Raised,
    ) -> Result<(), SourceError> {
        let Some(wanted) = &self.source.columns else {
            return Ok(());
        };
        let name = info.instance.to_string();
        let captured = cdc::captured_columns(
            &mut *self.live().await?.lock().await,
            &name,
            info.change_table_id,
        )
        .await?;
        let left_out: Vec<&str> = captured
            .iter()
            .map(|c| c.name.as_str())
            .filter(|c| !wanted.iter().any(|w| w.eq_ignore_ascii_case(c)))
            .collect();
        if !left_out.is_empty() {
            warnings.push(format!(
                "capture instance {name} captures columns that spec.source.columns leaves out: {}",
                left_out.join(", ")
            ));
        }
        Ok(())
    }

    /// Warns when the heartbeat table is not captured: its writes would not
    /// move the max LSN.
    async fn check_heartbeat(
        &mut self,
        heartbeat: &HeartbeatConfig,
        warnings: &mut Raised,
    ) -> Result<(), SourceError> {
        let captured =
            heartbeat::is_captured(&mut *self.live().await?.lock().await, &heartbeat.table).await?;
        if !captured {
            warnings.push(format!(
                "spec.heartbeat.table: {} does not exist or is not enabled for CDC; its writes \
                 do not move the max LSN (enable it with sys.sp_cdc_enable_table)",
                heartbeat.table
            ));
        }
        Ok(())
    }
}

/// CDC's default retention (3 days): how far back a read may reach when
/// the cleanup job's own retention is unknown.
const DEFAULT_RETENTION_MINUTES: i64 = 3 * 24 * 60;

/// What the commits of one fall-back change showed so far.
#[derive(Debug, Clone)]
struct FoldScan {
    fold: Fold,
    /// The last LSN looked at.
    scanned_to: Option<Lsn>,
    /// The latest local time seen in the repeated hour.
    seen: Option<chrono::NaiveDateTime>,
    /// The first commit of the second pass, once seen.
    second_pass_from: Option<Lsn>,
    /// Every commit of the hour was looked at.
    complete: bool,
}

impl FoldScan {
    fn new(fold: Fold) -> Self {
        Self {
            fold,
            scanned_to: None,
            seen: None,
            second_pass_from: None,
            complete: false,
        }
    }

    /// Whether commits up to `until` may still show something new.
    fn wants(&self, until: Lsn) -> bool {
        self.second_pass_from.is_none()
            && !self.complete
            && self.scanned_to.is_none_or(|seen| seen < until)
    }
}
