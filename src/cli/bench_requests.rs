//! `mssql-cdc bench --requests`: object-store requests per trigger, by
//! kind and by path class, for a stream on the built-in sandbox and a
//! local lake, counted by `lake::requests` (docs/performance.md). Three
//! kinds of trigger: idle (the source has nothing new), an empty batch
//! (only another table changed, so the range holds no row of this one)
//! and a busy batch (a few changes of this table); each with bronze
//! alone, with the finalization table, and with silver as well. Then the
//! per-batch operations of a design that keeps its position in the Delta
//! log alone (`bench_requests_model`), on the same counting store. Counts
//! do not depend on speed, so a debug build measures the same.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use mssql_cdc::domain::FactRow;
use mssql_cdc::engine::{Observer, RunOptions, SourceCheck, run};
use mssql_cdc::lake::requests::{self, Counts, Kind, RequestCounter};
use mssql_cdc::source::connect;
use mssql_cdc::spec::{StreamConfig, load_yaml};
use secrecy::SecretString;
use tokio::sync::mpsc;
use url::Url;

use super::bench_source::{PASSWORD_ENV, SA_PASSWORD, source, start_sandbox};

/// How many triggers of each kind to count.
#[derive(Debug, Clone, Copy)]
pub struct RequestsBench {
    /// Idle triggers.
    pub idle: u64,
    /// Empty batches, and as many busy ones.
    pub batches: u64,
}

/// The lake layouts measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Bronze,
    Finalization,
    Silver,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Bronze, Variant::Finalization, Variant::Silver];

    fn name(self) -> &'static str {
        match self {
            Variant::Bronze => "bronze + facts",
            Variant::Finalization => "bronze + facts + finalization",
            Variant::Silver => "bronze + facts + finalization + silver",
        }
    }

    fn database(self) -> &'static str {
        match self {
            Variant::Bronze => "requests_bronze",
            Variant::Finalization => "requests_final",
            Variant::Silver => "requests_silver",
        }
    }
}

/// What a trigger was, told by what happened between two source checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Trigger {
    Idle,
    Empty,
    Busy,
}

impl Trigger {
    const ALL: [Trigger; 3] = [Trigger::Idle, Trigger::Empty, Trigger::Busy];

    fn name(self) -> &'static str {
        match self {
            Trigger::Idle => "idle trigger",
            Trigger::Empty => "empty batch",
            Trigger::Busy => "busy batch",
        }
    }
}

/// What the observer saw, in order.
enum Seen {
    /// A trigger read the source: the requests counted up to then.
    Checked(Counts),
    /// A batch finished with this many rows.
    Done(u64),
}

struct Recorder {
    counter: Arc<RequestCounter>,
    events: mpsc::UnboundedSender<Seen>,
}

impl Observer for Recorder {
    fn source_checked(&self, _check: &SourceCheck) {
        let _ = self.events.send(Seen::Checked(self.counter.snapshot()));
    }

    fn batch_done(&self, row: &FactRow) {
        let _ = self.events.send(Seen::Done(row.rows.unwrap_or(0)));
    }
}

/// The requests of each kind of trigger: their sum and how many there were.
#[derive(Default)]
struct Tally(BTreeMap<Trigger, (Counts, u64)>);

impl Tally {
    fn per_trigger(&self, trigger: Trigger, count: impl Fn(&Counts) -> u64) -> String {
        match self.0.get(&trigger) {
            Some((counts, n)) if *n > 0 => format!("{:.1}", count(counts) as f64 / *n as f64),
            _ => "–".to_string(),
        }
    }
}

/// Runs the request count and prints its tables.
pub async fn run_bench(dir: &Path, bench: &RequestsBench) -> anyhow::Result<()> {
    println!(
        "mssql-cdc bench --requests: {} idle triggers, {} empty and {} busy batches per layout, local lake",
        bench.idle, bench.batches, bench.batches
    );
    let (mut sandbox, address) = start_sandbox().await?;
    for variant in Variant::ALL {
        prepare(address, variant.database()).await?;
        let lake = dir.join(variant.database());
        std::fs::create_dir_all(&lake)?;
        let tally = measure(address, variant, &lake, bench).await?;
        print_tally(variant, &tally);
    }
    let _ = sandbox.kill().await;
    super::bench_requests_model::run(&dir.join("delta-log-only")).await?;
    println!();
    println!(
        "Counted on the stores deltalake and the checkpoint open (lake::requests): a ranged read counts once per coalesced request, as S3 would get it; a LIST counts once per call (S3 pages at 1000 keys); a rename counts as S3's copy and delete. A trigger is what happens between two reads of the source (the rest of one step and the start of the next)."
    );
    Ok(())
}

