//! Keeping the facts table (and bronze and silver) small: every micro-batch is a
//! commit, so a quiet stream leaves thousands of tiny files a day.
//!
//! Maintenance deletes micro-batch facts rows older than a window (event
//! rows are the durable record of snapshots, schema changes and lost data,
//! and are never deleted), rewrites small files into large ones (the facts
//! table z-ordered by `target, app_id`, which every monitoring query
//! filters or groups by, a silver table by its keys), vacuums files no
//! table version needs any more (those the log removed and those no
//! commit ever added: a failed commit's upload, a crash between upload and
//! commit), and deletes log entries older than the log's retention, which
//! the engine's commits no longer do themselves
//! ([`super::table_properties`]). Every step is an ordinary Delta commit,
//! so it runs safely next to streams that keep appending: their appends
//! are blind, and a facts append that loses a race retries on its `txn`
//! key.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deltalake::datafusion::prelude::{col, lit};
use deltalake::datafusion::scalar::ScalarValue;
use deltalake::operations::optimize::OptimizeType;
use deltalake::operations::vacuum::VacuumMode;
use deltalake::{DeltaTable, DeltaTableError};

use super::delta::open_existing;
use super::silver::KEYS_PROPERTY;
use super::storage::{StorageLocation, StorageOptions};
use super::table_properties::commit_properties;

/// The shortest vacuum retention allowed without
/// [`VacuumRetention::allow_short`]: Delta's default
/// `delta.deletedFileRetentionDuration`. A shorter one can delete files a
/// running stream's pending commit or a reader of an older version still
/// needs.
pub const SAFE_VACUUM_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Columns the facts table is z-ordered by.
pub const FACTS_ZORDER_COLUMNS: [&str; 2] = ["target", "app_id"];

/// How long removed files stay before vacuum deletes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VacuumRetention {
    /// Files removed from the table longer ago than this are deleted.
    pub retain: Duration,
    /// Accept a retention below [`SAFE_VACUUM_RETENTION`] (and below the
    /// table's own `delta.deletedFileRetentionDuration`).
    pub allow_short: bool,
}

impl VacuumRetention {
    /// Refuses a retention below the safe minimum unless allowed; run it
    /// before any step so a refused vacuum leaves the table untouched.
    pub fn check(&self) -> Result<(), MaintenanceError> {
        if self.retain < SAFE_VACUUM_RETENTION && !self.allow_short {
            return Err(MaintenanceError::UnsafeRetention {
                retain: self.retain,
            });
        }
        Ok(())
    }
}

impl Default for VacuumRetention {
    fn default() -> Self {
        VacuumRetention {
            retain: SAFE_VACUUM_RETENTION,
            allow_short: false,
        }
    }
}

/// Why maintenance stopped.
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    /// A retention below the safe minimum without the explicit opt-in.
    #[error(
        "vacuum retention of {hours} h is below the safe minimum of {min} h: files a running \
         stream or a reader of an older version still needs could be deleted \
         (pass --allow-short-retention to do it anyway)",
        hours = .retain.as_secs() / 3600,
        min = SAFE_VACUUM_RETENTION.as_secs() / 3600
    )]
    UnsafeRetention {
        /// The retention asked for.
        retain: Duration,
    },
    /// The micro-batch window is zero or beyond what timestamps can hold.
    #[error("keep window of {days} days is invalid: it must be at least 1 day")]
    BadWindow {
        /// The window asked for, in days.
        days: u64,
    },
    /// A table given as silver has no recorded keys.
    #[error(
        "{location} is not a silver table (it has no {KEYS_PROPERTY} property); pass it with \
         --bronze to compact it without clustering"
    )]
    NotSilver {
        /// The table location.
        location: String,
    },
    /// A Delta operation failed.
    #[error("{step} of {location}: {source}")]
    Delta {
        /// Which step (delete, optimize, vacuum, open).
        step: &'static str,
        /// The table location.
        location: String,
        /// deltalake's error.
        source: Box<DeltaTableError>,
    },
}

/// One table to maintain, opened.
pub struct Maintenance {
    table: DeltaTable,
    location: String,
}

