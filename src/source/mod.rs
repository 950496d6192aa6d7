//! The SQL Server side of a stream: the tiberius session, the CDC queries,
//! the snapshot reader, the session's own read metrics (`session_stats`),
//! the CDC jobs (`jobs`: retention, the capture job's state), capture's
//! health as a monitoring login reads it (`capture_health`), which of many
//! tables changed in a round, in one statement (`changed_tables`), what
//! the round reads once for its quiet tables' idle batches
//! (`round_marks`), where a
//! parallel read splits a batch (`lsn_parts`) or a table (`key_ranges`),
//! the table's unique keys (`unique_keys`) and the mapping of SQL Server
//! types to Arrow. `session` is the adapter a run holds (the connected
//! source the engine reads through its `ChangeSource` seam), `parts` what a
//! part of a parallel read asks and the pooled session that runs it,
//! `retention` where the retention headroom's retention comes from and
//! `time_zone` the UTC offset commit times are converted with.

mod arrow_rows;
pub mod capture_health;
pub mod cdc;
pub mod changed_tables;
mod connection;
mod error;
pub mod heartbeat;
pub mod jobs;
pub mod key_ranges;
pub mod lsn_parts;
pub mod parts;
pub mod reader;
mod retention;
pub mod round_marks;
pub mod session;
pub mod session_stats;
pub mod snapshot;
pub mod time_zone;
pub mod types;
pub mod unique_keys;

pub use cdc::CaptureInfo;
pub use connection::{SqlClient, client_config, connect};
pub use error::{COLUMN_PERMISSION_DENIED, OBJECT_PERMISSION_DENIED, SourceError, SourceOutage};
pub use session::SourceSession;
