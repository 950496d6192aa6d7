//! `mssql-cdc bench`: end-to-end throughput of the engine against the
//! sandbox (run as a separate process so its CPU and memory are not
//! counted), next to a read-only pass (TDS decode into Arrow, nothing
//! written) and a write-only pass (the same rows, made in memory, into
//! Delta), for each row shape, number of readers and batch size. Prints
//! one Markdown table row per setting: rows/s, the engine's CPU per row
//! and the rate it allows, peak RSS, and the end-to-end/read-only ratio.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use deltalake::arrow::datatypes::Schema;
use futures::StreamExt;
use mssql_cdc::domain::{BatchId, Lsn};
use mssql_cdc::engine::{RunOptions, Silent, run};
use mssql_cdc::lake::bronze::{BronzeTable, bronze_schema};
use mssql_cdc::lake::txn::Txn;
use mssql_cdc::lake::{StorageLocation, StorageOptions};
use mssql_cdc::source::reader::{ReadRequest, RowShape, spawn_read};
use mssql_cdc::source::time_zone::CommitClock;
use mssql_cdc::source::{cdc, connect};
use secrecy::SecretString;
use tiberius::ColumnData;

use super::bench_measure::measure;
use super::bench_shape::Shape;
use super::bench_source::{
    PASSWORD_ENV, ROWS_PER_COMMIT, SA_PASSWORD, database, prepare, source, start_sandbox,
    stream_config,
};

/// Arguments of `bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Change rows to stream, per shape.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Change rows per micro-batch (a multiple of 10000); repeat for several runs.
    #[arg(long = "rows-per-batch", default_values_t = vec![100_000, 1_000_000])]
    pub rows_per_batch: Vec<u64>,
    /// Row shapes to measure; repeat for several.
    #[arg(long = "shape", value_enum, default_values_t = vec![Shape::Narrow, Shape::Wide])]
    pub shapes: Vec<Shape>,
    /// Source sessions reading each batch (`spec.source.readers`); repeat
    /// for a sweep, e.g. `--readers 1 --readers 2 --readers 4`.
    #[arg(long = "readers", default_values_t = vec![1u32], value_parser = clap::value_parser!(u32).range(1..=16))]
    pub readers: Vec<u32>,
    /// Directory for the benchmark's lakes (removed afterwards).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Time only the checkpoint log's step on checkpoints this many
    /// batches old (e.g. `--checkpoint 100 --checkpoint 100000`), instead
    /// of the throughput passes.
    #[arg(long = "checkpoint", value_name = "BATCHES")]
    pub checkpoint: Vec<u64>,
    /// Measure only the requests and time of each kind of commit (facts,
    /// finalization, bronze, silver, an empty one) on tables whose logs
    /// are this many versions old, built directly (e.g. `--table-age
    /// 100,10000,100000`), instead of the throughput passes.
    #[arg(long = "table-age", value_name = "VERSIONS", value_delimiter = ',')]
    pub table_age: Vec<u64>,
    /// Commits of each kind measured per `--table-age` (the median prints).
    #[arg(long = "table-age-repeats", default_value_t = 5)]
    pub table_age_repeats: usize,
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
    /// Which keys silver's batches change (`random`, `newest`); repeat for
    /// both. Each in a process of its own gives each its own peak RSS.
    #[arg(
        long = "silver-keys",
        value_enum,
        default_values_t = vec![super::bench_silver::Shape::Random, super::bench_silver::Shape::Newest]
    )]
    pub silver_keys: Vec<super::bench_silver::Shape>,
    /// Count object-store requests per trigger (idle, empty batch, busy
    /// batch) by kind and path class, instead of the throughput passes.
    #[arg(long)]
    pub requests: bool,
    /// Idle triggers counted by `--requests`.
    #[arg(long = "requests-idle", default_value_t = 20)]
    pub requests_idle: u64,
    /// Empty batches, and as many busy ones, counted by `--requests`.
    #[arg(long = "requests-batches", default_value_t = 10)]
    pub requests_batches: u64,
    /// Measure this many captured tables of one database (one hot, the
    /// others quiet) in one CdcSource against as many single-table
    /// streams, instead of the throughput passes (e.g. `--source-tables 200`).
    #[arg(long = "source-tables", value_name = "TABLES")]
    pub source_tables: Option<usize>,
    /// Changes a second into the hot table, for `--source-tables`.
    #[arg(long = "hot-rate", default_value_t = 1_000)]
    pub hot_rate: u64,
    /// The measured window of each `--source-tables` setting, after its warm-up.
    #[arg(long = "source-tables-duration", default_value = "2m")]
    pub source_tables_duration: humantime::Duration,
    /// The trigger of `--source-tables` (the source's rounds, each stream's polls).
    #[arg(long = "source-tables-trigger", default_value = "2s")]
    pub source_tables_trigger: humantime::Duration,
    /// The source's `idleCommitInterval` in `--source-tables`.
    #[arg(long = "source-tables-idle-commit", default_value = "1m")]
    pub source_tables_idle_commit: humantime::Duration,
    /// In `--source-tables`, the hot table writes its facts rows into the
    /// quiet tables' facts table (as a source's tables usually do), so its
    /// batches join their group commits; by default it writes a facts
    /// table of its own, which keeps the quiet tables' request counts
    /// theirs alone.
    #[arg(long = "source-tables-shared-facts")]
    pub source_tables_shared_facts: bool,
    /// The settings `--source-tables` runs (`source`, `streams`, `hot`,
    /// `quiet`); repeat for several. All four by default; the comparison
    /// table is printed only when all four ran.
    #[arg(long = "source-tables-settings", value_enum, value_name = "SETTING")]
    pub source_tables_settings: Vec<super::bench_source_tables::Side>,
    /// Internal: run only this setting of `--source-tables`, against the
    /// sandbox at `--source-tables-server` (the bench runs each so).
    #[arg(
        long = "source-tables-side",
        value_enum,
        hide = true,
        requires = "source_tables_server"
    )]
    pub source_tables_side: Option<super::bench_source_tables::Side>,
    /// Internal: the sandbox a `--source-tables-side` run uses.
    #[arg(long = "source-tables-server", hide = true)]
    pub source_tables_server: Option<std::net::SocketAddr>,
}