impl Maintenance {
    /// Opens an existing table; maintenance never creates one.
    pub async fn open(
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<Self, MaintenanceError> {
        let table = open_existing(location, options)
            .await
            .map_err(|e| delta_error("open", &location.to_string(), e))?;
        Ok(Maintenance {
            table,
            location: location.to_string(),
        })
    }

    /// Deletes micro-batch rows (`event IS NULL`) written before
    /// `now - keep_days`; event rows stay whatever their age.
    pub async fn delete_old_batches(
        &mut self,
        keep_days: u64,
        now: DateTime<Utc>,
    ) -> Result<Option<u64>, MaintenanceError> {
        let cutoff = i64::try_from(keep_days)
            .ok()
            .filter(|d| *d >= 1)
            .and_then(chrono::Duration::try_days)
            .and_then(|window| now.checked_sub_signed(window))
            .ok_or(MaintenanceError::BadWindow { days: keep_days })?;
        let cutoff = lit(ScalarValue::TimestampMicrosecond(
            Some(cutoff.timestamp_micros()),
            None,
        ));
        let predicate = col("event").is_null().and(col("written_at").lt(cutoff));
        let (table, metrics) = self
            .table
            .clone()
            .delete()
            .with_predicate(predicate)
            .with_commit_properties(commit_properties())
            .await
            .map_err(|e| self.error("delete", e))?;
        self.table = table;
        Ok(metrics.num_deleted_rows.map(|n| n as u64))
    }

    /// Rewrites small files into large ones, z-ordered by `zorder` when
    /// given (bin-packing otherwise). Returns (files removed, files added).
    pub async fn compact(&mut self, zorder: &[&str]) -> Result<(u64, u64), MaintenanceError> {
        let kind = if zorder.is_empty() {
            OptimizeType::Compact
        } else {
            OptimizeType::ZOrder(zorder.iter().map(|c| c.to_string()).collect())
        };
        let (table, metrics) = self
            .table
            .clone()
            .optimize()
            .with_type(kind)
            .with_commit_properties(commit_properties())
            .await
            .map_err(|e| self.error("optimize", e))?;
        self.table = table;
        Ok((metrics.num_files_removed, metrics.num_files_added))
    }

    /// Deletes the files of the table's directory that no table version
    /// within `retention` references and that are older than it: those
    /// the log removed (even after a checkpoint dropped their remove
    /// actions) and those no commit ever added. Folders whose name starts
    /// with `_` or `.` (`_delta_log`, the name claims) are never touched.
    pub async fn vacuum(&mut self, retention: VacuumRetention) -> Result<u64, MaintenanceError> {
        retention.check()?;
        let period = chrono::Duration::from_std(retention.retain).map_err(|_| {
            MaintenanceError::UnsafeRetention {
                retain: retention.retain,
            }
        })?;
        let (table, metrics) = self
            .table
            .clone()
            .vacuum()
            .with_retention_period(period)
            .with_enforce_retention_duration(!retention.allow_short)
            .with_mode(VacuumMode::Full)
            .with_commit_properties(commit_properties())
            .await
            .map_err(|e| self.error("vacuum", e))?;
        self.table = table;
        Ok(metrics.files_deleted.len() as u64)
    }

    /// Deletes the log's commits and checkpoints older than the table's
    /// `delta.logRetentionDuration` that come before a checkpoint also
    /// older than it, so the table's state can still be read at every
    /// version inside the retention. Returns how many log files it deleted.
    pub async fn clean_up_log(&mut self) -> Result<usize, MaintenanceError> {
        let deleted = deltalake::checkpoints::cleanup_metadata(&self.table, None)
            .await
            .map_err(|e| self.error("log cleanup", e))?;
        if deleted > 0 {
            self.table
                .update_state()
                .await
                .map_err(|e| self.error("log cleanup", e))?;
        }
        Ok(deleted)
    }

    /// The key columns a silver table was created with (its
    /// `mssql_cdc.keys` property), which compaction clusters it by: MERGEs
    /// and readers look rows up by key, so files holding a narrow key range
    /// let both skip the rest. `None` for a table that is not silver.
    pub fn silver_keys(&self) -> Result<Option<Vec<String>>, MaintenanceError> {
        let snapshot = self.table.snapshot().map_err(|e| self.error("open", e))?;
        Ok(snapshot
            .metadata()
            .configuration()
            .get(KEYS_PROPERTY)
            .map(|keys| keys.split(',').map(str::to_string).collect()))
    }

    /// The table version now.
    pub fn version(&self) -> Option<u64> {
        self.table.version()
    }

    /// [`Maintenance::silver_keys`], or why the table is not silver.
    pub fn require_silver_keys(&self) -> Result<Vec<String>, MaintenanceError> {
        self.silver_keys()?
            .ok_or_else(|| MaintenanceError::NotSilver {
                location: self.location.clone(),
            })
    }

    fn error(&self, step: &'static str, source: DeltaTableError) -> MaintenanceError {
        delta_error(step, &self.location, source)
    }
}

fn delta_error(step: &'static str, location: &str, source: DeltaTableError) -> MaintenanceError {
    MaintenanceError::Delta {
        step,
        location: location.to_string(),
        source: Box::new(source),
    }
}
