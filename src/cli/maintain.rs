//! `mssql-cdc maintain`: keeps the facts table (and bronze, silver and
//! finalization tables) small, the tables named one flag each or all
//! those a manifest names (`-f`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mssql_cdc::lake::checkpoint::{Checkpoint, KEEP_BATCHES};
use mssql_cdc::lake::maintenance::{FACTS_ZORDER_COLUMNS, Maintenance, VacuumRetention};
use mssql_cdc::lake::{StorageLocation, StorageOptions};
use mssql_cdc::spec::{Manifests, StreamConfig, load_documents, source_stream_config};

use super::StorageOptionArgs;

/// Arguments of `maintain`.
#[derive(clap::Args)]
pub struct MaintainArgs {
    /// A manifest (a CdcStream, or a CdcSource with its CdcStreams, as
    /// `run -f` takes): maintain every table and checkpoint it names,
    /// each once, instead of naming them with the flags below.
    #[arg(short = 'f', long = "file", conflicts_with_all = ["facts", "bronze", "silver", "finalization", "checkpoint"])]
    pub file: Option<PathBuf>,
    /// The facts table (path or URI).
    #[arg(long, required_unless_present = "file")]
    pub facts: Option<String>,
    /// Keep micro-batch rows written in the last N days; older ones are
    /// deleted. Event rows (snapshots, schema changes, lost data) are kept
    /// whatever their age.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub keep_days: u64,
    /// A bronze table to compact and vacuum too (no rows are deleted from
    /// bronze); repeat for several.
    #[arg(long = "bronze")]
    pub bronze: Vec<String>,
    /// A silver table to compact, z-ordered by its keys, and vacuum;
    /// repeat for several.
    #[arg(long = "silver")]
    pub silver: Vec<String>,
    /// A finalization control table to compact and vacuum (every round's
    /// MERGE rewrites it); repeat for several.
    #[arg(long = "finalization")]
    pub finalization: Vec<String>,
    /// A stream's checkpoint whose old plans and commit markers to delete
    /// (a running stream keeps its newest ones itself; this also clears a
    /// checkpoint written before that); repeat for several.
    #[arg(long = "checkpoint")]
    pub checkpoint: Vec<String>,
    /// How many of the newest batches a pruned checkpoint keeps.
    #[arg(long, default_value_t = KEEP_BATCHES, value_parser = clap::value_parser!(u64).range(1..))]
    pub keep_batches: u64,
    /// Vacuum deletes files removed from the table longer ago than this.
    #[arg(long, default_value_t = 168)]
    pub retain_hours: u64,
    /// Accept --retain-hours below 168 (Delta's default file retention):
    /// readers of older versions and a running stream's pending commit may
    /// then lose files they still need.
    #[arg(long)]
    pub allow_short_retention: bool,
    #[command(flatten)]
    pub storage: StorageOptionArgs,
}

/// What one table is to maintenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Facts,
    Finalization,
    Bronze,
    Silver,
    Checkpoint,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Facts => "facts",
            Kind::Finalization => "finalization",
            Kind::Bronze => "bronze",
            Kind::Silver => "silver",
            Kind::Checkpoint => "checkpoint",
        }
    }
}

/// Every table and checkpoint to maintain, each once, in order.
#[derive(Default)]
struct Plan(Vec<(Kind, StorageLocation, StorageOptions)>);

impl Plan {
    fn add(&mut self, kind: Kind, location: StorageLocation, options: StorageOptions) {
        if !self.0.iter().any(|(k, l, _)| *k == kind && *l == location) {
            self.0.push((kind, location, options));
        }
    }

    /// The tables the flags name.
    fn of_flags(args: &MaintainArgs) -> anyhow::Result<Plan> {
        let mut plan = Plan::default();
        let mut add = |kind: Kind, flag: &str, given: &str| -> anyhow::Result<()> {
            let location = StorageLocation::parse(given).with_context(|| format!("--{flag}"))?;
            let options = args.storage.for_location(&location);
            plan.add(kind, location, options);
            Ok(())
        };
        if let Some(facts) = &args.facts {
            add(Kind::Facts, "facts", facts)?;
        }
        for (kind, values) in [
            (Kind::Bronze, &args.bronze),
            (Kind::Silver, &args.silver),
            (Kind::Finalization, &args.finalization),
            (Kind::Checkpoint, &args.checkpoint),
        ] {
            for value in values {
                add(kind, kind.name(), value)?;
            }
        }
        Ok(plan)
    }

