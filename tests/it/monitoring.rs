//! Monitoring from the lake: `mssql-cdc sql`, `health` and `freshness` on a
//! lake written by two real streams, plus a lagging and a metric-less one
//! and control-table rows for every stale reason. Time moves with `--now`.
//!
//! One test runs every Spark-SQL query of the monitoring guide unchanged.
//! The guide is not part of the project: it is read at run time from
//! `MSSQL_CDC_MONITORING_GUIDE` (default `../shared/seed/monitoring-guide.md`
//! next to the repository); without it that test says so and passes.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, DurationRound, Utc};
use mssql_cdc::domain::BatchId;
use mssql_cdc::domain::FactRow;
use mssql_cdc::lake::facts::{FactsKey, FactsTable};
use mssql_cdc::lake::txn::FactSequence;
use mssql_cdc::lake::{StorageLocation, StorageOptions};
use serde_json::Value;

use crate::support::cdc::{capture_table, max_lsn, wait_for_capture};
use crate::support::control::{ControlRow, write_control};
use crate::support::server::{TestServer, run};
use crate::support::stream::StreamFixture;

const GUIDE_ENV: &str = "MSSQL_CDC_MONITORING_GUIDE";

/// The lake of the scenario, and the instant the streams last wrote.
struct Scenario {
    _streams: Vec<StreamFixture>,
    facts: PathBuf,
    control: PathBuf,
    /// Just after the streams' and the synthetic rows' last facts.
    t0: DateTime<Utc>,
}

impl Scenario {
    fn at(&self, minutes: i64) -> String {
        (self.t0 + Duration::minutes(minutes)).to_rfc3339()
    }

    fn tables(&self) -> Vec<String> {
        vec![
            "--table".into(),
            format!("ops.ingestion_facts={}", self.facts.display()),
            "--table".into(),
            format!("ops.table_finalization={}", self.control.display()),
        ]
    }
}

/// A stream of a fresh database's `dbo.orders`, one bootstrap and one
/// micro-batch with a change, writing `target` into `facts` (when given).
async fn stream(server: &TestServer, target: &str, facts: Option<&Path>) -> StreamFixture {
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, qty int NULL)",
    )
    .await
    .expect("create table");
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, 1)")
        .await
        .expect("seed");
    capture_table(&mut client, "orders").await;
    let mut fixture = StreamFixture::new(server, &db, "");
    let own_facts = fixture.path("facts").display().to_string();
    fixture.manifest = fixture
        .manifest
        .replace("name: bronze.orders", &format!("name: {target}"))
        .replace(
            "appId: it-orders",
            &format!("appId: it-{}", target.replace('.', "-")),
        );
    if let Some(shared) = facts {
        fixture.manifest = fixture
            .manifest
            .replace(&own_facts, &shared.display().to_string());
    }
    fixture.run_once().await.expect("bootstrap run");
    if server.is_sandbox() {
        // Two days of kept changes before the next one, as on a database
        // that has run a while (a young one is tested on its own below).
        run(
            &mut client,
            "EXEC sandbox.sp_advance_clock @seconds = 172800",
        )
        .await
        .expect("advance the sandbox clock");
    }
    let before = max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (2, 2)")
        .await
        .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    let summary = fixture.run_once().await.expect("change run");
    assert_eq!(summary.rows, 1, "{summary:?}");
    fixture
}

/// A synthetic micro-batch row of `target`, written at `written_at`.
fn batch_row(target: &str, written_at: DateTime<Utc>) -> FactRow {
    let mut row = FactRow::new(
        target,
        "it-synthetic",
        BatchId::new(0).ok(),
        None,
        written_at,
    );
    row.rows = Some(0);
    row
}

async fn append(facts: &Path, row: FactRow) {
    let location = StorageLocation::parse(&facts.display().to_string()).expect("facts path");
    let mut table = FactsTable::open_or_create(&location, &StorageOptions::default())
        .await
        .expect("facts table");
    let key = FactsKey {
        target: row.target.clone(),
        app_id: row.app_id.clone(),
        sequence: FactSequence::Batch(row.batch_id.expect("batch id")),
    };
    table.append(&key, &[row]).await.expect("facts row");
}

