//! The benchmark's source: a sandbox in a separate process (so its CPU and
//! memory are not the engine's), a database per row shape whose table
//! holds the benchmark's changes, captured before any pass starts, and the
//! manifest of a stream of it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mssql_cdc::source::connect;
use mssql_cdc::spec::{SourceConfig, StreamConfig, load_yaml};
use secrecy::SecretString;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::bench_shape::Shape;

/// The sandbox's `sa` password (the sandbox lives as long as the bench).
pub const SA_PASSWORD: &str = "Bench-Pa55word!";
/// The variable the manifests name for the password.
pub const PASSWORD_ENV: &str = "MSSQL_CDC_BENCH_PASSWORD";
/// Rows per source transaction.
pub const ROWS_PER_COMMIT: u64 = 10_000;

/// Starts `mssql-cdc sandbox` on a free port; the child and its address.
pub async fn start_sandbox() -> anyhow::Result<(tokio::process::Child, std::net::SocketAddr)> {
    let exe = std::env::current_exe().context("cannot find this program to start the sandbox")?;
    let mut child = tokio::process::Command::new(exe)
        .args([
            "sandbox",
            "--listen",
            "127.0.0.1:0",
            "--idle-interval",
            "3600",
        ])
        .env("MSSQL_CDC_SANDBOX_SA_PASSWORD", SA_PASSWORD)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the sandbox")?;
    let stdout = child.stdout.take().context("sandbox stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let address = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.strip_prefix("mssql-cdc sandbox listening on ") {
                let address = rest.split_whitespace().next().unwrap_or_default();
                return address.parse().context("sandbox address");
            }
        }
        bail!("the sandbox exited before listening")
    })
    .await
    .context("the sandbox did not start within 30 s")??;
    Ok((child, address))
}

/// The database holding `shape`'s table.
pub fn database(shape: Shape) -> String {
    format!("bench_{}", shape.name())
}

/// The source section of a stream of `database`'s `dbo.events`.
pub fn source(address: std::net::SocketAddr, database: &str) -> anyhow::Result<SourceConfig> {
    Ok(stream_config(address, database, Path::new("/unused"), 1, 1)?.source)
}

/// Creates `shape`'s database with `rows` captured changes (inserts, in
/// transactions of [`ROWS_PER_COMMIT`]) and waits until capture has them.
pub async fn prepare(address: std::net::SocketAddr, shape: Shape, rows: u64) -> anyhow::Result<()> {
    let mut source = source(address, "master")?;
    source.database = "master".into();
    let mut client = connect(&source, &SecretString::from(SA_PASSWORD)).await?;
    let database = database(shape);
    let columns = shape.columns_ddl();
    for batch in [
        format!("CREATE DATABASE {database}"),
        format!("USE {database}"),
        format!("CREATE TABLE dbo.seed ({columns}); CREATE TABLE dbo.events ({columns})"),
        "EXEC sys.sp_cdc_enable_db".to_string(),
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events', @role_name = NULL"
            .to_string(),
        format!("INSERT INTO dbo.seed VALUES ({})", shape.first_row()),
    ] {
        client.simple_query(batch).await?.into_results().await?;
    }
    // A seed of ROWS_PER_COMMIT rows, doubled into place (not captured).
    let mut have = 1u64;
    while have < ROWS_PER_COMMIT {
        let add = have.min(ROWS_PER_COMMIT - have);
        let sql = format!(
            "INSERT INTO dbo.seed SELECT TOP ({add}) {} FROM dbo.seed ORDER BY id",
            shape.doubling_select(have)
        );
        client.simple_query(sql).await?.into_results().await?;
        have += add;
    }
    for commit in 0..rows / ROWS_PER_COMMIT {
        let sql = format!(
            "INSERT INTO dbo.events SELECT {} FROM dbo.seed",
            shape.copy_select(commit * ROWS_PER_COMMIT)
        );
        client.simple_query(sql).await?.into_results().await?;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let row = client
            .simple_query("SELECT COUNT_BIG(*) FROM cdc.dbo_events_CT")
            .await?
            .into_row()
            .await?;
        let captured = row.and_then(|r| r.get::<i64, _>(0)).unwrap_or(0);
        if u64::try_from(captured).unwrap_or(0) >= rows {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the sandbox captured only {captured} of {rows} rows within 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The stream of `database`'s `dbo.events` into `lake`, reading at most
/// `max_commits` source transactions per batch on `readers` sessions.
pub fn stream_config(
    address: std::net::SocketAddr,
    database: &str,
    lake: &Path,
    max_commits: u64,
    readers: u32,
) -> anyhow::Result<StreamConfig> {
    let path = |rel: &str| lake.join(rel).display().to_string();
    // `readers` only when asked for, so one reader is the default setting.
    let readers = if readers > 1 {
        format!("\n    readers: {readers}")
    } else {
        String::new()
    };
    let manifest = format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: bench}}
spec:
  appId: bench
  source:
    host: "{ip}"
    port: {port}
    database: {database}
    table: dbo.events
    credentials: {{username: sa, passwordFrom: {{env: {PASSWORD_ENV}}}}}
    encrypt: required
    trustServerCertificate: true{readers}
  target: {{name: bronze.events, location: "{bronze}"}}
  checkpoint: "{checkpoint}"
  facts: {{name: ops.ingestion_facts, location: "{facts}"}}
  trigger: {{availableNow: true}}
  maxCommitsPerBatch: {max_commits}
  snapshot: {{mode: never}}
"#,
        ip = address.ip(),
        port = address.port(),
        bronze = path("bronze"),
        checkpoint = path("checkpoint"),
        facts = path("facts"),
    );
    // Unknown fields are refused: the benchmark measures what it says.
    load_yaml(&manifest)?
        .spec
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}"))
}
