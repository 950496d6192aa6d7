//! The `mssql-cdc` command line: parses arguments and calls the library.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use mssql_cdc::sandbox::{Sandbox, SandboxOptions, TlsSource};

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
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the SQL Server sandbox: a TDS server with an in-memory T-SQL
    /// engine, for development and tests.
    Sandbox(SandboxArgs),
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    match cli.command {
        Command::Sandbox(args) => run_sandbox(args).await,
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
    };
    let sandbox = Sandbox::start(options)
        .await
        .context("the sandbox did not start")?;
    println!(
        "mssql-cdc sandbox listening on {} (Ctrl-C stops it)",
        sandbox.local_addr()
    );
    shutdown_signal().await;
    tracing::info!("stopping the sandbox");
    sandbox
        .stop()
        .await
        .context("the sandbox stopped with an error")?;
    Ok(())
}

/// Ctrl-C, or SIGTERM as Kubernetes sends it.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
