//! The rounds of a source's worker: how its tables share one process
//! without each polling SQL Server on its own.
//!
//! A table runs today's pipeline (`run.rs`) until it is caught up. Then,
//! instead of polling every trigger (a handful of queries and, in a busy
//! database, an empty batch of its own each time), it registers the window
//! it would read next and waits. Every trigger the round reads the
//! database's max LSN once and asks every waiting table's change table at
//! once whether its window holds a row (`source::changed_tables`: one
//! statement per 200 tables). Only the tables with a change are woken; a
//! quiet table is woken once every `idleCommitInterval`, so it still
//! commits a batch that moves its position, headroom and verdict. A table
//! whose change table SQL Server refused is woken too: its own run meets
//! the error and reports it in its own status.
//!
//! The rounds' session is also the one judge of the source as a whole
//! (`source_health.rs`). Every round reads the max LSN, so it knows; when
//! it cannot (the server unreachable, the login refused: an error whose
//! `outage()` says it is the source's), no table is woken, the rounds
//! back off as one (the trigger interval doubling to
//! [`SOURCE_RETRY_MAX`]), and a table that meets such an error itself
//! asks the rounds to look at once, then waits for the source instead of
//! retrying on its own: 1,000 tables cost one connection attempt per
//! backoff, not 1,000. A session of the rounds that fails is tried once
//! more on a new connection before the source is judged down, so one cut
//! connection does not flip every table's status.
//!
//! Two semaphores bound what runs at once: `concurrency.reads` tables
//! connect or read changes, `concurrency.snapshots` copy a snapshot (a
//! table waiting for a snapshot slot gives its read slot back, so a
//! bootstrap queue never stalls the others' changes).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use secrecy::SecretString;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::source_health::{SourceDown, SourceHealth};
use crate::domain::{CaptureInstance, Lsn};
use crate::retry::{Backoff, Jitter, Policy};
use crate::source::changed_tables::{ChangeWindow, ChangedTables, changed_tables};
use crate::source::round_marks::{QuietWindow, RoundMarks, round_marks};
use crate::source::time_zone::CommitClock;
use crate::source::{SourceError, SqlClient, cdc, connect};
use crate::spec::{SourceConfig, SourcePacing};

/// The longest wait between two looks at a source that is down: long
/// enough not to lock a login out with attempts, short enough to notice
/// its return within minutes.
pub const SOURCE_RETRY_MAX: Duration = Duration::from_secs(5 * 60);
/// The shortest wait between two looks at a source that is down.
const SOURCE_RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest a caught-up table holds its SQL Server session while it
/// waits: a quiet table closes it, and opens one again when woken.
const PARK_AFTER_MAX: Duration = Duration::from_secs(60);

/// How long a waiting table keeps its session: a fifth of the idle commit
/// interval, between 1 s and a minute. A table woken more often than
/// that (a busy one) never closes it; a quiet one holds none for most of
/// its wait and opens at most one per idle commit.
fn park_after(idle_commit_interval: Duration) -> Duration {
    (idle_commit_interval / 5).clamp(Duration::from_secs(1), PARK_AFTER_MAX)
}

/// The tables of one source and what they may run at once.
pub struct Pacer {
    shared: Arc<Shared>,
}

struct Shared {
    slots: Mutex<Vec<Slot>>,
    reads: Arc<Semaphore>,
    snapshots: Arc<Semaphore>,
    idle_commit_interval: Duration,
    /// The source as the rounds last found it.
    health: watch::Sender<SourceHealth>,
    /// Rounds run so far: a table that asked for a look waits for the next.
    rounds: watch::Sender<u64>,
    /// A table asks the rounds to look at the source now.
    look_now: Notify,
    /// Whether rounds run at all (not for an availableNow source): without
    /// them a table handles every error on its own.
    rounds_run: AtomicBool,
}

/// One table's place in the rounds.
struct Slot {
    /// Set while the table is caught up and waiting for the round.
    waiting: Option<Waiting>,
    wake: Arc<Notify>,
    /// What the round that woke the table found of its window, when the
    /// table's idle batch can be planned from it alone.
    answer: Option<QuietWindow>,
    /// How long the table's next wait lasts at most before its idle
    /// commit is due: the first one a share of the interval by the
    /// table's place, so that tables started together do not all commit
    /// in the same round ever after; the interval after that.
    idle_due_after: Duration,
}

