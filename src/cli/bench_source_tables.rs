//! `mssql-cdc bench --source-tables N`: the tables of one database in one
//! worker (a `CdcSource`, issue 30) against the same tables as single-table
//! streams. The sandbox runs apart; its database holds N captured tables,
//! of which the first (`dbo.t000`, the hot one) takes `--hot-rate` changes
//! a second and the others none. Each setting (a [`Side`]) runs in a
//! process of its own, so CPU and peak RSS are its own
//! (`bench_source_tables_side.rs`), and prints one JSON line of
//! [`SideFigures`]; this process starts the sandbox, the sides, and prints
//! the table of docs/performance.md.
//!
//! The sides: `source` (N tables of one `CdcSource`), `streams` (N
//! single-table streams, each with its own session and polling, in one
//! process: one runtime, not N), `hot` and `quiet` (one single-table worker
//! of the hot table, of one quiet table). N separate workers are estimated
//! as `hot` plus N−1 times `quiet`; that sum is arithmetic, not a run.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use mssql_cdc::source::connect;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::bench_source::{SA_PASSWORD, source, start_sandbox};

/// The database holding the benchmark's tables.
pub const DATABASE: &str = "bench_tables";

/// What `--source-tables` measures.
#[derive(Debug, Clone)]
pub struct TablesBench {
    /// Captured tables, the first of them hot.
    pub tables: usize,
    /// Changes a second into the hot table.
    pub hot_rate: u64,
    /// How long the measured window lasts, after the warm-up.
    pub duration: Duration,
    /// The trigger (a source's rounds; each single stream's polls).
    pub trigger: Duration,
    /// A source's quiet table commits an empty batch this often.
    pub idle_commit: Duration,
    /// The settings to run, in this order.
    pub settings: Vec<Side>,
    /// The hot table writes the quiet tables' facts table too.
    pub shared_facts: bool,
}

/// One setting, run in a process of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
pub enum Side {
    /// Every table in one `CdcSource`.
    Source,
    /// Every table as a single-table stream, all in this one process.
    Streams,
    /// The hot table alone, as a single-table stream.
    Hot,
    /// One quiet table alone, as a single-table stream.
    Quiet,
}

impl Side {
    /// Every side, in the order they run.
    pub const ALL: [Side; 4] = [Side::Source, Side::Streams, Side::Hot, Side::Quiet];

    /// Its name on the command line and in the lake's folders.
    pub fn name(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Streams => "streams",
            Side::Hot => "hot",
            Side::Quiet => "quiet",
        }
    }

    /// The tables it runs, by index (0 is the hot table).
    pub fn tables(self, tables: usize) -> std::ops::Range<usize> {
        match self {
            Side::Source | Side::Streams => 0..tables,
            Side::Hot => 0..1,
            Side::Quiet => 1..2,
        }
    }
}

/// The name of table `index`: `t000`, `t001`... (as wide as the count needs).
pub fn table_name(index: usize, tables: usize) -> String {
    let width = tables.saturating_sub(1).max(1).to_string().len().max(3);
    format!("t{index:0width$}")
}

/// What one side measured over its window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SideFigures {
    /// Tables run.
    pub tables: usize,
    /// The window's length, seconds.
    pub window_s: f64,
    /// The trigger, seconds.
    pub trigger_s: f64,
    /// Rows the writer committed into the hot table per second.
    pub hot_rate: f64,
    /// SQL requests the tables sent (the sandbox's count, less the
    /// writer's and the bench's own).
    pub sql_requests: u64,
    /// Logins the tables made.
    pub sql_logins: u64,
    /// Batches of the hot table.
    pub hot_batches: u64,
    /// Change rows the hot table wrote.
    pub hot_rows: u64,
    /// Batches of the quiet tables (idle commits, empty batches).
    pub quiet_batches: u64,
    /// The hot table's `ingestion_lag_seconds` at each check that led to a batch.
    pub hot_lag: Spread,
    /// Age of each hot batch's oldest change when its batch was done, seconds.
    pub hot_age: Spread,
    /// CPU of the process (user and system), seconds.
    pub cpu_s: f64,
    /// Peak RSS of the process since it started, MB.
    pub peak_rss_mb: f64,
    /// Object-store requests on the hot table's paths.
    pub store_hot: u64,
    /// Object-store requests on the quiet tables' paths, their shared facts
    /// table included.
    pub store_quiet: u64,
    /// Commits of the quiet tables' shared facts table.
    #[serde(default)]
    pub quiet_facts_commits: u64,
}

