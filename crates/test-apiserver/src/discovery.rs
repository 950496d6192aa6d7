//! Legacy discovery documents (`/api`, `/apis`, `/apis/{g}`, `/apis/{g}/{v}`,
//! `/version`). Requests that ask for aggregated discovery are answered by
//! `aggregated` instead.

use crate::resources::Registry;
use serde_json::{Value, json};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(server_addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": server_addr }]
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{name}/{v}"), "version": v }))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/{group}`.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    reg.groups()
        .iter()
        .find(|(g, _)| g == name)
        .map(|(g, vs)| group_doc(g, vs))
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for t in reg
        .all()
        .iter()
        .filter(|t| t.group == group && t.version(version).is_some())
    {
        resources.push(json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs(),
            "shortNames": t.short_names,
            "categories": t.categories,
            "storageVersionHash": "",
        }));
        if t.has_status(version) {
            resources.push(json!({
                "name": format!("{}/status", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        for (sub, verbs) in t.extra_subresources() {
            resources.push(json!({ "name": format!("{}/{sub}", t.plural), "singularName": "", "namespaced": t.namespaced, "kind": t.kind, "verbs": verbs }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources }),
    )
}
