//! `mssql-cdc freshness --control URI --table NAME`: one table's verdict
//! and how old it is, measured with the local clock against UTC.

use anyhow::bail;
use mssql_cdc::health::{FreshnessLimits, assess_finalization};
use mssql_cdc::query::monitoring::{CONTROL, verdicts};
use serde_json::json;

use super::lake_query::QueryClockArgs;

/// Arguments of `freshness`.
#[derive(clap::Args)]
pub struct FreshnessArgs {
    /// The finalization control Delta table.
    #[arg(long)]
    pub control: String,
    /// The target table whose verdict to show (its `table_name`).
    #[arg(long)]
    pub table: String,
    /// Print JSON instead of lines of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub clock: QueryClockArgs,
}

/// Prints the verdict of one table.
pub async fn run_freshness(args: FreshnessArgs) -> anyhow::Result<()> {
    let now = args.clock.now();
    let session = args.clock.session()?;
    args.clock
        .register(&session, CONTROL, &args.control)
        .await?;
    let all = verdicts(&session).await?;
    let Some(verdict) = all.iter().find(|v| v.table_name == args.table) else {
        bail!("the control table has no row for {}", args.table);
    };
    let health = assess_finalization(verdict, None, now, &FreshnessLimits::default());
    let until = verdict
        .finalized_until
        .map(|t| t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string());
    if args.json {
        let value = json!({
            "table_name": verdict.table_name,
            "finalized_until": until,
            "age_seconds": health.age_seconds,
            "seconds_since_update": health.seconds_since_update,
            "open_snapshot_lsn": verdict.open_snapshot_lsn,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let show = |v: Option<String>| v.unwrap_or_else(|| "NULL".into());
        println!("table_name: {}", verdict.table_name);
        println!("finalized_until: {}", show(until));
        println!(
            "age_seconds: {}",
            show(health.age_seconds.map(|a| format!("{a:.3}")))
        );
        println!("seconds_since_update: {:.3}", health.seconds_since_update);
        println!(
            "open_snapshot_lsn: {}",
            show(verdict.open_snapshot_lsn.clone())
        );
    }
    Ok(())
}
