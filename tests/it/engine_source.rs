//! `mssql-cdc run -f` on a file holding one CdcSource and its CdcStreams:
//! every table streams in one process with the source's connection and
//! defaults, and a table that cannot run fails alone, by name, while the
//! others complete.

use crate::support::cdc::capture_table;
use crate::support::server::{TestServer, run};
use crate::support::stream::{PASSWORD_ENV, StreamFixture, query_table};

fn stream_doc(name: &str, table: &str, lake: &std::path::Path) -> String {
    let path = |rel: &str| lake.join(rel).display().to_string();
    format!(
        r#"---
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: {name}}}
spec:
  appId: it-{name}
  sourceRef: {{name: shop}}
  source: {{table: {table}}}
  target: {{name: bronze.{name}, location: "{bronze}"}}
  checkpoint: "{checkpoint}"
"#,
        bronze = path(&format!("bronze/{name}")),
        checkpoint = path(&format!("checkpoints/{name}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_streams_each_table_and_a_broken_one_fails_alone() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for (table, rows) in [("orders", 5), ("items", 3)] {
        run(
            &mut client,
            &format!(
                "CREATE TABLE dbo.{table} (id int NOT NULL PRIMARY KEY, note nvarchar(40) NULL)"
            ),
        )
        .await
        .expect("create table");
        for id in 1..=rows {
            run(
                &mut client,
                &format!("INSERT INTO dbo.{table} VALUES ({id}, N'seed')"),
            )
            .await
            .expect("seed");
        }
        capture_table(&mut client, table).await;
    }
    // The stream fixture's manifest gives the connection; the source
    // document is built from the same endpoint.
    let fixture = StreamFixture::new(&server, &db, "");
    let endpoint = server.endpoint();
    let lake = fixture.lake.path();
    let mut file = format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcSource
metadata: {{name: shop}}
spec:
  connection:
    host: "{host}"
    port: {port}
    database: {db}
    credentials: {{username: "{user}", passwordFrom: {{env: {PASSWORD_ENV}}}}}
    encrypt: required
    trustServerCertificate: true
  trigger: {{availableNow: true}}
  defaults:
    facts: {{name: ops.facts, location: "{facts}"}}
"#,
        host = endpoint.host,
        port = endpoint.port,
        user = endpoint.user,
        facts = lake.join("facts").display(),
    );
    for (name, table) in [
        ("orders", "dbo.orders"),
        ("items", "dbo.items"),
        ("missing", "dbo.missing"),
    ] {
        file.push_str(&stream_doc(name, table, lake));
    }
    let path = lake.join("source.yaml");
    std::fs::write(&path, file).expect("write the source file");

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["run", "--once", "-f"])
        .arg(&path)
        .env(PASSWORD_ENV, &fixture.password)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a failed table fails the run");
    assert!(
        stderr.contains("bronze.missing: failed:") && stderr.contains("dbo.missing"),
        "the broken table is named with its error: {stderr}"
    );
    assert!(
        stderr.contains("1 table(s) of source shop failed"),
        "{stderr}"
    );
    for (name, rows) in [("orders", "5"), ("items", "3")] {
        assert!(
            stdout.contains(&format!("bronze.{name}: stopped:")),
            "{name} ran to the end: {stdout}"
        );
        let count = query_table(
            &lake.join(format!("bronze/{name}")),
            "SELECT count(DISTINCT id) FROM t",
        )
        .await;
        assert_eq!(count, [[rows.to_string()]], "bronze.{name} holds its table");
    }
    // Both tables wrote their facts rows to the source's shared facts table.
    let targets = query_table(
        &lake.join("facts"),
        "SELECT DISTINCT target FROM t ORDER BY target",
    )
    .await;
    assert_eq!(
        targets,
        [["bronze.items".to_string()], ["bronze.orders".to_string()]]
    );
}
