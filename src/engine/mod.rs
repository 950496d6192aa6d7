//! The ingestion engine: it runs one stream from its manifest.
//!
//! Pure decisions sit apart from the I/O that feeds them: `plan` (where a
//! run starts, what the next batch reads, what a replay still has to do),
//! `data_loss` (the `onDataLoss` policies), `facts_row` (each facts
//! column's rule), `warnings` and `time_zone`. The state a run needs once
//! it is ready is `session` (the connected source: its capture instance
//! and columns) and `sink` (checkpoint, bronze, facts, finalization).
//! `retention` reads the cleanup job's retention the headroom is
//! measured with; `run` drives the loop with the crate's backoff
//! (`crate::retry`), retrying what `error` classifies as transient; `step`
//! is one step of it; `batch` runs a planned batch, `snapshot` the bootstrap and re-snapshots,
//! both reading through `readers` (one session, or several at once),
//! `source_changes` moves to a newer capture instance; `identity` makes sure
//! the checkpoint and the target belong together; `silver_keys` that
//! silver's key identifies one row of the source, `silver_fill` that a
//! silver table added to a running stream is filled from bronze first; `heartbeat` is the
//! optional write that keeps a quiet database's max LSN moving; `observer`
//! is how the CLI, the demo, the worker and the metrics see progress.
//! The exactly-once protocol is docs/adr/0002-exactly-once.md.

mod batch;
mod changes_read;
mod context;
mod data_loss;
mod error;
mod facts_row;
mod heartbeat;
mod identity;
mod observer;
mod options;
mod plan;
mod readers;
mod retention;
mod run;
mod session;
mod silver_fill;
mod silver_keys;
mod sink;
mod snapshot;
mod snapshot_copy;
mod snapshot_ranges;
mod source_changes;
mod step;
mod time_zone;
mod warnings;

/// The backoff between a failed step and the next attempt (the crate's one
/// policy, [`crate::retry`]).
pub use crate::retry::Backoff;
pub use error::{DataLossError, EngineError};
pub use observer::{
    Fanout, Observer, PositionMeasures, Silent, SilverFill, SnapshotProgress, SourceCheck,
};
pub use options::{RunOptions, RunSummary};
pub use run::run;
pub use silver_keys::SilverKeyNotUnique;
