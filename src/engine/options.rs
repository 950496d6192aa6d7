//! How a run is asked to behave, and what it reports when it ends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::observer::Observer;
use super::pacer::TablePace;
use super::source_writes::SourceWrites;
use crate::domain::FactRow;
use crate::lake::lease::DEFAULT_LEASE_TTL;
use crate::retry::Backoff;

/// How to run a stream.
#[derive(Clone)]
pub struct RunOptions {
    /// Read up to the max LSN seen at start, then return (`--once`), whatever
    /// the manifest's trigger says.
    pub once: bool,
    /// Cancelled to stop after the current batch.
    pub stop: CancellationToken,
    /// Receives progress.
    pub observer: Arc<dyn Observer>,
    /// Warnings about the manifest (unknown fields), recorded in the `detail`
    /// of the first facts row this run writes.
    pub warnings: Vec<String>,
    /// Validity of a remote checkpoint lease.
    pub lease_ttl: Duration,
    /// Retry policy for transient errors.
    pub backoff: Backoff,
    /// Environment the password and storage options are read from.
    pub env: BTreeMap<String, String>,
    /// Take over a target that holds another checkpoint's commits
    /// (`--adopt-target`; `spec.adoptTarget` does the same).
    pub adopt_target: bool,
    /// A table of a source: its place in the source's rounds (it waits for
    /// them when caught up, instead of polling), and the shared limits.
    pub pace: Option<TablePace>,
    /// A source's table writes the facts and finalization tables it shares
    /// with the source's other tables through the source's one writer of
    /// each, in commits made together (`source_writes.rs`).
    pub writes: Option<SourceWrites>,
}

impl RunOptions {
    /// Defaults: continuous, silent, the process environment.
    pub fn new(observer: Arc<dyn Observer>) -> Self {
        RunOptions {
            once: false,
            stop: CancellationToken::new(),
            observer,
            warnings: Vec::new(),
            lease_ttl: DEFAULT_LEASE_TTL,
            backoff: Backoff::default(),
            env: std::env::vars().collect(),
            adopt_target: false,
            pace: None,
            writes: None,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSummary {
    /// Micro-batches completed (replays included).
    pub batches: u64,
    /// Change rows written to bronze by those batches.
    pub rows: u64,
    /// Rows copied by a snapshot in this run.
    pub snapshot_rows: u64,
    /// The last facts row written.
    pub last: Option<FactRow>,
}
