//! `mssql-cdc worker --stream NS/NAME`: what a worker pod runs. It reads
//! its CdcStream, runs the engine, and reports into the status: each batch
//! and trigger into `status.progress`, the snapshot into `status.snapshot`,
//! capture's health into `status.capture` (with the monitoring login),
//! each finalization row into `status.finalization`, purged changes into
//! `status.dataLoss`, and itself into `status.worker`. Before it exits on
//! an error it says why there and in the container's termination message.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use kube::Api;
use mssql_cdc::engine::{Fanout, Observer, RunOptions, run};
use mssql_cdc::metrics::{Metrics, MetricsServer};
use mssql_cdc::operator::children::worker_config;
use mssql_cdc::operator::failure::{Failure, engine_failure, stream_read_failure};
use mssql_cdc::operator::worker::{StatusObserver, StatusReports, WorkerMetrics, publish_status};
use mssql_cdc::spec::{CdcStream, Trigger, WorkerState, resolve_password};

use super::capture_monitor::watch_capture;
use super::progress_log::ProgressLog;

/// How long the last report may take to reach the API server at exit.
pub(super) const FINAL_REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where Kubernetes reads a container's termination message (the pod's
/// default `terminationMessagePath`); written only when the kubelet made it.
const TERMINATION_LOG: &str = "/dev/termination-log";

/// Arguments of `worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The CdcStream to run, as NAMESPACE/NAME.
    #[arg(long, required_unless_present = "source", conflicts_with = "source")]
    pub stream: Option<String>,
    /// The CdcSource to run, as NAMESPACE/NAME: every CdcStream of its
    /// namespace whose `spec.sourceRef` names it, in this one process.
    #[arg(long)]
    pub source: Option<String>,
    /// Address of `/healthz` (the probes) and `/metrics` (Prometheus);
    /// `--metrics-addr` is the same flag, as `run` names it.
    #[arg(
        long,
        visible_alias = "metrics-addr",
        env = "MSSQL_CDC_LISTEN",
        default_value = "0.0.0.0:8080"
    )]
    pub listen: SocketAddr,
    /// How often the worker writes moving numbers (progress, lags,
    /// snapshot counts) into the status at most; a change of the phase or
    /// of a condition's status or reason is written at once. The operator
    /// sets it from its `--worker-status-interval`.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub status_interval: Duration,
}

/// Runs the stream until caught up (availableNow), SIGTERM, or an error.
pub async fn run_worker(args: WorkerArgs) -> anyhow::Result<()> {
    let (flag, reference) = match (&args.stream, &args.source) {
        (Some(stream), _) => ("--stream", stream),
        (None, Some(source)) => ("--source", source),
        (None, None) => {
            return Err(anyhow!(
                "give --stream NAMESPACE/NAME or --source NAMESPACE/NAME"
            ));
        }
    };
    let (namespace, name) = namespaced_name(flag, reference)?;
    if args.source.is_some() {
        return super::worker_source::run_source_worker(&args, namespace, name).await;
    }
    let client = kube::Client::try_default()
        .await
        .context("cannot configure the Kubernetes client (in-cluster or KUBECONFIG)")?;
    let api: Api<CdcStream> = Api::namespaced(client, namespace);
    let stream = match api.get(name).await {
        Ok(stream) => stream,
        // Nothing can go into a status it may not read: the termination
        // message is where the operator learns why.
        Err(error) => {
            let failure = stream_read_failure(&error, namespace, name);
            write_termination_message(&failure);
            return Err(anyhow!("{}: {}", failure.reason, failure.message));
        }
    };

    let reports = Arc::new(StatusReports::default());
    let (status, latest) = StatusObserver::new(&stream);
    let publisher = {
        let (api, stream, reports) = (api.clone(), stream.clone(), Arc::clone(&reports));
        let interval = args.status_interval;
        tokio::spawn(async move { publish_status(api, &stream, latest, reports, interval).await })
    };
    let outcome = run_stream(&args, &stream, &status, &reports).await;
    let failure = outcome.as_ref().err().cloned();
    match &outcome {
        Ok(state) => status.worker_state(*state, None),
        Err(failure) => {
            status.worker_state(WorkerState::Failed, Some(failure));
            write_termination_message(failure);
        }
    }
    // The last clone of the observer goes: the publisher sends the last
    // report and ends.
    drop(status);
    if tokio::time::timeout(FINAL_REPORT_TIMEOUT, publisher)
        .await
        .is_err()
    {
        tracing::error!("the last status report did not reach the API server in time");
    } else if reports.failing() {
        tracing::error!("the last status report was not applied: the CdcStream's status is stale");
    }
    match failure {
        Some(failure) => Err(anyhow!("{}: {}", failure.reason, failure.message)),
        None => {
            tracing::info!("worker stopped");
            Ok(())
        }
    }
}

