//! `mssql-cdc maintain`: keeps the facts table (and bronze and silver
//! tables) small.

use std::time::{Duration, Instant};

use anyhow::Context;
use mssql_cdc::lake::StorageLocation;
use mssql_cdc::lake::checkpoint::{Checkpoint, KEEP_BATCHES};
use mssql_cdc::lake::maintenance::{FACTS_ZORDER_COLUMNS, Maintenance, VacuumRetention};

use super::StorageOptionArgs;

/// Arguments of `maintain`.
#[derive(clap::Args)]
pub struct MaintainArgs {
    /// The facts table (path or URI).
    #[arg(long)]
    pub facts: String,
    /// Keep micro-batch rows written in the last N days; older ones are
    /// deleted. Event rows (snapshots, schema changes, lost data) are kept
    /// whatever their age.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub keep_days: u64,
    /// A bronze table to compact and vacuum too (no rows are deleted from
    /// bronze); repeat for several.
    #[arg(long = "bronze")]
    pub bronze: Vec<String>,
    /// A silver table to compact, z-ordered by its keys, and vacuum;
    /// repeat for several.
    #[arg(long = "silver")]
    pub silver: Vec<String>,
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

/// Deletes old micro-batch facts rows, then compacts and vacuums each table,
/// printing each step as it ends.
pub async fn run_maintain(args: MaintainArgs) -> anyhow::Result<()> {
    let retention = VacuumRetention {
        retain: Duration::from_secs(args.retain_hours.saturating_mul(3600)),
        allow_short: args.allow_short_retention,
    };
    retention.check()?;
    let facts = StorageLocation::parse(&args.facts).context("--facts")?;
    let mut table = Maintenance::open(&facts, &args.storage.for_location(&facts)).await?;
    println!("facts {facts} (version {})", version(&table));
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
    compact_and_vacuum(&mut table, &FACTS_ZORDER_COLUMNS, retention).await?;
    for bronze in &args.bronze {
        let location = StorageLocation::parse(bronze).context("--bronze")?;
        let mut table = Maintenance::open(&location, &args.storage.for_location(&location)).await?;
        println!("bronze {location} (version {})", version(&table));
        compact_and_vacuum(&mut table, &[], retention).await?;
    }
    for silver in &args.silver {
        let location = StorageLocation::parse(silver).context("--silver")?;
        let mut table = Maintenance::open(&location, &args.storage.for_location(&location)).await?;
        let keys = table.require_silver_keys()?;
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        println!("silver {location} (version {})", version(&table));
        compact_and_vacuum(&mut table, &keys, retention).await?;
    }
    for checkpoint in &args.checkpoint {
        let location = StorageLocation::parse(checkpoint).context("--checkpoint")?;
        let started = Instant::now();
        let removed = Checkpoint::open(&location, &args.storage.for_location(&location))?
            .prune(args.keep_batches)
            .await?;
        println!(
            "checkpoint {location}: deleted {removed} plans and commit markers older than the newest {} batches ({})",
            args.keep_batches,
            elapsed(started)
        );
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
        "  vacuumed {vacuumed} files removed more than {} h ago ({}); now version {}",
        retention.retain.as_secs() / 3600,
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