/// Two real streams (bronze.orders, bronze.shipments) into one facts
/// table.
async fn healthy_lake(server: &TestServer) -> Scenario {
    let orders = stream(server, "bronze.orders", None).await;
    let facts = orders.path("facts");
    let shipments = stream(server, "bronze.shipments", Some(&facts)).await;
    Scenario {
        facts,
        control: orders.path("control"),
        _streams: vec![orders, shipments],
        t0: Utc::now(),
    }
}

/// The healthy lake plus bronze.lagging, two hours behind capture with a
/// warning; bronze.blind without metrics; and a control table with one
/// row per stale reason.
async fn scenario(server: &TestServer) -> Scenario {
    let lake = healthy_lake(server).await;
    add_troubles(&lake).await;
    lake
}

async fn add_troubles(lake: &Scenario) {
    let (facts, control, t0) = (&lake.facts, &lake.control, lake.t0);

    let mut lagging = batch_row("bronze.lagging", t0);
    lagging.end_commit_ts = Some(t0 - Duration::hours(2));
    lagging.retention_headroom_hours = Some(70.0);
    lagging.ingestion_lag_seconds = Some(7200.0);
    lagging.capture_lag_seconds = Some(3.0);
    lagging.detail =
        Some(r#"{"warnings": ["unknown option maxCommitsPerBatchh (ignored)"]}"#.into());
    append(facts, lagging).await;
    let mut blind = batch_row("bronze.blind", t0);
    blind.end_commit_ts = Some(t0);
    append(facts, blind).await;

    let hour = |t: DateTime<Utc>| t.duration_trunc(Duration::hours(1)).expect("hour floor");
    write_control(
        control,
        &[
            // Batches read far past a two-hour-old verdict: not advanced.
            ControlRow::bronze(
                "bronze.orders",
                Some(t0 - Duration::hours(2)),
                t0 - Duration::hours(2),
            ),
            // 30 minutes old: fresh now, the stream stops later.
            ControlRow::bronze("bronze.shipments", Some(t0 - Duration::minutes(30)), t0),
            // Behind: the stream lags, the verdict follows it.
            ControlRow::bronze("bronze.lagging", Some(hour(t0 - Duration::hours(2))), t0),
            ControlRow::bronze(
                "bronze.gone",
                Some(t0 - Duration::hours(5)),
                t0 - Duration::hours(5),
            ),
            ControlRow {
                open_snapshot_lsn: Some("0x0000002A000001F40003"),
                ..ControlRow::bronze("bronze.held", None, t0)
            },
            ControlRow {
                applied_lsn: Some("0x0000002A000001F40003"),
                ..ControlRow::bronze("silver.orders", Some(t0 - Duration::hours(3)), t0)
            },
        ],
    )
    .await;
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn mssql_cdc(args: &[String]) -> Output {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(args)
        .output()
        .await
        .expect("mssql-cdc runs");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `mssql-cdc sql --json` on the scenario at `now`; the rows.
async fn sql(scenario: &Scenario, now: &str, query: &str) -> Vec<Value> {
    let mut args: Vec<String> = vec!["--now".into(), now.into()];
    args.extend(scenario.tables());
    sql_with(&args, query).await
}

/// `mssql-cdc sql --json` with `args` before the query; the rows.
async fn sql_with(args: &[String], query: &str) -> Vec<Value> {
    let mut all: Vec<String> = vec!["sql".into(), "--json".into()];
    all.extend_from_slice(args);
    all.push(query.into());
    let out = mssql_cdc(&all).await;
    assert_eq!(out.code, 0, "{query}\n{}", out.stderr);
    match serde_json::from_str(&out.stdout) {
        Ok(Value::Array(rows)) => rows,
        other => panic!("{query}: not a JSON array: {other:?}\n{}", out.stdout),
    }
}

fn by(rows: &[Value], column: &str, value: &str) -> Value {
    rows.iter()
        .find(|r| r[column] == value)
        .cloned()
        .unwrap_or_else(|| panic!("no row with {column} = {value} in {rows:?}"))
}

fn column(rows: &[Value], name: &str) -> Vec<String> {
    rows.iter()
        .map(|r| r[name].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn health(scenario: &Scenario, extra: &[&str]) -> (i32, Value) {
    let mut args: Vec<String> = vec![
        "health".into(),
        "--json".into(),
        "--facts".into(),
        scenario.facts.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = mssql_cdc(&args).await;
    let report = serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "health output is not JSON ({e}): {}\n{}",
            out.stdout, out.stderr
        )
    });
    (out.code, report)
}

fn alerts(report: &Value, target: &str) -> Vec<String> {
    let stream = by(
        report["streams"].as_array().expect("streams"),
        "target",
        target,
    );
    stream["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .map(|a| a["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_current_stream_on_a_fresh_database_is_healthy() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, qty int NULL)",
    )
    .await
    .expect("create table");
    capture_table(&mut client, "orders").await;
    let before = max_lsn(&mut client).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, 1)")
        .await
        .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 1).await;
    let fixture = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    let summary = fixture.run_once().await.expect("run");
    assert_eq!(summary.rows, 1, "{summary:?}");
    let lake = Scenario {
        facts: fixture.path("facts"),
        control: fixture.path("control"),
        _streams: vec![fixture],
        t0: Utc::now(),
    };
    // The database is minutes old, younger than its three days of
    // retention: the headroom is the time until cleanup reaches the
    // position, not the database's age, and nothing fires.
    let now = lake.at(1);
    let (code, report) = health(&lake, &["--now", now.as_str()]).await;
    assert_eq!(alerts(&report, "bronze.orders"), Vec::<String>::new());
    assert_eq!(code, 0, "{report}");
    let orders = by(
        report["streams"].as_array().expect("streams"),
        "target",
        "bronze.orders",
    );
    let headroom = orders["headroom_hours"].as_f64().expect("headroom_hours");
    assert!(headroom > 70.0, "{orders}");
}

