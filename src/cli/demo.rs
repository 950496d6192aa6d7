//! `mssql-cdc demo`: the sandbox with its demo shop and change generator,
//! both demo tables streamed through one CdcSource (as `run -f` runs a
//! source and its streams) into a local lake, batch by batch, until Ctrl-C
//! or `--duration`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use mssql_cdc::engine::{RunOptions, RunSummary, Silent, TableRun, run_tables};
use mssql_cdc::spec::{Manifests, load_documents, source_stream_config};
use mssql_cdc_sandbox::{DemoOptions, Sandbox, SandboxOptions, TlsSource};

use super::console::Console;

/// The demo script's least-privilege reader (a public sandbox password).
const READER: (&str, &str) = ("cdc_reader", "Reader-Pa55word!");
const PASSWORD_ENV: &str = "MSSQL_CDC_DEMO_PASSWORD";

/// Arguments of `demo`.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Directory of the lake (bronze, facts and checkpoint go below it).
    #[arg(long, default_value = "./demo-lake")]
    pub lake: PathBuf,
    /// Stop after this long (e.g. `30s`, `5m`); default: until Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Changes per second the generator makes.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Time between micro-batches (e.g. `2s`).
    #[arg(long, default_value = "2s")]
    pub trigger: String,
}

/// Runs the demo.
pub async fn run_demo(args: DemoArgs) -> anyhow::Result<()> {
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        bail!(
            "--rate must be a positive number of changes per second, got {}",
            args.rate
        );
    }
    humantime::parse_duration(&args.trigger)
        .with_context(|| format!("--trigger {:?} is not a duration like 2s", args.trigger))?;
    std::fs::create_dir_all(&args.lake)
        .with_context(|| format!("cannot create the lake directory {}", args.lake.display()))?;
    let lake = args
        .lake
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", args.lake.display()))?;

    let sandbox = Sandbox::start(SandboxOptions {
        listen: "127.0.0.1:0".parse().context("loopback address")?,
        sa_password: format!("Sa-{}!", uuid::Uuid::new_v4().simple()),
        tls: TlsSource::SelfSigned,
        demo: Some(DemoOptions {
            rate: args.rate,
            seed: 1,
        }),
        ..SandboxOptions::default()
    })
    .await
    .context("the demo sandbox did not start")?;
    let address = sandbox.local_addr();

    let manifest = demo_manifest(&lake, address.port(), &args.trigger);
    let Manifests::Source { source, streams } =
        load_documents(&manifest).context("the demo manifest")?
    else {
        bail!("the demo manifest is one CdcSource and its CdcStreams");
    };
    let pacing = source.spec.pacing().context("the demo's CdcSource")?;
    println!("mssql-cdc demo");
    println!(
        "  sandbox    {address} (database shop, CDC on dbo.orders and dbo.customers, {} changes/s)",
        args.rate
    );
    println!("  source     shop: both tables in one CdcSource, one line per batch and table");
    for table in DEMO_TABLES {
        println!(
            "  bronze     {}",
            lake.join(format!("bronze/{table}")).display()
        );
    }
    println!(
        "  facts      {}",
        lake.join("ops/ingestion_facts").display()
    );
    println!("  checkpoint {}", lake.join("_checkpoints").display());
    println!(
        "  stop with Ctrl-C{}",
        args.duration
            .map(|d| format!(" (or after {})", humantime::format_duration(d)))
            .unwrap_or_default()
    );
    println!();

    let stop = tokio_util::sync::CancellationToken::new();
    let mut tables = Vec::new();
    for stream in &streams {
        let name = stream.metadata.name.as_deref().unwrap_or_default();
        let config = source_stream_config("shop", &source.spec, name, &stream.spec)
            .context("the demo manifest")?;
        let mut options = RunOptions::new(Arc::new(Console::for_table(&config.target.name)));
        options.env = BTreeMap::from([(PASSWORD_ENV.to_string(), READER.1.to_string())]);
        options.stop = stop.clone();
        tables.push(TableRun { config, options });
    }
    let duration = args.duration;
    let signal = stop.clone();
    tokio::spawn(async move {
        match duration {
            Some(d) => {
                tokio::select! {
                    () = super::shutdown_signal() => {}
                    () = tokio::time::sleep(d) => {}
                }
            }
            None => super::shutdown_signal().await,
        }
        signal.cancel();
    });
    let outcomes = run_tables(tables, Some(pacing), Arc::new(Silent), None).await;
    sandbox.stop().await.context("stopping the sandbox")?;
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let counts = |s: &RunSummary| {
        format!(
            "{}, {}, {}",
            plural(s.batches, "batch", "batches"),
            plural(s.rows, "change row", "change rows"),
            plural(s.snapshot_rows, "snapshot row", "snapshot rows"),
        )
    };
    println!();
    let mut total = RunSummary::default();
    for outcome in outcomes {
        let summary = outcome
            .result
            .with_context(|| format!("the demo's table {}", outcome.target))?;
        println!("{} stopped: {}", outcome.target, counts(&summary));
        total.batches += summary.batches;
        total.rows += summary.rows;
        total.snapshot_rows += summary.snapshot_rows;
    }
    println!(
        "demo stopped: {}. Query the lake with any Delta reader, e.g. DuckDB:",
        counts(&total)
    );
    println!(
        "  SELECT target, batch_id, rows, ingestion_lag_seconds FROM delta_scan('{}') ORDER BY written_at;",
        lake.join("ops/ingestion_facts").display()
    );
    Ok(())
}

/// The sandbox's demo tables, each a CdcStream of the one source `shop`.
const DEMO_TABLES: [&str; 2] = ["orders", "customers"];

/// One CdcSource for the sandbox's `shop` and one CdcStream per demo
/// table, as `run -f` takes them.
fn demo_manifest(lake: &std::path::Path, port: u16, trigger: &str) -> String {
    let path = |rel: &str| lake.join(rel).display().to_string();
    let mut text = format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcSource
metadata: {{name: shop}}
spec:
  connection:
    host: 127.0.0.1
    port: {port}
    database: shop
    credentials:
      username: {user}
      passwordFrom: {{env: {PASSWORD_ENV}}}
    encrypt: required
    trustServerCertificate: true
  trigger: {{processingTime: {trigger}}}
  idleCommitInterval: 30s
  defaults:
    facts: {{name: ops.ingestion_facts, location: "{facts}"}}
    snapshot: {{mode: initial, chunkRows: 1000}}
"#,
        user = READER.0,
        facts = path("ops/ingestion_facts"),
    );
    for table in DEMO_TABLES {
        text.push_str(&format!(
            r#"---
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: {table}}}
spec:
  appId: demo-{table}
  sourceRef: {{name: shop}}
  source: {{table: dbo.{table}}}
  target: {{name: bronze.{table}, location: "{bronze}"}}
  checkpoint: "{checkpoint}"
"#,
            bronze = path(&format!("bronze/{table}")),
            checkpoint = path(&format!("_checkpoints/{table}")),
        ));
    }
    text
}
