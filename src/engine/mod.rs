//! The ingestion engine: it runs one stream from its manifest.
//!
//! Pure decisions sit apart from the I/O that feeds them: `plan` (where a
//! run starts, what the next batch reads, what a replay still has to do),
//! `data_loss` (the `onDataLoss` policies), `facts_row` (each facts
//! column's rule) and `warnings`. The engine reads its source through one
//! seam, `change_source` (`ChangeSource`: marks and LSN times, the changes
//! of a range, snapshot chunks, session measures); SQL Server's adapter is
//! `source::SourceSession`, tied to the seam by `sql_server`, and the unit
//! tests of step, batch and snapshot use an in-memory one. `marks` composes
//! what planning needs from the seam's questions. `sink` is the lake side
//! (checkpoint, bronze, facts, finalization). `run` drives the loop with
//! the crate's backoff (`crate::retry`), retrying what `error` classifies
//! as transient (and is the one place that opens SQL Server); `step`
//! is one step of it; `batch` runs a planned batch, `snapshot` the
//! bootstrap and re-snapshots, both reading through `readers` (one session,
//! or several at once), `source_changes` moves to a newer capture instance;
//! `identity` makes sure the checkpoint and the target belong together;
//! `silver_keys` that silver's key identifies one row of the source;
//! `silver_fill` that a silver table added to a running stream is filled
//! from bronze first;
//! `heartbeat` is the optional write that keeps a quiet database's max LSN
//! moving; `observer` is how the CLI, the demo, the worker and the metrics
//! see progress. The exactly-once protocol is docs/adr/0002-exactly-once.md.

mod batch;
mod change_source;
mod changes_read;
mod column_types;
mod context;
mod data_loss;
mod error;
mod facts_row;
#[cfg(test)]
mod fake_source;
mod heartbeat;
mod identity;
mod marks;
mod measure;
mod observer;
mod options;
mod pacer;
mod plan;
mod readers;
mod run;
mod silver_fill;
mod silver_keys;
mod sink;
mod snapshot;
mod snapshot_copy;
mod snapshot_ranges;
mod source_changes;
mod source_health;
mod source_writes;
mod sql_server;
mod step;
#[cfg(test)]
mod step_tests;
mod store_outage;
mod table_panic;
mod tables;
mod warnings;

/// The backoff between a failed step and the next attempt (the crate's one
/// policy, [`crate::retry`]).
pub use crate::retry::Backoff;
pub use change_source::{ChangeSource, PartSession};
pub use error::{DataLossError, EngineError, SchemaChangeRefused};
pub use observer::{
    Fanout, Observer, PositionMeasures, Silent, SilverFill, SnapshotProgress, SourceCheck,
};
pub use options::{RunOptions, RunSummary};
pub use pacer::{Pacer, RoundOutcome, SOURCE_RETRY_MAX, TablePace};
pub use run::run;
pub use silver_keys::SilverKeyNotUnique;
pub use source_health::{SourceDown, SourceHealth};
pub use source_writes::SourceWrites;
pub use store_outage::{StoreDown, StoreOutage};
pub use table_panic::TablePanic;
pub use tables::{Joining, TABLE_RETRY_FIRST, TABLE_RETRY_MAX, TableOutcome, TableRun, run_tables};
