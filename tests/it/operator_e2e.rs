//! The whole path without a cluster: kubectl applies the CRD, a Secret and
//! a CdcStream; `mssql-cdc operator` creates the worker Deployment; the
//! harness kubelet runs `mssql-cdc worker` as a process; the sandbox's
//! changes reach Delta; `kubectl get cdcstreams` shows the stream
//! Streaming with its lag and headroom; suspend stops the worker; deleting
//! the stream garbage-collects it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use mssql_cdc::spec::{CdcStream, Phase};

use crate::support::kube::{KubeEnv, cells, eventually};
use crate::support::operator::{
    cluster_manifest, orders_with_changes, start_operator, suspend, wait_gone,
};
use crate::support::server::TestServer;
use crate::support::stream::StreamFixture;

#[tokio::test]
async fn kubectl_apply_to_delta_and_back_to_the_status() {
    let server = TestServer::start().await;
    let (_client, db) = orders_with_changes(&server, 3).await;

    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_mssql-cdc"));
    let kube = KubeEnv::with_kubelet(binary.clone()).await;
    kube.install_crd().await;
    let fixture = StreamFixture::new(&server, &db, "  snapshot: {mode: never}\n");
    let worker_env = format!(
        "  worker:\n    env:\n    - {{name: KUBECONFIG, value: \"{}\"}}\n    - {{name: MSSQL_CDC_LISTEN, value: \"127.0.0.1:0\"}}\n",
        kube.kubeconfig.display()
    );
    let manifest = cluster_manifest(&fixture).replace(
        "trigger: {availableNow: true}",
        "trigger: {processingTime: 1s}",
    ) + &worker_env;
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: sql, namespace: default}}\nstringData: {{password: \"{}\"}}\n",
        fixture.password
    );
    kube.kubectl_ok(&["apply", "-f", &kube.write("secret.yaml", &secret)])
        .await;
    let _operator = start_operator(&kube, &binary);
    kube.kubectl_ok(&[
        "apply",
        "-n",
        "default",
        "-f",
        &kube.write("orders.yaml", &manifest),
    ])
    .await;

    let kube_client = kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(kube_client.clone(), "default");
    let status = eventually("the stream Streaming with 3 rows read", || {
        let streams = streams.clone();
        async move {
            let status = streams.get("orders").await.ok()?.status?;
            let progress = status.progress.as_ref()?;
            (status.phase == Some(Phase::Streaming) && progress.end_lsn.is_some()).then_some(status)
        }
    })
    .await;
    assert!(status.progress.is_some());
    let bronze = eventually("the changes in bronze", || {
        let fixture = &fixture;
        async move {
            let rows = fixture.bronze_query("SELECT COUNT(*) FROM t").await;
            (rows == vec![vec!["3".to_string()]]).then_some(rows)
        }
    })
    .await;
    assert_eq!(bronze, vec![vec!["3".to_string()]]);

    let table = kube.kubectl_ok(&["get", "cdcstreams"]).await;
    println!("{table}");
    let row = cells(table.lines().nth(1).unwrap_or_default());
    assert_eq!(row[..2], ["orders", "Streaming"], "{table}");

    suspend(&kube, "orders").await;
    let pods: Api<Pod> = Api::namespaced(kube_client.clone(), "default");
    eventually("suspend removes the worker pod", || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("mssql-cdc.io/stream=orders"))
                .await
                .ok()?;
            list.items.is_empty().then_some(())
        }
    })
    .await;

    kube.kubectl_ok(&["delete", "cdcs", "orders"]).await;
    let deployments: Api<Deployment> = Api::namespaced(kube_client, "default");
    wait_gone(&deployments, "orders").await;
}
