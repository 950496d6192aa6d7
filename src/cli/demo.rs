//! `mssql-cdc demo`: the sandbox with its demo shop and change generator,
//! streamed into a local lake, batch by batch, until Ctrl-C or `--duration`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use mssql_cdc::engine::{RunOptions, run};
use mssql_cdc::spec::load_yaml;
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
    let stream = load_yaml(&manifest).context("the demo manifest")?;
    let config = match stream.spec.validate() {
        Ok(config) => config,
        Err(errors) => bail!("the demo manifest is not valid:\n{errors}"),
    };
    println!("mssql-cdc demo");
    println!(
        "  sandbox    {address} (database shop, CDC on dbo.orders, {} changes/s)",
        args.rate
    );
    println!("  bronze     {}", lake.join("bronze/orders").display());
    println!(
        "  facts      {}",
        lake.join("ops/ingestion_facts").display()
    );
    println!(
        "  checkpoint {}",
        lake.join("_checkpoints/orders").display()
    );
    println!(
        "  stop with Ctrl-C{}",
        args.duration
            .map(|d| format!(" (or after {})", humantime::format_duration(d)))
            .unwrap_or_default()
    );
    println!();

    let mut options = RunOptions::new(Arc::new(Console::new()));
    options.env = BTreeMap::from([(PASSWORD_ENV.to_string(), READER.1.to_string())]);
    let stop = options.stop.clone();
    let duration = args.duration;
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
        stop.cancel();
    });
    let result = run(config, options).await;
    sandbox.stop().await.context("stopping the sandbox")?;
    let summary = result?;
    println!();
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    println!(
        "demo stopped: {}, {}, {}. Query the lake with any Delta reader, e.g. DuckDB:",
        plural(summary.batches, "batch", "batches"),
        plural(summary.rows, "change row", "change rows"),
        plural(summary.snapshot_rows, "snapshot row", "snapshot rows"),
    );
    println!(
        "  SELECT batch_id, rows, ingestion_lag_seconds FROM delta_scan('{}') ORDER BY written_at;",
        lake.join("ops/ingestion_facts").display()
    );
    Ok(())
}

fn demo_manifest(lake: &std::path::Path, port: u16, trigger: &str) -> String {
    let path = |rel: &str| lake.join(rel).display().to_string();
    format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: orders}}
spec:
  appId: demo-orders
  source:
    host: 127.0.0.1
    port: {port}
    database: shop
    table: dbo.orders
    credentials:
      username: {user}
      passwordFrom: {{env: {PASSWORD_ENV}}}
    encrypt: required
    trustServerCertificate: true
  target: {{name: bronze.orders, location: "{bronze}"}}
  checkpoint: "{checkpoint}"
  facts: {{name: ops.ingestion_facts, location: "{facts}"}}
  trigger: {{processingTime: {trigger}}}
  snapshot: {{mode: initial, chunkRows: 1000}}
"#,
        user = READER.0,
        bronze = path("bronze/orders"),
        checkpoint = path("_checkpoints/orders"),
        facts = path("ops/ingestion_facts"),
    )
}
