//! `mssql-cdc worker --source NS/NAME`: what a CdcSource's one worker pod
//! runs. It reads its CdcSource and every CdcStream of the namespace that
//! names it in `spec.sourceRef`, runs them all in this process through the
//! source's rounds (`engine::run_tables`), and reports each table into its
//! own stream's status, as a stream's own worker does: progress, snapshot,
//! finalization, and a table's failure with its reason (the others go on).
//! What concerns the source as a whole (SQL Server down, capture's health)
//! goes once into the CdcSource's status (`source_report.rs`).
//! A stream that cannot be resolved against the source says why in its
//! status and is not run. A stream added to the source while it runs
//! starts alone, a removed one stops alone, and an edited one stops after
//! its batch and starts again with its new spec; the other tables run on
//! (`source_members`). Beside the tables, `source_discovery` reports the
//! captured tables no stream covers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, anyhow};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use mssql_cdc::engine::{
    Fanout, Joining, Observer, RunOptions, TableOutcome, TableRun, run_tables,
};
use mssql_cdc::metrics::{Metrics, MetricsServer};
use mssql_cdc::operator::children::source_worker_config;
use mssql_cdc::operator::failure::Failure;
use mssql_cdc::operator::source_children::resolved_stream;
use mssql_cdc::operator::worker::{
    StatusObserver, StatusReports, TableFailureReport, WorkerMetrics, publish_status,
};
use mssql_cdc::spec::{CdcSource, CdcStream, Trigger, WorkerState};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::progress_log::ProgressLog;
use super::source_report::SourceReport;
use super::worker::{FINAL_REPORT_TIMEOUT, WorkerArgs, write_termination_message};
use super::{source_discovery, source_members};

/// Runs every table of the source until caught up (availableNow),
/// SIGTERM, or, for the source as a whole, an error. With availableNow a
/// table that failed makes the worker exit non-zero after the others.
pub async fn run_source_worker(
    args: &WorkerArgs,
    namespace: &str,
    name: &str,
) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("cannot configure the Kubernetes client (in-cluster or KUBECONFIG)")?;
    let sources: Api<CdcSource> = Api::namespaced(client.clone(), namespace);
    let streams: Api<CdcStream> = Api::namespaced(client, namespace);
    let reports = Arc::new(StatusReports::default());
    let metrics = Arc::new(Metrics::new());
    let exposition = WorkerMetrics {
        stream: Arc::clone(&metrics),
        reports: Arc::clone(&reports),
    };
    let _server = MetricsServer::start(args.listen, Arc::new(exposition))
        .await
        .map_err(|e| anyhow!("ListenFailed: --listen {}: {e}", args.listen))?;

    let stop = tokio_util::sync::CancellationToken::new();
    let signal = stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        tracing::info!("stopping after the current batches");
        signal.cancel();
    });

    loop {
        let (source, mine) = read_members(&sources, &streams, namespace, name).await?;
        let round = Round {
            args,
            namespace,
            name,
            sources: &sources,
            streams: &streams,
            reports: &reports,
            metrics: &metrics,
            stop: &stop,
        };
        // Again only when no table could start (no stream yet, or all of
        // them suspended or invalid) and the streams changed since.
        if !round.run(&source, &mine).await? {
            break;
        }
    }
    tracing::info!("worker stopped");
    Ok(())
}

/// The source and the streams that name it, read now.
async fn read_members(
    sources: &Api<CdcSource>,
    streams: &Api<CdcStream>,
    namespace: &str,
    name: &str,
) -> anyhow::Result<(CdcSource, Vec<CdcStream>)> {
    let source = match sources.get(name).await {
        Ok(source) => source,
        Err(error) => {
            let failure = Failure::new(
                "SourceUnreadable",
                format!(
                    "cannot read CdcSource {namespace}/{name}: {error}; the worker's \
                     ServiceAccount needs get on cdcsources in {namespace}"
                ),
            );
            write_termination_message(&failure);
            return Err(anyhow!("{}: {}", failure.reason, failure.message));
        }
    };
    let listed = streams
        .list(&ListParams::default())
        .await
        .map_err(|error| {
            let failure = Failure::new(
                "StreamsUnreadable",
                format!(
                    "cannot list the CdcStreams of {namespace}: {error}; the worker's \
                 ServiceAccount needs list on cdcstreams in {namespace}"
                ),
            );
            write_termination_message(&failure);
            anyhow!("{}: {}", failure.reason, failure.message)
        })?;
    let mine: Vec<CdcStream> = listed
        .items
        .into_iter()
        .filter(|stream| source_members::is_member(stream, &source))
        .collect();
    tracing::info!(
        source = name,
        tables = mine.len(),
        "running the tables of the source"
    );

    Ok((source, mine))
}