#[tokio::test]
async fn sql_and_health_read_the_streams_of_a_lake() {
    let server = TestServer::start().await;
    let lake = healthy_lake(&server).await;
    let now = lake.at(1);
    if server.is_sandbox() {
        // On the sandbox the streams have kept two days of changes (its
        // clock was moved), so the default limits hold: exit 0.
        let (code, report) = health(&lake, &["--now", now.as_str()]).await;
        assert_eq!(alerts(&report, "bronze.orders"), Vec::<String>::new());
        assert_eq!(alerts(&report, "bronze.shipments"), Vec::<String>::new());
        assert_eq!(code, 0, "{report}");
        let orders = by(
            report["streams"].as_array().unwrap(),
            "target",
            "bronze.orders",
        );
        let headroom = orders["headroom_hours"].as_f64().expect("headroom_hours");
        // Until the cleanup job's three days reach the position.
        assert!((71.0..72.5).contains(&headroom), "{orders}");
        // Two days later, stopped: the headroom left is below a day.
        let day_later = lake.at(49 * 60);
        let (code, report) = health(&lake, &["--now", day_later.as_str()]).await;
        assert_eq!(
            alerts(&report, "bronze.orders"),
            ["FactsStopped", "RetentionHeadroomLow"]
        );
        assert_eq!(code, 1);
    }
    add_troubles(&lake).await;

    // Our own SQL over the facts the streams wrote.
    let counts = sql(
        &lake,
        &now,
        "SELECT target, count(*) AS batches, sum(rows) AS changes, \
         count(retention_headroom_hours) AS measured \
         FROM ops.ingestion_facts WHERE event IS NULL GROUP BY target ORDER BY target",
    )
    .await;
    assert_eq!(
        column(&counts, "target"),
        [
            "bronze.blind",
            "bronze.lagging",
            "bronze.orders",
            "bronze.shipments"
        ]
    );
    for target in ["bronze.orders", "bronze.shipments"] {
        let row = by(&counts, "target", target);
        assert_eq!(
            (row["changes"].as_i64(), row["measured"].as_i64()),
            (Some(1), Some(1)),
            "{row}"
        );
    }

    // The example queries of docs/monitoring.md.
    let per_stream = sql(
        &lake,
        &now,
        "SELECT target, count(*) AS batches, round(avg(duration_ms)) AS avg_ms, \
         round(try_divide(sum(network_wait_ms), sum(read_seconds) * 1000), 2) AS wait_share \
         FROM ops.ingestion_facts WHERE event IS NULL \
         AND written_at > convert_timezone('UTC', localtimestamp()) - INTERVAL 1 DAY GROUP BY target",
    )
    .await;
    assert_eq!(by(&per_stream, "target", "bronze.orders")["batches"], 1);
    let events = sql(
        &lake,
        &now,
        "SELECT target, event, count(*) AS times FROM ops.ingestion_facts \
         WHERE event IS NOT NULL GROUP BY target, event ORDER BY target",
    )
    .await;
    assert_eq!(column(&events, "event"), ["bootstrap", "bootstrap"]);
    let warnings = sql(
        &lake,
        &now,
        "SELECT target, max_by(from_json(detail, 'warnings ARRAY<STRING>').warnings, written_at) \
         AS latest_warnings FROM ops.ingestion_facts WHERE event IS NULL AND detail IS NOT NULL \
         GROUP BY target",
    )
    .await;
    assert_eq!(
        by(&warnings, "target", "bronze.lagging")["latest_warnings"],
        serde_json::json!(["unknown option maxCommitsPerBatchh (ignored)"])
    );

    // CSV and the text table.
    let mut args: Vec<String> = vec!["sql".into(), "--csv".into()];
    args.extend(lake.tables());
    args.push(
        "SELECT target FROM ops.ingestion_facts WHERE event IS NULL ORDER BY target LIMIT 2".into(),
    );
    let out = mssql_cdc(&args).await;
    assert_eq!(
        out.stdout, "target\nbronze.blind\nbronze.lagging\n",
        "{}",
        out.stderr
    );
    args[1] = "--session-time-zone=Asia/Tokyo".into();
    let last = args.len() - 1;
    args[last] = "SELECT timestampdiff(HOUR, convert_timezone('UTC', localtimestamp()), localtimestamp()) AS h".into();
    let out = mssql_cdc(&args).await;
    assert!(
        out.stdout.contains("| 9 |") && out.stdout.contains("(1 row)"),
        "{}{}",
        out.stdout,
        out.stderr
    );

    // Lagging and metric-less streams fire their alerts (the retention
    // limit is off: on a real server the scratch databases are minutes old).
    let fresh = ["--now", now.as_str(), "--min-headroom", "0s"];
    let (code, report) = health(&lake, &fresh).await;
    assert_eq!(alerts(&report, "bronze.lagging"), ["IngestionLagHigh"]);
    assert_eq!(alerts(&report, "bronze.blind"), ["MetricsMissing"]);
    assert_eq!(code, 1, "{report}");
    let lagging = by(
        report["streams"].as_array().unwrap(),
        "target",
        "bronze.lagging",
    );
    assert_eq!(lagging["ingestion_lag_seconds"], 7200.0);
    assert_eq!(lagging["hours_since_last"].as_f64(), Some(1.0 / 60.0));

    // Twenty minutes later the streams have stopped.
    let later = lake.at(20);
    let (code, report) = health(&lake, &["--now", later.as_str(), "--min-headroom", "0s"]).await;
    assert_eq!(code, 1);
    assert_eq!(alerts(&report, "bronze.shipments"), ["FactsStopped"]);
    assert_eq!(
        alerts(&report, "bronze.blind"),
        ["FactsStopped", "MetricsMissing"]
    );

    // Finalization: every stale reason, at t0 + 1 min and an hour later.
    let mut with_control: Vec<&str> = fresh.to_vec();
    let control = lake.control.display().to_string();
    with_control.extend(["--control", control.as_str()]);
    let (_, report) = health(&lake, &with_control).await;
    let verdicts = report["finalization"].as_array().expect("finalization");
    let reason = |table: &str| by(verdicts, "table_name", table)["stale_reason"].clone();
    assert_eq!(reason("bronze.orders"), "not advanced");
    assert_eq!(reason("bronze.shipments"), Value::Null);
    assert_eq!(reason("bronze.lagging"), "behind");
    assert_eq!(reason("bronze.gone"), "no facts");
    assert_eq!(reason("bronze.held"), "held");
    assert_eq!(reason("silver.orders"), "silver");
    let hour_later = lake.at(60);
    let (_, report) = health(
        &lake,
        &["--now", hour_later.as_str(), "--control", control.as_str()],
    )
    .await;
    let verdicts = report["finalization"].as_array().expect("finalization");
    assert_eq!(
        by(verdicts, "table_name", "bronze.shipments")["stale_reason"],
        "stopped"
    );

    // Text output names the alert and what to do.
    let out = mssql_cdc(&[
        "health".into(),
        "--facts".into(),
        lake.facts.display().to_string(),
        "--now".into(),
        later.clone(),
    ])
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.contains("bronze.shipments: FactsStopped"),
        "{}",
        out.stdout
    );

    // An unreadable table is an error: exit 2.
    let out = mssql_cdc(&[
        "health".into(),
        "--facts".into(),
        lake.control.join("missing").display().to_string(),
    ])
    .await;
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("Error"), "{}", out.stderr);
}

