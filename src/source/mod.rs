//! The SQL Server side of a stream.
//!
//! This folder will hold the tiberius connection, the CDC queries, the
//! snapshot reader, the mapping of SQL Server types to Arrow and the per-batch
//! read metrics. For now it holds the domain types every other module speaks
//! in: [`Lsn`], [`BatchId`] and [`CaptureInstance`].

mod ids;
mod lsn;

pub use ids::{BatchId, BatchIdError, CaptureInstance, CaptureInstanceError};
pub use lsn::{Lsn, LsnError};
