//! The ingestion engine: it runs one stream from its manifest.
//!
//! `stream` holds the loop (plan → offsets → read → bronze → facts →
//! commits, see docs/adr/0002-exactly-once.md) and `snapshot` the bootstrap
//! and re-snapshots. What the source does to a stream has a module each:
//! `source_changes` (DDL and capture-instance switches), `data_loss` (the
//! `onDataLoss` policies), `time_zone` (the server's UTC offset) and
//! `heartbeat`. `warnings` records the run's warnings once in the facts,
//! `read_metrics` measures the reader session, `finalize` keeps the
//! target's row in the finalization control table, `retry` is the backoff
//! for transient errors and `observer` the progress events the CLI, the
//! demo and the metrics endpoint consume.

mod data_loss;
mod error;
mod finalize;
mod heartbeat;
mod observer;
mod read_metrics;
mod retry;
mod snapshot;
mod source_changes;
mod stream;
mod time_zone;
mod warnings;

pub use error::{DataLossError, EngineError};
pub use observer::{Fanout, Observer, Silent, SnapshotProgress};
pub use retry::Backoff;
pub use stream::{RunOptions, RunSummary, run};