/// A waiting table's slot and the window it waits at.
type SlotWindow = (usize, ChangeWindow);

struct Waiting {
    window: ChangeWindow,
    since: Instant,
    idle_due_after: Duration,
}

/// The first idle commit of table `index` of `tables`: spread over one
/// interval, the last table's at the whole interval.
fn first_idle_due(index: usize, tables: usize, interval: Duration) -> Duration {
    let share = (index as f64 + 1.0) / tables.max(1) as f64;
    interval.mul_f64(share.min(1.0))
}

/// What a table's run holds of the pacer: its slot and the shared limits.
#[derive(Clone)]
pub struct TablePace {
    shared: Arc<Shared>,
    slot: usize,
}

/// Why the round woke the tables it woke (for its log and its tests).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RoundOutcome {
    /// Tables asked whether they changed.
    pub asked: usize,
    /// Tables woken for a change in their window.
    pub changed: usize,
    /// Tables woken because their idle commit was due.
    pub idle_due: usize,
    /// Of those, the tables whose idle batch the round's answers plan
    /// (`source::round_marks`): they ask SQL Server nothing of their own.
    pub quiet: usize,
    /// Tables woken because their change table could not be asked.
    pub failed: usize,
    /// The source is down: nothing was asked, no table woken.
    pub source_down: bool,
}

impl Pacer {
    /// A pacer for `tables` tables with `pacing`'s limits.
    pub fn new(tables: usize, pacing: &SourcePacing) -> Self {
        let slots = (0..tables)
            .map(|index| Slot {
                waiting: None,
                wake: Arc::new(Notify::new()),
                answer: None,
                idle_due_after: first_idle_due(index, tables, pacing.idle_commit_interval),
            })
            .collect();
        Pacer {
            shared: Arc::new(Shared {
                slots: Mutex::new(slots),
                reads: Arc::new(Semaphore::new(pacing.reads.get())),
                snapshots: Arc::new(Semaphore::new(pacing.snapshots.get())),
                idle_commit_interval: pacing.idle_commit_interval,
                health: watch::Sender::new(SourceHealth::Unknown),
                rounds: watch::Sender::new(0),
                look_now: Notify::new(),
                rounds_run: AtomicBool::new(false),
            }),
        }
    }

    /// A slot for a table that joins the source while it runs (a stream
    /// added to it): its first idle commit is due after a whole interval.
    /// The slot of a table that ended stays, empty; a slot is a few words.
    pub fn add_table(&self) -> TablePace {
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slots.push(Slot {
            waiting: None,
            wake: Arc::new(Notify::new()),
            answer: None,
            idle_due_after: self.shared.idle_commit_interval,
        });
        TablePace {
            shared: Arc::clone(&self.shared),
            slot: slots.len() - 1,
        }
    }

    /// The handle of table `slot` (0-based, in the order given to `new`).
    pub fn table(&self, slot: usize) -> TablePace {
        TablePace {
            shared: Arc::clone(&self.shared),
            slot,
        }
    }

    /// The source's health as the rounds find it, watched.
    pub fn health(&self) -> watch::Receiver<SourceHealth> {
        self.shared.health.subscribe()
    }

