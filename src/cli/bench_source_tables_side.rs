//! One side of `bench --source-tables` in this process: the tables it
//! runs, the hot table's writer, and what the side cost over its window
//! (`bench_source_tables.rs` starts it and reads the JSON line it prints).
//!
//! SQL round trips are the sandbox's count of the requests clients sent
//! (`sys.dm_os_performance_counters`, `Batch Requests/sec`), read before and
//! after the window on a session of the bench, less the writer's requests
//! and the second read itself. Object-store requests are counted by
//! `lake::requests`, classed by table: the hot one's paths, or a quiet
//! one's (their shared facts table included).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::future::join_all;
use mssql_cdc::domain::FactRow;
use mssql_cdc::engine::{Observer, RunOptions, Silent, SourceCheck, TableRun, run, run_tables};
use mssql_cdc::lake::requests::{self, Counts, RequestCounter};
use mssql_cdc::source::{SqlClient, connect};
use mssql_cdc::spec::{
    Manifests, SourcePacing, StreamConfig, load_documents, load_yaml, source_stream_config,
};
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::bench_measure::peak_rss_mb;
use super::bench_source::{PASSWORD_ENV, SA_PASSWORD, source};
use super::bench_source_tables::{DATABASE, Side, SideFigures, Spread, TablesBench, table_name};

/// The longest warm-up (every table started and the hot one caught up).
const WARM_UP_LIMIT: Duration = Duration::from_secs(600);
/// The writer commits this often.
const WRITE_EVERY: Duration = Duration::from_millis(100);

/// Runs `side` against the sandbox at `address` and prints its figures as
/// one JSON line.
pub async fn run_side(
    address: SocketAddr,
    dir: &Path,
    bench: &TablesBench,
    side: Side,
) -> anyhow::Result<()> {
    let lake = dir.join(side.name());
    std::fs::create_dir_all(&lake)?;
    let lake = lake.canonicalize()?;
    let root = Url::from_directory_path(&lake)
        .map_err(|()| anyhow::anyhow!("{} is not an absolute path", lake.display()))?;
    let hot_prefix = root.join(&format!("{}/", table_name(0, bench.tables)))?;
    let hot_facts = root.join("facts-hot/")?;
    let counter = RequestCounter::new(Arc::new(move |url: &str| {
        classify(&root, &hot_prefix, &hot_facts, url)
    }));
    requests::install(counter.clone());
    let result = measure_side(address, &lake, bench, side, &counter).await;
    requests::remove(&counter);
    println!("{}", serde_json::to_string(&result?)?);
    Ok(())
}

/// `hot`, `quiet` or nothing (outside the lake) for a request's URL.
fn classify(root: &Url, hot: &Url, hot_facts: &Url, url: &str) -> Option<String> {
    if !url.starts_with(root.as_str()) {
        return None;
    }
    let class = if url.starts_with(hot.as_str()) || url.starts_with(hot_facts.as_str()) {
        "hot"
    } else {
        "quiet"
    };
    Some(class.to_string())
}

/// What one table's observer saw.
#[derive(Default)]
struct Seen {
    checks: AtomicU64,
    batches: AtomicU64,
    rows: AtomicU64,
    /// The lag of the last check, until a batch starts from it.
    last_lag: Mutex<Option<f64>>,
    /// Lags of checks that led to a batch, and ages of batches' oldest changes.
    samples: Mutex<(Vec<f64>, Vec<f64>)>,
}

impl Seen {
    fn lock_samples(&self) -> std::sync::MutexGuard<'_, (Vec<f64>, Vec<f64>)> {
        self.samples.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A table's observer: counts its checks and batches, and samples lags.
struct Recorder(Arc<Seen>);

impl Observer for Recorder {
    fn source_checked(&self, check: &SourceCheck) {
        self.0.checks.fetch_add(1, Ordering::Relaxed);
        *self
            .0
            .last_lag
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = check.measures.ingestion_lag_seconds;
    }

    fn batch_started(&self, _batch_id: mssql_cdc::domain::BatchId) {
        let lag = self
            .0
            .last_lag
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(lag) = lag {
            self.0.lock_samples().0.push(lag);
        }
    }

