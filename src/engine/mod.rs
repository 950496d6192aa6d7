//! The ingestion engine: it runs one stream from its manifest.
//!
//! `stream` holds the loop (plan → offsets → read → bronze → facts →
//! commits, see docs/adr/0002-exactly-once.md), `snapshot` the bootstrap
//! copy, `read_metrics` the reader session's own metrics, `finalize` the
//! target's row in the finalization control table, `retry` the backoff for
//! transient errors and `observer` the progress events the CLI, the demo
//! and the metrics endpoint consume.

mod error;
mod finalize;
mod observer;
mod read_metrics;
mod retry;
mod snapshot;
mod stream;

pub use error::{DataLossError, EngineError};
pub use observer::{Fanout, Observer, Silent, SnapshotProgress};
pub use retry::Backoff;
pub use stream::{RunOptions, RunSummary, run};
