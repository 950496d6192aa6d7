//! Life in a worker pod's log at the default level: one info line per
//! snapshot chunk and per micro-batch, in the words of `run`'s console,
//! at most one line every [`EVERY`] so a busy stream does not flood the
//! log collector. The first line of a run and a snapshot's end are always
//! logged.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use mssql_cdc::domain::FactRow;
use mssql_cdc::engine::{Observer, SnapshotProgress};

use super::console::{batch_line, snapshot_line};

/// The least time between two progress lines.
pub const EVERY: Duration = Duration::from_secs(10);

/// Logs progress lines, rate-limited.
#[derive(Default)]
pub struct ProgressLog {
    last: Mutex<Option<Instant>>,
}

impl ProgressLog {
    /// Logs `line` when the last line is at least [`EVERY`] old.
    fn log(&self, line: impl FnOnce() -> String) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < EVERY) {
            return;
        }
        *last = Some(Instant::now());
        tracing::info!("{}", line());
    }
}

impl Observer for ProgressLog {
    fn snapshot_progress(&self, progress: &SnapshotProgress) {
        self.log(|| snapshot_line(progress));
    }

    fn snapshot_done(&self, row: &FactRow) {
        tracing::info!(
            "snapshot done: {} rows at LSN {}",
            row.rows.unwrap_or(0),
            row.end_lsn.map(|l| l.to_string()).unwrap_or_default()
        );
    }

    fn batch_done(&self, row: &FactRow) {
        self.log(|| batch_line(row));
    }
}