    fn batch_done(&self, row: &FactRow) {
        self.0.batches.fetch_add(1, Ordering::Relaxed);
        self.0
            .rows
            .fetch_add(row.rows.unwrap_or(0), Ordering::Relaxed);
        if let Some(oldest) = row.min_commit_ts {
            let age = (chrono::Utc::now() - oldest).num_milliseconds() as f64 / 1000.0;
            self.0.lock_samples().1.push(age);
        }
    }
}

/// Starts the side's tables, the writer, waits out the warm-up, measures
/// the window, then stops everything.
async fn measure_side(
    address: SocketAddr,
    lake: &Path,
    bench: &TablesBench,
    side: Side,
    counter: &Arc<RequestCounter>,
) -> anyhow::Result<SideFigures> {
    let indices = side.tables(bench.tables);
    let seen: Vec<Arc<Seen>> = indices.clone().map(|_| Arc::default()).collect();
    let stop = CancellationToken::new();
    let writer_stop = CancellationToken::new();
    purge_hot(address, bench.tables).await?;
    let written = Arc::new(Written::default());
    let writer = tokio::spawn(write_hot(
        address,
        bench.tables,
        bench.hot_rate,
        Arc::clone(&written),
        writer_stop.clone(),
    ));
    let (tables, pacing) = table_runs(address, lake, bench, side, &seen, &stop)?;
    let running = tokio::spawn(run_side_tables(tables, pacing));

    warm_up(&seen, side, &running).await?;
    let mut counters = counters_session(address).await?;
    let hot = if side == Side::Quiet {
        None
    } else {
        seen.first()
    };
    let quiet_facts = lake.join("facts");
    let before = Snapshot::take(&mut counters, &seen, &written, counter, &quiet_facts).await?;
    let lags_before = hot.map_or((0, 0), |s| {
        let samples = s.lock_samples();
        (samples.0.len(), samples.1.len())
    });
    tokio::time::sleep(bench.duration).await;
    let after = Snapshot::take(&mut counters, &seen, &written, counter, &quiet_facts).await?;
    let (lags, ages) = hot.map_or((Vec::new(), Vec::new()), |s| {
        let samples = s.lock_samples();
        (
            samples.0[lags_before.0..].to_vec(),
            samples.1[lags_before.1..].to_vec(),
        )
    });
    stop.cancel();
    writer_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(120), running).await;
    writer.await.context("the writer's task")??;
    let mut figures = after.figures_since(&before, side, &lags, &ages);
    figures.trigger_s = bench.trigger.as_secs_f64();
    Ok(figures)
}

/// Runs the side's tables: a source's (with its `pacing`) through its
/// rounds, single streams each on its own.
async fn run_side_tables(tables: Vec<TableRun>, pacing: Option<SourcePacing>) {
    if let Some(pacing) = pacing {
        let outcomes = run_tables(tables, Some(pacing), Arc::new(Silent), None).await;
        for outcome in outcomes {
            if let Err(error) = outcome.result {
                tracing::error!(target_table = %outcome.target, "{error}");
            }
        }
        return;
    }
    let runs = tables.into_iter().map(|t| run(t.config, t.options));
    for result in join_all(runs).await {
        if let Err(error) = result {
            tracing::error!("{error}");
        }
    }
}