/// One run of the source's tables, until caught up or SIGTERM; streams
/// added, removed or edited meanwhile start and stop alone.
struct Round<'a> {
    args: &'a WorkerArgs,
    namespace: &'a str,
    name: &'a str,
    sources: &'a Api<CdcSource>,
    streams: &'a Api<CdcStream>,
    reports: &'a Arc<StatusReports>,
    metrics: &'a Arc<Metrics>,
    stop: &'a CancellationToken,
}

/// One stream the worker runs (or reports as not runnable).
struct Member {
    /// The generation it was started at.
    generation: Option<i64>,
    /// Its table's target, while its table runs.
    running: Option<String>,
    /// Stops its table alone.
    stop: CancellationToken,
    /// Its status while the worker reports it.
    status: StatusObserver,
    /// Sends its status; ends with the last clone of `status`.
    publisher: JoinHandle<()>,
    /// What to do once its table has ended.
    then: Then,
}

/// What a member's ended table leads to.
enum Then {
    /// Report how it ended.
    Report,
    /// Nothing: the stream left the source.
    Leave,
    /// Start again with this spec.
    Restart(Box<CdcStream>),
}

impl Round<'_> {
    /// Runs the tables; `true` when none could start and the source's
    /// streams changed since (the caller reads them again).
    async fn run(&self, source: &CdcSource, mine: &[CdcStream]) -> anyhow::Result<bool> {
        let Round {
            args,
            namespace,
            name,
            sources,
            streams,
            reports,
            stop,
            ..
        } = *self;
        let pacing = source
            .spec
            .pacing()
            .with_context(|| format!("CdcSource {namespace}/{name}"))?;
        let mut members = BTreeMap::new();
        let mut tables = Vec::new();
        for stream in mine {
            let (member, table) = self.start(source, stream);
            members.insert(stream.name_any(), member);
            tables.extend(table);
        }
        let watched = Arc::new(Mutex::new(source_members::members(mine, source)));
        let (changed_tx, mut changed) = mpsc::unbounded_channel();
        let watching = tokio::spawn(source_members::watch(
            streams.clone(),
            source.clone(),
            Arc::clone(&watched),
            changed_tx,
            stop.child_token(),
        ));
        let idle_commit = pacing.idle_commit_interval;
        let mut discovering = self.discover(mine, idle_commit);
        if tables.is_empty() {
            let again = self.wait_for_streams(source, &watched, &mut changed).await;
            watching.abort();
            discovering.abort();
            for member in members.into_values() {
                finish(member).await;
            }
            return Ok(again);
        }
        let once = tables
            .first()
            .is_some_and(|t| t.config.trigger == Trigger::AvailableNow);
        let report = SourceReport::start(
            sources.clone(),
            name,
            &tables,
            reports,
            args.status_interval,
        );
        let (added_tx, added) = mpsc::unbounded_channel();
        let (ended, mut ended_rx) = mpsc::unbounded_channel();
        let joining = Joining { added, ended };
        // A task of its own: the tables run on while this loop waits on
        // the API server or a stream's last report.
        let mut running = tokio::spawn(run_tables(
            tables,
            Some(pacing),
            Arc::clone(&report.observer),
            Some(joining),
        ));
        let mut added_tx = Some(added_tx);
        let mut failed = Vec::new();
        // The loop ends when the tables' task does; an error is its panic.
        let broken = loop {
            tokio::select! {
                joined = &mut running => break joined.err(),
                Some(outcome) = ended_rx.recv() => {
                    let restart = self.ended(source, &mut members, outcome, &mut failed).await;
                    if let (Some(table), Some(tx)) = (restart, &added_tx) {
                        let _ = tx.send(table);
                    }
                }
                Some(()) = changed.recv() => {
                    let Some(now) = self.read_streams(source).await else { continue };
                    for table in self.follow(source, &mut members, &now).await {
                        if let Some(tx) = &added_tx {
                            let _ = tx.send(table);
                        }
                    }
                    let streamed: Vec<CdcStream> = now
                        .into_iter()
                        .filter(|s| members.contains_key(&s.name_any()))
                        .collect();
                    *watched.lock().unwrap_or_else(PoisonError::into_inner) =
                        source_members::members(&streamed, source);
                    discovering.abort();
                    discovering = self.discover(&streamed, idle_commit);
                }
                () = stop.cancelled(), if added_tx.is_some() => {
                    // No table joins any more: the tables end as they stop.
                    added_tx = None;
                }
            }
        };
        while let Ok(outcome) = ended_rx.try_recv() {
            self.ended(source, &mut members, outcome, &mut failed).await;
        }
        watching.abort();
        discovering.abort();
        report.finish().await;
        // The last clones of the observers go: each publisher sends its last
        // report and ends.
        let publishers: Vec<JoinHandle<()>> = members.into_values().map(|m| m.publisher).collect();
        let publishing = futures::future::join_all(publishers);
        if tokio::time::timeout(FINAL_REPORT_TIMEOUT, publishing)
            .await
            .is_err()
        {
            tracing::error!("the last status reports did not reach the API server in time");
        }
        // The tables' task itself failed (a panic): not a clean stop.
        if let Some(error) = broken {
            let failure = Failure::new(
                "InternalError",
                format!(
                    "the tables of CdcSource {namespace}/{name} stopped on a bug: {error}; \
                     the pod restarts the worker and each table resumes from its checkpoint; \
                     report it with the pod's log"
                ),
            );
            write_termination_message(&failure);
            return Err(anyhow!("{}: {}", failure.reason, failure.message));
        }
        if once && !failed.is_empty() {
            let failure = Failure::new(
                "TablesFailed",
                format!(
                    "{} table(s) of CdcSource {namespace}/{name} failed: {}; each stream's status says why",
                    failed.len(),
                    failed.join(", ")
                ),
            );
            write_termination_message(&failure);
            return Err(anyhow!("{}: {}", failure.reason, failure.message));
        }
        Ok(false)
    }

    /// No table could start: waits until the source's streams differ from
    /// `watched` (`true`: read them again and start) or SIGTERM. A source
    /// run once (availableNow) does not wait.
    async fn wait_for_streams(
        &self,
        source: &CdcSource,
        watched: &Mutex<source_members::Members>,
        changed: &mut mpsc::UnboundedReceiver<()>,
    ) -> bool {
        if source.spec.trigger.available_now == Some(true) {
            return false;
        }
        tracing::info!(
            source = self.name,
            "no table of the source can run; waiting for its streams to change"
        );
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return false,
                news = changed.recv() => {
                    if news.is_none() {
                        return false;
                    }
                    let Some(now) = self.read_streams(source).await else { continue };
                    let running = watched.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    if source_members::members(&now, source) != running {
                        return true;
                    }
                }
            }
        }
    }

    /// A member for `stream`, reporting into its status, and its table
    /// when it can run (not invalid, not suspended).
    fn start(&self, source: &CdcSource, stream: &CdcStream) -> (Member, Option<TableRun>) {
        // Reported as it runs: the spec hash the operator compares is the
        // resolved spec's, and capture is looked at with the source's login.
        let resolved = resolved_stream(source, stream).unwrap_or_else(|_| stream.clone());
        let (status, latest) = StatusObserver::new(&resolved);
        let publisher = {
            let (api, stream, reports) = (
                self.streams.clone(),
                stream.clone(),
                Arc::clone(self.reports),
            );
            let interval = self.args.status_interval;
            tokio::spawn(
                async move { publish_status(api, &stream, latest, reports, interval).await },
            )
        };
        let mut member = Member {
            generation: stream.metadata.generation,
            running: None,
            stop: self.stop.child_token(),
            status: status.clone(),
            publisher,
            then: Then::Report,
        };
        let config = match source_worker_config(source, stream) {
            Ok(config) => config,
            Err(error) => {
                let failure = Failure::new(
                    "InvalidSpec",
                    format!("{error}; fix the stream or its CdcSource"),
                );
                tracing::error!(stream = %stream.name_any(), "{}", failure.message);
                status.worker_state(WorkerState::Failed, Some(&failure));
                return (member, None);
            }
        };
        if stream.spec.suspend || source.spec.suspend {
            status.worker_state(WorkerState::Stopped, None);
            return (member, None);
        }
        let observers: Vec<Arc<dyn Observer>> = vec![
            Arc::new(status.clone()),
            Arc::new(self.metrics.observer(&config.target.name, &config.app_id)),
            Arc::new(ProgressLog::default()),
            Arc::new(TableFailureReport::new(status, config.clone())),
        ];
        let mut options = RunOptions::new(Arc::new(Fanout(observers)));
        options.stop = member.stop.clone();
        member.running = Some(config.target.name.clone());
        (member, Some(TableRun { config, options }))
    }

    /// The source's streams now, or `None` (logged) when they cannot be
    /// listed: the tables run on as they are.
    async fn read_streams(&self, source: &CdcSource) -> Option<Vec<CdcStream>> {
        match self.streams.list(&ListParams::default()).await {
            Ok(list) => Some(
                list.items
                    .into_iter()
                    .filter(|s| source_members::is_member(s, source))
                    .collect(),
            ),
            Err(error) => {
                tracing::warn!(
                    source = self.name,
                    "cannot list the CdcStreams after a change: {error}; the tables run on as they are"
                );
                None
            }
        }
    }

    /// Follows the source's streams to `now`: stops the tables of the
    /// streams removed or edited (an edited one starts again once ended),
    /// starts members for the added ones; the tables to start.
    async fn follow(
        &self,
        source: &CdcSource,
        members: &mut BTreeMap<String, Member>,
        now: &[CdcStream],
    ) -> Vec<TableRun> {
        // A member whose table is stopping because its stream left is not
        // run any more: a stream of that name seen again is added anew.
        let running: source_members::Members = members
            .iter()
            .filter(|(_, m)| !matches!(m.then, Then::Leave))
            .map(|(name, m)| (name.clone(), m.generation))
            .collect();
        let moves = source_members::moves(&running, &source_members::members(now, source));
        let by_name: BTreeMap<String, &CdcStream> = now.iter().map(|s| (s.name_any(), s)).collect();
        let mut start = Vec::new();
        for name in &moves.removed {
            tracing::info!(source = self.name, stream = %name, "a stream left the source: stopping its table");
            let Some(member) = members.get_mut(name) else {
                continue;
            };
            if member.running.is_some() {
                member.then = Then::Leave;
                member.stop.cancel();
            } else if let Some(member) = members.remove(name) {
                finish(member).await;
            }
        }
        for name in &moves.edited {
            let (Some(member), Some(stream)) = (members.get_mut(name), by_name.get(name)) else {
                continue;
            };
            tracing::info!(source = self.name, stream = %name, "a stream's spec changed: its table starts again after its batch");
            member.generation = stream.metadata.generation;
            if member.running.is_some() {
                member.then = Then::Restart(Box::new((*stream).clone()));
                member.stop.cancel();
            } else if let Some(old) = members.remove(name) {
                finish(old).await;
                let (member, table) = self.start(source, stream);
                members.insert(name.clone(), member);
                start.extend(table);
            }
        }
        for name in &moves.added {
            let Some(stream) = by_name.get(name) else {
                continue;
            };
            tracing::info!(source = self.name, stream = %name, "a stream joined the source: starting its table");
            // Its name's old table is still stopping: it starts again
            // once that one has ended (one run per checkpoint).
            if let Some(leaving) = members.get_mut(name) {
                leaving.generation = stream.metadata.generation;
                leaving.then = Then::Restart(Box::new((*stream).clone()));
                continue;
            }
            let (member, table) = self.start(source, stream);
            members.insert(name.clone(), member);
            start.extend(table);
        }
        start
    }

    /// A table ended: reports how (or lets its stream go, or starts it
    /// again with its new spec: the table to start).
    async fn ended(
        &self,
        source: &CdcSource,
        members: &mut BTreeMap<String, Member>,
        outcome: TableOutcome,
        failed: &mut Vec<String>,
    ) -> Option<TableRun> {
        let name = members
            .iter()
            .find(|(_, m)| m.running.as_deref() == Some(outcome.target.as_str()))
            .map(|(name, _)| name.clone())?;
        let member = members.get_mut(&name)?;
        member.running = None;
        match std::mem::replace(&mut member.then, Then::Report) {
            Then::Leave => {
                if let Some(member) = members.remove(&name) {
                    finish(member).await;
                }
                None
            }
            Then::Restart(stream) => {
                // The old status sends its last report before the new one
                // starts, so the two never race.
                if let Some(member) = members.remove(&name) {
                    finish(member).await;
                }
                let (member, table) = self.start(source, &stream);
                members.insert(name, member);
                table
            }
            Then::Report => {
                match outcome.result {
                    // Its failure is in its status already (TableFailureReport).
                    Err(error) => {
                        tracing::error!(target_table = %outcome.target, "{error}");
                        failed.push(outcome.target);
                    }
                    Ok(_) if self.stop.is_cancelled() => {
                        member.status.worker_state(WorkerState::Stopped, None);
                    }
                    Ok(_) => member.status.worker_state(WorkerState::Completed, None),
                }
                None
            }
        }
    }

    /// Reports the captured tables none of `streams` covers, every
    /// `every`, until aborted.
    fn discover(&self, streams: &[CdcStream], every: std::time::Duration) -> JoinHandle<()> {
        tokio::spawn(source_discovery::report(
            self.sources.clone(),
            self.name.to_string(),
            streams
                .iter()
                .map(|s| s.spec.source.table.clone())
                .collect(),
            every,
            self.stop.child_token(),
        ))
    }
}

/// Lets a member go: its status sends its last report (bounded in time).
async fn finish(member: Member) {
    let Member {
        status, publisher, ..
    } = member;
    drop(status);
    if tokio::time::timeout(FINAL_REPORT_TIMEOUT, publisher)
        .await
        .is_err()
    {
        tracing::error!("a stream's last status report did not reach the API server in time");
    }
}
