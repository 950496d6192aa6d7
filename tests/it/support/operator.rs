//! Set-up shared by the operator tests: a captured `dbo.orders` with
//! changes, the stream fixture's manifest as the cluster takes it, the
//! operator (as a process or in the test, on the fake clock), and waiting
//! for garbage collection.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use mssql_cdc::operator::children::WorkerDefaults;
use mssql_cdc::operator::controller::{Context, run_controller};
use tokio::process::Child;

use super::cdc::{capture_table, max_lsn, wait_for_capture};
use super::kube::{KubeEnv, eventually};
use super::server::{Client, TestServer, run};
use super::stream::{PASSWORD_ENV, StreamFixture};

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)";

/// A scratch database with CDC on `dbo.orders` and `count` captured inserts.
pub async fn orders_with_changes(server: &TestServer, count: i32) -> (Client, String) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    capture_table(&mut client, "orders").await;
    let before = max_lsn(&mut client).await;
    for id in 1..=count {
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES ({id}, N'n{id}', {id})"),
        )
        .await
        .expect("insert");
    }
    wait_for_capture(&mut client, "dbo_orders", before.as_deref(), count).await;
    (client, db)
}

/// The fixture's manifest with the password from the Secret `sql` (key
/// `password`), as the CRD requires.
pub fn cluster_manifest(fixture: &StreamFixture) -> String {
    fixture.manifest.replace(
        &format!("{{env: {PASSWORD_ENV}}}"),
        "{secretKeyRef: {name: sql, key: password}}",
    )
}

/// `mssql-cdc operator` against `kube`, killed when dropped.
pub fn start_operator(kube: &KubeEnv, binary: &Path) -> Child {
    tokio::process::Command::new(binary)
        .args([
            "operator",
            "--listen",
            "127.0.0.1:0",
            "--worker-image",
            "mssql-cdc:e2e",
            "--worker-service-account",
            "cdc-worker",
        ])
        .env("KUBECONFIG", &kube.kubeconfig)
        .kill_on_drop(true)
        .spawn()
        .expect("the operator starts")
}

/// The controller run inside the test, on the test API server's fake
/// clock, looking at every stream again each `resync`; stopped when dropped.
pub struct InProcessOperator(tokio::task::JoinHandle<()>);

impl Drop for InProcessOperator {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts [`InProcessOperator`] against `kube`, with the defaults
/// [`start_operator`] passes on its command line.
pub async fn start_operator_in_process(kube: &KubeEnv, resync: Duration) -> InProcessOperator {
    let clock = kube.server.clock().clone();
    let defaults = WorkerDefaults {
        image: "mssql-cdc:e2e".to_string(),
        service_account: Some("cdc-worker".to_string()),
    };
    let context = Context::new(kube.client().await, defaults, None)
        .with_clock(Arc::new(move || clock.now()))
        .with_resync(resync);
    InProcessOperator(tokio::spawn(run_controller(
        context,
        std::future::pending(),
    )))
}

/// Waits until `name` no longer exists in `api`.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} to be deleted"), || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// `spec.suspend: true` on the CdcStream `name`, through kubectl.
pub async fn suspend(kube: &KubeEnv, name: &str) {
    kube.kubectl_ok(&[
        "patch",
        "cdcs",
        name,
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ])
    .await;
}