/// Waits until every table has checked the source and the hot table has
/// made two batches (its backlog is purged before the side starts), then
/// five seconds more.
async fn warm_up(
    seen: &[Arc<Seen>],
    side: Side,
    running: &tokio::task::JoinHandle<()>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if running.is_finished() {
            bail!(
                "the {} side's tables stopped during the warm-up",
                side.name()
            );
        }
        let all_checked = seen.iter().all(|s| s.checks.load(Ordering::Relaxed) > 0);
        let hot_caught_up = seen
            .first()
            .is_some_and(|s| s.batches.load(Ordering::Relaxed) >= 2);
        if all_checked && (hot_caught_up || side == Side::Quiet) {
            break;
        }
        if started.elapsed() > WARM_UP_LIMIT {
            bail!(
                "the {} side did not warm up within {} s",
                side.name(),
                WARM_UP_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    tracing::info!(
        side = side.name(),
        warm_up_s = started.elapsed().as_secs_f64(),
        "warmed up"
    );
    Ok(())
}

/// The side's tables, each with its own recorder, and a source's pacing.
fn table_runs(
    address: SocketAddr,
    lake: &Path,
    bench: &TablesBench,
    side: Side,
    seen: &[Arc<Seen>],
    stop: &CancellationToken,
) -> anyhow::Result<(Vec<TableRun>, Option<SourcePacing>)> {
    let (configs, pacing) = match side {
        Side::Source => {
            let (configs, pacing) = source_configs(address, lake, bench)?;
            (configs, Some(pacing))
        }
        Side::Streams | Side::Hot | Side::Quiet => (
            side.tables(bench.tables)
                .map(|index| stream_config(address, lake, bench, index))
                .collect::<anyhow::Result<Vec<_>>>()?,
            None,
        ),
    };
    let env = BTreeMap::from([(PASSWORD_ENV.to_string(), SA_PASSWORD.to_string())]);
    let tables = configs
        .into_iter()
        .zip(seen)
        .map(|(config, seen)| {
            let mut options = RunOptions::new(Arc::new(Recorder(Arc::clone(seen))));
            options.env = env.clone();
            options.stop = stop.clone();
            TableRun { config, options }
        })
        .collect();
    Ok((tables, pacing))
}

/// The lake folders of table `index`: its bronze, checkpoint and facts.
fn table_lake(lake: &Path, bench: &TablesBench, index: usize) -> (PathBuf, PathBuf, PathBuf) {
    let table = lake.join(table_name(index, bench.tables));
    // The hot table writes its facts apart, so the quiet tables' shared
    // facts table is theirs alone to count (unless the bench is asked to
    // measure it sharing theirs).
    let facts = if index == 0 && !bench.shared_facts {
        "facts-hot"
    } else {
        "facts"
    };
    (
        table.join("bronze"),
        table.join("checkpoint"),
        lake.join(facts),
    )
}

/// A table's own fields, as a stream of a source or a stream alone holds them.
fn table_fields(lake: &Path, bench: &TablesBench, index: usize) -> String {
    let name = table_name(index, bench.tables);
    let (bronze, checkpoint, facts) = table_lake(lake, bench, index);
    format!(
        r#"  appId: bench-{name}
  target: {{name: bronze.{name}, location: "{bronze}"}}
  checkpoint: "{checkpoint}"
  facts: {{name: ops.ingestion_facts, location: "{facts}"}}
"#,
        bronze = bronze.display(),
        checkpoint = checkpoint.display(),
        facts = facts.display(),
    )
}

/// The connection as a manifest writes it, indented by `indent`.
fn connection_yaml(address: SocketAddr, indent: &str) -> String {
    format!(
        r#"{indent}host: "{ip}"
{indent}port: {port}
{indent}database: {DATABASE}
{indent}credentials: {{username: sa, passwordFrom: {{env: {PASSWORD_ENV}}}}}
{indent}encrypt: required
{indent}trustServerCertificate: true
"#,
        ip = address.ip(),
        port = address.port(),
    )
}

/// Table `index` as a single-table stream.
fn stream_config(
    address: SocketAddr,
    lake: &Path,
    bench: &TablesBench,
    index: usize,
) -> anyhow::Result<StreamConfig> {
    let manifest = format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: {name}}}
spec:
  source:
{connection}    table: dbo.{name}
{fields}  trigger: {{processingTime: {trigger}}}
  snapshot: {{mode: never}}
"#,
        name = table_name(index, bench.tables),
        connection = connection_yaml(address, "    "),
        fields = table_fields(lake, bench, index),
        trigger = humantime::format_duration(bench.trigger),
    );
    load_yaml(&manifest)?
        .spec
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Every table as a stream of one `CdcSource`, resolved as `run -f` does,
/// and the source's pacing.
fn source_configs(
    address: SocketAddr,
    lake: &Path,
    bench: &TablesBench,
) -> anyhow::Result<(Vec<StreamConfig>, SourcePacing)> {
    let mut manifest = format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcSource
metadata: {{name: bench}}
spec:
  connection:
{connection}  trigger: {{processingTime: {trigger}}}
  idleCommitInterval: {idle}
  defaults:
    snapshot: {{mode: never}}
"#,
        connection = connection_yaml(address, "    "),
        trigger = humantime::format_duration(bench.trigger),
        idle = humantime::format_duration(bench.idle_commit),
    );
    for index in 0..bench.tables {
        let name = table_name(index, bench.tables);
        manifest.push_str(&format!(
            "---\napiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: {name}}}\nspec:\n  sourceRef: {{name: bench}}\n  source: {{table: dbo.{name}}}\n{}",
            table_fields(lake, bench, index)
        ));
    }
    let Manifests::Source { source, streams } = load_documents(&manifest)? else {
        bail!("the benchmark's source manifest holds no CdcSource");
    };
    let configs = streams
        .iter()
        .map(|stream| {
            let name = stream.metadata.name.as_deref().unwrap_or_default();
            source_stream_config("bench", &source.spec, name, &stream.spec)
                .map_err(|e| anyhow::anyhow!("{e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((configs, source.spec.pacing()?))
}

/// What the writer has done so far.
#[derive(Default)]
struct Written {
    /// Statements sent (one request each).
    requests: AtomicU64,
    /// Rows committed.
    rows: AtomicU64,
}

/// Inserts `rate` rows a second into the hot table, one statement (one
/// transaction) every [`WRITE_EVERY`], until `stop`.
async fn write_hot(
    address: SocketAddr,
    tables: usize,
    rate: u64,
    written: Arc<Written>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let per_write = rate * WRITE_EVERY.as_millis() as u64 / 1000;
    if per_write == 0 {
        stop.cancelled().await;
        return Ok(());
    }
    let mut client = bench_session(address, DATABASE).await?;
    let values = vec!["(N'change')"; usize::try_from(per_write)?].join(", ");
    let sql = format!(
        "INSERT INTO dbo.{} (v) VALUES {values}",
        table_name(0, tables)
    );
    let mut tick = tokio::time::interval(WRITE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            _ = tick.tick() => {}
        }
        client
            .simple_query(sql.as_str())
            .await?
            .into_results()
            .await?;
        written.requests.fetch_add(1, Ordering::Relaxed);
        written.rows.fetch_add(per_write, Ordering::Relaxed);
    }
}

/// Removes the hot table's captured changes up to the max LSN, so the
/// side's hot stream (which starts at the oldest change kept) does not
/// begin with the earlier sides' changes.
async fn purge_hot(address: SocketAddr, tables: usize) -> anyhow::Result<()> {
    let mut client = bench_session(address, DATABASE).await?;
    let sql = format!(
        "DECLARE @lsn BINARY(10) = sys.fn_cdc_get_max_lsn(); \
         EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_{}', \
         @low_water_mark = @lsn, @threshold = 100000000",
        table_name(0, tables)
    );
    client.simple_query(sql).await?.into_results().await?;
    Ok(())
}

/// A session of the bench (sa) in `database`.
async fn bench_session(address: SocketAddr, database: &str) -> anyhow::Result<SqlClient> {
    let mut config = source(address, database)?;
    config.database = database.into();
    Ok(connect(&config, &SecretString::from(SA_PASSWORD)).await?)
}

/// The bench's session that reads the sandbox's counters.
async fn counters_session(address: SocketAddr) -> anyhow::Result<SqlClient> {
    bench_session(address, "master").await
}

/// The sandbox's requests and logins served so far (this read included).
async fn served(client: &mut SqlClient) -> anyhow::Result<(u64, u64)> {
    let rows = client
        .simple_query(
            "SELECT counter_name, cntr_value FROM sys.dm_os_performance_counters \
             WHERE counter_name IN (N'Batch Requests/sec', N'Logins/sec')",
        )
        .await?
        .into_first_result()
        .await?;
    let (mut requests, mut logins) = (None, None);
    for row in rows {
        let name: Option<&str> = row.get(0);
        let value: Option<i64> = row.get(1);
        let value = value.and_then(|v| u64::try_from(v).ok());
        match name {
            Some("Batch Requests/sec") => requests = value,
            Some("Logins/sec") => logins = value,
            _ => {}
        }
    }
    match (requests, logins) {
        (Some(requests), Some(logins)) => Ok((requests, logins)),
        _ => bail!("the sandbox has no request counters (sys.dm_os_performance_counters)"),
    }
}

/// The commits in the log of the local Delta table at `table` (none
/// before it exists).
fn commits_in(table: &Path) -> anyhow::Result<u64> {
    let log = table.join("_delta_log");
    if !log.exists() {
        return Ok(0);
    }
    let mut commits = 0;
    for entry in
        std::fs::read_dir(&log).with_context(|| format!("cannot list {}", log.display()))?
    {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        let is_commit = name
            .strip_suffix(".json")
            .is_some_and(|version| version.bytes().all(|b| b.is_ascii_digit()));
        commits += u64::from(is_commit);
    }
    Ok(commits)
}

/// Everything counted, at one moment.
struct Snapshot {
    at: Instant,
    requests: u64,
    logins: u64,
    writer_requests: u64,
    writer_rows: u64,
    cpu: Duration,
    store: Counts,
    batches: Vec<(u64, u64)>,
    /// Commits in the quiet tables' facts table's log.
    facts_commits: u64,
}

impl Snapshot {
    async fn take(
        client: &mut SqlClient,
        seen: &[Arc<Seen>],
        written: &Written,
        counter: &RequestCounter,
        quiet_facts: &Path,
    ) -> anyhow::Result<Snapshot> {
        let (requests, logins) = served(client).await?;
        let facts_commits = commits_in(quiet_facts)?;
        Ok(Snapshot {
            at: Instant::now(),
            requests,
            logins,
            writer_requests: written.requests.load(Ordering::Relaxed),
            writer_rows: written.rows.load(Ordering::Relaxed),
            cpu: super::bench_measure::cpu_time(),
            store: counter.snapshot(),
            batches: seen
                .iter()
                .map(|s| {
                    (
                        s.batches.load(Ordering::Relaxed),
                        s.rows.load(Ordering::Relaxed),
                    )
                })
                .collect(),
            facts_commits,
        })
    }

    /// The window's figures: this snapshot less `before`.
    fn figures_since(
        &self,
        before: &Snapshot,
        side: Side,
        lags: &[f64],
        ages: &[f64],
    ) -> SideFigures {
        let window = self.at.duration_since(before.at).as_secs_f64();
        let writer = self.writer_requests - before.writer_requests;
        // The second read is a request of the bench, not of the tables.
        let requests = (self.requests - before.requests).saturating_sub(writer + 1);
        let batches: Vec<(u64, u64)> = self
            .batches
            .iter()
            .zip(&before.batches)
            .map(|(a, b)| (a.0 - b.0, a.1 - b.1))
            .collect();
        let hot = if side == Side::Quiet {
            (0, 0)
        } else {
            batches.first().copied().unwrap_or_default()
        };
        let quiet_batches = batches.iter().map(|b| b.0).sum::<u64>() - hot.0;
        let store = self.store.since(&before.store);
        SideFigures {
            tables: batches.len(),
            window_s: window,
            trigger_s: 0.0,
            hot_rate: (self.writer_rows - before.writer_rows) as f64 / window.max(1e-9),
            sql_requests: requests,
            sql_logins: self.logins - before.logins,
            hot_batches: hot.0,
            hot_rows: hot.1,
            quiet_batches,
            hot_lag: Spread::of(lags),
            hot_age: Spread::of(ages),
            cpu_s: self.cpu.saturating_sub(before.cpu).as_secs_f64(),
            peak_rss_mb: peak_rss_mb(),
            store_hot: store.of_class("hot"),
            store_quiet: store.of_class("quiet"),
            quiet_facts_commits: self.facts_commits.saturating_sub(before.facts_commits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classed_hot_or_quiet_by_table_folder() {
        let root = Url::parse("file:///tmp/lake/source/").unwrap();
        let hot = root.join("t000/").unwrap();
        let hot_facts = root.join("facts-hot/").unwrap();
        let class = |url: &str| classify(&root, &hot, &hot_facts, url);
        assert_eq!(
            class("file:///tmp/lake/source/t000/bronze/_delta_log/0.json").as_deref(),
            Some("hot")
        );
        assert_eq!(
            class("file:///tmp/lake/source/facts-hot/x.parquet").as_deref(),
            Some("hot")
        );
        assert_eq!(
            class("file:///tmp/lake/source/t001/checkpoint/latest").as_deref(),
            Some("quiet")
        );
        assert_eq!(
            class("file:///tmp/lake/source/facts/_delta_log/3.json").as_deref(),
            Some("quiet")
        );
        assert_eq!(class("file:///tmp/elsewhere/t000/x"), None);
    }
}
