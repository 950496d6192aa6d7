//! The facts and finalization writes of a source's tables, committed
//! together (issue 30, item 7).
//!
//! The tables of one `CdcSource` usually share one facts table and one
//! finalization table. Written table by table, 200 tables would make 200
//! commits to the same Delta log every round, each racing the others (a
//! lost race reads the log again and retries), and each table would hold
//! its own copy of both tables' snapshots in memory. Here each shared table
//! is opened **once** per source and written by one task that gathers the
//! appends and upserts of the tables that finish a step together into one
//! commit: the facts rows in one commit carrying each table's own `txn`
//! (`FactsTable::append_group`), the verdicts in one MERGE
//! (`FinalizationTable::upsert_group`).
//!
//! When to commit: the task waits while some table of the source is still
//! in a step and not yet waiting on one of these commits (it may have rows
//! to add), at most [`gather_max`] after the group's first
//! write. A table copying a snapshot is not counted (`Run::in_step`). A
//! round's tables therefore usually make one facts commit and one
//! finalization commit together. Exactly once is unchanged: each
//! table's rows keep their own `txn`, a commit holds all of a group's or
//! none, a table goes on (to its commit marker) only once the commit that
//! holds its rows is made. A commit the store failed fails every write it
//! held, each table retrying its step as it would its own commit; one that
//! failed otherwise (a table's rows that cannot be encoded) is made again
//! table by table, so only the table whose rows cannot be written fails.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use crate::domain::{FactRow, VerdictUpdate};
use crate::lake::facts::{AppendOutcome, FactsAppend, FactsError, FactsKey, FactsTable};
use crate::lake::finalization::{FinalizationError, FinalizationTable};
use crate::lake::{StorageLocation, StorageOptions};
use crate::retry::classify::delta_transient;

/// The longest a write waits for other tables' writes to join its commit.
pub const GATHER_MAX: Duration = Duration::from_secs(1);

/// How long a source's writes wait for others to join them: half the
/// trigger interval, at most [`GATHER_MAX`], so a busy table's batch is
/// never held back by more than a fraction of a round.
pub fn gather_max(trigger: Duration) -> Duration {
    if trigger.is_zero() {
        GATHER_MAX
    } else {
        (trigger / 2).min(GATHER_MAX)
    }
}

/// The shared tables of one source's tables, each opened once, and how
/// many of its tables are in a step (the group commits wait for them).
#[derive(Clone)]
pub struct SourceWrites {
    inner: Arc<Inner>,
}

struct Inner {
    gather_max: Duration,
    steps: watch::Sender<Steps>,
    facts: Writers<FactsTable>,
    finalization: Writers<FinalizationTable>,
}

/// The running writers of one kind of table, by the table they write.
type Writers<T> = tokio::sync::Mutex<
    Vec<(
        Opened,
        Writer<<T as GroupTable>::Job, <T as GroupTable>::Reply>,
    )>,
>;

/// Which table a writer writes, as the tables name it.
#[derive(PartialEq, Eq)]
struct Opened {
    location: String,
    options: StorageOptions,
}

/// The source's tables in a step, and those of them waiting on a commit.
#[derive(Debug, Default, Clone, Copy)]
struct Steps {
    running: usize,
    waiting: usize,
}

impl Steps {
    /// Tables in a step that may still add a write to a group.
    fn working(self) -> usize {
        self.running.saturating_sub(self.waiting)
    }
}

impl SourceWrites {
    /// The writes of one source; a group waits at most `gather_max`.
    pub fn new(gather_max: Duration) -> Self {
        SourceWrites {
            inner: Arc::new(Inner {
                gather_max,
                steps: watch::Sender::new(Steps::default()),
                facts: tokio::sync::Mutex::new(Vec::new()),
                finalization: tokio::sync::Mutex::new(Vec::new()),
            }),
        }
    }

    /// A table starts a step: the groups wait for its writes until it
    /// ends (the guard dropped) or waits on one of them.
    pub fn step(&self) -> InStep {
        self.inner.steps.send_modify(|s| s.running += 1);
        InStep {
            steps: self.inner.steps.clone(),
        }
    }

