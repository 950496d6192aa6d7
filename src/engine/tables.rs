//! The tables of one `CdcSource` in one process: each table runs today's
//! pipeline (its own checkpoint, lease, batch ids, `txn`s and facts rows,
//! so exactly once per table as for a stream of its own), side by side.
//!
//! One table's failure stops only that table: an error the run could not
//! retry is reported, and the table starts again after a backoff of its
//! own (30 s doubling to 30 min) while the others go on. With `--once`
//! (or an availableNow trigger) a failed table is not retried; its error is returned with the others'
//! summaries.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;

use super::error::EngineError;
use super::heartbeat::Heartbeat;
use super::measure::measure_position;
use super::observer::Observer;
use super::options::{RunOptions, RunSummary};
use super::pacer::Pacer;
use super::run::run;
use super::source_writes::{SourceWrites, gather_max};
use crate::retry::Backoff;
use crate::spec::{SourcePacing, StreamConfig, Trigger, resolve_password};

/// The first wait before a failed table starts again.
pub const TABLE_RETRY_FIRST: Duration = Duration::from_secs(30);
/// The longest wait before a failed table starts again.
pub const TABLE_RETRY_MAX: Duration = Duration::from_secs(30 * 60);

/// How often the position of a table waiting out its backoff is measured
/// without a source's pacing (headroom is judged in hours; a handful of
/// queries each time). A source's tables are measured every
/// `idleCommitInterval`, as often as a quiet table's position moves.
pub const FAILED_TABLE_MEASURE_EVERY: Duration = Duration::from_secs(5 * 60);

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
/// With `pacing` (a `CdcSource`'s), the tables share its limits and, once
/// caught up, wait for the source's rounds instead of polling each on its
/// own (`pacer.rs`); the rounds stop with the tables' stop token. The
/// rounds' verdict on the source as a whole (up, or down and why) goes to
/// `source_observer` and to every table's observer, on each change only.
pub async fn run_tables(
    mut tables: Vec<TableRun>,
    pacing: Option<SourcePacing>,
    source_observer: Arc<dyn Observer>,
) -> Vec<TableOutcome> {
    let (Some(pacing), Some(first)) = (pacing, tables.first()) else {
        let measure_every = FAILED_TABLE_MEASURE_EVERY;
        return join_all(tables.into_iter().map(|t| run_table(t, measure_every))).await;
    };
    let pacer = Pacer::new(tables.len(), &pacing);
    let source = first.config.source.clone();
    let heartbeat = first.config.heartbeat.clone();
    let source_name = first.config.source_name.clone();
    let once = first.options.once || first.config.trigger == Trigger::AvailableNow;
    let interval = match first.config.trigger {
        Trigger::ProcessingTime(interval) => interval,
        Trigger::AvailableNow => Duration::ZERO,
    };
    // The rounds stop when the tables are stopped, or have all ended.
    let stop = first.options.stop.child_token();
    let password = resolve_password(&source.password, |name: &str| {
        first.options.env.get(name).cloned()
    });
    // The tables' facts and finalization writes go through one writer
    // per shared table, committed together (`source_writes.rs`).
    let writes = SourceWrites::new(gather_max(interval));
    for (slot, table) in tables.iter_mut().enumerate() {
        table.options.pace = Some(pacer.table(slot));
        table.options.writes = Some(writes.clone());
    }
    let mut told: Vec<Arc<dyn Observer>> = tables
        .iter()
        .map(|t| Arc::clone(&t.options.observer))
        .collect();
    told.push(source_observer);
    // A source run once has no rounds: one look says whether the source
    // answers (its verdict goes to every observer, as a round's would);
    // down, no table is run, rather than each failing on its own.
    if once && let Ok(password) = &password {
        let down = pacer.look_once(&source, password).await;
        let health = pacer.health().borrow().clone();
        for observer in &told {
            observer.source_health(&health);
        }
        if let Some(down) = down {
            tracing::error!(
                reason = down.outage.reason(),
                "the source is down: none of its tables is run: {}",
                down.message()
            );
            return tables
                .into_iter()
                .map(|t| TableOutcome {
                    target: t.config.target.name.clone(),
                    result: Err(EngineError::SourceDown(down.clone())),
                })
                .collect();
        }
    }
    let health = pacer.health();
    let rounds = async {
        // Without a password every table fails on its own, saying why.
        let Ok(password) = password else {
            return;
        };
        // One heartbeat for the whole source, in the source's name.
        let _heartbeat = heartbeat.map(|heartbeat| {
            Heartbeat::start(
                source.clone(),
                password.clone(),
                heartbeat,
                source_name.clone().unwrap_or_default(),
            )
        });
        if once {
            stop.cancelled().await;
        } else {
            tokio::select! {
                () = pacer.run_rounds(&source, &password, interval, &stop) => {}
                () = tell_source_health(health, &told) => {}
            }
        }
    };
    let measure_every = pacing.idle_commit_interval;
    let tables = join_all(tables.into_iter().map(|t| run_table(t, measure_every)));
    let (outcomes, ()) = tokio::join!(
        async {
            let outcomes = tables.await;
            // Every table has ended: the rounds and heartbeat end with them.
            stop.cancel();
            outcomes
        },
        rounds
    );
    outcomes
}

/// Tells `observers` each change of the source's health, until the rounds
/// end.
async fn tell_source_health(
    mut health: tokio::sync::watch::Receiver<super::source_health::SourceHealth>,
    observers: &[Arc<dyn Observer>],
) {
    while health.changed().await.is_ok() {
        let now = health.borrow_and_update().clone();
        for observer in observers {
            observer.source_health(&now);
        }
    }
    std::future::pending::<()>().await;
}

/// One table, retried after a failure; its position measured every
/// `measure_every` while it waits.
async fn run_table(table: TableRun, measure_every: Duration) -> TableOutcome {
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
        // A run that stops once caught up is not retried: its error is
        // its outcome (availableNow on a schedule runs again later).
        let once = options.once || config.trigger == Trigger::AvailableNow;
        if once || options.stop.is_cancelled() {
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
        // Waiting, the table's position is still measured, so its headroom
        // keeps moving in its status while it cannot run.
        let until = tokio::time::Instant::now() + delay;
        loop {
            // A source that is down is not measured table by table.
            let source_down = options.pace.as_ref().is_some_and(|p| p.source_down());
            if !source_down && let Err(error) = measure_position(&config, &options).await {
                tracing::warn!(target_table = %target, %error, "cannot measure the stopped table's position");
            }
            let next = until.min(tokio::time::Instant::now() + measure_every);
            tokio::select! {
                () = options.stop.cancelled() => {
                    return TableOutcome { target, result: Err(error) };
                }
                () = tokio::time::sleep_until(next) => {}
            }
            if next >= until {
                break;
            }
        }
    }
}