    /// Runs a round every `interval` (or at once when a table asks) until
    /// `stop`: one session of its own (`source`'s server and login),
    /// reconnected after an error. While the source is down the rounds
    /// back off, from `interval` doubling to [`SOURCE_RETRY_MAX`].
    pub async fn run_rounds(
        &self,
        source: &SourceConfig,
        password: &SecretString,
        interval: Duration,
        stop: &CancellationToken,
    ) {
        self.shared.rounds_run.store(true, Ordering::SeqCst);
        let first = interval.max(SOURCE_RETRY_MIN);
        // Equal jitter: one process's rhythm, never much sooner than due.
        let mut backoff = Backoff::with_policy(Policy::new(
            first,
            SOURCE_RETRY_MAX.max(first),
            Jitter::Equal,
        ));
        let mut client: Option<SqlClient> = None;
        let mut clock: Option<CommitClock> = None;
        let mut wait = interval;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(wait) => {}
                () = self.shared.look_now.notified() => {}
            }
            let outcome = self
                .round((&mut client, &mut clock), source, password)
                .await;
            wait = if outcome.source_down {
                let (attempt, delay) = backoff.next_delay();
                tracing::warn!(
                    attempt,
                    delay_s = delay.as_secs_f64(),
                    "the source is down: its tables wait; looking again after the delay"
                );
                delay
            } else {
                backoff.reset();
                interval
            };
            if outcome.changed + outcome.idle_due + outcome.failed > 0 {
                tracing::debug!(?outcome, "round");
            }
        }
        // Tables waiting for a look get their answer: no more rounds.
        self.shared.rounds_run.store(false, Ordering::SeqCst);
        self.shared.rounds.send_modify(|n| *n += 1);
    }

    /// One look at the source for a run without rounds (an availableNow
    /// source's, whose tables each run once): its verdict goes to the
    /// health watch as a round's does; the outage, when the source is down.
    pub async fn look_once(
        &self,
        source: &SourceConfig,
        password: &SecretString,
    ) -> Option<SourceDown> {
        let answer = ask_once_more(&mut None, source, password, &[]).await;
        let found = outage_of(&answer);
        let now = chrono::Utc::now();
        self.shared
            .health
            .send_modify(|health| *health = health.after(found, now));
        self.shared.health.borrow().down().cloned()
    }

    /// One round: the source's max LSN, which waiting tables to wake, and
    /// waking them; or, the source down, nothing but saying so.
    async fn round(
        &self,
        (client, clock): (&mut Option<SqlClient>, &mut Option<CommitClock>),
        source: &SourceConfig,
        password: &SecretString,
    ) -> RoundOutcome {
        let (due, asked) = self.waiting();
        let mut outcome = RoundOutcome {
            asked: asked.len() + due.len(),
            ..RoundOutcome::default()
        };
        // A table whose idle commit is due is asked too: a window without
        // a change is then committed from the round's answers.
        let windows: Vec<ChangeWindow> = due.iter().chain(&asked).map(|(_, w)| w.clone()).collect();
        let answer = ask_once_more(client, source, password, &windows).await;
        let now = chrono::Utc::now();
        let found = outage_of(&answer);
        let down = found.is_err();
        self.shared.health.send_if_modified(|health| {
            let next = health.after(found, now);
            let news = !next.same_state(health);
            if news {
                match next.down() {
                    Some(down) => tracing::error!(
                        reason = down.outage.reason(),
                        "the source is down, every table of it waits: {}",
                        down.message()
                    ),
                    None => tracing::info!("the source answers: its tables go on"),
                }
            }
            *health = next;
            news
        });
        let mut wake: BTreeMap<usize, Option<QuietWindow>> = BTreeMap::new();
        match answer {
            _ if down => outcome.source_down = true,
            Ok(answer) => {
                let changed: BTreeSet<&CaptureInstance> = answer.changed.changed.iter().collect();
                let failed: BTreeSet<&CaptureInstance> = answer
                    .changed
                    .failed
                    .iter()
                    .map(|(instance, _)| instance)
                    .collect();
                let looked_at = |window: &ChangeWindow| {
                    changed.contains(&window.instance) || failed.contains(&window.instance)
                };
                let quiet: Vec<&ChangeWindow> = due
                    .iter()
                    .map(|(_, w)| w)
                    .filter(|w| !looked_at(w))
                    .collect();
                let marks = if quiet.is_empty() {
                    None
                } else {
                    read_round_marks((client, clock), &quiet, answer.max_lsn, now, source).await
                };
                outcome.idle_due = due.len();
                for (slot, window) in &due {
                    let planned = marks
                        .as_ref()
                        .filter(|_| !looked_at(window))
                        .and_then(|marks| marks.quiet(window));
                    outcome.quiet += usize::from(planned.is_some());
                    wake.insert(*slot, planned);
                }
                for (slot, window) in &asked {
                    if changed.contains(&window.instance) {
                        outcome.changed += 1;
                        wake.insert(*slot, None);
                    } else if failed.contains(&window.instance) {
                        outcome.failed += 1;
                        wake.insert(*slot, None);
                    }
                }
            }
            Err(error) => {
                tracing::warn!(
                    %error,
                    "the round cannot ask which tables changed; each waiting table checks on its own"
                );
                outcome.idle_due = due.len();
                outcome.failed += asked.len();
                wake.extend(due.iter().chain(&asked).map(|(slot, _)| (*slot, None)));
            }
        }
        self.wake(wake);
        self.shared.rounds.send_modify(|n| *n += 1);
        outcome
    }

    /// The waiting tables: those whose idle commit is due, and the others
    /// with their windows.
    fn waiting(&self) -> (Vec<SlotWindow>, Vec<SlotWindow>) {
        let slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut due = Vec::new();
        let mut asked = Vec::new();
        for (index, slot) in slots.iter().enumerate() {
            let Some(waiting) = &slot.waiting else {
                continue;
            };
            if waiting.since.elapsed() >= waiting.idle_due_after {
                due.push((index, waiting.window.clone()));
            } else {
                asked.push((index, waiting.window.clone()));
            }
        }
        (due, asked)
    }

    /// Wakes `tables`, each with the round's answer for its idle batch
    /// when it has one.
    fn wake(&self, tables: BTreeMap<usize, Option<QuietWindow>>) {
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (index, answer) in tables {
            if let Some(slot) = slots.get_mut(index)
                && slot.waiting.take().is_some()
            {
                slot.answer = answer;
                slot.wake.notify_one();
            }
        }
    }
}

