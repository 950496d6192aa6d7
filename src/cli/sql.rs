//! `mssql-cdc sql --table NAME=URI ... "QUERY"`: Spark SQL over Delta tables.

use anyhow::Context;
use mssql_cdc::query::render::{Format, render};

use super::lake_query::QueryClockArgs;
use super::parse_key_value;

/// Arguments of `sql`.
#[derive(clap::Args)]
pub struct SqlArgs {
    /// A Delta table to query, as NAME=URI (repeatable); NAME may be dotted
    /// (`ops.ingestion_facts`).
    #[arg(long = "table", value_parser = parse_key_value, required = true)]
    pub tables: Vec<(String, String)>,
    /// Print JSON (an array of objects) instead of a table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header instead of a table.
    #[arg(long)]
    pub csv: bool,
    #[command(flatten)]
    pub clock: QueryClockArgs,
    /// The query, in Spark SQL; `-` reads it from standard input.
    pub query: String,
}

/// Runs the query and prints its result.
pub async fn run_sql(args: SqlArgs) -> anyhow::Result<()> {
    let query = if args.query == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read the query from stdin")?
    } else {
        args.query.clone()
    };
    let session = args.clock.session()?;
    for (name, uri) in &args.tables {
        args.clock.register(&session, name, uri).await?;
    }
    let batches = session.sql(&query).await?;
    let format = if args.json {
        Format::Json
    } else if args.csv {
        Format::Csv
    } else {
        Format::Text
    };
    print!("{}", render(&batches, format)?);
    Ok(())
}