#[tokio::test]
async fn freshness_reports_the_verdict_before_and_after_it_exists() {
    let dir = tempfile::tempdir().expect("temporary lake");
    let control = dir.path().join("control");
    let now = Utc::now()
        .duration_trunc(Duration::seconds(1))
        .expect("second floor");
    let args = |json: bool| {
        let mut args = vec![
            "freshness".to_string(),
            "--control".into(),
            control.display().to_string(),
            "--table".into(),
            "bronze.orders".into(),
            "--now".into(),
            now.to_rfc3339(),
        ];
        if json {
            args.push("--json".into());
        }
        args
    };
    let snapshot = ControlRow {
        open_snapshot_lsn: Some("0x0000002A000001F40003"),
        ..ControlRow::bronze("bronze.orders", None, now - Duration::seconds(30))
    };
    write_control(&control, &[snapshot]).await;
    let out = mssql_cdc(&args(true)).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let before: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(before["finalized_until"], Value::Null);
    assert_eq!(before["age_seconds"], Value::Null);
    assert_eq!(before["seconds_since_update"], 30.0);
    assert_eq!(before["open_snapshot_lsn"], "0x0000002A000001F40003");

    let until = now - Duration::minutes(90);
    write_control(
        &control,
        &[ControlRow::bronze(
            "bronze.orders",
            Some(until),
            now - Duration::seconds(5),
        )],
    )
    .await;
    let out = mssql_cdc(&args(true)).await;
    let after: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(after["age_seconds"], 5400.0);
    assert_eq!(after["seconds_since_update"], 5.0);
    assert_eq!(after["open_snapshot_lsn"], Value::Null);
    assert_eq!(
        after["finalized_until"],
        until
            .naive_utc()
            .format("%Y-%m-%dT%H:%M:%S%.6f")
            .to_string()
    );
    let text = mssql_cdc(&args(false)).await;
    assert!(
        text.stdout.contains("age_seconds: 5400.000"),
        "{}",
        text.stdout
    );

    let mut unknown = args(false);
    unknown[4] = "bronze.nothing".into();
    let out = mssql_cdc(&unknown).await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("no row for bronze.nothing"),
        "{}",
        out.stderr
    );
}

