//! Every worker in a network of its own: three CdcStreams applied at once
//! (with the whole chart installed and the operator in its own pod, as the
//! e2e does) give three worker pods
//! that all listen on the worker's default metrics port, each at its own
//! pod IP, and all three streams reach Ready, and `kubectl get events`
//! lists the operator's Events of each. When the harness's pods shared the
//! host's network, two of them failed with `ListenFailed`.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use mssql_cdc::spec::CdcStream;

use crate::support::e2e::{E2eOptions, start_e2e};
use crate::support::kube::eventually;
use crate::support::operator::{condition, status_when};

#[tokio::test]
async fn three_streams_applied_at_once_all_reach_ready() {
    let Some(e) = start_e2e(E2eOptions {
        more_streams: vec!["orders-b".into(), "orders-c".into()],
        ..E2eOptions::default()
    })
    .await
    else {
        return;
    };
    let client = e.kube.client().await;
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), &e.kube.namespace);
    for name in ["orders", "orders-b", "orders-c"] {
        let status = status_when(&streams, name, "Ready=True", |s| {
            condition(s, "Ready").is_some_and(|c| c.status == "True")
        })
        .await;
        assert_eq!(
            condition(&status, "Ready")
                .map(|c| c.status.clone())
                .as_deref(),
            Some("True"),
            "{name}"
        );
    }
    // The operator's Events (recorded through events.k8s.io) are what
    // `kubectl get events` lists, one or more for each stream.
    let ns = e.kube.namespace.clone();
    let events = e
        .kube
        .kubectl_ok(&["get", "events", "-n", &ns, "-o", "json"])
        .await;
    let events: serde_json::Value = serde_json::from_str(&events).expect("kubectl's JSON");
    for name in ["orders", "orders-b", "orders-c"] {
        let about = events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| {
                e["involvedObject"]["kind"] == "CdcStream" && e["involvedObject"]["name"] == name
            })
            .count();
        assert!(about > 0, "no Event of CdcStream {name}: {events}");
    }
    let table = e.kube.kubectl_ok(&["get", "events", "-n", &ns]).await;
    for part in ["REASON", "OBJECT", "MESSAGE", "cdcstream/orders-b"] {
        assert!(table.contains(part), "{part}: {table}");
    }
    if e.kube.server().is_none() {
        return;
    }
    let pods: Api<Pod> = Api::namespaced(client, &e.kube.namespace);
    let ips = eventually("three ready workers with their own addresses", || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let ready: Vec<String> = list
            .items
            .iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key("mssql-cdc.io/stream"))
            })
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
            .collect();
        (ready.len() == 3).then_some(ready)
    })
    .await;
    let distinct: std::collections::BTreeSet<&String> = ips.iter().collect();
    assert_eq!(distinct.len(), 3, "{ips:?}");
}
