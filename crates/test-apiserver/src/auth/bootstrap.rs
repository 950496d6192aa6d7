//! The default RBAC policy kube-apiserver creates at start, as far as
//! clients rely on it: `cluster-admin` for `system:masters`, discovery and
//! the self-reviews for every authenticated user, and the public health
//! and version endpoints for everyone.

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
    ]
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
    obj["metadata"]["labels"] = json!({ "kubernetes.io/bootstrapping": "rbac-defaults" });
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
