//! The words every layer speaks, and nothing else: positions in SQL
//! Server's log ([`Lsn`]), batches ([`BatchId`]), capture instances and
//! tables, the change rows and facts rows the lake stores, the
//! finalization verdict, and how far a snapshot copy is. This module imports nothing else of the crate, so
//! any module may depend on it (see docs/architecture.md).

pub mod change;
pub mod columns;
mod copy_share;
pub mod facts;
mod granularity;
mod ids;
mod lsn;
mod table_name;
mod verdict;

pub use change::Operation;
pub use copy_share::CopyShare;
pub use facts::{FactEvent, FactRow};
pub use granularity::{Granularity, GranularityError};
pub use ids::{BatchId, BatchIdError, CaptureInstance, CaptureInstanceError};
pub use lsn::{Lsn, LsnError};
pub use table_name::TableName;
pub use verdict::{VerdictUpdate, finalized_until};