/// A database with two captured tables: `dbo.events`, streamed, and
/// `dbo.other`, whose changes give the stream empty batches.
async fn prepare(address: std::net::SocketAddr, database: &str) -> anyhow::Result<()> {
    let mut source = source(address, "master")?;
    source.database = "master".into();
    let mut client = connect(&source, &SecretString::from(SA_PASSWORD)).await?;
    for sql in [
        format!("CREATE DATABASE {database}"),
        format!("USE {database}"),
        "CREATE TABLE dbo.events (id INT NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL)".to_string(),
        "CREATE TABLE dbo.other (id INT NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL)".to_string(),
        "EXEC sys.sp_cdc_enable_db".to_string(),
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events', @role_name = NULL"
            .to_string(),
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'other', @role_name = NULL"
            .to_string(),
    ] {
        client.simple_query(sql).await?.into_results().await?;
    }
    Ok(())
}

/// The stream of `dbo.events` into `lake`, triggered every 100 ms.
fn config(
    address: std::net::SocketAddr,
    variant: Variant,
    lake: &Path,
) -> anyhow::Result<StreamConfig> {
    let path = |rel: &str| lake.join(rel).display().to_string();
    let finalization = match variant {
        Variant::Bronze => String::new(),
        Variant::Finalization | Variant::Silver => format!(
            "\n  finalization: {{name: ops.table_finalization, location: \"{}\"}}",
            path("finalization")
        ),
    };
    let silver = match variant {
        Variant::Silver => format!(
            "\n  silver: {{name: silver.events, location: \"{}\"}}",
            path("silver")
        ),
        Variant::Bronze | Variant::Finalization => String::new(),
    };
    let manifest = format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: requests}}
spec:
  appId: requests
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
  facts: {{name: ops.ingestion_facts, location: "{facts}"}}{finalization}{silver}
  trigger: {{processingTime: 100ms}}
  snapshot: {{mode: never}}
"#,
        ip = address.ip(),
        port = address.port(),
        database = variant.database(),
        bronze = path("bronze"),
        checkpoint = path("checkpoint"),
        facts = path("facts"),
    );
    load_yaml(&manifest)?
        .spec
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The class of a request under `lake`: the checkpoint's subfolder or the
/// lease, a table's `_delta_log` or its data, or the claims.
pub fn classify(lake: &Url, url: &str) -> Option<String> {
    let rest = url.strip_prefix(lake.as_str())?;
    let (folder, inside) = rest.split_once('/').unwrap_or((rest, ""));
    if inside.starts_with("_mssql_cdc_claims") {
        return Some("claims".to_string());
    }
    Some(match folder {
        "checkpoint" if inside == "lease" => "lease".to_string(),
        "checkpoint" => match inside.split_once('/') {
            Some((sub, _)) => format!("checkpoint {sub}/"),
            None if inside.is_empty() => "checkpoint".to_string(),
            None => format!("checkpoint {inside}"),
        },
        table if inside.starts_with("_delta_log") => format!("{table} _delta_log"),
        table => format!("{table} data"),
    })
}

async fn measure(
    address: std::net::SocketAddr,
    variant: Variant,
    lake: &Path,
    bench: &RequestsBench,
) -> anyhow::Result<Tally> {
    let root = Url::from_directory_path(lake)
        .map_err(|()| anyhow::anyhow!("{} is not an absolute path", lake.display()))?;
    let counter = RequestCounter::new(Arc::new(move |url: &str| classify(&root, url)));
    requests::install(counter.clone());
    let result = drive(address, variant, lake, bench, counter.clone()).await;
    requests::remove(&counter);
    result
}

async fn drive(
    address: std::net::SocketAddr,
    variant: Variant,
    lake: &Path,
    bench: &RequestsBench,
    counter: Arc<RequestCounter>,
) -> anyhow::Result<Tally> {
    let (events, mut seen) = mpsc::unbounded_channel();
    let mut options = RunOptions::new(Arc::new(Recorder { counter, events }));
    options.env = BTreeMap::from([(PASSWORD_ENV.to_string(), SA_PASSWORD.to_string())]);
    let stop = options.stop.clone();
    let stream = tokio::spawn(run(config(address, variant, lake)?, options));
    let mut source = source(address, variant.database())?;
    source.database = variant.database().into();
    let mut client = connect(&source, &SecretString::from(SA_PASSWORD)).await?;

    let mut log = Vec::new();
    // Start-up (lease, tables, the first steps) is not a trigger's cost:
    // counting starts at the third source check.
    let mut checks = 0;
    while checks < 3 {
        let event = next(&mut seen).await?;
        if let Seen::Checked(_) = event {
            checks += 1;
            if checks == 3 {
                log.push(event);
            }
        }
    }
    while log.iter().filter(|e| matches!(e, Seen::Checked(_))).count() <= bench.idle as usize {
        log.push(next(&mut seen).await?);
    }
    for (i, table) in (0..bench.batches)
        .map(|i| (i, "other"))
        .chain((0..bench.batches).map(|i| (i, "events")))
    {
        // One transaction of three rows: one commit, one batch.
        let base = i * 3;
        let sql = format!(
            "INSERT INTO dbo.{table} VALUES ({}, N'a'), ({}, N'b'), ({}, N'c')",
            base,
            base + 1,
            base + 2
        );
        client.simple_query(sql).await?.into_results().await?;
        loop {
            let event = next(&mut seen).await?;
            let done = matches!(event, Seen::Done(_));
            log.push(event);
            if done {
                break;
            }
        }
    }
    // Closes the last batch's trigger.
    loop {
        let event = next(&mut seen).await?;
        let checked = matches!(event, Seen::Checked(_));
        log.push(event);
        if checked {
            break;
        }
    }
    stop.cancel();
    stream.await.context("the stream's task")??;
    tally(&log, bench)
}