/// What a look at the source found, as [`SourceHealth::after`] takes it:
/// the outage and its words when the error is the whole source's; any
/// other error is not the source being down.
fn outage_of<T>(
    answer: &Result<T, SourceError>,
) -> Result<(), (crate::source::SourceOutage, String)> {
    match answer {
        Err(error) => match error.outage() {
            Some(outage) => Err((outage, error.to_string())),
            None => Ok(()),
        },
        Ok(_) => Ok(()),
    }
}

/// [`ask`], and once more on a new connection when the round's session
/// failed (a session cut while idle is not the source down).
async fn ask_once_more(
    client: &mut Option<SqlClient>,
    source: &SourceConfig,
    password: &SecretString,
    windows: &[ChangeWindow],
) -> Result<Look, SourceError> {
    let reused = client.is_some();
    match ask(client, source, password, windows).await {
        Ok(answer) => Ok(answer),
        Err(_) if reused => {
            *client = None;
            let again = ask(client, source, password, windows).await;
            if again.is_err() {
                *client = None;
            }
            again
        }
        Err(error) => {
            *client = None;
            Err(error)
        }
    }
}

/// The max LSN, then which windows hold a change up to it, on the round's
/// session (connecting first when it has none).
async fn ask(
    client: &mut Option<SqlClient>,
    source: &SourceConfig,
    password: &SecretString,
    windows: &[ChangeWindow],
) -> Result<Look, SourceError> {
    let session = match client {
        Some(session) => session,
        None => client.insert(connect(source, password).await?),
    };
    let max_lsn = cdc::max_lsn(session).await?;
    let changed = if windows.is_empty() {
        ChangedTables::default()
    } else {
        changed_tables(session, windows, max_lsn).await?
    };
    Ok(Look { max_lsn, changed })
}

/// What a round's look found.
struct Look {
    /// The database's max LSN: every window ends there.
    max_lsn: Lsn,
    /// Which windows hold a change up to it.
    changed: ChangedTables,
}

/// What the idle batches of the `quiet` windows need besides their
/// emptiness, read once on the round's session; `None` (each table then
/// plans on its own) when it cannot be read, the session dropped in case
/// the error was the connection's.
async fn read_round_marks(
    (client, clock): (&mut Option<SqlClient>, &mut Option<CommitClock>),
    quiet: &[&ChangeWindow],
    max_lsn: Lsn,
    observed_at: chrono::DateTime<chrono::Utc>,
    source: &SourceConfig,
) -> Option<RoundMarks> {
    let session = client.as_mut()?;
    let lowest = quiet.iter().map(|w| w.after).min()?;
    let marks = async {
        // A zone's rules are taken once; a bare offset (an older server
        // without sourceTimeZone) every round, so a clock change shows.
        let taken = match *clock {
            Some(CommitClock::Zone(zone)) => CommitClock::Zone(zone),
            Some(CommitClock::Fixed(_)) => {
                CommitClock::Fixed(cdc::utc_offset_minutes(session).await?)
            }
            None => cdc::commit_clock(session, source.source_time_zone).await?,
        };
        *clock = Some(taken);
        round_marks(session, lowest, max_lsn, observed_at, taken).await
    };
    match marks.await {
        Ok(marks) => Some(marks),
        Err(error) => {
            tracing::warn!(
                %error,
                "the round cannot read what its quiet tables' idle commits need; each asks on its own"
            );
            *client = None;
            None
        }
    }
}