/// Runs the benchmark and prints its figures.
pub async fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(tables) = args.source_tables {
        return run_source_tables(&args, tables).await;
    }
    if args.requests {
        let scratch = tempfile::Builder::new()
            .prefix("mssql-cdc-bench")
            .tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir))
            .context("cannot create the benchmark directory")?;
        let bench = super::bench_requests::RequestsBench {
            idle: args.requests_idle,
            batches: args.requests_batches,
        };
        return super::bench_requests::run_bench(scratch.path(), &bench).await;
    }
    if !args.table_age.is_empty() {
        let scratch = tempfile::Builder::new()
            .prefix("mssql-cdc-bench")
            .tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir))
            .context("cannot create the benchmark directory")?;
        return super::bench_table_age::run(
            scratch.path(),
            &args.table_age,
            args.table_age_repeats,
        )
        .await;
    }
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
                shapes: args.silver_keys.clone(),
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
        "mssql-cdc bench: {} change rows per shape, in transactions of {ROWS_PER_COMMIT}",
        args.rows
    );
    let (mut sandbox, address) = start_sandbox().await?;
    for shape in &args.shapes {
        let setup = Instant::now();
        prepare(address, *shape, args.rows).await?;
        println!(
            "{} source ready in {:.1} s (sandbox pid {})",
            shape.name(),
            setup.elapsed().as_secs_f64(),
            sandbox.id().unwrap_or(0)
        );
    }
    println!();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "| shape | readers | rows/batch | end-to-end rows/s | read-only rows/s | write-only rows/s | engine CPU µs/row | engine-limited rows/s | read-only CPU µs/row | sandbox CPU µs/row end-to-end / read | limit of {cores} cores rows/s | peak RSS MB end-to-end / read / write | end-to-end / read-only |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut run = 0;
    for shape in &args.shapes {
        for readers in &args.readers {
            for per_batch in &args.rows_per_batch {
                run += 1;
                let pass = Pass {
                    address,
                    sandbox: sandbox.id(),
                    cores,
                    shape: *shape,
                    readers: *readers,
                    rows: args.rows,
                    per_batch: *per_batch,
                    dir: scratch.path().join(format!("run{run}")),
                };
                println!("{}", pass.run().await?);
            }
        }
    }
    let _ = sandbox.kill().await;
    println!();
    println!(
        "CPU and peak RSS are this process's (the sandbox runs apart): CPU from getrusage, peak RSS from /proc/self/status VmHWM (Linux)"
    );
    println!(
        "sandbox CPU is the sandbox process's during the end-to-end and the read-only pass (/proc/<pid>/stat, Linux); the limit of {cores} cores is the end-to-end rate they would allow if they ran nothing but the engine and the sandbox"
    );
    Ok(())
}

