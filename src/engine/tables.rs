//! The tables of one `CdcSource` in one process: each table runs today's
//! pipeline (its own checkpoint, lease, batch ids, `txn`s and facts rows,
//! so exactly once per table as for a stream of its own), side by side.
//!
//! One table's failure stops only that table: an error the run could not
//! retry is reported, and the table starts again after a backoff of its
//! own (30 s doubling to 30 min) while the others go on. With `--once`
//! a failed table is not retried; its error is returned with the others'
//! summaries.

use std::time::Duration;

use futures::future::join_all;

use super::error::EngineError;
use super::options::{RunOptions, RunSummary};
use super::run::run;
use crate::retry::Backoff;
use crate::spec::StreamConfig;

/// The first wait before a failed table starts again.
pub const TABLE_RETRY_FIRST: Duration = Duration::from_secs(30);
/// The longest wait before a failed table starts again.
pub const TABLE_RETRY_MAX: Duration = Duration::from_secs(30 * 60);

/// One table of a source and how it runs (its own observer; the stop
/// token shared by all).
pub struct TableRun {
    /// The resolved stream (`spec::source_stream_config`).
    pub config: StreamConfig,
    /// Its run's options.
    pub options: RunOptions,
}

/// How one table's run ended.
#[derive(Debug)]
pub struct TableOutcome {
    /// The table's target name.
    pub target: String,
    /// Its summary, or the error that stopped it last.
    pub result: Result<RunSummary, EngineError>,
}

/// Runs every table until each is caught up (`once`), or all are stopped.
pub async fn run_tables(tables: Vec<TableRun>) -> Vec<TableOutcome> {
    join_all(tables.into_iter().map(run_table)).await
}

async fn run_table(table: TableRun) -> TableOutcome {
    let TableRun { config, options } = table;
    let target = config.target.name.clone();
    let mut backoff = Backoff::new(TABLE_RETRY_FIRST, TABLE_RETRY_MAX);
    loop {
        let started = std::time::Instant::now();
        let result = run(config.clone(), options.clone()).await;
        // A table that ran for a while before failing starts its backoff over.
        if started.elapsed() > TABLE_RETRY_MAX {
            backoff.reset();
        }
        let error = match result {
            Ok(summary) => {
                return TableOutcome {
                    target,
                    result: Ok(summary),
                };
            }
            Err(error) => error,
        };
        if options.once || options.stop.is_cancelled() {
            return TableOutcome {
                target,
                result: Err(error),
            };
        }
        let (attempt, delay) = backoff.next_delay();
        tracing::error!(
            target_table = %target,
            %error,
            attempt,
            delay_s = delay.as_secs_f64(),
            "this table stopped; the source's other tables go on, and it starts again after the delay"
        );
        tokio::select! {
            () = options.stop.cancelled() => {
                return TableOutcome { target, result: Err(error) };
            }
            () = tokio::time::sleep(delay) => {}
        }
    }
}
