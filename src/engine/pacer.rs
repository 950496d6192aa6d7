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
//! Two semaphores bound what runs at once: `concurrency.reads` tables
//! connect or read changes, `concurrency.snapshots` copy a snapshot (a
//! table waiting for a snapshot slot gives its read slot back, so a
//! bootstrap queue never stalls the others' changes).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use secrecy::SecretString;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::domain::CaptureInstance;
use crate::source::changed_tables::{ChangeWindow, ChangedTables, changed_tables};
use crate::source::{SourceError, SqlClient, cdc, connect};
use crate::spec::{SourceConfig, SourcePacing};

/// The tables of one source and what they may run at once.
pub struct Pacer {
    shared: Arc<Shared>,
}

struct Shared {
    slots: Mutex<Vec<Slot>>,
    reads: Arc<Semaphore>,
    snapshots: Arc<Semaphore>,
    idle_commit_interval: Duration,
}

/// One table's place in the rounds.
struct Slot {
    /// Set while the table is caught up and waiting for the round.
    waiting: Option<Waiting>,
    wake: Arc<Notify>,
}

struct Waiting {
    window: ChangeWindow,
    since: Instant,
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
    /// Tables woken because their change table could not be asked.
    pub failed: usize,
}

impl Pacer {
    /// A pacer for `tables` tables with `pacing`'s limits.
    pub fn new(tables: usize, pacing: &SourcePacing) -> Self {
        let slots = (0..tables)
            .map(|_| Slot {
                waiting: None,
                wake: Arc::new(Notify::new()),
            })
            .collect();
        Pacer {
            shared: Arc::new(Shared {
                slots: Mutex::new(slots),
                reads: Arc::new(Semaphore::new(pacing.reads.get())),
                snapshots: Arc::new(Semaphore::new(pacing.snapshots.get())),
                idle_commit_interval: pacing.idle_commit_interval,
            }),
        }
    }

    /// The handle of table `slot` (0-based, in the order given to `new`).
    pub fn table(&self, slot: usize) -> TablePace {
        TablePace {
            shared: Arc::clone(&self.shared),
            slot,
        }
    }

    /// Runs a round every `interval` until `stop`: one session of its own
    /// (`source`'s server and login), reconnected after an error; when it
    /// cannot ask, every waiting table is woken to find out for itself.
    pub async fn run_rounds(
        &self,
        source: &SourceConfig,
        password: &SecretString,
        interval: Duration,
        stop: &CancellationToken,
    ) {
        let mut client: Option<SqlClient> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let outcome = self.round(&mut client, source, password).await;
            if outcome.changed + outcome.idle_due + outcome.failed > 0 {
                tracing::debug!(?outcome, "round");
            }
        }
    }

    /// One round: which waiting tables to wake, and waking them.
    async fn round(
        &self,
        client: &mut Option<SqlClient>,
        source: &SourceConfig,
        password: &SecretString,
    ) -> RoundOutcome {
        let (due, asked) = self.waiting();
        let mut outcome = RoundOutcome {
            asked: asked.len(),
            idle_due: due.len(),
            ..RoundOutcome::default()
        };
        let mut wake: BTreeSet<usize> = due.into_iter().collect();
        if !asked.is_empty() {
            let windows: Vec<ChangeWindow> = asked.iter().map(|(_, w)| w.clone()).collect();
            match ask(client, source, password, &windows).await {
                Ok(answer) => {
                    let changed: BTreeSet<&CaptureInstance> = answer.changed.iter().collect();
                    let failed: BTreeSet<&CaptureInstance> =
                        answer.failed.iter().map(|(instance, _)| instance).collect();
                    for (slot, window) in &asked {
                        if changed.contains(&window.instance) {
                            outcome.changed += 1;
                            wake.insert(*slot);
                        } else if failed.contains(&window.instance) {
                            outcome.failed += 1;
                            wake.insert(*slot);
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(
                        %error,
                        "the round cannot ask which tables changed; each waiting table checks on its own"
                    );
                    *client = None;
                    outcome.failed += asked.len();
                    wake.extend(asked.iter().map(|(slot, _)| *slot));
                }
            }
        }
        self.wake(&wake);
        outcome
    }

    /// The waiting tables: those whose idle commit is due, and the others
    /// with their windows.
    fn waiting(&self) -> (Vec<usize>, Vec<(usize, ChangeWindow)>) {
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
            if waiting.since.elapsed() >= self.shared.idle_commit_interval {
                due.push(index);
            } else {
                asked.push((index, waiting.window.clone()));
            }
        }
        (due, asked)
    }

    fn wake(&self, tables: &BTreeSet<usize>) {
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for &index in tables {
            if let Some(slot) = slots.get_mut(index)
                && slot.waiting.take().is_some()
            {
                slot.wake.notify_one();
            }
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
) -> Result<ChangedTables, SourceError> {
    let session = match client {
        Some(session) => session,
        None => client.insert(connect(source, password).await?),
    };
    let max_lsn = cdc::max_lsn(session).await?;
    changed_tables(session, windows, max_lsn).await
}

impl TablePace {
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
    pub async fn wait_for_change(&self, window: ChangeWindow, stop: &CancellationToken) {
        let wake = {
            let mut slots = self
                .shared
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(slot) = slots.get_mut(self.slot) else {
                return;
            };
            slot.waiting = Some(Waiting {
                window,
                since: Instant::now(),
            });
            Arc::clone(&slot.wake)
        };
        tokio::select! {
            () = stop.cancelled() => {}
            () = wake.notified() => {}
        }
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get_mut(self.slot) {
            slot.waiting = None;
        }
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
            async move { first.wait_for_change(window("dbo_a"), &stop).await }
        });
        let b = tokio::spawn({
            let stop = stop.clone();
            async move { second.wait_for_change(window("dbo_b"), &stop).await }
        });
        // Both register before anything is woken.
        while pacer.waiting().1.len() < 2 {
            tokio::task::yield_now().await;
        }
        pacer.wake(&BTreeSet::from([1]));
        b.await.expect("b woken");
        assert!(!a.is_finished(), "a table not woken keeps waiting");
        let (due, asked) = pacer.waiting();
        assert!(due.is_empty());
        assert_eq!(asked, vec![(0, window("dbo_a"))]);
        stop.cancel();
        a.await.expect("a stops");
        assert!(pacer.waiting().1.is_empty());
    }

    #[tokio::test]
    async fn a_table_waiting_longer_than_the_idle_interval_is_due() {
        let pacer = Pacer::new(1, &pacing(Duration::ZERO));
        let stop = CancellationToken::new();
        let table = pacer.table(0);
        let waiter = tokio::spawn({
            let stop = stop.clone();
            async move { table.wait_for_change(window("dbo_a"), &stop).await }
        });
        loop {
            let (due, asked) = pacer.waiting();
            assert!(asked.is_empty(), "with a zero interval nothing is asked");
            if due == [0] {
                break;
            }
            tokio::task::yield_now().await;
        }
        pacer.wake(&BTreeSet::from([0]));
        waiter.await.expect("woken");
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
}