impl TablePace {
    /// After this table met an error that looks like the whole source's:
    /// asks the rounds to look at the source now (unless they know it is
    /// down), and while it is down waits until it is back (or `stop`).
    /// `true`: the source was down and is back, so the table tries again at
    /// once; `false`: the source answers (or no rounds run), so the error
    /// is the table's own to handle.
    pub async fn wait_out_source_outage(&self, stop: &CancellationToken) -> bool {
        let shared = &self.shared;
        if !shared.rounds_run.load(Ordering::SeqCst) {
            return false;
        }
        let mut health = shared.health.subscribe();
        if health.borrow_and_update().down().is_none() {
            let mut rounds = shared.rounds.subscribe();
            let seen = *rounds.borrow_and_update();
            shared.look_now.notify_one();
            tokio::select! {
                () = stop.cancelled() => return false,
                _ = rounds.wait_for(|n| *n > seen) => {}
            }
            if health.borrow_and_update().down().is_none() {
                return false;
            }
        }
        tokio::select! {
            () = stop.cancelled() => {}
            _ = health.wait_for(|h| h.down().is_none()) => {}
        }
        true
    }

    /// Whether the rounds find the source down now.
    pub fn source_down(&self) -> bool {
        self.shared.health.borrow().down().is_some()
    }

    /// Waits while the rounds know the source is down (a table about to
    /// connect does not try what the rounds are trying for it).
    pub async fn wait_while_source_down(&self, stop: &CancellationToken) {
        let mut health = self.shared.health.subscribe();
        tokio::select! {
            () = stop.cancelled() => {}
            _ = health.wait_for(|h| h.down().is_none()) => {}
        }
    }

