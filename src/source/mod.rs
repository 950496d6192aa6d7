//! The SQL Server side of a stream: the tiberius session, the CDC queries,
//! the snapshot reader, the session's own read metrics (`session_stats`),
//! the CDC jobs (`jobs`: retention, the capture job's state), capture's
//! health as a monitoring login reads it (`capture_health`), where a
//! parallel read splits a batch (`lsn_parts`) or a table (`key_ranges`),
//! the table's unique keys (`unique_keys`) and the mapping of SQL Server
//! types to Arrow.

mod arrow_rows;
pub mod capture_health;
pub mod cdc;
mod connection;
mod error;
pub mod heartbeat;
pub mod jobs;
pub mod key_ranges;
pub mod lsn_parts;
pub mod reader;
pub mod session_stats;
pub mod snapshot;
pub mod types;
pub mod unique_keys;

pub use cdc::CaptureInfo;
pub use connection::{SqlClient, client_config, connect};
pub use error::SourceError;
