//! The default RBAC policy kube-apiserver creates at start, as far as
//! clients rely on it: `cluster-admin` for `system:masters`, discovery and
//! the self-reviews for every authenticated user, the public health and
//! version endpoints for everyone, and the user-facing roles `admin`,
//! `edit` and `view`, built as kube-apiserver builds them: by aggregation
//! (`view` feeds `edit`, `edit` feeds `admin`, and a ClusterRole labelled
//! `rbac.authorization.k8s.io/aggregate-to-view` etc. adds its rules).
//! Their own rules for built-in resources (`system:aggregate-to-*`) are a
//! subset here: the workloads, configuration and events.

use crate::ops;
use crate::state::{State, Target, WriteOpts};
use serde_json::{Value, json};

const RBAC: &str = "rbac.authorization.k8s.io";

fn cluster_roles() -> Vec<Value> {
    vec![
        json!({ "metadata": { "name": "cluster-admin" }, "rules": [
            { "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] },
            { "nonResourceURLs": ["*"], "verbs": ["*"] },
        ]}),
        json!({ "metadata": { "name": "system:discovery" }, "rules": [
            { "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"] },
        ]}),
        json!({ "metadata": { "name": "system:basic-user" }, "rules": [
            { "apiGroups": ["authorization.k8s.io"],
              "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"] },
            { "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"] },
        ]}),
        json!({ "metadata": { "name": "system:public-info-viewer" }, "rules": [
            { "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"] },
        ]}),
        aggregated("admin", "aggregate-to-admin", None),
        aggregated("edit", "aggregate-to-edit", Some("aggregate-to-admin")),
        aggregated("view", "aggregate-to-view", Some("aggregate-to-edit")),
        json!({ "metadata": { "name": "system:aggregate-to-view",
            "labels": { "rbac.authorization.k8s.io/aggregate-to-view": "true" } }, "rules": [
            { "apiGroups": [""], "resources": ["pods", "pods/log", "configmaps", "services",
                "endpoints", "events", "persistentvolumeclaims", "serviceaccounts"],
              "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"],
              "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"] },
        ]}),
        json!({ "metadata": { "name": "system:aggregate-to-edit",
            "labels": { "rbac.authorization.k8s.io/aggregate-to-edit": "true" } }, "rules": [
            { "apiGroups": [""], "resources": ["pods", "configmaps", "secrets", "services",
                "persistentvolumeclaims", "serviceaccounts"],
              "verbs": ["create", "delete", "deletecollection", "patch", "update"] },
            { "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"],
              "verbs": ["create", "delete", "deletecollection", "patch", "update"] },
            { "apiGroups": ["batch"], "resources": ["jobs", "cronjobs"],
              "verbs": ["create", "delete", "deletecollection", "patch", "update"] },
        ]}),
    ]
}

/// A user-facing ClusterRole made of the rules of every ClusterRole
/// labelled `rbac.authorization.k8s.io/<selects>`, itself labelled
/// `<feeds>` (so its rules reach the next role up).
fn aggregated(name: &str, selects: &str, feeds: Option<&str>) -> Value {
    let mut labels = serde_json::Map::new();
    if let Some(feeds) = feeds {
        labels.insert(format!("{RBAC}/{feeds}"), json!("true"));
    }
    json!({
        "metadata": { "name": name, "labels": labels },
        "aggregationRule": { "clusterRoleSelectors": [
            { "matchLabels": { format!("{RBAC}/{selects}"): "true" } },
        ]},
        "rules": [],
    })
}

fn binding(role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({ "apiGroup": RBAC, "kind": "Group", "name": g }))
        .collect();
    json!({
        "metadata": { "name": role },
        "roleRef": { "apiGroup": RBAC, "kind": "ClusterRole", "name": role },
        "subjects": subjects,
    })
}

fn create(st: &State, kind: &str, mut obj: Value) {
    let Some(rt) = st.registry.by_kind(RBAC, kind) else {
        return;
    };
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
    let t = Target {
        rt,
        version: "v1".into(),
        namespace: String::new(),
        name: String::new(),
        sub: String::new(),
    };
    let o = WriteOpts {
        manager: "kube-apiserver".into(),
        ..Default::default()
    };
    if let Err(e) = ops::create(st, &t, obj, &o) {
        tracing::warn!(error = %e, "bootstrap policy");
    }
}

/// Creates the default ClusterRoles and ClusterRoleBindings.
pub fn seed(st: &State) {
    for role in cluster_roles() {
        create(st, "ClusterRole", role);
    }
    create(
        st,
        "ClusterRoleBinding",
        binding("cluster-admin", &["system:masters"]),
    );
    create(
        st,
        "ClusterRoleBinding",
        binding("system:discovery", &["system:authenticated"]),
    );
    create(
        st,
        "ClusterRoleBinding",
        binding("system:basic-user", &["system:authenticated"]),
    );
    create(
        st,
        "ClusterRoleBinding",
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    );
}