/// Mean, 95th percentile and maximum of some samples.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Spread {
    /// Samples.
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// The 95th percentile (nearest rank).
    pub p95: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `samples` (all zero when there are none).
    pub fn of(samples: &[f64]) -> Spread {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let Some(max) = sorted.last().copied() else {
            return Spread::default();
        };
        let n = sorted.len();
        let rank = (n * 95).div_ceil(100).clamp(1, n);
        Spread {
            n,
            mean: sorted.iter().sum::<f64>() / n as f64,
            p95: sorted[rank - 1],
            max,
        }
    }

    fn cell(&self) -> String {
        if self.n == 0 {
            return "–".to_string();
        }
        format!("{:.2} / {:.2} / {:.2}", self.mean, self.p95, self.max)
    }
}

impl SideFigures {
    /// Rounds in the window: one a trigger (a source's rounds, and each
    /// single stream's polls, wait a trigger after the last one ended, so
    /// the true count is a little lower and per-round figures err high).
    fn rounds(&self) -> f64 {
        (self.window_s / self.trigger_s.max(1e-9)).max(1.0)
    }

    /// `total` per round.
    fn per_round(&self, total: f64) -> f64 {
        total / self.rounds()
    }

    /// Object-store requests per quiet table per hour, as measured.
    fn quiet_requests_per_hour(&self) -> f64 {
        let quiet = self.tables.saturating_sub(1).max(1) as f64;
        self.store_quiet as f64 / quiet / self.window_s.max(1e-9) * 3600.0
    }

    /// Object-store requests per quiet table's batch.
    fn quiet_requests_per_batch(&self) -> f64 {
        self.store_quiet as f64 / self.quiet_batches.max(1) as f64
    }
}

