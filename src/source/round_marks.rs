//! What a source's round reads once so that its quiet tables' idle
//! commits ask SQL Server nothing of their own (issue 30: round trips per
//! round stay a constant, whatever the number of tables).
//!
//! A quiet table's idle commit is a batch over a window the round has just
//! found empty of the table's changes (`changed_tables`). Planned on its
//! own, that batch would ask its session a dozen questions (the max LSN
//! and its time, the instance's low-water mark and its time, the table's
//! instances, the commits and DDL of the window, the changes) and log in
//! first, its session being parked. Every answer but the window's
//! emptiness is the database's, not the table's, so the round asks them
//! once for all the tables it wakes: the max LSN's commit time, every row
//! of `cdc.change_tables` with the time of its low-water mark, and the DDL
//! after the lowest window. [`RoundMarks::quiet`] then says, per window,
//! whether its batch can be planned from these answers alone; when
//! anything needs the table's own look (a purge, a DDL statement, a newer
//! or re-created instance), it cannot, and the table plans as it always
//! did.
//!
//! `sys.fn_cdc_get_min_lsn` is `cdc.change_tables.start_lsn` (SQL Server's
//! documentation says so), so one read of the catalog answers every
//! instance's low-water mark.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tiberius::ColumnData;

use super::SourceError;
use super::arrow_rows::naive_utc;
use super::cdc::{self, all_rows, lsn_of};
use super::changed_tables::ChangeWindow;
use super::connection::SqlClient;
use super::time_zone::CommitClock;
use crate::domain::{CaptureInstance, Lsn};

/// Every capture instance of the database with its low-water mark and
/// that mark's commit time (the first mapped commit at or after it: a seek
/// on `cdc.lsn_time_mapping`'s clustered index per instance).
const INSTANCES: &str = "SELECT ct.capture_instance, ct.object_id, ct.source_object_id, \
     ct.start_lsn, (SELECT TOP (1) m.tran_end_time FROM cdc.lsn_time_mapping AS m \
     WHERE m.start_lsn >= ct.start_lsn ORDER BY m.start_lsn) FROM cdc.change_tables AS ct";

/// The DDL statements recorded after an LSN, by change table.
const DDL: &str = "SELECT object_id, ddl_lsn FROM cdc.ddl_history WHERE ddl_lsn > @P1";

/// One row of `cdc.change_tables`, as a quiet window needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRow {
    /// The capture instance.
    pub name: CaptureInstance,
    /// Its change table's object id.
    pub change_table_id: i32,
    /// The captured table's object id.
    pub source_object_id: i32,
    /// Its low-water mark (`sys.fn_cdc_get_min_lsn`).
    pub start_lsn: Option<Lsn>,
    /// The commit time (UTC) of the first mapped commit at or after it.
    pub start_commit_ts: Option<DateTime<Utc>>,
}

/// What one round read for the quiet tables it wakes.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundMarks {
    /// The round's max LSN: every window ends there.
    pub max_lsn: Lsn,
    /// Its commit time (UTC).
    pub max_commit_ts: Option<DateTime<Utc>>,
    /// When the max LSN was read.
    pub observed_at: DateTime<Utc>,
    /// How long the statement reading the max LSN's time took: a quiet
    /// batch's round trip to the source.
    pub round_trip: Duration,
    /// Every capture instance of the database.
    pub instances: Vec<InstanceRow>,
    /// (change table id, LSN) of every DDL statement after the lowest
    /// window's start.
    pub ddl: Vec<(i32, Lsn)>,
}

