//! `mssql-cdc worker --source NS/NAME`: what a CdcSource's one worker pod
//! runs. It reads its CdcSource and every CdcStream of the namespace that
//! names it in `spec.sourceRef`, runs them all in this process through the
//! source's rounds (`engine::run_tables`), and reports each table into its
//! own stream's status, as a stream's own worker does: progress, snapshot,
//! finalization, and a table's failure with its reason (the others go on).
//! What concerns the source as a whole (SQL Server down, capture's health)
//! goes once into the CdcSource's status (`source_report.rs`).
//! A stream that cannot be resolved against the source says why in its
//! status and is not run. Beside the tables, `source_discovery` reports the
//! captured tables no stream covers.

use std::sync::Arc;

use anyhow::{Context, anyhow};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use mssql_cdc::engine::{Fanout, Observer, RunOptions, TableRun, run_tables};
use mssql_cdc::metrics::{Metrics, MetricsServer};
use mssql_cdc::operator::children::source_worker_config;
use mssql_cdc::operator::failure::Failure;
use mssql_cdc::operator::source_children::resolved_stream;
use mssql_cdc::operator::worker::{
    StatusObserver, StatusReports, TableFailureReport, WorkerMetrics, publish_status,
};
use mssql_cdc::spec::{CdcSource, CdcStream, DEFAULT_IDLE_COMMIT_INTERVAL, Trigger, WorkerState};

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
        // Cancelled by SIGTERM, or by the watch when the source's streams
        // change: the tables finish their batches, then start again.
        let restart = stop.child_token();
        let watching = tokio::spawn(source_members::watch(
            streams.clone(),
            name.to_string(),
            source_members::members(&mine, name),
            restart.clone(),
        ));
        let discovering = tokio::spawn(source_discovery::report(
            sources.clone(),
            name.to_string(),
            mine.iter().map(|s| s.spec.source.table.clone()).collect(),
            source
                .spec
                .pacing()
                .map_or(DEFAULT_IDLE_COMMIT_INTERVAL, |p| p.idle_commit_interval),
            restart.clone(),
        ));
        let round = Round {
            args,
            namespace,
            name,
            sources: &sources,
            streams: &streams,
            reports: &reports,
            metrics: &metrics,
            stop: &stop,
            restart: &restart,
        };
        let ended = round.run(&source, &mine).await;
        let changed = restart.is_cancelled() && !stop.is_cancelled();
        restart.cancel();
        watching.abort();
        discovering.abort();
        ended?;
        if !changed {
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
        .filter(|stream| {
            stream
                .spec
                .source_ref
                .as_ref()
                .is_some_and(|r| r.name == name)
        })
        .collect();
    tracing::info!(
        source = name,
        tables = mine.len(),
        "running the tables of the source"
    );

    Ok((source, mine))
}

/// One run of the source's tables, until caught up, SIGTERM, or a change
/// of its streams.
struct Round<'a> {
    args: &'a WorkerArgs,
    namespace: &'a str,
    name: &'a str,
    sources: &'a Api<CdcSource>,
    streams: &'a Api<CdcStream>,
    reports: &'a Arc<StatusReports>,
    metrics: &'a Arc<Metrics>,
    stop: &'a tokio_util::sync::CancellationToken,
    restart: &'a tokio_util::sync::CancellationToken,
}

impl Round<'_> {
    async fn run(&self, source: &CdcSource, mine: &[CdcStream]) -> anyhow::Result<()> {
        let Round {
            args,
            namespace,
            name,
            sources,
            streams,
            reports,
            metrics,
            stop,
            restart,
        } = *self;
        let pacing = source
            .spec
            .pacing()
            .with_context(|| format!("CdcSource {namespace}/{name}"))?;
        let mut publishers = Vec::new();
        let mut statuses = std::collections::BTreeMap::new();
        let mut tables = Vec::new();
        for stream in mine {
            // Reported as it runs: the spec hash the operator compares is the
            // resolved spec's, and capture is looked at with the source's login.
            let resolved = resolved_stream(source, stream).unwrap_or_else(|_| stream.clone());
            let (status, latest) = StatusObserver::new(&resolved);
            publishers.push({
                let (api, stream, reports) = (streams.clone(), stream.clone(), Arc::clone(reports));
                let interval = args.status_interval;
                tokio::spawn(async move {
                    publish_status(api, &stream, latest, reports, interval).await
                })
            });
            let config = match source_worker_config(source, stream) {
                Ok(config) => config,
                Err(error) => {
                    let failure = Failure::new(
                        "InvalidSpec",
                        format!("{error}; fix the stream or its CdcSource"),
                    );
                    tracing::error!(stream = %stream.name_any(), "{}", failure.message);
                    status.worker_state(WorkerState::Failed, Some(&failure));
                    continue;
                }
            };
            if stream.spec.suspend || source.spec.suspend {
                status.worker_state(WorkerState::Stopped, None);
                continue;
            }
            let observers: Vec<Arc<dyn Observer>> = vec![
                Arc::new(status.clone()),
                Arc::new(metrics.observer(&config.target.name, &config.app_id)),
                Arc::new(ProgressLog::default()),
                Arc::new(TableFailureReport::new(status.clone(), config.clone())),
            ];
            let mut options = RunOptions::new(Arc::new(Fanout(observers)));
            options.stop = restart.clone();
            statuses.insert(config.target.name.clone(), status);
            tables.push(TableRun { config, options });
        }
        let once = tables
            .first()
            .is_some_and(|t| t.config.trigger == Trigger::AvailableNow);
        let mut failed = Vec::new();
        let report = SourceReport::start(
            sources.clone(),
            name,
            &tables,
            reports,
            args.status_interval,
        );
        let outcomes = run_tables(tables, Some(pacing), Arc::clone(&report.observer)).await;
        report.finish().await;
        for outcome in outcomes {
            let Some(status) = statuses.get(&outcome.target) else {
                continue;
            };
            match outcome.result {
                // Its failure is in its status already (TableFailureReport).
                Err(error) => {
                    tracing::error!(target_table = %outcome.target, "{error}");
                    failed.push(outcome.target);
                }
                Ok(_) if stop.is_cancelled() => status.worker_state(WorkerState::Stopped, None),
                // Started again at once, with the source's new streams.
                Ok(_) if restart.is_cancelled() => {}
                Ok(_) => status.worker_state(WorkerState::Completed, None),
            }
        }
        // The last clones of the observers go: each publisher sends its last
        // report and ends.
        drop(statuses);
        let publishing = futures::future::join_all(publishers);
        if tokio::time::timeout(FINAL_REPORT_TIMEOUT, publishing)
            .await
            .is_err()
        {
            tracing::error!("the last status reports did not reach the API server in time");
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
        Ok(())
    }
}
