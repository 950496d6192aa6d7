//! `mssql-cdc worker --stream NS/NAME`: what a worker pod runs. It reads
//! its CdcStream, runs the engine, and reports each batch into
//! `status.progress`, each finalization row into `status.finalization` and
//! purged changes it meets into `status.dataLoss`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use kube::Api;
use mssql_cdc::engine::{Fanout, Observer, RunOptions, run};
use mssql_cdc::metrics::{Metrics, MetricsServer};
use mssql_cdc::operator::children::worker_config;
use mssql_cdc::operator::worker::{StatusObserver, StatusReports, WorkerMetrics, publish_status};
use mssql_cdc::spec::CdcStream;

/// How long the last report may take to reach the API server at exit.
const FINAL_REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The CdcStream to run, as NAMESPACE/NAME.
    #[arg(long)]
    pub stream: String,
    /// Address of `/healthz` (the probes) and `/metrics` (Prometheus);
    /// `--metrics-addr` is the same flag, as `run` names it.
    #[arg(
        long,
        visible_alias = "metrics-addr",
        env = "MSSQL_CDC_LISTEN",
        default_value = "0.0.0.0:8080"
    )]
    pub listen: SocketAddr,
}

/// Runs the stream until caught up (availableNow), SIGTERM, or an error.
pub async fn run_worker(args: WorkerArgs) -> anyhow::Result<()> {
    let (namespace, name) = args
        .stream
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| anyhow!("--stream: expected NAMESPACE/NAME, got {:?}", args.stream))?;
    let client = kube::Client::try_default()
        .await
        .context("cannot configure the Kubernetes client (in-cluster or KUBECONFIG)")?;
    let api: Api<CdcStream> = Api::namespaced(client, namespace);
    let stream = api
        .get(name)
        .await
        .with_context(|| format!("cannot read CdcStream {namespace}/{name}"))?;
    let config = worker_config(&stream)
        .map_err(|errors| anyhow!("CdcStream {namespace}/{name} is not valid:\n{errors}"))?;

    let metrics = Arc::new(Metrics::new());
    let stream_metrics = metrics.observer(&config.target.name, &config.app_id);
    let reports = Arc::new(StatusReports::default());
    let exposition = WorkerMetrics {
        stream: metrics,
        reports: Arc::clone(&reports),
    };
    let server = MetricsServer::start(args.listen, Arc::new(exposition))
        .await
        .context("--listen")?;
    let (observer, latest) = StatusObserver::new(&stream);
    let publisher = tokio::spawn(publish_status(
        api,
        name.to_string(),
        latest,
        Arc::clone(&reports),
    ));
    let observers: Vec<Arc<dyn Observer>> = vec![Arc::new(observer), Arc::new(stream_metrics)];
    let options = RunOptions::new(Arc::new(Fanout(observers)));
    let stop = options.stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        tracing::info!("stopping after the current batch");
        stop.cancel();
    });
    let outcome = run(config, options).await;
    // The engine dropped the observer: the publisher sends the last report and ends.
    if tokio::time::timeout(FINAL_REPORT_TIMEOUT, publisher)
        .await
        .is_err()
    {
        tracing::error!("the last status report did not reach the API server in time");
    } else if reports.failing() {
        tracing::error!("the last status report was not applied: the CdcStream's status is stale");
    }
    drop(server);
    let summary = outcome?;
    tracing::info!(
        batches = summary.batches,
        rows = summary.rows,
        "worker stopped"
    );
    Ok(())
}
