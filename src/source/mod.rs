//! The SQL Server side of a stream: the tiberius session, the CDC queries,
//! the snapshot reader, the session's own read metrics (`session_stats`),
//! the mapping of SQL Server types to Arrow, and the domain types every
//! other module speaks in ([`Lsn`], [`BatchId`], [`CaptureInstance`]).

mod arrow_rows;
pub mod cdc;
mod connection;
mod error;
mod ids;
mod lsn;
pub mod reader;
pub mod session_stats;
pub mod snapshot;
pub mod types;

pub use cdc::CaptureInfo;
pub use connection::{SqlClient, client_config, connect};
pub use error::SourceError;
pub use ids::{BatchId, BatchIdError, CaptureInstance, CaptureInstanceError};
pub use lsn::{Lsn, LsnError};