/// A quiet table's window as the round found it: no change of the table
/// in (after, max LSN], nothing purged, no DDL, no other instance of the
/// table starting later. Its batch is planned from this alone.
#[derive(Debug, Clone, PartialEq)]
pub struct QuietWindow {
    /// The instance and the LSN after which the window starts.
    pub window: ChangeWindow,
    /// The instance's change table, as the round found it: a table whose
    /// session knows another one (disabled and enabled again) plans on
    /// its own.
    pub change_table_id: i32,
    /// The round's max LSN, the window's end.
    pub max_lsn: Lsn,
    /// Its commit time (UTC).
    pub max_commit_ts: Option<DateTime<Utc>>,
    /// The instance's low-water mark, at or before the window's start.
    pub min_lsn: Lsn,
    /// Its commit time (UTC).
    pub min_commit_ts: Option<DateTime<Utc>>,
    /// When the round read the max LSN.
    pub observed_at: DateTime<Utc>,
    /// The round's round trip to the source.
    pub round_trip: Duration,
}

impl RoundMarks {
    /// The quiet window of `window`, a window the round found without a
    /// change; `None` when its batch needs the table's own look: the
    /// instance is not listed (disabled) or has no low-water mark, cleanup
    /// passed the window's start, a DDL statement of its change table
    /// follows the start, or another instance of the table starts after
    /// it (a move to it may be due; a stream pinned to its instance plans
    /// that on its own too, which costs it a look per idle commit only
    /// while a second instance exists).
    pub fn quiet(&self, window: &ChangeWindow) -> Option<QuietWindow> {
        let row = self.instances.iter().find(|i| i.name == window.instance)?;
        let min_lsn = row.start_lsn.filter(|lsn| *lsn != Lsn::ZERO)?;
        let next = window.after.checked_next()?;
        if min_lsn > next {
            return None;
        }
        let ddl_ahead = self
            .ddl
            .iter()
            .any(|(table, lsn)| *table == row.change_table_id && *lsn > window.after);
        let newer = self.instances.iter().any(|other| {
            other.source_object_id == row.source_object_id
                && other.name != row.name
                && other.start_lsn.is_none_or(|start| start > min_lsn)
        });
        if ddl_ahead || newer {
            return None;
        }
        Some(QuietWindow {
            window: window.clone(),
            change_table_id: row.change_table_id,
            max_lsn: self.max_lsn,
            max_commit_ts: self.max_commit_ts,
            min_lsn,
            min_commit_ts: row.start_commit_ts,
            observed_at: self.observed_at,
            round_trip: self.round_trip,
        })
    }
}

/// Reads, in three statements whatever the number of windows, what quiet
/// windows need besides their emptiness: the commit time of `max_lsn`
/// (read at `observed_at`, converted by `clock`), every capture instance
/// with its low-water mark, and the DDL after `lowest`, the lowest
/// window's start.
pub async fn round_marks(
    client: &mut SqlClient,
    lowest: Lsn,
    max_lsn: Lsn,
    observed_at: DateTime<Utc>,
    clock: CommitClock,
) -> Result<RoundMarks, SourceError> {
    let started = Instant::now();
    let max_commit_ts = cdc::lsn_time(client, max_lsn, clock).await?;
    let round_trip = started.elapsed();
    let instances = instances(client, clock).await?;
    let ddl = ddl_after(client, lowest).await?;
    Ok(RoundMarks {
        max_lsn,
        max_commit_ts,
        observed_at,
        round_trip,
        instances,
        ddl,
    })
}

/// Every row of `cdc.change_tables` with its low-water mark's time.
async fn instances(
    client: &mut SqlClient,
    clock: CommitClock,
) -> Result<Vec<InstanceRow>, SourceError> {
    let context = "the capture instances of the database";
    let rows = all_rows(client, INSTANCES, &[], context).await?;
    let mut instances = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = row.into_iter();
        let (Some(name), Some(id), Some(source), Some(start), time) = (
            values.next(),
            values.next(),
            values.next(),
            values.next(),
            values.next(),
        ) else {
            return Err(SourceError::Missing(context.into()));
        };
        let (
            ColumnData::String(Some(name)),
            ColumnData::I32(Some(id)),
            ColumnData::I32(Some(source)),
        ) = (name, id, source)
        else {
            continue;
        };
        let name = CaptureInstance::new(name.to_string())
            .map_err(|e| SourceError::NotCaptured(format!("capture instance {name}: {e}")))?;
        instances.push(InstanceRow {
            name,
            change_table_id: id,
            source_object_id: source,
            start_lsn: lsn_of(&start, context)?,
            start_commit_ts: time
                .as_ref()
                .and_then(naive_utc)
                .map(|t| clock.watermark(t.naive_utc())),
        });
    }
    Ok(instances)
}

