//! The `mssql-cdc` command line: parses arguments and calls the library.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use mssql_cdc_sandbox::{DemoOptions, Sandbox, SandboxOptions, SqlVersion, TlsSource};

mod cli;

#[derive(Parser)]
#[command(
    name = "mssql-cdc",
    version,
    about = "SQL Server Change Data Capture into Delta Lake"
)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log level of our own messages: error, warn, info, debug or trace
    /// (`RUST_LOG` overrides it).
    #[arg(long, global = true, value_enum, default_value_t = LogLevel::Info)]
    log_level: LogLevel,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    fn directive(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Stream the built-in sandbox's demo shop into ./demo-lake/, printing
    /// each micro-batch (the quickest way to see mssql-cdc work).
    Demo(cli::demo::DemoArgs),
    /// Measure throughput and memory: end to end, read-only and write-only
    /// (a benchmark, not a test).
    Bench(cli::bench::BenchArgs),
    /// Run one CdcStream manifest locally.
    Run(cli::run::RunArgs),
    /// Print the CdcStream CustomResourceDefinition (YAML), or with
    /// --reference its field reference (Markdown).
    Crd(CrdArgs),
    // Boxed: its flags make it much the largest variant.
    /// Run the Kubernetes controller: one worker per CdcStream.
    Operator(Box<cli::operator::OperatorArgs>),
    /// Run the CdcStream NAMESPACE/NAME from the Kubernetes API, reporting
    /// progress into its status (what a worker pod runs).
    Worker(cli::worker::WorkerArgs),
    /// Delete old micro-batch facts rows, compact (z-order) and vacuum the
    /// facts table, and bronze tables when given.
    Maintain(cli::maintain::MaintainArgs),
    /// Run the SQL Server sandbox: a TDS server with an in-memory T-SQL
    /// engine, for development and tests.
    Sandbox(SandboxArgs),
    /// Run Spark SQL over Delta tables (the monitoring guide's queries).
    Sql(cli::sql::SqlArgs),
    /// Judge every stream from its facts (and, with --control, its
    /// finalization verdict). Exit status: 0 nothing fires, 1 an alert
    /// fires, 2 error.
    Health(cli::health::HealthArgs),
    /// Show one table's finalization verdict and how old it is.
    Freshness(cli::freshness::FreshnessArgs),
    /// Print a CdcStream manifest for each captured table of a CdcSource's
    /// database that no stream covers yet (for GitOps).
    GenerateStreams(cli::generate_streams::GenerateArgs),
}

/// Arguments of `crd`.
#[derive(clap::Args)]
struct CrdArgs {
    /// Print the Markdown reference of every field (docs/crd-reference.md)
    /// instead of the CRD.
    #[arg(long)]
    reference: bool,
    /// Print the CdcSource CRD (crds/cdcsources.yaml) instead of the
    /// CdcStream one.
    #[arg(long, conflicts_with = "reference")]
    source: bool,
}

#[derive(clap::Args)]
struct SandboxArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:1433")]
    listen: SocketAddr,
    /// Password of the `sa` login.
    #[arg(long, env = "MSSQL_CDC_SANDBOX_SA_PASSWORD", hide_env_values = true)]
    sa_password: String,
    /// T-SQL file to run before accepting clients (batches separated by GO).
    #[arg(long)]
    script: Option<PathBuf>,
    /// PEM certificate for TLS (default: a self-signed one made at start).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key matching --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// SQL Server release to emulate: version strings and the permission
    /// rules that differ. (`--version` is this program's own version.)
    #[arg(long, value_enum, default_value_t = ProductVersion::V2022)]
    product_version: ProductVersion,
    /// Server time zone for GETDATE and CDC times: UTC or an IANA name.
    #[arg(long, default_value = "UTC")]
    timezone: String,
    /// Server clock speed: 1 = real time, 0 = frozen (time moves only with
    /// `EXEC sandbox.sp_advance_clock`), 60 = a minute per second.
    #[arg(long, default_value_t = 1.0)]
    clock_speed: f64,
    /// Seconds of quiet after which the CDC capture job writes an idle
    /// entry (moving sys.fn_cdc_get_max_lsn on a quiet database).
    #[arg(long, default_value_t = 300)]
    idle_interval: i64,
    /// Create database `shop` with CDC on dbo.orders and dbo.customers and
    /// keep inserting, updating and deleting rows.
    #[arg(long)]
    demo: bool,
    /// Changes per second the demo makes.
    #[arg(long, default_value_t = 3.0, requires = "demo")]
    demo_rate: f64,
    /// Seed of the demo's choices (same seed, same statements).
    #[arg(long, default_value_t = 1, requires = "demo")]
    demo_seed: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum ProductVersion {
    #[value(name = "2019")]
    V2019,
    #[value(name = "2022")]
    V2022,
}

