//! The tables of one `CdcSource` in one process: each table runs today's
//! pipeline (its own checkpoint, lease, batch ids, `txn`s and facts rows,
//! so exactly once per table as for a stream of its own), side by side.
//!
//! One table's failure stops only that table: an error the run could not
//! retry, or a panic anywhere in its pipeline (`table_panic.rs`), is
//! reported, and the table starts again after a backoff of its own (30 s
//! doubling to 30 min) while the others go on. With `--once`
//! (or an availableNow trigger) a failed table is not retried; its error is returned with the others'
//! summaries.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::error::EngineError;
use super::heartbeat::Heartbeat;
use super::measure::measure_position;
use super::observer::Observer;
use super::options::{RunOptions, RunSummary};
use super::pacer::Pacer;
use super::run::run;
use super::source_health::SourceHealth;
use super::source_writes::{SourceWrites, gather_max};
use super::table_panic;
use crate::domain::BatchId;
use crate::lake::checkpoint::Checkpoint;
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

/// Tables that join a source while it runs, and word of each table that
/// ends: with it, a stream added to a source starts alone, and a stream
/// removed or edited stops alone (its own stop token) and, edited, starts
/// again, while the source's other tables run on.
pub struct Joining {
    /// Tables to start, as they come. Closed, the tables run until they
    /// end (a continuous source's when they are stopped).
    pub added: mpsc::UnboundedReceiver<TableRun>,
    /// Each table's outcome as it ends, instead of at the end.
    pub ended: mpsc::UnboundedSender<TableOutcome>,
}

