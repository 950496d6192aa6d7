//! `mssql-cdc sandbox --demo` as the library runs it: the shop database
//! with CDC, a generator whose changes reach the change tables, and the
//! release knob; and `mssql-cdc demo`, the README's first command.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::time::Duration;

use mssql_cdc_sandbox::{DemoOptions, Sandbox, SandboxOptions, SqlVersion};
use tiberius::{AuthMethod, Config, EncryptionLevel};

use crate::support::TestServer;
use crate::support::cdc::{binary, wait_for_capture};
use crate::support::duckdb::read_delta;
use crate::support::scalar;
use crate::support::tools::run_mssql_cdc;

const PASSWORD: &str = "Demo-Sandbox-Pa55!";

#[tokio::test]
async fn the_demo_keeps_changing_cdc_enabled_tables() {
    let helper = TestServer::start().await; // installs the TLS provider
    let sandbox = Sandbox::start(SandboxOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        sa_password: PASSWORD.into(),
        sql_version: SqlVersion::Sql2019,
        demo: Some(DemoOptions {
            rate: 200.0,
            seed: 5,
        }),
        ..SandboxOptions::default()
    })
    .await
    .expect("the demo sandbox starts");
    let mut config = Config::new();
    config.host(sandbox.local_addr().ip());
    config.port(sandbox.local_addr().port());
    config.authentication(AuthMethod::sql_server("sa", PASSWORD));
    config.encryption(EncryptionLevel::Required);
    config.trust_cert();
    config.database("shop");
    let mut client = helper.connect_with(config).await.expect("connects to shop");

    let version: Option<String> = scalar(
        &mut client,
        "SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(32))",
    )
    .await;
    assert!(
        version.as_deref().is_some_and(|v| v.starts_with("15.")),
        "--product-version 2019: {version:?}"
    );
    let tracked: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM sys.tables WHERE is_tracked_by_cdc = 1 AND name IN (N'orders', N'customers')",
    )
    .await;
    assert_eq!(tracked, Some(2), "both demo tables are CDC-enabled");
    let first_lsn = binary(&mut client, "SELECT sys.fn_cdc_get_max_lsn()").await;
    assert!(
        first_lsn.is_some_and(|lsn| lsn.iter().any(|b| *b != 0)),
        "a change is captured before the sandbox takes clients"
    );

    wait_for_capture(&mut client, "dbo_orders", None, 10).await;
    let operations: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(DISTINCT __$operation) FROM cdc.dbo_orders_CT",
    )
    .await;
    assert!(
        operations.unwrap_or(0) >= 2,
        "inserts and updates or deletes: {operations:?}"
    );
    assert!(sandbox.demo_changes().unwrap_or(0) >= 10);
    drop(client);
    sandbox
        .stop()
        .await
        .expect("the sandbox stops with its demo");
}

/// `mssql-cdc demo` as the README runs it, for a fixed time: both demo
/// tables stream through one source, one line per batch naming its table;
/// the lake it leaves holds, read by DuckDB, exactly the rows its closing
/// lines count, table by table,
/// and its log warns neither about its own sandbox's certificate nor about
/// a permission its own reader lacks.
#[tokio::test]
async fn the_demo_command_leaves_a_lake_duckdb_reads_with_every_row_it_counted() {
    let lake = tempfile::tempdir().expect("a lake directory");
    let lake_arg = lake.path().as_os_str();
    let output = run_mssql_cdc(
        [
            OsStr::new("demo"),
            OsStr::new("--duration"),
            OsStr::new("12s"),
            OsStr::new("--trigger"),
            OsStr::new("1s"),
            OsStr::new("--rate"),
            OsStr::new("50"),
            OsStr::new("--lake"),
            lake_arg,
        ],
        &[],
        Duration::from_secs(120),
    )
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{:?}\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        !stderr.contains("Trusting the server certificate"),
        "the demo trusts its own sandbox without a warning: {stderr}"
    );
    assert!(
        !stderr.contains("network_wait_ms is NULL"),
        "the demo's reader may read its own session's waits: {stderr}"
    );
    // "bronze.orders stopped: B batches, C change rows, S snapshot rows", one line
    // per table, then "demo stopped: ..." with the sums.
    let counts_of = |prefix: &str| -> [u64; 3] {
        let counts: Vec<u64> = stdout
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?}: {stdout}"))
            .split(", ")
            .take(3)
            .map(|part| {
                part.split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("not a count: {part:?}"))
            })
            .collect();
        counts
            .try_into()
            .unwrap_or_else(|c| panic!("three counts: {c:?}"))
    };
    let total = counts_of("demo stopped: ");
    let tables = ["orders", "customers"];
    let mut summed = [0u64; 3];
    for table in tables {
        let [batches, changes, snapshot] = counts_of(&format!("bronze.{table} stopped: "));
        assert!(
            changes + snapshot > 0,
            "the demo moved rows of {table}: {stdout}"
        );
        for (sum, n) in summed.iter_mut().zip([batches, changes, snapshot]) {
            *sum += n;
        }
        assert!(
            stdout.contains(&format!("bronze.{table}: batch ")),
            "one line per batch, named after its table: {stdout}"
        );
    }
    assert_eq!(summed, total, "the closing line sums the tables: {stdout}");

    for table in tables {
        let [_, changes, snapshot] = counts_of(&format!("bronze.{table} stopped: "));
        let Some(bronze) = read_delta(&lake.path().join(format!("bronze/{table}")), None).await
        else {
            return;
        };
        assert_eq!(bronze.rows, changes + snapshot, "bronze.{table}: {stdout}");
        let sql = format!(
            "SELECT CAST(coalesce(sum(rows) FILTER (WHERE event IS NULL), 0) AS BIGINT), \
             CAST(coalesce(sum(rows) FILTER (WHERE event = 'bootstrap'), 0) AS BIGINT), \
             count(DISTINCT source) FILTER (WHERE source = 'shop') \
             FROM t WHERE target = 'bronze.{table}'"
        );
        let Some(facts) = read_delta(&lake.path().join("ops/ingestion_facts"), Some(&sql)).await
        else {
            return;
        };
        assert_eq!(
            facts.query,
            [[
                serde_json::json!(changes),
                serde_json::json!(snapshot),
                serde_json::json!(1)
            ]],
            "the facts table counts the same change and snapshot rows of {table}, \
             written as a table of the source shop"
        );
    }
}