    /// The source's writer of the facts table at `location`, opening
    /// (creating) the table on first use.
    pub async fn facts(
        &self,
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<SharedFacts, FactsError> {
        let open = || FactsTable::open_or_create(location, options);
        let writer = self
            .writer(&self.inner.facts, location, options, open)
            .await?;
        Ok(SharedFacts { writer })
    }

    /// The source's writer of the finalization table at `location`,
    /// opening (creating) the table on first use.
    pub async fn finalization(
        &self,
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<SharedFinalization, FinalizationError> {
        let open = || FinalizationTable::open_or_create(location, options);
        let writer = self
            .writer(&self.inner.finalization, location, options, open)
            .await?;
        Ok(SharedFinalization { writer })
    }

    /// The running writer of the table at `location` in `writers`, or a
    /// new one of the table `open` opens (replacing one that stopped).
    async fn writer<T: GroupTable, E, F: Future<Output = Result<T, E>>>(
        &self,
        writers: &Writers<T>,
        location: &StorageLocation,
        options: &StorageOptions,
        open: impl FnOnce() -> F,
    ) -> Result<Writer<T::Job, T::Reply>, E> {
        let mut writers = writers.lock().await;
        let opened = Opened {
            location: location.to_string(),
            options: options.clone(),
        };
        if let Some((_, writer)) = writers.iter().find(|(o, w)| *o == opened && w.is_open()) {
            return Ok(writer.clone());
        }
        let writer = Writer::spawn(open().await?, self.inner.gather_max, &self.inner.steps);
        writers.retain(|(o, _)| *o != opened);
        writers.push((opened, writer.clone()));
        Ok(writer)
    }
}

/// A table's step, counted while it lasts (`SourceWrites::step`).
pub struct InStep {
    steps: watch::Sender<Steps>,
}

impl Drop for InStep {
    fn drop(&mut self) {
        self.steps
            .send_modify(|s| s.running = s.running.saturating_sub(1));
    }
}

/// One table's facts rows, to be appended under its key.
struct FactsJob {
    key: FactsKey,
    rows: Vec<FactRow>,
    origin: String,
}
type FactsReply = Result<AppendOutcome, FactsError>;

/// One table's verdict rows (its target's, and its silver table's).
type VerdictJob = Vec<VerdictUpdate>;
type VerdictReply = Result<(), FinalizationError>;

/// A facts table written by the source's one writer.
#[derive(Clone)]
pub struct SharedFacts {
    writer: Writer<FactsJob, FactsReply>,
}

impl SharedFacts {
    /// Appends `rows` under `key` in the source's next facts commit (with
    /// `origin`, the checkpoint, recorded), unless the table holds `key`.
    pub async fn append(
        &self,
        key: &FactsKey,
        rows: &[FactRow],
        origin: &str,
    ) -> Result<AppendOutcome, FactsError> {
        let job = FactsJob {
            key: key.clone(),
            rows: rows.to_vec(),
            origin: origin.to_string(),
        };
        self.writer
            .submit(job)
            .await
            .unwrap_or_else(|| Err(stopped_facts(&self.writer.location)))
    }
}

/// A finalization table written by the source's one writer.
#[derive(Clone)]
pub struct SharedFinalization {
    writer: Writer<VerdictJob, VerdictReply>,
}

impl SharedFinalization {
    /// Upserts `updates` (one table's rows) in the source's next
    /// finalization commit.
    pub async fn upsert(&self, updates: Vec<VerdictUpdate>) -> Result<(), FinalizationError> {
        self.writer.submit(updates).await.unwrap_or_else(|| {
            Err(FinalizationError::Delta {
                location: self.writer.location.clone(),
                source: Arc::new(writer_stopped()),
            })
        })
    }
}

/// Whether a facts commit failed on the store (which every table's rows
/// meet alike), not on the rows of one of them.
fn facts_store_failed(error: &FactsError) -> bool {
    matches!(error, FactsError::Delta { source, .. } if delta_transient(source))
}

/// [`facts_store_failed`], for the finalization table.
fn finalization_store_failed(error: &FinalizationError) -> bool {
    matches!(error, FinalizationError::Delta { source, .. } if delta_transient(source))
}

fn stopped_facts(location: &str) -> FactsError {
    FactsError::Delta {
        location: location.to_string(),
        source: Arc::new(writer_stopped()),
    }
}

/// The error of a write whose writer stopped before answering (it
/// panicked): the table's step fails and is tried again, and the next
/// open starts a new writer.
fn writer_stopped() -> deltalake::DeltaTableError {
    deltalake::DeltaTableError::Generic(
        "the source's writer of this table stopped before committing; the step is tried again"
            .to_string(),
    )
}

/// A table the source's writer commits groups of jobs to.
trait GroupTable: Send + 'static {
    type Job: Send + 'static;
    type Reply: Send + 'static;
    /// Where the table is (for errors).
    fn location(&self) -> String;
    /// Commits `jobs` together; one reply per job, in order.
    fn commit(&mut self, jobs: &[Self::Job]) -> impl Future<Output = Vec<Self::Reply>> + Send;
}

impl GroupTable for FactsTable {
    type Job = FactsJob;
    type Reply = FactsReply;

    fn location(&self) -> String {
        FactsTable::location(self).to_string()
    }