impl From<ProductVersion> for SqlVersion {
    fn from(v: ProductVersion) -> Self {
        match v {
            ProductVersion::V2019 => SqlVersion::Sql2019,
            ProductVersion::V2022 => SqlVersion::Sql2022,
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(
        cli.log_format,
        cli.log_level,
        matches!(cli.command, Command::Demo(_) | Command::Bench(_)),
    );
    // Both ring and aws-lc-rs are linked (tiberius, object stores); pick one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Fault tests run this binary with a store fault plan (failpoints builds).
    #[cfg(feature = "failpoints")]
    if let Some(plan) = mssql_cdc::lake::faults::from_env().map_err(anyhow::Error::msg)? {
        tracing::warn!(
            ?plan,
            "store faults injected ({})",
            mssql_cdc::lake::faults::ENV
        );
    }
    match cli.command {
        Command::Demo(args) => cli::demo::run_demo(args).await,
        Command::Bench(args) => cli::bench::run_bench(args).await,
        Command::Run(args) => cli::run::run_manifest(args).await,
        Command::Worker(args) => cli::worker::run_worker(args).await,
        Command::Operator(args) => cli::operator::run_operator(*args).await,
        Command::Crd(args) => {
            if args.reference {
                print!("{}", mssql_cdc::operator::crd_reference::crd_reference());
            } else if args.source {
                print!("{}", mssql_cdc::operator::crd::source_crd_yaml()?);
            } else {
                print!("{}", mssql_cdc::operator::crd::crd_yaml()?);
            }
            Ok(())
        }
        Command::Maintain(args) => cli::maintain::run_maintain(args).await,
        Command::Sandbox(args) => run_sandbox(args).await,
        Command::Sql(args) => cli::sql::run_sql(args).await,
        Command::Health(args) => {
            // Cron reads the status: 0 healthy, 1 an alert fires, 2 error.
            let code = match cli::health::run_health(args).await {
                Ok(report) => i32::from(report.fires()),
                Err(error) => {
                    eprintln!("Error: {error:#}");
                    2
                }
            };
            std::process::exit(code);
        }
        Command::Freshness(args) => cli::freshness::run_freshness(args).await,
        Command::GenerateStreams(args) => cli::generate_streams::run_generate(args).await,
    }
}

async fn run_sandbox(args: SandboxArgs) -> anyhow::Result<()> {
    let script = match &args.script {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --script {}", path.display()))?,
        ),
        None => None,
    };
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => TlsSource::Files { cert, key },
        _ => TlsSource::SelfSigned,
    };
    let options = SandboxOptions {
        listen: args.listen,
        sa_password: args.sa_password,
        script,
        tls,
        sql_version: args.product_version.into(),
        time_zone: args.timezone,
        clock_speed: args.clock_speed,
        cdc_idle_interval_secs: args.idle_interval,
        demo: args.demo.then_some(DemoOptions {
            rate: args.demo_rate,
            seed: args.demo_seed,
        }),
    };
    let sandbox = Sandbox::start(options)
        .await
        .context("the sandbox did not start")?;
    println!(
        "mssql-cdc sandbox listening on {} (Ctrl-C stops it)",
        sandbox.local_addr()
    );
    if sandbox.demo_changes().is_some() {
        println!(
            "demo: database shop, CDC on dbo.orders and dbo.customers, {} changes per second",
            args.demo_rate
        );
    }
    cli::shutdown_signal().await;
    tracing::info!("stopping the sandbox");
    sandbox
        .stop()
        .await
        .context("the sandbox stopped with an error")?;
    Ok(())
}

/// Logs go to stderr. The Delta kernel reports expected events (a table
/// that does not exist yet) at INFO and ERROR, so it is off by default (our
/// own errors carry what matters); the demo also quiets its in-process
/// sandbox and the warning that its self-signed certificate is trusted
/// (the sandbox is the demo's own). `RUST_LOG` overrides all of this.
fn init_tracing(format: LogFormat, level: LogLevel, quiet_sandbox: bool) {
    // tiberius logs every server error at ERROR; ours carry them where they
    // matter. deltalake's MERGE warns on every finalization upsert about a
    // file metric it derives itself, and its writer warns for every binary
    // column of every Parquet file it writes that Delta keeps no min/max
    // for such a column (true of every `varbinary` column, and expected).
    let mut default = format!(
        "{},buoyant_kernel=off,delta_kernel=off,deltalake_core=warn,\
         deltalake_core::operations::merge=error,deltalake_core::writer::stats=error,\
         tiberius::tds::stream::token=off",
        level.directive()
    );
    if quiet_sandbox {
        default.push_str(",mssql_cdc_sandbox=warn,tiberius::client::tls_stream=error");
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a terminal: a pod's log or a file would keep the
    // escape codes as text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
