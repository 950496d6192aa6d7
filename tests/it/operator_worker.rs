//! `mssql-cdc worker` against the test API server and the sandbox: it reads
//! its CdcStream (password from the variable the operator fills from the
//! Secret), streams into Delta, and applies `status.progress` under its own
//! field manager.

use std::time::Duration;

use kube::Api;
use mssql_cdc::spec::CdcStream;

use crate::support::cdc::{capture_table, max_lsn, wait_for_capture};
use crate::support::kube::{KubeEnv, cells};
use crate::support::server::{TestServer, run};
use crate::support::stream::{PASSWORD_ENV, StreamFixture};

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)";

#[tokio::test]
async fn worker_streams_and_reports_progress_into_status() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    capture_table(&mut client, "orders").await;
    let before = max_lsn(&mut client).await;
    for id in 1..=3 {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'n{id}', {id})"),
        )
        .await
        .expect("insert");
    }
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), 3).await;

    let fixture = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    let manifest = fixture.manifest.replace(
        &format!("{{env: {PASSWORD_ENV}}}"),
        "{secretKeyRef: {name: sql, key: password}}",
    );
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    let file = kube.write("orders.yaml", &manifest);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;

    let worker = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args([
            "worker",
            "--stream",
            "default/orders",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &kube.kubeconfig)
        .env("MSSQL_CDC_PASSWORD", &fixture.password)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), worker)
        .await
        .expect("the availableNow worker exits once caught up")
        .expect("the worker starts");
    assert!(
        out.status.success(),
        "worker failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bronze = fixture.bronze_query("SELECT COUNT(*) FROM t").await;
    assert_eq!(bronze, vec![vec!["3".to_string()]]);
    let last = fixture
        .facts_query(
            "SELECT CAST(batch_id AS VARCHAR) AS batch, end_lsn FROM t WHERE batch_id IS NOT NULL \
             ORDER BY batch_id DESC LIMIT 1",
        )
        .await;

    let api: Api<CdcStream> = Api::namespaced(kube.client().await, "default");
    let stream = api.get("orders").await.expect("the stream");
    let progress = stream
        .status
        .and_then(|s| s.progress)
        .expect("status.progress after the run");
    assert_eq!(
        vec![vec![
            progress.batch_id.to_string(),
            progress.end_lsn.clone().unwrap_or_default()
        ]],
        last,
        "status.progress is the last facts row"
    );
    let managers: Vec<(String, Option<String>)> = stream
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager.unwrap_or_default(), m.subresource))
        .collect();
    assert!(
        managers.contains(&("mssql-cdc-worker".to_string(), Some("status".to_string()))),
        "{managers:?}"
    );

    let table = kube.kubectl_ok(&["get", "cdcstreams"]).await;
    println!("{table}");
    let row = table.lines().nth(1).unwrap_or_default();
    assert_eq!(cells(row)[0], "orders", "{table}");
}