/// Runs every side and prints the table.
pub async fn run(dir: &Path, bench: &TablesBench) -> anyhow::Result<()> {
    if bench.tables < 2 {
        bail!(
            "--source-tables needs at least 2 tables (one hot, the others quiet), got {}",
            bench.tables
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "mssql-cdc bench --source-tables {}: 1 table at {} changes/s, {} quiet, trigger {}, idle commit {}, window {}, {cores} cores, the hot table's facts {}",
        bench.tables,
        bench.hot_rate,
        bench.tables - 1,
        humantime::format_duration(bench.trigger),
        humantime::format_duration(bench.idle_commit),
        humantime::format_duration(bench.duration),
        if bench.shared_facts {
            "in the quiet tables' facts table"
        } else {
            "in a facts table of its own"
        },
    );
    let (mut sandbox, address) = start_sandbox().await?;
    let started = std::time::Instant::now();
    prepare(address, bench.tables).await?;
    println!(
        "{} captured tables ready in {:.1} s",
        bench.tables,
        started.elapsed().as_secs_f64()
    );
    let mut figures = Vec::new();
    for side in Side::ALL.into_iter().filter(|s| bench.settings.contains(s)) {
        let found = run_side_process(address, dir, bench, side).await?;
        println!("{}: {}", side.name(), serde_json::to_string(&found)?);
        figures.push((side, found));
    }
    let _ = sandbox.kill().await;
    print_table(bench, &figures);
    Ok(())
}

/// Creates the database and its `tables` captured tables.
async fn prepare(address: SocketAddr, tables: usize) -> anyhow::Result<()> {
    let mut master = source(address, "master")?;
    master.database = "master".into();
    let mut client = connect(&master, &SecretString::from(SA_PASSWORD)).await?;
    for sql in [
        format!("CREATE DATABASE {DATABASE}"),
        format!("USE {DATABASE}"),
        "EXEC sys.sp_cdc_enable_db".to_string(),
    ] {
        client.simple_query(sql).await?.into_results().await?;
    }
    for index in 0..tables {
        let name = table_name(index, tables);
        let sql = format!(
            "CREATE TABLE dbo.{name} (id BIGINT IDENTITY(1,1) NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL); \
             EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{name}', @role_name = NULL"
        );
        client.simple_query(sql).await?.into_results().await?;
    }
    // Capture maps new changes every second (SQL Server's default is 5 s),
    // so the lag measured is mostly the engine's, not capture's.
    let sql = "EXEC sys.sp_cdc_change_job @job_type = N'capture', @pollinginterval = 1; \
               EXEC sys.sp_cdc_stop_job @job_type = N'capture'; \
               EXEC sys.sp_cdc_start_job @job_type = N'capture'";
    client.simple_query(sql).await?.into_results().await?;
    Ok(())
}

/// Runs `side` in a child process of this program; its figures.
async fn run_side_process(
    address: SocketAddr,
    dir: &Path,
    bench: &TablesBench,
    side: Side,
) -> anyhow::Result<SideFigures> {
    let exe = std::env::current_exe().context("cannot find this program to run a side")?;
    let output = tokio::process::Command::new(exe)
        .args(["bench", "--source-tables"])
        .arg(bench.tables.to_string())
        .args(["--source-tables-side", side.name()])
        .args(["--source-tables-server"])
        .arg(address.to_string())
        .args(["--hot-rate"])
        .arg(bench.hot_rate.to_string())
        .args(["--source-tables-duration"])
        .arg(humantime::format_duration(bench.duration).to_string())
        .args(["--source-tables-trigger"])
        .arg(humantime::format_duration(bench.trigger).to_string())
        .args(["--source-tables-idle-commit"])
        .arg(humantime::format_duration(bench.idle_commit).to_string())
        .args(bench.shared_facts.then_some("--source-tables-shared-facts"))
        .arg("--dir")
        .arg(dir)
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("cannot run the {} side", side.name()))?;
    if !output.status.success() {
        bail!("the {} side failed: {}", side.name(), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("the {} side printed no figures", side.name()))?;
    serde_json::from_str(line).with_context(|| format!("the {} side's figures", side.name()))
}

/// N separate single-table workers, estimated: the hot one's figures plus
/// N−1 times the quiet one's, over the hot one's rounds.
fn separate_workers(hot: &SideFigures, quiet: &SideFigures, tables: usize) -> SideFigures {
    let others = tables.saturating_sub(1) as f64;
    let scale = |h: f64, q: f64| h + q * others;
    let per_window = |q: u64| q as f64 / quiet.window_s.max(1e-9) * hot.window_s;
    SideFigures {
        tables,
        window_s: hot.window_s,
        trigger_s: hot.trigger_s,
        hot_rate: hot.hot_rate,
        sql_requests: scale(hot.sql_requests as f64, per_window(quiet.sql_requests)) as u64,
        sql_logins: scale(hot.sql_logins as f64, per_window(quiet.sql_logins)) as u64,
        hot_batches: hot.hot_batches,
        hot_rows: hot.hot_rows,
        quiet_batches: (per_window(quiet.quiet_batches) * others) as u64,
        hot_lag: hot.hot_lag,
        hot_age: hot.hot_age,
        cpu_s: scale(
            hot.cpu_s,
            quiet.cpu_s / quiet.window_s.max(1e-9) * hot.window_s,
        ),
        peak_rss_mb: scale(hot.peak_rss_mb, quiet.peak_rss_mb),
        store_hot: hot.store_hot,
        store_quiet: (per_window(quiet.store_quiet) * others) as u64,
        quiet_facts_commits: (per_window(quiet.quiet_facts_commits) * others) as u64,
    }
}

/// Prints the figures of every side, one column each.
fn print_table(bench: &TablesBench, figures: &[(Side, SideFigures)]) {
    let of = |side: Side| figures.iter().find(|(s, _)| *s == side).map(|(_, f)| f);
    let (Some(source), Some(streams), Some(hot), Some(quiet)) = (
        of(Side::Source),
        of(Side::Streams),
        of(Side::Hot),
        of(Side::Quiet),
    ) else {
        return;
    };
    let separate = separate_workers(hot, quiet, bench.tables);
    let columns = [source, streams, &separate, hot, quiet];
    let n = bench.tables;
    println!();
    println!(
        "| figure | one CdcSource, {n} tables | {n} single-table streams, one process | {n} single-table workers (estimated: hot + {} × quiet) | hot table alone | one quiet table alone |",
        n - 1
    );
    println!("|---|---|---|---|---|---|");
    let row = |label: &str, cell: &dyn Fn(&SideFigures) -> String| {
        let cells: Vec<String> = columns.iter().map(|f| cell(f)).collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    row("rounds in the window (window ÷ trigger)", &|f| {
        format!("{:.0}", f.rounds())
    });
    row("hot table's batches in the window", &|f| {
        f.hot_batches.to_string()
    });
    row("SQL round trips per round", &|f| {
        format!("{:.1}", f.per_round(f.sql_requests as f64))
    });
    row("SQL logins in the window", &|f| f.sql_logins.to_string());
    row("hot rows/s ingested (written)", &|f| {
        format!(
            "{:.0} ({:.0})",
            f.hot_rows as f64 / f.window_s.max(1e-9),
            f.hot_rate
        )
    });
    row(
        "hot ingestion_lag_seconds at a batch's check, mean / p95 / max",
        &|f| f.hot_lag.cell(),
    );
    row(
        "hot oldest change's age when its batch is done, s, mean / p95 / max",
        &|f| f.hot_age.cell(),
    );
    row("worker CPU per round, ms", &|f| {
        format!("{:.1}", f.per_round(f.cpu_s * 1000.0))
    });
    row("worker CPU, % of one core", &|f| {
        format!("{:.1}", f.cpu_s / f.window_s.max(1e-9) * 100.0)
    });
    row("peak RSS, MB", &|f| format!("{:.0}", f.peak_rss_mb));
    row("quiet tables' batches in the window", &|f| {
        f.quiet_batches.to_string()
    });
    row("object-store requests per quiet table's batch", &|f| {
        format!("{:.1}", f.quiet_requests_per_batch())
    });
    row("quiet tables' facts commits per round", &|f| {
        format!("{:.2}", f.per_round(f.quiet_facts_commits as f64))
    });
    row("quiet tables' batches per facts commit", &|f| {
        format!(
            "{:.2}",
            f.quiet_batches as f64 / f.quiet_facts_commits.max(1) as f64
        )
    });
    row("object-store requests per quiet table per hour", &|f| {
        format!("{:.0}", f.quiet_requests_per_hour())
    });
    // Only a source's quiet tables commit on a timer; a single stream's
    // commit whenever the database moves.
    row(
        "the same at idleCommitInterval 5m (per batch × 12, estimated)",
        &|f| {
            if std::ptr::eq(f, source) {
                format!("{:.0}", f.quiet_requests_per_batch() * 12.0)
            } else {
                "–".to_string()
            }
        },
    );
    row("object-store requests of the hot table per round", &|f| {
        format!("{:.1}", f.per_round(f.store_hot as f64))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_named_as_wide_as_their_count_needs() {
        assert_eq!(table_name(0, 200), "t000");
        assert_eq!(table_name(199, 200), "t199");
        assert_eq!(table_name(7, 2), "t007");
        assert_eq!(table_name(42, 2000), "t0042");
    }

    #[test]
    fn a_spread_is_the_mean_the_nearest_rank_95th_percentile_and_the_max() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let spread = Spread::of(&samples);
        assert_eq!(
            (spread.n, spread.mean, spread.p95, spread.max),
            (100, 50.5, 95.0, 100.0)
        );
        assert_eq!(Spread::of(&[2.0]).p95, 2.0);
        assert_eq!(Spread::of(&[]).n, 0);
    }

    #[test]
    fn separate_workers_are_the_hot_one_plus_the_others_times_a_quiet_one() {
        let hot = SideFigures {
            tables: 1,
            window_s: 100.0,
            trigger_s: 2.0,
            sql_requests: 1000,
            hot_batches: 50,
            cpu_s: 2.0,
            peak_rss_mb: 60.0,
            ..SideFigures::default()
        };
        // The quiet worker ran twice as long: its counts are halved to the
        // hot one's window.
        let quiet = SideFigures {
            tables: 1,
            window_s: 200.0,
            sql_requests: 400,
            quiet_batches: 100,
            cpu_s: 1.0,
            peak_rss_mb: 40.0,
            store_quiet: 3000,
            ..SideFigures::default()
        };
        let all = separate_workers(&hot, &quiet, 3);
        assert_eq!(all.sql_requests, 1000 + 2 * 200);
        assert_eq!(all.cpu_s, 2.0 + 2.0 * 0.5);
        assert_eq!(all.peak_rss_mb, 60.0 + 2.0 * 40.0);
        assert_eq!(all.quiet_batches, 100);
        // 50 rounds of 2 s in the hot worker's 100 s.
        assert_eq!(all.per_round(all.sql_requests as f64), 1400.0 / 50.0);
        // 1500 requests for each of 2 quiet tables in 100 s.
        assert_eq!(all.quiet_requests_per_hour(), 1500.0 * 36.0);
        assert_eq!(all.quiet_requests_per_batch(), 30.0);
    }
}
