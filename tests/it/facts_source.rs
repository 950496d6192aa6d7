//! The facts `source` column: a facts table created before it gains it on
//! open (older rows read NULL, as DuckDB sees them), and `mssql-cdc health
//! --source` judges a CdcSource's tables together.

use std::path::Path;

use chrono::{DateTime, Duration, TimeZone, Utc};
use deltalake::DeltaTable;
use deltalake::arrow::json::ReaderBuilder;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use mssql_cdc::domain::facts::COLUMNS;
use mssql_cdc::domain::{BatchId, FactRow};
use mssql_cdc::lake::facts::{FactsKey, FactsTable};
use mssql_cdc::lake::schema::{arrow_schema, delta_fields};
use mssql_cdc::lake::txn::FactSequence;
use mssql_cdc::lake::{StorageLocation, StorageOptions, register_handlers};
use serde_json::Value;

use crate::support::duckdb::read_delta;
use crate::support::tools::run_mssql_cdc;

/// How long one `mssql-cdc health` or `sql` over a small facts table may take.
const CLI_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

fn location(dir: &Path) -> StorageLocation {
    StorageLocation::parse(dir.to_str().expect("utf-8 path")).expect("location")
}

/// A current batch row of `target` in `source`, ending at LSN `end`.
fn batch_row(target: &str, batch: u64, source: Option<&str>, end: u32) -> FactRow {
    let written = t0() - Duration::minutes(1);
    let mut row = FactRow::new(
        target,
        format!("{target}-v1"),
        BatchId::new(batch).ok(),
        None,
        written,
    );
    row.source = source.map(String::from);
    row.rows = Some(1);
    row.end_lsn = format!("0x{end:020X}").parse().ok();
    row.end_commit_ts = Some(t0() - Duration::minutes(60 - i64::from(end)));
    row.retention_headroom_hours = Some(72.0);
    row.ingestion_lag_seconds = Some(1.0);
    row.capture_lag_seconds = Some(1.0);
    row
}

async fn append(facts: &mut FactsTable, row: FactRow) {
    let key = FactsKey {
        target: row.target.clone(),
        app_id: row.app_id.clone(),
        sequence: FactSequence::Batch(row.batch_id.expect("a batch row")),
    };
    facts.append(&key, &[row]).await.expect("facts append");
}

/// A facts table as the release before the `source` column created and
/// wrote it: its columns, one row.
async fn older_facts_table(dir: &Path, row: &FactRow) {
    register_handlers();
    std::fs::create_dir_all(dir).expect("table directory");
    let old: Vec<_> = COLUMNS.into_iter().filter(|c| c.name != "source").collect();
    let url = location(dir).url().clone();
    let mut table =
        DeltaTable::try_from_url_with_storage_options(url, StorageOptions::default().to_map())
            .await
            .expect("table handle")
            .create()
            .with_columns(delta_fields(&old))
            .await
            .expect("create the older table");
    // The row's serialised form without the column the table lacks.
    let mut decoder = ReaderBuilder::new(arrow_schema(&old))
        .build_decoder()
        .expect("decoder");
    decoder
        .serialize(std::slice::from_ref(row))
        .expect("encode");
    let batch = decoder.flush().expect("flush").expect("one batch");
    let mut writer = RecordBatchWriter::for_table(&table).expect("writer");
    writer.write(batch).await.expect("write");
    writer
        .flush_and_commit(&mut table)
        .await
        .expect("commit the older row");
}

#[tokio::test]
async fn an_older_facts_table_gains_source_and_its_rows_read_null() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("facts");
    older_facts_table(&path, &batch_row("bronze.orders", 0, None, 10)).await;

    let mut facts = FactsTable::open_or_create(&location(&path), &StorageOptions::default())
        .await
        .expect("the new code opens the older table");
    append(&mut facts, batch_row("bronze.orders", 1, Some("sales"), 20)).await;

    let Some(read) = read_delta(
        &path,
        Some("SELECT batch_id, source, end_lsn FROM t ORDER BY batch_id"),
    )
    .await
    else {
        return;
    };
    assert_eq!(read.rows, 2);
    assert_eq!(read.column_names().last(), Some(&"source"));
    assert_eq!(read.column_type("source"), "VARCHAR");
    assert_eq!(
        read.query,
        vec![
            vec![
                Value::from(0),
                Value::Null,
                Value::from("0x0000000000000000000A")
            ],
            vec![
                Value::from(1),
                Value::from("sales"),
                Value::from("0x00000000000000000014")
            ],
        ]
    );
}

