//! kube-rs server-side apply: managedFields, conflicts between managers, force.

use crate::common;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

fn cfg(data: serde_json::Value) -> serde_json::Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "ssa" }, "data": data })
}

#[tokio::test]
async fn ssa_conflicts_force_and_field_removal() {
    let env = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "default");

    let a = PatchParams::apply("manager-a");
    let b = PatchParams::apply("manager-b");
    cms.patch(
        "ssa",
        &a,
        &Patch::Apply(cfg(json!({"shared": "1", "onlyA": "x"}))),
    )
    .await
    .expect("apply a");
    // Same value: co-ownership, no conflict.
    cms.patch("ssa", &b, &Patch::Apply(cfg(json!({"shared": "1"}))))
        .await
        .expect("apply b same value");

    let err = cms
        .patch("ssa", &b, &Patch::Apply(cfg(json!({"shared": "2"}))))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("expected API error")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.contains("conflict with \"manager-a\"") && s.message.contains(".data.shared"),
        "{}",
        s.message
    );

    let forced = cms
        .patch(
            "ssa",
            &b.clone().force(),
            &Patch::Apply(cfg(json!({"shared": "2"}))),
        )
        .await
        .expect("force");
    assert_eq!(
        forced
            .data
            .as_ref()
            .and_then(|d| d.get("shared"))
            .map(String::as_str),
        Some("2")
    );
    let managers: Vec<_> = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.fields_v1.map(|f| f.0.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    let a_fields = &managers
        .iter()
        .find(|(m, _)| m == "manager-a")
        .expect("manager-a entry")
        .1;
    assert!(
        a_fields.contains("f:onlyA") && !a_fields.contains("f:shared"),
        "{a_fields}"
    );

    // manager-a stops applying onlyA: the field it alone owned is removed.
    let after = cms
        .patch("ssa", &a, &Patch::Apply(cfg(json!({}))))
        .await
        .expect("apply a without onlyA");
    assert!(
        after
            .data
            .as_ref()
            .is_some_and(|d| !d.contains_key("onlyA") && d.contains_key("shared"))
    );
}
