//! The SQL Server side of a stream: the tiberius session, the CDC queries,
//! the snapshot reader, the session's own read metrics (`session_stats`),
//! and the mapping of SQL Server types to Arrow.

mod arrow_rows;
pub mod cdc;
mod connection;
mod error;
pub mod heartbeat;
pub mod reader;
pub mod session_stats;
pub mod snapshot;
pub mod types;

pub use cdc::CaptureInfo;
pub use connection::{SqlClient, client_config, connect};
pub use error::SourceError;