/// Runs every table until each is caught up (`once`), or all are stopped.
/// With `pacing` (a `CdcSource`'s), the tables share its limits and, once
/// caught up, wait for the source's rounds instead of polling each on its
/// own (`pacer.rs`); the rounds stop once every table has ended. The
/// rounds' verdict on the source as a whole (up, or down and why) goes to
/// `source_observer` and to every table's observer, on each change only.
/// With `joining`, tables may join while the others run, and each
/// outcome is sent as its table ends (the returned list is then empty).
/// The source's connection, trigger and heartbeat are the first table's
/// (every table of a source has the same): without a first table there
/// is nothing to run, and nothing joins.
pub async fn run_tables(
    mut tables: Vec<TableRun>,
    pacing: Option<SourcePacing>,
    source_observer: Arc<dyn Observer>,
    joining: Option<Joining>,
) -> Vec<TableOutcome> {
    let (Some(pacing), Some(first)) = (pacing, tables.first()) else {
        let measure_every = FAILED_TABLE_MEASURE_EVERY;
        let outcomes = join_all(tables.into_iter().map(|t| run_table(t, measure_every))).await;
        return hand_over(outcomes, joining.as_ref());
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
    // The rounds stop when the tables have all ended (stopped, or caught
    // up); never with one table's own stop token, as a table of a source
    // may be stopped alone.
    let stop = CancellationToken::new();
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
    // Who hears the source's health: each running table (until it ends)
    // and the source.
    let told = Told::default();
    told.add(usize::MAX, source_observer);
    for (id, table) in tables.iter().enumerate() {
        told.add(id, Arc::clone(&table.options.observer));
    }
    // A source run once has no rounds: one look says whether the source
    // answers (its verdict goes to every observer, as a round's would);
    // down, no table is run, rather than each failing on its own.
    if once && let Ok(password) = &password {
        let down = pacer.look_once(&source, password).await;
        let health = pacer.health().borrow().clone();
        told.tell(&health);
        if let Some(down) = down {
            tracing::error!(
                reason = down.outage.reason(),
                "the source is down: none of its tables is run: {}",
                down.message()
            );
            let outcomes = tables.into_iter().map(|t| TableOutcome {
                target: t.config.target.name.clone(),
                result: Err(EngineError::SourceDown(down.clone())),
            });
            return hand_over(outcomes, joining.as_ref());
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
    let tables = async {
        let mut running = FuturesUnordered::new();
        for (id, table) in tables.into_iter().enumerate() {
            running.push(run_numbered(id, table, measure_every));
        }
        let mut next_id = running.len();
        let (mut added, ended) = match joining {
            Some(Joining { added, ended }) => (Some(added), Some(ended)),
            None => (None, None),
        };
        let mut outcomes = Vec::new();
        loop {
            tokio::select! {
                Some((id, outcome)) = running.next(), if !running.is_empty() => {
                    // An ended table's observer is let go (its status
                    // publisher ends with its last clone).
                    told.remove(id);
                    match &ended {
                        Some(ended) => {
                            let _ = ended.send(outcome);
                        }
                        None => outcomes.push(outcome),
                    }
                }
                table = next_added(&mut added), if added.is_some() => match table {
                    Some(mut table) => {
                        table.options.pace = Some(pacer.add_table());
                        table.options.writes = Some(writes.clone());
                        let observer = Arc::clone(&table.options.observer);
                        let health = pacer.health().borrow().clone();
                        observer.source_health(&health);
                        told.add(next_id, observer);
                        tracing::info!(target_table = %table.config.target.name, "a table joins the source");
                        running.push(run_numbered(next_id, table, measure_every));
                        next_id += 1;
                    }
                    None => added = None,
                },
            }
            if running.is_empty() && (added.is_none() || once) {
                break;
            }
        }
        outcomes
    };
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

/// Outcomes go to `joining`'s `ended` when there is one (and none are
/// returned), else back to the caller.
fn hand_over(
    outcomes: impl IntoIterator<Item = TableOutcome>,
    joining: Option<&Joining>,
) -> Vec<TableOutcome> {
    let outcomes = outcomes.into_iter();
    match joining {
        Some(joining) => {
            for outcome in outcomes {
                let _ = joining.ended.send(outcome);
            }
            Vec::new()
        }
        None => outcomes.collect(),
    }
}

/// The next table to join, or `None` once the sender is gone.
async fn next_added(added: &mut Option<mpsc::UnboundedReceiver<TableRun>>) -> Option<TableRun> {
    match added {
        Some(added) => added.recv().await,
        None => std::future::pending().await,
    }
}

/// [`run_table`], its outcome numbered.
async fn run_numbered(
    id: usize,
    table: TableRun,
    measure_every: Duration,
) -> (usize, TableOutcome) {
    (id, run_table(table, measure_every).await)
}

/// The observers that hear the source's health, by table (the source's
/// own under `usize::MAX`).
#[derive(Default)]
struct Told(Mutex<BTreeMap<usize, Arc<dyn Observer>>>);

impl Told {
    fn add(&self, id: usize, observer: Arc<dyn Observer>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, observer);
    }

    fn remove(&self, id: usize) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// Tells every observer, outside the lock.
    fn tell(&self, health: &SourceHealth) {
        let observers: Vec<Arc<dyn Observer>> = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for observer in observers {
            observer.source_health(health);
        }
    }
}

/// Tells `told` each change of the source's health, until the rounds end.
async fn tell_source_health(mut health: watch::Receiver<SourceHealth>, told: &Told) {
    while health.changed().await.is_ok() {
        let now = health.borrow_and_update().clone();
        told.tell(&now);
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
        tracing::info!(target_table = %target, "the table starts");
        let started = std::time::Instant::now();
        let result = match table_panic::catch(run(config.clone(), options.clone())).await {
            Ok(result) => result,
            Err(mut panic) => {
                panic.batch = batch_in_flight(&config, &options).await;
                let error = EngineError::Panicked(Box::new(panic));
                options.observer.failed(&error);
                Err(error)
            }
        };
        // A table that ran for a while before failing starts its backoff over.
        if started.elapsed() > TABLE_RETRY_MAX {
            backoff.reset();
        }
        let error = match result {
            Ok(summary) => {
                tracing::info!(target_table = %target, "the table's run ended");
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

/// The batch planned and not committed on the table's checkpoint, if it
/// can be read: what a panic interrupted.
async fn batch_in_flight(config: &StreamConfig, options: &RunOptions) -> Option<BatchId> {
    let checkpoint_options = config
        .checkpoint
        .options(&config.storage_options, options.env.clone());
    let checkpoint = Checkpoint::open(&config.checkpoint, &checkpoint_options).ok()?;
    let state = checkpoint.state().await.ok()?;
    state.pending().map(|plan| plan.batch_id)
}
