//! `mssql-cdc worker` against the test API server and the sandbox: it reads
//! its CdcStream (password from the variable the operator fills from the
//! Secret), streams into Delta, and applies `status.progress` and
//! `status.finalization` under its own field manager.

use std::time::Duration;

use kube::Api;
use mssql_cdc::spec::CdcStream;

use crate::support::kube::{KubeEnv, cells};
use crate::support::operator::{cluster_manifest, orders_with_changes};
use crate::support::server::TestServer;
use crate::support::stream::{StreamFixture, query_table};

#[tokio::test]
async fn worker_streams_and_reports_progress_into_status() {
    let server = TestServer::start().await;
    let (_client, db) = orders_with_changes(&server, 3).await;

    let control = tempfile::tempdir().expect("control dir");
    let control_path = control.path().join("control");
    let fixture = StreamFixture::new(
        &server,
        &db,
        &format!(
            "  snapshot: {{mode: never}}\n  finalization: {{name: ops.table_finalization, location: \"{}\"}}\n",
            control_path.display()
        ),
    );
    let manifest = cluster_manifest(&fixture);
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
            "--metrics-addr",
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
    let status = stream.status.expect("a status after the run");
    let progress = status
        .progress
        .clone()
        .expect("status.progress after the run");
    assert_eq!(
        vec![vec![
            progress.batch_id.map(|b| b.to_string()).unwrap_or_default(),
            progress.end_lsn.clone().unwrap_or_default()
        ]],
        last,
        "status.progress is the last facts row"
    );
    let finalization = status
        .finalization
        .expect("status.finalization after the run");
    let row = query_table(
        &control_path,
        "SELECT CAST(finalized_until AS VARCHAR), CAST(open_snapshot_lsn AS VARCHAR) FROM t",
    )
    .await;
    let reported = finalization
        .finalized_until
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default();
    assert_eq!(
        row,
        vec![vec![reported, String::new()]],
        "status.finalization is the control table's row"
    );
    assert_eq!(finalization.open_snapshot_lsn, None);
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