/// The monitoring guide's Spark-SQL queries: statements starting with
/// WITH or SELECT at the start of a line, up to the line ending in `;`
/// (before any `--` comment) or a blank line; SQL Server's own queries
/// (`TOP (`, `sys.`) are left out.
fn guide_queries(guide: &str) -> Vec<String> {
    let mut queries = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in guide.lines() {
        let code = line.split("--").next().unwrap_or_default().trim_end();
        match current.as_mut() {
            None if line.starts_with("WITH ") || line.starts_with("SELECT") => {
                current = Some(vec![line]);
            }
            None => continue,
            Some(lines) if line.trim().is_empty() => {
                queries.push(lines.join("\n"));
                current = None;
                continue;
            }
            Some(lines) => lines.push(line),
        }
        if code.ends_with(';')
            && let Some(lines) = current.take()
        {
            queries.push(lines.join("\n"));
        }
    }
    if let Some(lines) = current {
        queries.push(lines.join("\n"));
    }
    queries.retain(|q| !q.contains("TOP (") && !q.contains("sys."));
    queries
}

#[test]
fn guide_queries_are_found_in_plain_text() {
    let text = "Intro\nSELECT a\nFROM t; -- done\nprose\n\nWITH x AS (\n  SELECT 1  -- c;\n)\nSELECT * FROM x;\n\
                -- the newest\nSELECT TOP (5) x FROM sys.y;\nSELECT b FROM t\n\nend";
    assert_eq!(
        guide_queries(text),
        [
            "SELECT a\nFROM t; -- done",
            "WITH x AS (\n  SELECT 1  -- c;\n)\nSELECT * FROM x;",
            "SELECT b FROM t"
        ]
    );
}