    /// A slot to connect or read changes in; held for one step.
    pub async fn read_permit(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.shared.reads).acquire_owned().await.ok()
    }

    /// A slot to copy a snapshot in; held for the whole copy.
    pub async fn snapshot_permit(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.shared.snapshots)
            .acquire_owned()
            .await
            .ok()
    }

    /// Waits, caught up at `window`, until the round finds a change in it,
    /// the idle commit is due, the change table cannot be asked, or `stop`.
    /// A wait longer than the source's park time calls `park` once (the
    /// table closes its session), so quiet tables hold no session. Returns
    /// the round's answer for the idle batch when the round found the
    /// window without a change and could plan it
    /// (`source::round_marks`).
    pub async fn wait_for_change(
        &self,
        window: ChangeWindow,
        stop: &CancellationToken,
        park: impl FnOnce(),
    ) -> Option<QuietWindow> {
        let wake = {
            let mut slots = self
                .shared
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let slot = slots.get_mut(self.slot)?;
            slot.answer = None;
            slot.waiting = Some(Waiting {
                window,
                since: Instant::now(),
                idle_due_after: std::mem::replace(
                    &mut slot.idle_due_after,
                    self.shared.idle_commit_interval,
                ),
            });
            Arc::clone(&slot.wake)
        };
        let park_after = park_after(self.shared.idle_commit_interval);
        let parked = async move {
            tokio::time::sleep(park_after).await;
            park();
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = stop.cancelled() => {}
            () = wake.notified() => {}
            () = parked => {}
        }
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot = slots.get_mut(self.slot)?;
        slot.waiting = None;
        slot.answer.take()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use super::*;
    use crate::domain::Lsn;

    fn pacing(idle: Duration) -> SourcePacing {
        SourcePacing {
            idle_commit_interval: idle,
            reads: NonZeroUsize::MIN,
            snapshots: NonZeroUsize::MIN,
        }
    }

    fn window(instance: &str) -> ChangeWindow {
        ChangeWindow {
            instance: CaptureInstance::new(instance).expect("an instance name"),
            after: Lsn::ZERO,
        }
    }

    #[tokio::test]
    async fn only_woken_tables_stop_waiting() {
        let pacer = Pacer::new(2, &pacing(Duration::from_secs(3600)));
        let stop = CancellationToken::new();
        let (first, second) = (pacer.table(0), pacer.table(1));
        let a = tokio::spawn({
            let stop = stop.clone();
            async move { first.wait_for_change(window("dbo_a"), &stop, || {}).await }
        });
        let b = tokio::spawn({
            let stop = stop.clone();
            async move { second.wait_for_change(window("dbo_b"), &stop, || {}).await }
        });
        // Both register before anything is woken.
        while pacer.waiting().1.len() < 2 {
            tokio::task::yield_now().await;
        }
        pacer.wake(BTreeMap::from([(1, None)]));
        b.await.expect("b woken");
        assert!(!a.is_finished(), "a table not woken keeps waiting");
        let (due, asked) = pacer.waiting();
        assert!(due.is_empty(), "{due:?}");
        assert_eq!(asked, vec![(0, window("dbo_a"))]);
        stop.cancel();
        a.await.expect("a stops");
        assert!(pacer.waiting().1.is_empty());
    }

    #[tokio::test]
    async fn a_table_woken_with_the_rounds_answer_gets_it_once() {
        let pacer = Pacer::new(1, &pacing(Duration::from_secs(3600)));
        let stop = CancellationToken::new();
        let answer = QuietWindow {
            window: window("dbo_a"),
            change_table_id: 7,
            max_lsn: Lsn::from_low_byte(9),
            max_commit_ts: None,
            min_lsn: Lsn::from_low_byte(1),
            min_commit_ts: None,
            observed_at: chrono::Utc::now(),
            round_trip: Duration::from_millis(1),
        };
        // Table 0 waits, is woken with `given`, and gets what it was given.
        let woken_with = async |given: Option<QuietWindow>| {
            let table = pacer.table(0);
            let waiter = tokio::spawn({
                let stop = stop.clone();
                async move { table.wait_for_change(window("dbo_a"), &stop, || {}).await }
            });
            while pacer.waiting().1.is_empty() {
                tokio::task::yield_now().await;
            }
            pacer.wake(BTreeMap::from([(0, given)]));
            waiter.await.expect("woken")
        };
        assert_eq!(woken_with(Some(answer.clone())).await, Some(answer));
        // The next wait, woken without one, has none.
        assert_eq!(woken_with(None).await, None);
    }

    #[tokio::test]
    async fn a_table_waiting_longer_than_the_idle_interval_is_due() {
        let pacer = Pacer::new(1, &pacing(Duration::ZERO));
        let stop = CancellationToken::new();
        let table = pacer.table(0);
        let waiter = tokio::spawn({
            let stop = stop.clone();
            async move { table.wait_for_change(window("dbo_a"), &stop, || {}).await }
        });
        loop {
            let (due, asked) = pacer.waiting();
            assert!(asked.is_empty(), "with a zero interval nothing is asked");
            if due == [(0, window("dbo_a"))] {
                break;
            }
            tokio::task::yield_now().await;
        }
        pacer.wake(BTreeMap::from([(0, None)]));
        waiter.await.expect("woken");
    }

    #[test]
    fn tables_started_together_spread_their_first_idle_commits_over_one_interval() {
        let interval = Duration::from_secs(300);
        let due: Vec<Duration> = (0..4).map(|i| first_idle_due(i, 4, interval)).collect();
        assert_eq!(due, [75, 150, 225, 300].map(Duration::from_secs).to_vec());
        assert_eq!(first_idle_due(0, 1, interval), interval);
    }

    #[test]
    fn a_waiting_table_keeps_its_session_a_fifth_of_the_idle_interval_at_most_a_minute() {
        assert_eq!(
            park_after(Duration::from_secs(300)),
            Duration::from_secs(60)
        );
        assert_eq!(
            park_after(Duration::from_secs(3600)),
            Duration::from_secs(60)
        );
        assert_eq!(park_after(Duration::from_secs(10)), Duration::from_secs(2));
        assert_eq!(park_after(Duration::ZERO), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_table_that_waits_long_parks_once_and_a_woken_one_does_not() {
        // Idle interval 5 s: a table parks after 1 s of waiting.
        let pacer = Pacer::new(2, &pacing(Duration::from_secs(5)));
        let stop = CancellationToken::new();
        let (busy, quiet) = (pacer.table(0), pacer.table(1));
        let busy_parked = Arc::new(AtomicBool::new(false));
        let (parked_tx, parked_rx) = tokio::sync::oneshot::channel::<()>();
        let busy_waiter = tokio::spawn({
            let (stop, parked) = (stop.clone(), Arc::clone(&busy_parked));
            async move {
                busy.wait_for_change(window("dbo_a"), &stop, move || {
                    parked.store(true, Ordering::SeqCst);
                })
                .await;
            }
        });
        let quiet_waiter = tokio::spawn({
            let stop = stop.clone();
            async move {
                quiet
                    .wait_for_change(window("dbo_b"), &stop, move || {
                        let _ = parked_tx.send(());
                    })
                    .await;
            }
        });
        while pacer.waiting().1.len() < 2 {
            tokio::task::yield_now().await;
        }
        pacer.wake(BTreeMap::from([(0, None)]));
        busy_waiter.await.expect("the busy table is woken");
        assert!(
            !busy_parked.load(Ordering::SeqCst),
            "a table woken within the park time keeps its session"
        );
        tokio::time::timeout(Duration::from_secs(30), parked_rx)
            .await
            .expect("the quiet table parks after 1 s")
            .expect("the park call");
        assert!(!quiet_waiter.is_finished(), "parking does not end the wait");
        pacer.wake(BTreeMap::from([(1, None)]));
        quiet_waiter.await.expect("the quiet table is woken");
    }

    #[tokio::test]
    async fn a_table_waiting_for_a_snapshot_slot_does_not_hold_a_read_slot() {
        let pacer = Pacer::new(2, &pacing(Duration::from_secs(60)));
        let copying = pacer.table(0).snapshot_permit().await;
        assert!(copying.is_some());
        let queued = pacer.table(1);
        let waiting = tokio::spawn(async move { queued.snapshot_permit().await.is_some() });
        // The only read slot is free while the second snapshot waits.
        let read = pacer.table(0).read_permit().await;
        assert!(read.is_some());
        assert!(!waiting.is_finished());
        drop(copying);
        assert!(waiting.await.expect("gets the snapshot slot"));
    }

    /// Plays one round that found `found` (what `round` does after asking).
    fn round_found(pacer: &Pacer, found: Result<(), (crate::source::SourceOutage, String)>) {
        let now = chrono::Utc::now();
        pacer
            .shared
            .health
            .send_modify(|health| *health = health.after(found, now));
        pacer.shared.rounds.send_modify(|n| *n += 1);
    }

    #[tokio::test]
    async fn a_table_meeting_an_outage_waits_for_the_rounds_verdict_and_the_source() {
        let pacer = Pacer::new(2, &pacing(Duration::from_secs(3600)));
        let stop = CancellationToken::new();
        // Without rounds (availableNow) the error is the table's own.
        assert!(!pacer.table(0).wait_out_source_outage(&stop).await);

        pacer.shared.rounds_run.store(true, Ordering::SeqCst);
        // The rounds find the source answering: the table's own error.
        let asking = tokio::spawn({
            let (table, stop) = (pacer.table(0), stop.clone());
            async move { table.wait_out_source_outage(&stop).await }
        });
        pacer.shared.look_now.notified().await;
        round_found(&pacer, Ok(()));
        assert!(!asking.await.expect("answered"));

        // The rounds find it down: the table waits until it is back.
        let waiting = tokio::spawn({
            let (table, stop) = (pacer.table(1), stop.clone());
            async move { table.wait_out_source_outage(&stop).await }
        });
        pacer.shared.look_now.notified().await;
        let refused = (
            crate::source::SourceOutage::LoginFailed,
            "refused".to_string(),
        );
        round_found(&pacer, Err(refused.clone()));
        assert!(pacer.table(0).source_down());
        // Another look that finds it still down keeps the table waiting.
        round_found(&pacer, Err(refused));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        round_found(&pacer, Ok(()));
        assert!(
            waiting.await.expect("back"),
            "the source was down and is back"
        );
        assert!(!pacer.table(1).source_down());
    }
}