/// `--source-tables`: every setting in a process of its own, or (with
/// `--source-tables-side`) one setting in this process, in the directory
/// the bench gave it.
async fn run_source_tables(args: &BenchArgs, tables: usize) -> anyhow::Result<()> {
    let bench = super::bench_source_tables::TablesBench {
        tables,
        hot_rate: args.hot_rate,
        duration: *args.source_tables_duration,
        trigger: *args.source_tables_trigger,
        idle_commit: *args.source_tables_idle_commit,
        shared_facts: args.source_tables_shared_facts,
        settings: if args.source_tables_settings.is_empty() {
            super::bench_source_tables::Side::ALL.to_vec()
        } else {
            args.source_tables_settings.clone()
        },
    };
    if let (Some(side), Some(server), Some(dir)) = (
        args.source_tables_side,
        args.source_tables_server,
        args.dir.as_deref(),
    ) {
        return super::bench_source_tables_side::run_side(server, dir, &bench, side).await;
    }
    let scratch = tempfile::Builder::new()
        .prefix("mssql-cdc-bench")
        .tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir))
        .context("cannot create the benchmark directory")?;
    super::bench_source_tables::run(scratch.path(), &bench).await
}

/// One line of the table: the three passes of one setting.
struct Pass {
    address: std::net::SocketAddr,
    /// The sandbox's pid, whose CPU the end-to-end and read-only passes
    /// also measure.
    sandbox: Option<u32>,
    cores: usize,
    shape: Shape,
    readers: u32,
    rows: u64,
    per_batch: u64,
    dir: std::path::PathBuf,
}

impl Pass {
    async fn run(&self) -> anyhow::Result<String> {
        let (summary, e2e) = measure(self.sandbox, end_to_end(self)).await;
        let summary = summary?;
        if summary.rows != self.rows {
            bail!(
                "end-to-end pass wrote {} rows, expected {}",
                summary.rows,
                self.rows
            );
        }
        let (read_rows, read) = measure(
            self.sandbox,
            read_only(self.address, self.shape, self.readers),
        )
        .await;
        let read_rows = read_rows?;
        if read_rows != self.rows {
            bail!(
                "read-only pass read {read_rows} rows, expected {}",
                self.rows
            );
        }
        let (written, write) = measure(None, write_only(self)).await;
        written?;
        let rows = self.rows;
        let per_row = |cost: &super::bench_measure::Cost| {
            cost.source_cpu_us_per_row(rows)
                .map_or_else(|| "n/a".to_string(), |us| format!("{us:.2}"))
        };
        Ok(format!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.0} | {:.2} | {} / {} | {} | {:.0} / {:.0} / {:.0} | {:.2} |",
            self.shape.name(),
            self.readers,
            self.per_batch,
            e2e.rate(rows),
            read.rate(rows),
            write.rate(rows),
            e2e.cpu_us_per_row(rows),
            e2e.cpu_limited_rate(rows),
            read.cpu_us_per_row(rows),
            per_row(&e2e),
            per_row(&read),
            e2e.cores_limited_rate(rows, self.cores)
                .map_or_else(|| "n/a".to_string(), |rate| format!("{rate:.0}")),
            e2e.peak_rss_mb,
            read.peak_rss_mb,
            write.peak_rss_mb,
            e2e.rate(rows) / read.rate(rows).max(1e-9),
        ))
    }
}

async fn end_to_end(pass: &Pass) -> anyhow::Result<mssql_cdc::engine::RunSummary> {
    let config = stream_config(
        pass.address,
        &database(pass.shape),
        &pass.dir,
        pass.per_batch / ROWS_PER_COMMIT,
        pass.readers,
    )?;
    let mut options = RunOptions::new(Arc::new(Silent));
    options.once = true;
    options.env = BTreeMap::from([(PASSWORD_ENV.to_string(), SA_PASSWORD.to_string())]);
    Ok(run(config, options).await?)
}

