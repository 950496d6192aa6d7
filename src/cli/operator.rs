//! `mssql-cdc operator`: the Kubernetes controller for CdcStreams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use mssql_cdc::metrics::{Metrics, MetricsServer};
use mssql_cdc::operator::children::WorkerDefaults;
use mssql_cdc::operator::controller::{Context, run_controller};

use super::lake_query::parse_duration;

/// Arguments of `operator`.
#[derive(clap::Args)]
pub struct OperatorArgs {
    /// Address of `/healthz` (the probes) and `/metrics`.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Image of worker pods, unless a stream sets spec.worker.image.
    #[arg(long, env = "MSSQL_CDC_WORKER_IMAGE")]
    pub worker_image: String,
    /// ServiceAccount of worker pods, unless a stream sets
    /// spec.worker.serviceAccountName.
    #[arg(long)]
    pub worker_service_account: Option<String>,
    /// How often each stream is looked at again without a change: a
    /// stopped worker cannot report, so this bounds how late Live turns
    /// False.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub resync: Duration,
}

/// Reconciles every CdcStream until SIGTERM or Ctrl-C.
pub async fn run_operator(args: OperatorArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("cannot configure the Kubernetes client (in-cluster or KUBECONFIG)")?;
    // Reconcile metrics are not written yet: /metrics is empty, /healthz answers.
    let server = MetricsServer::start(args.listen, Arc::new(Metrics::new())).await?;
    let defaults = WorkerDefaults {
        image: args.worker_image,
        service_account: args.worker_service_account,
    };
    let instance = std::env::var("POD_NAME").ok();
    tracing::info!("operator started");
    run_controller(
        Context::new(client, defaults, instance).with_resync(args.resync),
        super::shutdown_signal(),
    )
    .await;
    drop(server);
    tracing::info!("operator stopped");
    Ok(())
}