    /// The tables and checkpoints of every stream in the manifest at
    /// `file`: a source's shared tables once, then each stream's own.
    fn of_manifest(file: &std::path::Path) -> anyhow::Result<Plan> {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read manifest {}", file.display()))?;
        let configs: Vec<StreamConfig> =
            match load_documents(&text).with_context(|| format!("manifest {}", file.display()))? {
                Manifests::Stream(stream) => match stream.spec.validate() {
                    Ok(config) => vec![config],
                    Err(errors) => bail!("manifest {} is not valid:\n{errors}", file.display()),
                },
                Manifests::Source { source, streams } => {
                    let Some(source_name) = source.metadata.name.as_deref() else {
                        bail!(
                            "manifest {}: the CdcSource has no metadata.name",
                            file.display()
                        );
                    };
                    streams
                        .iter()
                        .map(|stream| {
                            let name = stream.metadata.name.as_deref().unwrap_or("(unnamed)");
                            source_stream_config(source_name, &source.spec, name, &stream.spec)
                                .with_context(|| format!("manifest {}", file.display()))
                        })
                        .collect::<anyhow::Result<_>>()?
                }
            };
        // The shared tables first, then each stream's own.
        let shared = configs.iter().flat_map(|c| {
            std::iter::once((Kind::Facts, c, &c.facts.location)).chain(
                c.finalization
                    .iter()
                    .map(move |f| (Kind::Finalization, c, &f.table.location)),
            )
        });
        let own = configs.iter().flat_map(|c| {
            std::iter::once((Kind::Bronze, c, &c.target.location))
                .chain(
                    c.silver
                        .iter()
                        .map(move |s| (Kind::Silver, c, &s.table.location)),
                )
                .chain(std::iter::once((Kind::Checkpoint, c, &c.checkpoint)))
        });
        let env: Vec<(String, String)> = std::env::vars().collect();
        let mut plan = Plan::default();
        for (kind, config, location) in shared.chain(own) {
            let options = location.options(&config.storage_options, env.iter().cloned());
            plan.add(kind, location.clone(), options);
        }
        Ok(plan)
    }
}

/// Deletes old micro-batch facts rows, then compacts, vacuums and cleans
/// up the log of each table, and prunes each checkpoint, printing each
/// step as it ends.
pub async fn run_maintain(args: MaintainArgs) -> anyhow::Result<()> {
    let retention = VacuumRetention {
        retain: Duration::from_secs(args.retain_hours.saturating_mul(3600)),
        allow_short: args.allow_short_retention,
    };
    retention.check()?;
    let plan = match &args.file {
        Some(file) => Plan::of_manifest(file)?,
        None => Plan::of_flags(&args)?,
    };
    let total = plan.0.len();
    for (done, (kind, location, options)) in plan.0.iter().enumerate() {
        let place = format!("[{}/{total}]", done + 1);
        if *kind == Kind::Checkpoint {
            let started = Instant::now();
            let removed = Checkpoint::open(location, options)?
                .prune(args.keep_batches)
                .await?;
            println!(
                "{place} checkpoint {location}: deleted {removed} plans and commit markers older than the newest {} batches ({})",
                args.keep_batches,
                elapsed(started)
            );
            continue;
        }
        let mut table = Maintenance::open(location, options).await?;
        println!(
            "{place} {} {location} (version {})",
            kind.name(),
            version(&table)
        );
        let zorder: Vec<String> = match kind {
            Kind::Facts => {
                let started = Instant::now();
                let deleted = table
                    .delete_old_batches(args.keep_days, chrono::Utc::now())
                    .await?;
                let deleted = deleted.map_or_else(|| "some".to_string(), |n| n.to_string());
                println!(
                    "  deleted {deleted} micro-batch rows older than {} days ({})",
                    args.keep_days,
                    elapsed(started)
                );
                FACTS_ZORDER_COLUMNS.map(str::to_string).to_vec()
            }
            Kind::Silver => table.require_silver_keys()?,
            Kind::Bronze | Kind::Finalization | Kind::Checkpoint => Vec::new(),
        };
        let zorder: Vec<&str> = zorder.iter().map(String::as_str).collect();
        compact_and_vacuum(&mut table, &zorder, retention).await?;
    }
    Ok(())
}

async fn compact_and_vacuum(
    table: &mut Maintenance,
    zorder: &[&str],
    retention: VacuumRetention,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let (removed, added) = table.compact(zorder).await?;
    let how = if zorder.is_empty() {
        String::new()
    } else {
        format!(", z-ordered by {}", zorder.join(", "))
    };
    println!(
        "  compacted {removed} files into {added}{how} ({})",
        elapsed(started)
    );
    let started = Instant::now();
    let vacuumed = table.vacuum(retention).await?;
    println!(
        "  vacuumed {vacuumed} files removed, or never added, more than {} h ago ({})",
        retention.retain.as_secs() / 3600,
        elapsed(started),
    );
    let started = Instant::now();
    let cleaned = table.clean_up_log().await?;
    println!(
        "  deleted {cleaned} log files older than the log's retention ({}); now version {}",
        elapsed(started),
        version(table)
    );
    Ok(())
}

fn version(table: &Maintenance) -> String {
    table
        .version()
        .map_or_else(|| "none".to_string(), |v| v.to_string())
}

fn elapsed(started: Instant) -> String {
    format!("{:.1} s", started.elapsed().as_secs_f64())
}
