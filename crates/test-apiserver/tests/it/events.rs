//! Events are one resource seen through two APIs: an Event written
//! through events.k8s.io/v1 (kube-runtime's Recorder) is listed by
//! `kubectl get events` and shown by `kubectl describe`, one written as a
//! core/v1 Event is read through events.k8s.io/v1, each with its fields
//! under its API's names.

use crate::common::{self, Env};
use crate::kubectl::{ok, write};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{Value, json};

async fn config_map(env: &Env, name: &str) -> ConfigMap {
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let cm = serde_json::from_value(json!({ "metadata": { "name": name } })).expect("cm");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create cm")
}

fn core_events(out: &str, object: &str) -> Vec<Value> {
    let list: Value = serde_json::from_str(out).expect("kubectl json");
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == object)
        .collect()
}

#[tokio::test]
async fn a_recorders_event_is_a_core_event_for_kubectl() {
    let env = common::start().await;
    let cm = config_map(&env, "watched").await;
    let reference = cm.object_ref(&());
    let recorder = Recorder::new(
        env.client().await,
        Reporter {
            controller: "cdc-controller".into(),
            instance: Some("cdc-controller-0".into()),
        },
    );
    let ev = Event {
        type_: EventType::Warning,
        reason: "ListenFailed".into(),
        note: Some("port 9100 is taken".into()),
        action: "Starting".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.expect("publish");

    let out = ok(&env, &["get", "events", "-n", "default", "-o", "json"]).await;
    let got = core_events(&out, "watched");
    assert_eq!(got.len(), 1, "{out}");
    let e = &got[0];
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["message"], "port 9100 is taken");
    assert_eq!(e["reason"], "ListenFailed");
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["involvedObject"]["kind"], "ConfigMap");
    assert_eq!(e["involvedObject"]["uid"], json!(cm.metadata.uid));
    assert_eq!(e["reportingComponent"], "cdc-controller");
    assert_eq!(e["reportingInstance"], "cdc-controller-0");
    assert!(e["eventTime"].is_string(), "{e}");
    assert!(
        e.get("note").is_none() && e.get("regarding").is_none(),
        "{e}"
    );

    // The same event again becomes a series, seen through both APIs.
    recorder
        .publish(&ev, &reference)
        .await
        .expect("publish again");
    let out = ok(&env, &["get", "events", "-n", "default", "-o", "json"]).await;
    let got = core_events(&out, "watched");
    assert_eq!(got.len(), 1, "{out}");
    assert_eq!(got[0]["series"]["count"], 2, "{}", got[0]);

    let described = ok(&env, &["describe", "configmap", "watched", "-n", "default"]).await;
    let line = described
        .lines()
        .find(|l| l.contains("ListenFailed"))
        .unwrap_or_else(|| panic!("no event in describe: {described}"));
    assert!(line.contains("Warning"), "{line}");
    assert!(line.contains("cdc-controller"), "the From column: {line}");
    assert!(line.contains("port 9100 is taken"), "{line}");

    // kube-apiserver's Event columns: the object and the reason, the
    // Event's own name only in the wide output.
    let listed = ok(&env, &["get", "events", "-n", "default"]).await;
    let header = listed.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("LAST SEEN") && header.contains("REASON"),
        "{listed}"
    );
    let row = listed
        .lines()
        .find(|l| l.contains("configmap/watched"))
        .unwrap_or_else(|| panic!("no row for the ConfigMap: {listed}"));
    for part in ["Warning", "ListenFailed", "port 9100 is taken"] {
        assert!(row.contains(part), "{part}: {row}");
    }
    let name = got[0]["metadata"]["name"].as_str().unwrap_or("?");
    assert!(!listed.contains(name), "{listed}");
    let wide = ok(&env, &["get", "events", "-n", "default", "-o", "wide"]).await;
    assert!(wide.contains(name), "{wide}");
}

#[tokio::test]
async fn a_core_event_is_read_through_events_k8s_io() {
    let env = common::start().await;
    let cm = config_map(&env, "old-style").await;
    let uid = cm.metadata.uid.clone().unwrap_or_default();
    let manifest = format!(
        "apiVersion: v1\nkind: Event\nmetadata: {{name: old-style.1, namespace: default}}\n\
         involvedObject: {{apiVersion: v1, kind: ConfigMap, name: old-style, namespace: default, uid: {uid}}}\n\
         reason: Synced\nmessage: synced 3 tables\ntype: Normal\ncount: 3\n\
         source: {{component: old-controller, host: node-1}}\n\
         firstTimestamp: '2026-01-01T00:00:00Z'\nlastTimestamp: '2026-01-01T00:05:00Z'\n"
    );
    let file = write(&env, "event.yaml", &manifest);
    ok(&env, &["create", "-f", &file]).await;

    let events: Api<NewEvent> = Api::namespaced(env.client().await, "default");
    let e = serde_json::to_value(
        events
            .get("old-style.1")
            .await
            .expect("get through events.k8s.io"),
    )
    .expect("json");
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["note"], "synced 3 tables");
    assert_eq!(e["regarding"]["name"], "old-style");
    assert_eq!(
        e["deprecatedSource"],
        json!({ "component": "old-controller", "host": "node-1" })
    );
    assert_eq!(e["deprecatedCount"], 3);
    assert_eq!(e["deprecatedFirstTimestamp"], "2026-01-01T00:00:00Z");
    assert_eq!(e["deprecatedLastTimestamp"], "2026-01-01T00:05:00Z");
    assert!(
        e.get("message").is_none() && e.get("involvedObject").is_none(),
        "{e}"
    );

    // Selected by the new API's field names.
    let selected = events
        .list(&ListParams::default().fields("regarding.name=old-style"))
        .await
        .expect("list");
    assert_eq!(selected.items.len(), 1);
    let none = events
        .list(&ListParams::default().fields("regarding.name=other"))
        .await
        .expect("list");
    assert!(none.items.is_empty());

    // One object: deleted through one API, it is gone from the other.
    ok(
        &env,
        &[
            "delete",
            "events.events.k8s.io",
            "old-style.1",
            "-n",
            "default",
        ],
    )
    .await;
    let out = ok(&env, &["get", "events", "-n", "default", "-o", "json"]).await;
    assert!(core_events(&out, "old-style").is_empty(), "{out}");
}