/// The monitoring guide's text, when it is there to read.
fn read_guide() -> Option<String> {
    let path = std::env::var(GUIDE_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/seed/monitoring-guide.md")
        });
    let guide = std::fs::read_to_string(&path).ok();
    if guide.is_none() {
        eprintln!(
            "NOTICE: monitoring guide not found at {}; set {GUIDE_ENV} to run its queries",
            path.display()
        );
    }
    guide
}

/// The guide's query of the stale verdicts and their reasons, unchanged.
pub(crate) fn guide_stale_query() -> Option<String> {
    guide_queries(&read_guide()?)
        .into_iter()
        .find(|q| q.contains(" AS reason"))
}

/// `mssql-cdc sql --json` with `tables` (`name=location`) at the current
/// time; the rows.
pub(crate) async fn run_sql(tables: &[String], query: &str) -> Vec<Value> {
    let args: Vec<String> = tables
        .iter()
        .flat_map(|t| ["--table".to_string(), t.clone()])
        .collect();
    sql_with(&args, query).await
}

#[tokio::test]
async fn every_query_of_the_monitoring_guide_runs_unchanged() {
    let Some(guide) = read_guide() else {
        return;
    };
    let queries = guide_queries(&guide);
    assert!(
        queries.len() >= 5,
        "expected the guide's queries, found {queries:?}"
    );
    let server = TestServer::start().await;
    let lake = scenario(&server).await;
    let mut checked = 0;
    for query in &queries {
        if query.contains("hours_since_last") {
            // The health query, twenty minutes after the last facts.
            let rows = sql(&lake, &lake.at(20), query).await;
            let lagging = by(&rows, "target", "bronze.lagging");
            assert_eq!(
                lagging["hours_since_last"].to_string().trim_matches('"'),
                "0.333333"
            );
            assert_eq!(lagging["ingestion_lag_seconds"], 7200.0);
            assert_eq!(
                by(&rows, "target", "bronze.blind")["headroom_hours"],
                Value::Null
            );
            for stopped in ["bronze.orders", "bronze.shipments"] {
                by(&rows, "target", stopped);
            }
        } else if query.contains(" AS reason") || query.contains("'not advanced'") {
            let rows = sql(&lake, &lake.at(1), query).await;
            let reason = |table: &str| by(&rows, "table_name", table)["reason"].clone();
            assert_eq!(reason("bronze.orders"), "not advanced");
            assert_eq!(reason("bronze.lagging"), "behind");
            assert_eq!(reason("bronze.gone"), "no facts");
            assert_eq!(reason("bronze.held"), "held");
            assert_eq!(reason("silver.orders"), "silver");
            assert!(
                rows.iter().all(|r| r["table_name"] != "bronze.shipments"),
                "{rows:?}"
            );
            let later = sql(&lake, &lake.at(60), query).await;
            assert_eq!(
                by(&later, "table_name", "bronze.shipments")["reason"],
                "stopped"
            );
        } else if query.contains("network_share") {
            let rows = sql(&lake, &lake.at(1), query).await;
            assert_eq!(
                rows.len(),
                1,
                "bronze.orders has one batch with rows: {rows:?}"
            );
            assert_eq!(rows[0]["rows"], 1);
        } else if query.contains("event IS NOT NULL") {
            let rows = sql(&lake, &lake.at(1), query).await;
            assert_eq!(
                column(&rows, "event"),
                ["bootstrap", "bootstrap"],
                "{rows:?}"
            );
        } else if query.contains("from_json") {
            let rows = sql(&lake, &lake.at(1), query).await;
            let lagging = by(&rows, "target", "bronze.lagging");
            assert_eq!(
                lagging["warnings"],
                serde_json::json!(["unknown option maxCommitsPerBatchh (ignored)"])
            );
        } else {
            panic!("a guide query this test does not know: {query}");
        }
        checked += 1;
    }
    assert_eq!(checked, queries.len());
}