/// `NAMESPACE/NAME` of `flag`, both parts non-empty.
pub(super) fn namespaced_name<'a>(
    flag: &str,
    reference: &'a str,
) -> anyhow::Result<(&'a str, &'a str)> {
    reference
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| anyhow!("{flag}: expected NAMESPACE/NAME, got {reference:?}"))
}

/// Runs the engine with every observer; how it ended, or why it failed.
async fn run_stream(
    args: &WorkerArgs,
    stream: &CdcStream,
    status: &StatusObserver,
    reports: &Arc<StatusReports>,
) -> Result<WorkerState, Failure> {
    let config = worker_config(stream).map_err(|errors| {
        Failure::new(
            "InvalidSpec",
            format!("the spec is not valid: {errors}; fix the spec"),
        )
    })?;
    let metrics = Arc::new(Metrics::new());
    let stream_metrics = metrics.observer(&config.target.name, &config.app_id);
    let exposition = WorkerMetrics {
        stream: metrics,
        reports: Arc::clone(reports),
    };
    let _server = MetricsServer::start(args.listen, Arc::new(exposition))
        .await
        .map_err(|e| Failure::new("ListenFailed", format!("--listen {}: {e}", args.listen)))?;
    let interval = match config.trigger {
        Trigger::ProcessingTime(interval) => interval,
        Trigger::AvailableNow => Duration::from_secs(10),
    };
    let monitor = monitoring_password(&config).map(|password| {
        let status = status.clone();
        tokio::spawn(watch_capture(
            config.source.clone(),
            password,
            interval,
            move |capture| status.capture_looked(capture),
        ))
    });
    let observers: Vec<Arc<dyn Observer>> = vec![
        Arc::new(status.clone()),
        Arc::new(stream_metrics),
        Arc::new(ProgressLog::default()),
    ];
    let options = RunOptions::new(Arc::new(Fanout(observers)));
    let stop = options.stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        tracing::info!("stopping after the current batch");
        stop.cancel();
    });
    let stopped = options.stop.clone();
    let outcome = run(config.clone(), options).await;
    if let Some(monitor) = monitor {
        monitor.abort();
    }
    let summary = outcome.map_err(|error| {
        tracing::error!("{error}");
        engine_failure(&error, &config)
    })?;
    tracing::info!(
        batches = summary.batches,
        rows = summary.rows,
        "the engine stopped"
    );
    Ok(if stopped.is_cancelled() {
        WorkerState::Stopped
    } else {
        WorkerState::Completed
    })
}

/// The monitoring login's password, when the spec names one and the pod
/// has it; a missing one is a warning, never a failure.
pub(super) fn monitoring_password(
    config: &mssql_cdc::spec::StreamConfig,
) -> Option<secrecy::SecretString> {
    let login = config.source.monitoring.as_ref()?;
    resolve_password(&login.password, |name: &str| std::env::var(name).ok())
        .map_err(|e| tracing::warn!("spec.source.monitoring: {e}; capture is not looked at"))
        .ok()
}

/// The failure as the container's termination message, where the kubelet
/// reads it (`kubectl describe pod`, the pod's `lastState`).
pub(super) fn write_termination_message(failure: &Failure) {
    let path = Path::new(TERMINATION_LOG);
    if path.exists()
        && let Err(error) = std::fs::write(path, format!("{}: {}", failure.reason, failure.message))
    {
        tracing::warn!("cannot write the termination message: {error}");
    }
}
