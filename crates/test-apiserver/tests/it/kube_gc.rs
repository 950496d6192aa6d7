//! kube-rs: finalizers and ownerReference garbage collection.

use crate::common::{self, within};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

async fn make(api: &Api<ConfigMap>, name: &str, extra: serde_json::Value) -> ConfigMap {
    let mut v = json!({ "metadata": { "name": name } });
    json_patch::merge(&mut v, &extra);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(v).expect("cm"),
    )
    .await
    .expect("create")
}

fn owned_by(owner: &ConfigMap) -> serde_json::Value {
    json!({ "metadata": { "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "name": owner.metadata.name, "uid": owner.metadata.uid, "blockOwnerDeletion": true
    }]}})
}

async fn gone(api: &Api<ConfigMap>, obj: &ConfigMap) {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    within(
        &format!("{name} deleted"),
        await_condition(api.clone(), &name, conditions::is_deleted(&uid)),
    )
    .await
    .expect("await");
}

#[tokio::test]
async fn finalizers_block_deletion_until_removed() {
    let env = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "default");
    let obj = make(
        &cms,
        "fin",
        json!({"metadata": {"finalizers": ["example.com/hold"]}}),
    )
    .await;
    cms.delete("fin", &DeleteParams::default())
        .await
        .expect("delete");
    let held = cms.get("fin").await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    cms.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizer");
    gone(&cms, &obj).await;
}

#[tokio::test]
async fn garbage_collection_background_foreground_orphan() {
    let env = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "default");

    let owner = make(&cms, "owner-bg", json!({})).await;
    let dep = make(&cms, "dep-bg", owned_by(&owner)).await;
    cms.delete("owner-bg", &DeleteParams::background())
        .await
        .expect("delete");
    gone(&cms, &dep).await;

    let owner = make(&cms, "owner-fg", json!({})).await;
    let dep = make(&cms, "dep-fg", owned_by(&owner)).await;
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    cms.delete("owner-fg", &dp).await.expect("delete");
    gone(&cms, &dep).await;
    gone(&cms, &owner).await;

    let owner = make(&cms, "owner-or", json!({})).await;
    make(&cms, "dep-or", owned_by(&owner)).await;
    cms.delete("owner-or", &DeleteParams::orphan())
        .await
        .expect("delete");
    gone(&cms, &owner).await;
    let orphan = cms.get("dep-or").await.expect("orphan survives");
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}