/// (change table id, LSN) of the DDL recorded after `after`.
async fn ddl_after(client: &mut SqlClient, after: Lsn) -> Result<Vec<(i32, Lsn)>, SourceError> {
    let context = "cdc.ddl_history";
    let bytes = after.to_bytes();
    let rows = all_rows(client, DDL, &[&&bytes[..]], context).await?;
    let mut ddl = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = row.into_iter();
        let (Some(ColumnData::I32(Some(table))), Some(lsn)) = (values.next(), values.next()) else {
            return Err(SourceError::Missing(format!("{context}.object_id")));
        };
        let lsn = lsn_of(&lsn, context)?.ok_or_else(|| SourceError::Missing(context.into()))?;
        ddl.push((table, lsn));
    }
    Ok(ddl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(n: u8) -> Lsn {
        Lsn::from_low_byte(n)
    }

    fn instance(name: &str, table: i32, source: i32, start: u8) -> InstanceRow {
        InstanceRow {
            name: CaptureInstance::new(name).expect("an instance name"),
            change_table_id: table,
            source_object_id: source,
            start_lsn: Some(lsn(start)),
            start_commit_ts: None,
        }
    }

    fn window(name: &str, after: u8) -> ChangeWindow {
        ChangeWindow {
            instance: CaptureInstance::new(name).expect("an instance name"),
            after: lsn(after),
        }
    }

    fn marks(instances: Vec<InstanceRow>, ddl: Vec<(i32, Lsn)>) -> RoundMarks {
        RoundMarks {
            max_lsn: lsn(50),
            max_commit_ts: None,
            observed_at: Utc::now(),
            round_trip: Duration::from_millis(1),
            instances,
            ddl,
        }
    }

    #[test]
    fn a_quiet_window_is_planned_from_the_rounds_answers() {
        let round = marks(
            vec![instance("dbo_a", 10, 1, 5), instance("dbo_b", 20, 2, 30)],
            Vec::new(),
        );
        let quiet = round.quiet(&window("dbo_a", 20)).expect("quiet");
        assert_eq!(quiet.min_lsn, lsn(5));
        assert_eq!(quiet.max_lsn, lsn(50));
        assert_eq!(quiet.change_table_id, 10);
        // The low-water mark may be the window's first LSN, not past it.
        assert!(round.quiet(&window("dbo_b", 29)).is_some());
    }

    #[test]
    fn a_window_that_needs_the_tables_own_look_is_not_quiet() {
        let round = marks(
            vec![
                instance("dbo_a", 10, 1, 5),
                instance("dbo_b", 20, 2, 30),
                instance("dbo_c", 30, 3, 5),
                instance("dbo_c_v2", 31, 3, 40),
            ],
            vec![(10, lsn(25))],
        );
        // Cleanup passed the start: the data-loss policy decides.
        assert!(round.quiet(&window("dbo_b", 20)).is_none());
        // A DDL statement after the start...
        assert!(round.quiet(&window("dbo_a", 20)).is_none());
        // ...but not one the stream has read past.
        assert!(round.quiet(&window("dbo_a", 25)).is_some());
        // A newer instance of the same table.
        assert!(round.quiet(&window("dbo_c", 20)).is_none());
        // The newer instance itself is quiet: the older one starts first.
        assert!(round.quiet(&window("dbo_c_v2", 45)).is_some());
        // Not listed: disabled.
        assert!(round.quiet(&window("dbo_gone", 20)).is_none());
        // No low-water mark.
        let mut none = marks(vec![instance("dbo_a", 10, 1, 5)], Vec::new());
        none.instances[0].start_lsn = None;
        assert!(none.quiet(&window("dbo_a", 20)).is_none());
    }
}
