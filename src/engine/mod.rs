//! The ingestion engine: it runs one stream from its manifest.
//!
//! `stream` holds the loop (plan → offsets → read → bronze → facts →
//! commits, see docs/adr/0002-exactly-once.md), `snapshot` the bootstrap
//! copy, `retry` the backoff for transient errors and `observer` the
//! progress events the CLI and the demo print.

mod data_loss;
mod error;
mod heartbeat;
mod observer;
mod retry;
mod snapshot;
mod source_changes;
mod stream;
mod time_zone;
mod warnings;

pub use error::{DataLossError, EngineError};
pub use observer::{Observer, Silent, SnapshotProgress};
pub use retry::Backoff;
pub use stream::{RunOptions, RunSummary, run};
