//! `mssql-cdc run -f FILE [--once]`: one CdcStream manifest, locally.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use mssql_cdc::engine::{Fanout, Observer, RunOptions, run};
use mssql_cdc::lake::lease::DEFAULT_LEASE_TTL;
use mssql_cdc::metrics::{Metrics, MetricsServer};
use mssql_cdc::spec::load_yaml;

use super::console::Console;

/// Arguments of `run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The CdcStream manifest (YAML).
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Read up to the max LSN seen at start, then exit (availableNow).
    #[arg(long)]
    pub once: bool,
    /// Serve Prometheus metrics on `/metrics` and a liveness probe on
    /// `/healthz` at this address, e.g. `127.0.0.1:9464`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Take over a target that holds commits of the manifest's appId made
    /// by another checkpoint: stream on, in this new and empty checkpoint,
    /// after the position the target's newest commit recorded (the same as
    /// `spec.adoptTarget: true`).
    #[arg(long)]
    pub adopt_target: bool,
    /// How long the checkpoint's lease on an object store lasts without
    /// renewal: a stopped process's successor waits this long; a process
    /// that cannot renew stops writing a fifth of it before.
    #[arg(long, default_value_t = DEFAULT_LEASE_TTL.into())]
    pub lease_ttl: humantime::Duration,
}

/// Loads, validates and runs the manifest until caught up (`--once`),
/// Ctrl-C/SIGTERM, or an error.
pub async fn run_manifest(args: RunArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read manifest {}", args.file.display()))?;
    // Unknown fields are refused here, before validation: a misspelt field
    // often explains an invalid one.
    let stream = load_yaml(&text).with_context(|| format!("manifest {}", args.file.display()))?;
    let config = match stream.spec.validate() {
        Ok(config) => config,
        Err(errors) => bail!("manifest {} is not valid:\n{errors}", args.file.display()),
    };
    let warnings = config.unusable_options();
    for warning in &warnings {
        tracing::warn!("{}: {warning}", args.file.display());
    }
    let mut observers: Vec<Arc<dyn Observer>> = vec![Arc::new(Console::new())];
    let _server = match args.metrics_addr {
        Some(address) => {
            let metrics = Arc::new(Metrics::new());
            observers.push(Arc::new(
                metrics.observer(&config.target.name, &config.app_id),
            ));
            let server = MetricsServer::start(address, metrics)
                .await
                .context("--metrics-addr")?;
            eprintln!("metrics: http://{}/metrics", server.local_addr());
            Some(server)
        }
        None => None,
    };
    let mut options = RunOptions::new(Arc::new(Fanout(observers)));
    options.once = args.once;
    options.adopt_target = args.adopt_target;
    options.lease_ttl = *args.lease_ttl;
    options.warnings = warnings;
    let stop = options.stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        eprintln!("stopping after the current batch...");
        stop.cancel();
    });
    let summary = run(config, options).await?;
    println!(
        "stopped: {} batches, {} change rows{}",
        summary.batches,
        summary.rows,
        if summary.snapshot_rows > 0 {
            format!(", {} snapshot rows", summary.snapshot_rows)
        } else {
            String::new()
        }
    );
    Ok(())
}