/// The query by source of docs/monitoring.md, ordered for the test.
const BY_SOURCE: &str = "SELECT source, count(*) AS tables, min(end_lsn) AS complete_to_lsn, \
       min_by(target, end_lsn) AS slowest_table, max(ingestion_lag_seconds) AS max_lag_s \
FROM (SELECT target, max_by(source, written_at) AS source, max_by(end_lsn, written_at) AS end_lsn, \
             max_by(ingestion_lag_seconds, written_at) AS ingestion_lag_seconds \
      FROM ops.ingestion_facts WHERE event IS NULL GROUP BY target) \
WHERE source IS NOT NULL GROUP BY source ORDER BY source";

/// What one CLI run printed, as text.
struct Printed {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn health(facts: &Path, extra: &[&str]) -> Printed {
    let now = t0().to_rfc3339();
    let mut args = vec!["health", "--facts", facts.to_str().expect("utf-8"), "--now"];
    args.push(&now);
    args.extend_from_slice(extra);
    let out = run_mssql_cdc(&args, &[], CLI_TIMEOUT).await;
    Printed {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn health_by_source_reports_where_every_table_of_it_is_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("facts");
    let mut facts = FactsTable::open_or_create(&location(&path), &StorageOptions::default())
        .await
        .expect("facts table");
    // Two tables of `sales`, one of `hr`, one of its own, and one that was
    // in `sales` and now runs on its own (its newest row decides).
    for row in [
        batch_row("bronze.orders", 0, Some("sales"), 40),
        batch_row("bronze.customers", 0, Some("sales"), 30),
        batch_row("bronze.staff", 0, Some("hr"), 5),
        batch_row("bronze.legacy", 0, None, 6),
        batch_row("bronze.moved", 0, Some("sales"), 7),
    ] {
        append(&mut facts, row).await;
    }
    let mut moved = batch_row("bronze.moved", 1, None, 8);
    moved.written_at = t0() - Duration::seconds(30);
    append(&mut facts, moved).await;

    let out = health(&path, &["--source", "sales", "--json"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    let source = &report["source"];
    assert_eq!(source["name"], "sales");
    assert_eq!(
        source["tables"],
        serde_json::json!(["bronze.customers", "bronze.orders"])
    );
    assert_eq!(
        source["complete_up_to"],
        serde_json::json!({
            "lsn": "0x0000000000000000001E",
            "commit_ts": "2026-11-29T11:30:00.000000",
            "target": "bronze.customers",
        })
    );
    let streams: Vec<&str> = report["streams"]
        .as_array()
        .expect("streams")
        .iter()
        .filter_map(|s| s["target"].as_str())
        .collect();
    assert_eq!(streams, ["bronze.customers", "bronze.orders"]);

    let text = health(&path, &["--source", "sales"]).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.starts_with(
            "every table of `sales` (2 tables) is complete up to LSN 0x0000000000000000001E / \
             time 2026-11-29T11:30:00.000000 (the minimum is bronze.customers's)\n"
        ),
        "{}",
        text.stdout
    );

    // docs/monitoring.md's query by source gives the same answer.
    let table = format!("ops.ingestion_facts={}", path.display());
    let sql = run_mssql_cdc(
        ["sql", "--json", "--table", &table, BY_SOURCE],
        &[],
        CLI_TIMEOUT,
    )
    .await;
    assert!(
        sql.status.success(),
        "{}",
        String::from_utf8_lossy(&sql.stderr)
    );
    let rows: Value = serde_json::from_slice(&sql.stdout).expect("JSON rows");
    assert_eq!(
        rows,
        serde_json::json!([
            {"source": "hr", "tables": 1, "complete_to_lsn": "0x00000000000000000005",
             "slowest_table": "bronze.staff", "max_lag_s": 1.0},
            {"source": "sales", "tables": 2, "complete_to_lsn": "0x0000000000000000001E",
             "slowest_table": "bronze.customers", "max_lag_s": 1.0},
        ])
    );

    // A source no newest row names is complete up to nothing: it fires.
    let unknown = health(&path, &["--source", "billing", "--json"]).await;
    assert_eq!(unknown.code, 1, "{}", unknown.stderr);
    let report: Value = serde_json::from_str(&unknown.stdout).expect("JSON report");
    assert_eq!(report["source"]["reason"], "no tables");
    assert_eq!(report["source"]["complete_up_to"], Value::Null);
}
