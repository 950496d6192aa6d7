//! `mssql-cdc bench`: end-to-end throughput of the engine against the
//! sandbox (run as a separate process so its memory is not counted), next
//! to a read-only pass (tiberius decode into Arrow, nothing written) and a
//! write-only pass (the same rows, made in memory, into Delta). Prints
//! rows/s, the end-to-end/read-only ratio and the peak RSS of each pass.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::Schema;
use deltalake::arrow::record_batch::RecordBatch;
use futures::StreamExt;
use mssql_cdc::domain::BatchId;
use mssql_cdc::engine::{RunOptions, Silent, run};
use mssql_cdc::lake::bronze::{BronzeTable, bronze_schema};
use mssql_cdc::lake::txn::Txn;
use mssql_cdc::lake::{StorageLocation, StorageOptions};
use mssql_cdc::source::reader::{ReadRequest, RowShape, spawn_read};
use mssql_cdc::source::{cdc, connect};
use mssql_cdc::spec::load_yaml;
use secrecy::SecretString;
use tiberius::ColumnData;
use tokio::io::{AsyncBufReadExt, BufReader};

const SA_PASSWORD: &str = "Bench-Pa55word!";
const PASSWORD_ENV: &str = "MSSQL_CDC_BENCH_PASSWORD";
/// Rows per source transaction.
const ROWS_PER_COMMIT: u64 = 10_000;

/// Arguments of `bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Change rows to stream.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Change rows per micro-batch (a multiple of 10000); repeat for several runs.
    #[arg(long = "rows-per-batch", default_values_t = vec![100_000, 1_000_000])]
    pub rows_per_batch: Vec<u64>,
    /// Directory for the benchmark's lakes (removed afterwards).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Time only the checkpoint log's step on checkpoints this many
    /// batches old (e.g. `--checkpoint 100 --checkpoint 100000`), instead
    /// of the throughput passes.
    #[arg(long = "checkpoint", value_name = "BATCHES")]
    pub checkpoint: Vec<u64>,
    /// Time only applying batches to a silver table of this many keys
    /// (e.g. `--silver 1000000`), instead of the throughput passes.
    #[arg(long = "silver", value_name = "ROWS")]
    pub silver: Option<u64>,
    /// Changes per batch applied to silver.
    #[arg(long = "silver-changes", default_value_t = 10_000)]
    pub silver_changes: u64,
    /// Batches applied to silver per shape (the median is printed).
    #[arg(long = "silver-batches", default_value_t = 5)]
    pub silver_batches: u64,
}

/// Runs the benchmark and prints its figures.
pub async fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    if !args.checkpoint.is_empty() || args.silver.is_some() {
        let scratch = tempfile::Builder::new()
            .prefix("mssql-cdc-bench")
            .tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir))
            .context("cannot create the benchmark directory")?;
        if !args.checkpoint.is_empty() {
            super::bench_checkpoint::run(scratch.path(), &args.checkpoint).await?;
        }
        if let Some(rows) = args.silver {
            let bench = super::bench_silver::SilverBench {
                rows,
                changes: args.silver_changes,
                batches: args.silver_batches,
            };
            super::bench_silver::run(scratch.path(), &bench).await?;
        }
        return Ok(());
    }
    if args.rows == 0 || !args.rows.is_multiple_of(ROWS_PER_COMMIT) {
        bail!(
            "--rows must be a positive multiple of {ROWS_PER_COMMIT}, got {}",
            args.rows
        );
    }
    for per_batch in &args.rows_per_batch {
        if *per_batch == 0 || !per_batch.is_multiple_of(ROWS_PER_COMMIT) {
            bail!(
                "--rows-per-batch must be a positive multiple of {ROWS_PER_COMMIT}, got {per_batch}"
            );
        }
    }
    let scratch = match &args.dir {
        Some(dir) => tempfile::Builder::new()
            .prefix("mssql-cdc-bench")
            .tempdir_in(dir),
        None => tempfile::Builder::new().prefix("mssql-cdc-bench").tempdir(),
    }
    .context("cannot create the benchmark directory")?;

    println!(
        "mssql-cdc bench: {} change rows of a narrow table (bigint, int, varchar(20))",
        args.rows
    );
    let (mut sandbox, address) = start_sandbox().await?;
    let setup = Instant::now();
    prepare_source(address, args.rows).await?;
    println!(
        "source ready in {:.1} s (sandbox pid {})",
        setup.elapsed().as_secs_f64(),
        sandbox.id().unwrap_or(0)
    );

    for (i, per_batch) in args.rows_per_batch.iter().enumerate() {
        let lake = scratch.path().join(format!("run{i}"));
        reset_peak_rss();
        let started = Instant::now();
        let summary = end_to_end(address, &lake, per_batch / ROWS_PER_COMMIT).await?;
        let e2e = started.elapsed();
        let e2e_rss = peak_rss_mb();
        if summary.rows != args.rows {
            bail!(
                "end-to-end pass wrote {} rows, expected {}",
                summary.rows,
                args.rows
            );
        }

        reset_peak_rss();
        let started = Instant::now();
        let read_rows = read_only(address).await?;
        let read = started.elapsed();
        let read_rss = peak_rss_mb();
        if read_rows != args.rows {
            bail!(
                "read-only pass read {read_rows} rows, expected {}",
                args.rows
            );
        }

        reset_peak_rss();
        let started = Instant::now();
        write_only(
            &scratch.path().join(format!("write{i}")),
            args.rows,
            *per_batch,
        )
        .await?;
        let write = started.elapsed();
        let write_rss = peak_rss_mb();

        let rate = |d: Duration| args.rows as f64 / d.as_secs_f64().max(1e-9);
        let line = format!(
            "rows/batch {per_batch:>9}: end-to-end {:>9.0} rows/s ({} {}, peak RSS {e2e_rss:.0} MB) | read-only {:>9.0} rows/s (peak RSS {read_rss:.0} MB) | write-only {:>9.0} rows/s (peak RSS {write_rss:.0} MB) | ratio end-to-end/read-only {:.2}",
            rate(e2e),
            summary.batches,
            if summary.batches == 1 {
                "batch"
            } else {
                "batches"
            },
            rate(read),
            rate(write),
            read.as_secs_f64() / e2e.as_secs_f64().max(1e-9),
        );
        println!("{line}");
    }
    let _ = sandbox.kill().await;
    println!(
        "peak RSS is this process's (the sandbox runs apart); Linux only, from /proc/self/status VmHWM"
    );
    Ok(())
}