/// The next thing the stream did; an error when it stopped or went quiet
/// for a minute (the benchmark never waits without bound).
async fn next(seen: &mut mpsc::UnboundedReceiver<Seen>) -> anyhow::Result<Seen> {
    match tokio::time::timeout(Duration::from_secs(60), seen.recv()).await {
        Ok(Some(event)) => Ok(event),
        Ok(None) => bail!("the stream stopped before the benchmark ended"),
        Err(_) => bail!("the stream did nothing for 60 s"),
    }
}

/// Cuts the log into triggers (from one source check to the next) and sums
/// the requests of each kind of trigger.
fn tally(log: &[Seen], bench: &RequestsBench) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    let mut previous: Option<&Counts> = None;
    let mut rows: Option<u64> = None;
    for event in log {
        match event {
            Seen::Done(n) => rows = Some(rows.unwrap_or(0) + n),
            Seen::Checked(counts) => {
                if let Some(before) = previous {
                    let trigger = match rows {
                        None => Trigger::Idle,
                        Some(0) => Trigger::Empty,
                        Some(_) => Trigger::Busy,
                    };
                    let entry = tally.0.entry(trigger).or_default();
                    entry.0.add(&counts.since(before));
                    entry.1 += 1;
                }
                previous = Some(counts);
                rows = None;
            }
        }
    }
    for trigger in [Trigger::Empty, Trigger::Busy] {
        let n = tally.0.get(&trigger).map_or(0, |(_, n)| *n);
        if n != bench.batches {
            bail!(
                "counted {n} {}es, expected {} (two batches in one trigger?)",
                trigger.name(),
                bench.batches
            );
        }
    }
    Ok(tally)
}

fn print_tally(variant: Variant, tally: &Tally) {
    let count_of = |trigger: Trigger| tally.0.get(&trigger).map_or(0, |(_, n)| *n);
    println!();
    println!("### {}", variant.name());
    println!();
    println!(
        "| requests per trigger | {} (n={}) | {} (n={}) | {} (n={}) |",
        Trigger::Idle.name(),
        count_of(Trigger::Idle),
        Trigger::Empty.name(),
        count_of(Trigger::Empty),
        Trigger::Busy.name(),
        count_of(Trigger::Busy)
    );
    println!("|---|---|---|---|");
    let mut all = Counts::default();
    for (counts, _) in tally.0.values() {
        all.add(counts);
    }
    let row = |label: &str, count: &dyn Fn(&Counts) -> u64| {
        let cells: Vec<String> = Trigger::ALL
            .iter()
            .map(|t| tally.per_trigger(*t, count))
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    row("**total**", &|c: &Counts| c.total());
    for kind in Kind::ALL {
        if all.of_kind(kind) > 0 {
            row(kind.name(), &|c: &Counts| c.of_kind(kind));
        }
    }
    for class in all.classes() {
        row(&format!("_{class}_"), &|c: &Counts| c.of_class(&class));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classed_by_folder_and_log() {
        let lake = Url::parse("file:///tmp/lake/").unwrap();
        let cases = [
            ("file:///tmp/lake/checkpoint/lease", Some("lease")),
            (
                "file:///tmp/lake/checkpoint/offsets/7",
                Some("checkpoint offsets/"),
            ),
            (
                "file:///tmp/lake/checkpoint/identity",
                Some("checkpoint identity"),
            ),
            ("file:///tmp/lake/checkpoint", Some("checkpoint")),
            (
                "file:///tmp/lake/bronze/_delta_log/00.json",
                Some("bronze _delta_log"),
            ),
            (
                "file:///tmp/lake/bronze/part-1.parquet",
                Some("bronze data"),
            ),
            (
                "file:///tmp/lake/facts/_mssql_cdc_claims/x.json",
                Some("claims"),
            ),
            ("file:///tmp/elsewhere/x", None),
        ];
        for (url, class) in cases {
            assert_eq!(classify(&lake, url).as_deref(), class, "{url}");
        }
    }

    #[test]
    fn triggers_are_cut_at_source_checks() {
        let at = |n: u64| Counts(BTreeMap::from([(("bronze".to_string(), Kind::Get), n)]));
        let log = [
            Seen::Checked(at(0)),
            Seen::Checked(at(1)),
            Seen::Done(0),
            Seen::Checked(at(4)),
            Seen::Done(3),
            Seen::Checked(at(10)),
        ];
        let tally = tally(
            &log,
            &RequestsBench {
                idle: 1,
                batches: 1,
            },
        )
        .unwrap();
        let total = |t| tally.0.get(&t).map(|(c, n)| (c.total(), *n));
        assert_eq!(total(Trigger::Idle), Some((1, 1)));
        assert_eq!(total(Trigger::Empty), Some((3, 1)));
        assert_eq!(total(Trigger::Busy), Some((6, 1)));
    }
}
