//! kube-rs against the server: CRUD of built-ins and custom resources.

use crate::common::{self, within};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "data": { "k": "v" }
    }))
    .expect("configmap")
}

fn api_err(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason),
        other => panic!("expected API error, got {other}"),
    }
}

#[tokio::test]
async fn builtin_crud_conflicts_selectors_and_pagination() {
    let env = common::start().await;
    let client = env.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let created = cms
        .create(&PostParams::default(), &cm("one", json!({"app": "x"})))
        .await
        .expect("create");
    let md = &created.metadata;
    assert!(md.uid.is_some() && md.creation_timestamp.is_some() && md.resource_version.is_some());
    let (code, reason) = api_err(
        cms.create(&PostParams::default(), &cm("one", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));

    // Stale resourceVersion on replace is a 409 Conflict.
    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "v2".to_string())].into());
    let updated = cms
        .replace("one", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let (code, reason) = api_err(
        cms.replace("one", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));

    let patched = cms
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "1"}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(
        patched
            .data
            .as_ref()
            .and_then(|d| d.get("extra"))
            .map(String::as_str),
        Some("1")
    );
    let patched = cms
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "remove", "path": "/data/extra"}]))
                    .expect("json patch"),
            ),
        )
        .await
        .expect("json patch");
    assert!(
        patched
            .data
            .as_ref()
            .is_some_and(|d| !d.contains_key("extra"))
    );

    for i in 0..5 {
        cms.create(
            &PostParams::default(),
            &cm(&format!("page-{i}"), json!({"app": "paged"})),
        )
        .await
        .expect("create page");
    }
    let selected = cms
        .list(&ListParams::default().labels("app=paged"))
        .await
        .expect("list");
    assert_eq!(selected.items.len(), 5);
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=one"))
        .await
        .expect("list");
    assert_eq!(by_name.items.len(), 1);
    let mut names = Vec::new();
    let mut lp = ListParams::default().labels("app=paged").limit(2);
    loop {
        let page = cms.list(&lp).await.expect("page");
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    assert_eq!(
        names,
        (0..5).map(|i| format!("page-{i}")).collect::<Vec<_>>()
    );

    cms.delete("one", &DeleteParams::default())
        .await
        .expect("delete");
    let (code, _) = api_err(cms.get("one").await.unwrap_err());
    assert_eq!(code, 404);
    let ghost: Api<ConfigMap> = Api::namespaced(client, "no-such-ns");
    let (code, _) = api_err(
        ghost
            .create(&PostParams::default(), &cm("x", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 404);
}

pub async fn install_widget_crd(client: &kube::Client) -> ApiResource {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let yaml = std::fs::read_to_string(common::fixture("widgets-crd.yaml")).expect("fixture");
    let crd: CustomResourceDefinition = serde_yaml::from_str(&yaml).expect("crd yaml");
    crds.patch(
        "widgets.example.com",
        &PatchParams::apply("it").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply crd");
    within(
        "CRD Established",
        await_condition(
            crds,
            "widgets.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("await");
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

#[tokio::test]
async fn custom_resources_status_generation_pruning_validation() {
    let env = common::start().await;
    let client = env.client().await;
    let ar = install_widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);

    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": { "name": "w" },
        "spec": { "size": 1, "color": "red", "bogus": true },
        "status": { "phase": "ignored-on-create" }
    }))
    .expect("widget");
    let w = widgets
        .create(&PostParams::default(), &obj)
        .await
        .expect("create widget");
    assert_eq!(w.data["spec"]["maxSize"], json!(10), "default applied");
    assert!(
        w.data["spec"].get("bogus").is_none(),
        "unknown field pruned"
    );
    assert!(
        w.data.get("status").is_none(),
        "status ignored on main resource"
    );
    assert_eq!(w.metadata.generation, Some(1));

    let st = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 9}})),
        )
        .await
        .expect("status patch");
    assert_eq!(st.data["status"]["phase"], json!("Ready"));
    assert_eq!(
        st.data["spec"]["size"],
        json!(1),
        "status subresource ignores spec"
    );
    assert_eq!(
        st.metadata.generation,
        Some(1),
        "status does not bump generation"
    );

    let w = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("label");
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "metadata does not bump generation"
    );
    let w = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .expect("spec");
    assert_eq!(w.metadata.generation, Some(2), "spec bumps generation");

    for (patch, field) in [
        (json!({"spec": {"size": 11}}), "spec"),
        (json!({"spec": {"size": -1}}), "spec.size"),
        (json!({"spec": {"color": "green"}}), "spec"),
        (json!({"spec": {"owner": "Not Lower"}}), "spec.owner"),
        (json!({"spec": {"size": "big"}}), "spec.size"),
    ] {
        let err = widgets
            .patch("w", &PatchParams::default(), &Patch::Merge(patch.clone()))
            .await
            .unwrap_err();
        let kube::Error::Api(s) = err else {
            panic!("expected API error for {patch}")
        };
        assert_eq!(
            (s.code, s.reason.as_str()),
            (422, "Invalid"),
            "{patch}: {}",
            s.message
        );
        assert!(s.message.contains(field), "{patch}: {}", s.message);
    }
    let missing: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "m" }, "spec": {}
    }))
    .expect("widget");
    let kube::Error::Api(s) = widgets
        .create(&PostParams::default(), &missing)
        .await
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!(s.code, 422);
    assert!(
        s.message.contains("spec.size: Required value"),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn metadata_only_reads_return_labels_never_data() {
    use k8s_openapi::api::core::v1::Secret;
    let env = common::start().await;
    let client = env.client().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "sql", "labels": {"mssql-cdc.io/allow": "true"}},
        "stringData": {"password": "s3cret-value"}
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create");

    let meta = secrets
        .get_metadata_opt("sql")
        .await
        .expect("metadata GET")
        .expect("the Secret exists");
    assert_eq!(
        meta.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(
        meta.metadata
            .labels
            .unwrap_or_default()
            .get("mssql-cdc.io/allow")
            .map(String::as_str),
        Some("true")
    );
    assert!(
        secrets
            .get_metadata_opt("missing")
            .await
            .expect("GET")
            .is_none()
    );

    let list = secrets
        .list_metadata(&ListParams::default())
        .await
        .expect("metadata list");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("sql"));

    // Neither answer carries the data: the raw bodies, as a client sees them.
    for path in [
        "/api/v1/namespaces/default/secrets/sql",
        "/api/v1/namespaces/default/secrets",
    ] {
        let request = axum::http::Request::get(path)
            .header(
                "Accept",
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
            )
            .body(Vec::new())
            .expect("request");
        let body = client.request_text(request).await.expect("raw GET");
        assert!(
            !body.contains("s3cret") && !body.contains("czNjcmV0"),
            "{body}"
        );
        assert!(body.contains("PartialObjectMetadata"), "{body}");
    }
}