/// Reads every change of the shape's table through the engine's reader
/// (TDS decode into Arrow) and drops it; with several readers, each reads
/// a share of the transactions on its own session. Rows read.
async fn read_only(
    address: std::net::SocketAddr,
    shape: Shape,
    readers: u32,
) -> anyhow::Result<u64> {
    let source = source(address, &database(shape))?;
    let password = SecretString::from(SA_PASSWORD);
    let mut client = connect(&source, &password).await?;
    let info = cdc::discover(&mut client, &source.table, None, None).await?;
    // One reader reads the whole range, as the engine's one reader does,
    // without counting its changes first.
    let ranges = if readers > 1 {
        split_by_changes(&mut client, &info.instance, readers).await?
    } else {
        let from = cdc::min_lsn(&mut client, &info.instance).await?;
        vec![(from, cdc::max_lsn(&mut client).await?)]
    };
    drop(client);
    let reads = ranges.into_iter().map(|(from, to)| {
        let (source, password, info) = (source.clone(), password.clone(), info.clone());
        tokio::spawn(async move {
            let client = connect(&source, &password).await?;
            read_range(client, &info, from, to).await
        })
    });
    let mut rows = 0;
    for read in futures::future::join_all(reads).await {
        rows += read.context("read task")??;
    }
    Ok(rows)
}

/// The captured transactions cut into `n` LSN ranges of about equal change
/// counts.
async fn split_by_changes(
    client: &mut mssql_cdc::source::SqlClient,
    instance: &mssql_cdc::domain::CaptureInstance,
    n: u32,
) -> anyhow::Result<Vec<(Lsn, Lsn)>> {
    let sql = format!(
        "SELECT __$start_lsn, COUNT_BIG(*) FROM cdc.[{}_CT] GROUP BY __$start_lsn ORDER BY __$start_lsn",
        instance.as_str()
    );
    let rows = client.simple_query(sql).await?.into_first_result().await?;
    let mut commits = Vec::new();
    for row in rows {
        let lsn: &[u8] = row.get(0).context("a change table row without an LSN")?;
        let count: i64 = row.get(1).unwrap_or(0);
        commits.push((Lsn::try_from(lsn)?, u64::try_from(count).unwrap_or(0)));
    }
    let total: u64 = commits.iter().map(|(_, c)| c).sum();
    let share = total.div_ceil(u64::from(n.max(1))).max(1);
    let mut ranges = Vec::new();
    let (mut first, mut counted, mut last) = (None, 0u64, None);
    for (lsn, count) in commits {
        let from = *first.get_or_insert(lsn);
        counted += count;
        last = Some(lsn);
        if counted >= share {
            ranges.push((from, lsn));
            (first, counted) = (None, 0);
        }
    }
    if let (Some(from), Some(to)) = (first, last) {
        ranges.push((from, to));
    }
    Ok(ranges)
}

async fn read_range(
    client: mssql_cdc::source::SqlClient,
    info: &cdc::CaptureInfo,
    from: Lsn,
    to: Lsn,
) -> anyhow::Result<u64> {
    let fields = info.arrow_fields()?;
    let schema = bronze_schema(&Schema::new(fields))?;
    // The engine's default limit, as a stream would read.
    let limit = mssql_cdc::source::types::ValueLimit::new(mssql_cdc::spec::DEFAULT_MAX_VALUE_BYTES);
    let request = ReadRequest {
        sql: cdc::changes_query(info, limit),
        params: vec![
            ColumnData::Binary(Some(from.to_bytes().to_vec().into())),
            ColumnData::Binary(Some(to.to_bytes().to_vec().into())),
        ],
        columns: info.columns.clone(),
        schema,
        shape: RowShape::Changes {
            clock: CommitClock::Fixed(0),
            repeated: None,
        },
        batch_id: 1,
        value_limit: limit,
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

/// Writes the same number of rows, made in memory, to a bronze table in
/// batches of the pass's size: the lake side alone.
async fn write_only(pass: &Pass) -> anyhow::Result<()> {
    let dir = pass.dir.join("write-only");
    let schema = bronze_schema(&pass.shape.captured())?;
    std::fs::create_dir_all(&dir)?;
    let location = StorageLocation::parse(&dir.display().to_string())?;
    let mut table = BronzeTable::open_or_create(&location, &StorageOptions::default(), &schema)
        .await?
        .with_unique_columns(&pass.shape.key_columns());
    let chunk = 8192u64;
    let mut batch = BatchId::SNAPSHOT;
    let mut written = 0u64;
    while written < pass.rows {
        let batch_rows = pass.per_batch.min(pass.rows - written);
        let start = written;
        let (schema, shape) = (schema.clone(), pass.shape);
        let batches = futures::stream::iter((0..batch_rows.div_ceil(chunk)).map(move |i| {
            let from = start + i * chunk;
            let to = (from + chunk).min(start + batch_rows);
            shape.synthetic(&schema, from, to)
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
