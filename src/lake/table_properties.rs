//! The Delta properties every table the engine creates carries, and the
//! ones it refuses to run on (docs/adr/0016-commit-cost-flat-with-age.md).
//!
//! A table commits every few seconds for months, so every default that
//! makes a commit cost more as the log grows is ours to set, not delta-rs's:
//!
//! - **Expired-log cleanup is maintenance's job.** delta-rs runs it after
//!   every commit by default, and it lists the whole `_delta_log` each
//!   time: a commit of a month-old table paid for hundreds of LIST pages.
//!   Every commit of ours also says so itself ([`commit_properties`]), so a
//!   table created before this property existed costs the same.
//! - **A checkpoint every [`CHECKPOINT_INTERVAL`] commits**, so loading a
//!   table replays at most that many JSON commits after the newest
//!   checkpoint, whatever its age.
//! - **Logs and removed files are kept [`RETENTION_DAYS`] days**, as long
//!   as vacuum keeps removed files: a version older than that has lost its
//!   files and cannot be read anyway.
//!
//! `delta.setTransactionRetentionDuration` is refused on every table
//! ([`refuse_unsafe`]): it makes readers drop `txn` actions older than its
//! value, and a replayed batch then no longer finds the commit it made, so
//! it would be written twice.

use deltalake::DeltaTable;
use deltalake::kernel::transaction::CommitProperties;

/// Commits between two Delta checkpoints.
pub const CHECKPOINT_INTERVAL: u64 = 100;

/// Days the log keeps a commit and vacuum keeps a removed file.
pub const RETENTION_DAYS: u64 = 7;

/// The property that drops old `txn` actions, which exactly-once needs.
pub const TXN_RETENTION_PROPERTY: &str = "delta.setTransactionRetentionDuration";

/// The Delta properties a new table of ours is created with.
pub fn owned() -> [(&'static str, String); 4] {
    [
        ("delta.enableExpiredLogCleanup", "false".to_string()),
        ("delta.checkpointInterval", CHECKPOINT_INTERVAL.to_string()),
        (
            "delta.logRetentionDuration",
            format!("interval {RETENTION_DAYS} days"),
        ),
        (
            "delta.deletedFileRetentionDuration",
            format!("interval {RETENTION_DAYS} days"),
        ),
    ]
}

/// What every commit of ours starts from: delta-rs's defaults without the
/// expired-log cleanup after the commit, whatever the table's properties.
pub fn commit_properties() -> CommitProperties {
    CommitProperties::default().with_cleanup_expired_logs(Some(false))
}

/// A table property set so that going on could write a batch twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "table {location} has {property} = {value:?}: Delta readers then forget the txn markers a \
     replayed batch looks for, and the batch could be written twice. Nothing was written. Unset \
     it (in Spark: ALTER TABLE delta.`{location}` UNSET TBLPROPERTIES ('{property}')) and start \
     the stream again"
)]
pub struct UnsafeTableProperty {
    /// The table.
    pub location: String,
    /// The property's key.
    pub property: &'static str,
    /// Its value.
    pub value: String,
}

/// Refuses a table whose properties would break exactly-once.
pub fn refuse_unsafe(table: &DeltaTable, location: &str) -> Result<(), UnsafeTableProperty> {
    let Ok(snapshot) = table.snapshot() else {
        return Ok(());
    };
    match snapshot
        .metadata()
        .configuration()
        .get(TXN_RETENTION_PROPERTY)
    {
        Some(value) => Err(UnsafeTableProperty {
            location: location.to_string(),
            property: TXN_RETENTION_PROPERTY,
            value: value.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "table_properties_tests.rs"]
mod tests;