    async fn commit(&mut self, jobs: &[FactsJob]) -> Vec<FactsReply> {
        // A job whose rows do not fit its key fails alone; the others are
        // committed without it.
        let checked: Vec<Result<(), FactsError>> = jobs
            .iter()
            .map(|job| crate::lake::facts::check_rows(&job.key, &job.rows))
            .collect();
        let group: Vec<FactsAppend<'_>> = jobs
            .iter()
            .zip(&checked)
            .filter(|(_, checked)| checked.is_ok())
            .map(|(job, _)| FactsAppend {
                key: &job.key,
                rows: &job.rows,
                origin: Some(&job.origin),
            })
            .collect();
        let mut outcomes = match self.append_group(&group).await {
            Ok(outcomes) => {
                // Committed for every table of the group, none told yet.
                crate::failpoint::hit("in_group_facts_commit");
                outcomes.into_iter().map(Ok).collect::<Vec<_>>()
            }
            // One table's rows that cannot be written fail only that table:
            // each is tried alone. A store that failed fails them all.
            Err(error) if group.len() > 1 && !facts_store_failed(&error) => {
                let mut alone = Vec::with_capacity(group.len());
                for append in &group {
                    let outcome = self
                        .append_group(std::slice::from_ref(append))
                        .await
                        .and_then(|outcomes| {
                            outcomes
                                .into_iter()
                                .next()
                                .ok_or_else(|| stopped_facts(FactsTable::location(self)))
                        });
                    alone.push(outcome);
                }
                alone
            }
            Err(error) => vec![Err(error); group.len()],
        }
        .into_iter();
        checked
            .into_iter()
            .map(|checked| match checked {
                Ok(()) => outcomes
                    .next()
                    .unwrap_or_else(|| Err(stopped_facts(FactsTable::location(self)))),
                Err(error) => Err(error),
            })
            .collect()
    }
}

impl GroupTable for FinalizationTable {
    type Job = VerdictJob;
    type Reply = VerdictReply;

    fn location(&self) -> String {
        FinalizationTable::location(self).to_string()
    }

    async fn commit(&mut self, jobs: &[VerdictJob]) -> Vec<VerdictReply> {
        let updates: Vec<VerdictUpdate> = jobs.iter().flatten().cloned().collect();
        match self.upsert_group(&updates).await {
            Ok(()) => {
                crate::failpoint::hit("in_group_finalization_commit");
                vec![Ok(()); jobs.len()]
            }
            // One table's verdicts that cannot be written fail only that
            // table: each is tried alone. A store that failed fails them all.
            Err(error) if jobs.len() > 1 && !finalization_store_failed(&error) => {
                let mut alone = Vec::with_capacity(jobs.len());
                for job in jobs {
                    alone.push(self.upsert_group(job).await);
                }
                alone
            }
            Err(error) => vec![Err(error); jobs.len()],
        }
    }
}

/// The sending side of one table's writer task.
struct Writer<J, R> {
    jobs: mpsc::UnboundedSender<(J, oneshot::Sender<R>)>,
    steps: watch::Sender<Steps>,
    location: String,
}

impl<J, R> Clone for Writer<J, R> {
    fn clone(&self) -> Self {
        Writer {
            jobs: self.jobs.clone(),
            steps: self.steps.clone(),
            location: self.location.clone(),
        }
    }
}

impl<J: Send + 'static, R: Send + 'static> Writer<J, R> {
    /// Starts the task that commits `table`'s groups.
    fn spawn<T: GroupTable<Job = J, Reply = R>>(
        table: T,
        gather_max: Duration,
        steps: &watch::Sender<Steps>,
    ) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let location = table.location();
        tokio::spawn(commit_groups(table, queue, steps.subscribe(), gather_max));
        Writer {
            jobs,
            steps: steps.clone(),
            location,
        }
    }

    fn is_open(&self) -> bool {
        !self.jobs.is_closed()
    }

    /// Hands `job` to the task and waits for its commit; `None` when the
    /// task is gone. Meanwhile the table counts as waiting, not working.
    async fn submit(&self, job: J) -> Option<R> {
        let (reply, answer) = oneshot::channel();
        let _waiting = Waiting::new(&self.steps);
        self.jobs.send((job, reply)).ok()?;
        answer.await.ok()
    }
}

/// A table waiting on a commit, counted while it waits.
struct Waiting<'a> {
    steps: &'a watch::Sender<Steps>,
}

impl<'a> Waiting<'a> {
    fn new(steps: &'a watch::Sender<Steps>) -> Self {
        steps.send_modify(|s| s.waiting += 1);
        Waiting { steps }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.steps
            .send_modify(|s| s.waiting = s.waiting.saturating_sub(1));
    }
}

/// The writer task: gathers a group, commits it, answers each job; until
/// every sender is gone.
async fn commit_groups<T: GroupTable>(
    mut table: T,
    mut queue: mpsc::UnboundedReceiver<(T::Job, oneshot::Sender<T::Reply>)>,
    mut steps: watch::Receiver<Steps>,
    gather_max: Duration,
) {
    while let Some(first) = queue.recv().await {
        let mut group = vec![first];
        let deadline = tokio::time::Instant::now() + gather_max;
        loop {
            while let Ok(job) = queue.try_recv() {
                group.push(job);
            }
            if steps.borrow_and_update().working() == 0 {
                break;
            }
            tokio::select! {
                job = queue.recv() => match job {
                    Some(job) => group.push(job),
                    None => break,
                },
                changed = steps.changed() => if changed.is_err() { break },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        let (jobs, replies): (Vec<_>, Vec<_>) = group.into_iter().unzip();
        tracing::debug!(table = %table.location(), writes = jobs.len(), "committing the source's writes together");
        let outcomes = table.commit(&jobs).await;
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // A table stopped meanwhile no longer waits: nothing to tell.
            let _ = reply.send(outcome);
        }
    }
}

#[cfg(test)]
#[path = "source_writes_tests.rs"]
mod tests;
