//! `mssql-cdc run -f FILE [--once]`: one CdcStream manifest, or one
//! CdcSource with its CdcStreams (each table then runs side by side in this
//! process, a failed one retried on its own), locally.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use mssql_cdc::engine::{
    Fanout, Observer, RunOptions, RunSummary, Silent, TableRun, run, run_tables,
};
use mssql_cdc::lake::lease::DEFAULT_LEASE_TTL;
use mssql_cdc::metrics::{Metrics, MetricsServer};
use mssql_cdc::spec::{
    CdcSource, CdcStream, Manifests, Membership, load_documents, source_membership,
    source_stream_config,
};

use super::console::Console;

/// Arguments of `run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The CdcStream manifest (YAML), or a file of several documents: one
    /// CdcSource and the CdcStreams of its tables.
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
    let stream = match load_documents(&text)
        .with_context(|| format!("manifest {}", args.file.display()))?
    {
        Manifests::Stream(stream) => *stream,
        Manifests::Source { source, streams } => return run_source(&args, &source, streams).await,
    };
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
    stop_on_signal(&options);
    let summary = run(config, options).await?;
    println!("stopped: {}", summary_line(&summary));
    Ok(())
}

/// Every table of `source` in this process: each resolved and checked
/// first (one invalid stream stops the start, naming it), then run side by
/// side until caught up or stopped.
async fn run_source(
    args: &RunArgs,
    source: &CdcSource,
    streams: Vec<CdcStream>,
) -> anyhow::Result<()> {
    let file = args.file.display();
    let Some(source_name) = source.metadata.name.as_deref() else {
        bail!("manifest {file}: the CdcSource has no metadata.name");
    };
    if streams.is_empty() {
        bail!("manifest {file}: CdcSource {source_name} has no CdcStream in the file");
    }
    if args.metrics_addr.is_some() {
        bail!("--metrics-addr serves one stream; run a source's tables without it for now");
    }
    let pacing = source
        .spec
        .pacing()
        .with_context(|| format!("manifest {file}: CdcSource {source_name}"))?;
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tables = Vec::new();
    for stream in &streams {
        let name = stream.metadata.name.as_deref().unwrap_or("(unnamed)");
        if let Membership::Refused(refused) = source_membership(source, stream) {
            bail!("manifest {file}: {refused}");
        }
        let config = source_stream_config(source_name, &source.spec, name, &stream.spec)
            .with_context(|| format!("manifest {file}"))?;
        if stream.spec.suspend || source.spec.suspend {
            eprintln!("{name}: suspended, not run");
            continue;
        }
        let warnings = config.unusable_options();
        for warning in &warnings {
            tracing::warn!("{file}: {name}: {warning}");
        }
        let console: Arc<dyn Observer> = Arc::new(Console::for_table(&config.target.name));
        let mut options = RunOptions::new(console);
        options.once = args.once;
        options.adopt_target = args.adopt_target;
        options.lease_ttl = *args.lease_ttl;
        options.warnings = warnings;
        options.stop = stop.clone();
        tables.push(TableRun { config, options });
    }
    eprintln!("source {source_name}: {} tables", tables.len());
    let signal = stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        eprintln!("stopping after the current batches...");
        signal.cancel();
    });
    let mut failed = 0;
    for outcome in run_tables(tables, Some(pacing), Arc::new(Silent), None).await {
        match outcome.result {
            Ok(summary) => println!("{}: stopped: {}", outcome.target, summary_line(&summary)),
            Err(error) => {
                failed += 1;
                eprintln!("{}: failed: {error}", outcome.target);
            }
        }
    }
    if failed > 0 {
        bail!("{failed} table(s) of source {source_name} failed; see above");
    }
    Ok(())
}

/// Cancels the run on Ctrl-C/SIGTERM.
fn stop_on_signal(options: &RunOptions) {
    let stop = options.stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        eprintln!("stopping after the current batch...");
        stop.cancel();
    });
}

/// `3 batches, 120 change rows, 40 snapshot rows`.
fn summary_line(summary: &RunSummary) -> String {
    format!(
        "{} batches, {} change rows{}",
        summary.batches,
        summary.rows,
        if summary.snapshot_rows > 0 {
            format!(", {} snapshot rows", summary.snapshot_rows)
        } else {
            String::new()
        }
    )
}