async fn start_sandbox() -> anyhow::Result<(tokio::process::Child, std::net::SocketAddr)> {
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

fn source(
    address: std::net::SocketAddr,
    database: &str,
) -> anyhow::Result<mssql_cdc::spec::SourceConfig> {
    let manifest = manifest(address, database, Path::new("/unused"), 1);
    let loaded = load_yaml(&manifest)?;
    let config = loaded
        .stream
        .spec
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(config.source)
}

async fn prepare_source(address: std::net::SocketAddr, rows: u64) -> anyhow::Result<()> {
    let mut source = source(address, "master")?;
    source.database = "master".into();
    let password = SecretString::from(SA_PASSWORD);
    let mut client = connect(&source, &password).await?;
    for batch in [
        "CREATE DATABASE bench",
        "USE bench",
        "CREATE TABLE dbo.seed (id bigint NOT NULL PRIMARY KEY, v int NOT NULL, s varchar(20) NOT NULL);
         CREATE TABLE dbo.events (id bigint NOT NULL PRIMARY KEY, v int NOT NULL, s varchar(20) NOT NULL)",
        "EXEC sys.sp_cdc_enable_db",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events', @role_name = NULL",
    ] {
        client.simple_query(batch).await?.into_results().await?;
    }
    // A seed of ROWS_PER_COMMIT rows, doubled into place (not captured).
    client
        .simple_query("INSERT INTO dbo.seed VALUES (0, 0, 'event-0')")
        .await?
        .into_results()
        .await?;
    let mut have = 1u64;
    while have < ROWS_PER_COMMIT {
        let add = have.min(ROWS_PER_COMMIT - have);
        let sql = format!(
            "INSERT INTO dbo.seed SELECT TOP ({add}) id + {have}, v + 1, 'event-' + CAST(id + {have} AS varchar(12)) FROM dbo.seed ORDER BY id"
        );
        client.simple_query(sql).await?.into_results().await?;
        have += add;
    }
    let commits = rows / ROWS_PER_COMMIT;
    for commit in 0..commits {
        let offset = commit * ROWS_PER_COMMIT;
        let sql = format!("INSERT INTO dbo.events SELECT id + {offset}, v, s FROM dbo.seed");
        client.simple_query(sql).await?.into_results().await?;
    }
    // Wait until the capture job has every row.
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

fn manifest(
    address: std::net::SocketAddr,
    database: &str,
    lake: &Path,
    max_commits: u64,
) -> String {
    let path = |rel: &str| lake.join(rel).display().to_string();
    format!(
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
    trustServerCertificate: true
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
    )
}

async fn end_to_end(
    address: std::net::SocketAddr,
    lake: &Path,
    max_commits: u64,
) -> anyhow::Result<mssql_cdc::engine::RunSummary> {
    let loaded = load_yaml(&manifest(address, "bench", lake, max_commits))?;
    let config = loaded
        .stream
        .spec
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut options = RunOptions::new(Arc::new(Silent));
    options.once = true;
    options.env = BTreeMap::from([(PASSWORD_ENV.to_string(), SA_PASSWORD.to_string())]);
    Ok(run(config, options).await?)
}

async fn read_only(address: std::net::SocketAddr) -> anyhow::Result<u64> {
    let source = source(address, "bench")?;
    let mut client = connect(&source, &SecretString::from(SA_PASSWORD)).await?;
    let info = cdc::discover(&mut client, &source.table, None, None).await?;
    let min = cdc::min_lsn(&mut client, &info.instance).await?;
    let max = cdc::max_lsn(&mut client).await?;
    let fields = info.arrow_fields()?;
    let schema = bronze_schema(&Schema::new(fields))?;
    let request = ReadRequest {
        sql: cdc::changes_query(&info),
        params: vec![
            ColumnData::Binary(Some(min.to_bytes().to_vec().into())),
            ColumnData::Binary(Some(max.to_bytes().to_vec().into())),
        ],
        columns: info.columns.clone(),
        schema,
        shape: RowShape::Changes {
            utc_offset_minutes: 0,
        },
        batch_id: 1,
        on_batch: None,
    };
    let (batches, task) = spawn_read(Box::new(client), request);
    let mut batches = std::pin::pin!(batches);
    let mut rows = 0u64;
    while let Some(batch) = batches.next().await {
        rows += batch?.num_rows() as u64;
    }
    let (_client, stats) = task.await.context("read task")?;
    stats?;
    Ok(rows)
}

async fn write_only(dir: &Path, rows: u64, per_batch: u64) -> anyhow::Result<()> {
    let captured = Schema::new(vec![
        deltalake::arrow::datatypes::Field::new(
            "id",
            deltalake::arrow::datatypes::DataType::Int64,
            true,
        ),
        deltalake::arrow::datatypes::Field::new(
            "v",
            deltalake::arrow::datatypes::DataType::Int32,
            true,
        ),
        deltalake::arrow::datatypes::Field::new(
            "s",
            deltalake::arrow::datatypes::DataType::Utf8,
            true,
        ),
    ]);
    let schema = bronze_schema(&captured)?;
    std::fs::create_dir_all(dir)?;
    let location = StorageLocation::parse(&dir.display().to_string())?;
    let mut table =
        BronzeTable::open_or_create(&location, &StorageOptions::default(), &schema).await?;
    let chunk = 8192u64;
    let mut batch = BatchId::SNAPSHOT;
    let mut written = 0u64;
    while written < rows {
        let batch_rows = per_batch.min(rows - written);
        let start = written;
        let schema = schema.clone();
        let batches = futures::stream::iter((0..batch_rows.div_ceil(chunk)).map(move |i| {
            let from = start + i * chunk;
            let to = (from + chunk).min(start + batch_rows);
            synthetic(&schema, from, to)
        }));
        batch = batch.next()?;
        let staged = table.stage(batches).await?;
        let txn = Txn::bronze_batch("bench", batch);
        table
            .commit_batch(&txn, staged, &serde_json::json!({}))
            .await?;
        written += batch_rows;
    }
    Ok(())
}

fn synthetic(
    schema: &deltalake::arrow::datatypes::SchemaRef,
    from: u64,
    to: u64,
) -> Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    let ids: Vec<i64> = (from..to).map(|i| i as i64).collect();
    let n = ids.len();
    let lsn = format!("0x{:020X}", from);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(Int32Array::from(
            ids.iter().map(|i| (*i % 1000) as i32).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            ids.iter().map(|i| format!("event-{i}")).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(vec![lsn.clone(); n])),
        Arc::new(StringArray::from(
            ids.iter()
                .map(|i| format!("0x{i:020X}"))
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(vec!["insert"; n])),
        Arc::new(TimestampMicrosecondArray::from(
            vec![1_700_000_000_000_000i64; n],
        )),
        Arc::new(Int64Array::from(vec![1i64; n])),
    ];
    RecordBatch::try_new(schema.clone(), columns)
}

/// Resets the kernel's peak-RSS counter for this process (Linux).
pub(super) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size in MB since the last reset (Linux; 0 elsewhere).
pub(super) fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
