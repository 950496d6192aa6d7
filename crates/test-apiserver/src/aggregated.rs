//! Aggregated discovery (KEP-3352): `/api` and `/apis` answer an
//! `APIGroupDiscoveryList` when the Accept header asks for one, so kubectl
//! and client-go learn every resource in one request instead of one per
//! group/version. The legacy documents stay in `discovery`.

use crate::resources::{Registry, ResourceType};
use serde_json::{Value, json};

const GROUP: &str = "apidiscovery.k8s.io";

/// The discovery API versions we can answer, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V2,
    V2Beta1,
}

impl Version {
    fn name(self) -> &'static str {
        match self {
            Self::V2 => "v2",
            Self::V2Beta1 => "v2beta1",
        }
    }

    /// The response Content-Type; client-go reads it to tell an aggregated
    /// document from a legacy one.
    pub fn content_type(self) -> String {
        format!(
            "application/json;g={GROUP};v={};as=APIGroupDiscoveryList",
            self.name()
        )
    }
}

/// Picks the aggregated version the Accept header prefers, in header
/// order. `None` when a plain JSON range comes first (or none matches):
/// the caller then serves the legacy document.
pub fn negotiate(accept: &str) -> Option<Version> {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let (mut g, mut v, mut as_) = ("", "", "");
        for p in parts {
            match p.split_once('=') {
                Some(("g", x)) => g = x,
                Some(("v", x)) => v = x,
                Some(("as", x)) => as_ = x,
                _ => {}
            }
        }
        let json_like = matches!(media, "application/json" | "application/*" | "*/*");
        if !json_like {
            continue; // e.g. protobuf, which we do not serve
        }
        if g.is_empty() && as_.is_empty() {
            return None;
        }
        if g == GROUP && as_ == "APIGroupDiscoveryList" {
            match v {
                "v2" => return Some(Version::V2),
                "v2beta1" => return Some(Version::V2Beta1),
                _ => {}
            }
        }
    }
    None
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "version": version, "kind": kind })
}

fn resource(t: &ResourceType, version: &str) -> Value {
    let kind = gvk(&t.group, version, &t.kind);
    let mut subs = Vec::new();
    if t.has_status(version) {
        subs.push(json!({
            "subresource": "status",
            "responseKind": kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    for (sub, verbs) in t.extra_subresources() {
        let kind = match *sub {
            "token" => gvk("authentication.k8s.io", "v1", "TokenRequest"),
            _ => kind.clone(),
        };
        subs.push(json!({ "subresource": sub, "responseKind": kind, "verbs": verbs }));
    }
    let mut r = json!({
        "resource": t.plural,
        "responseKind": kind,
        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": t.singular,
        "verbs": t.verbs(),
    });
    // Empty lists are omitted, as the real server does (omitempty).
    if !t.short_names.is_empty() {
        r["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        r["categories"] = json!(t.categories);
    }
    if !subs.is_empty() {
        r["subresources"] = Value::Array(subs);
    }
    r
}

fn group_entry(reg: &Registry, group: &str, versions: &[String]) -> Value {
    let all = reg.all();
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = all
                .iter()
                .filter(|t| t.group == group && t.version(v).is_some())
                .map(|t| resource(t, v))
                .collect();
            json!({ "version": v, "resources": resources, "freshness": "Current" })
        })
        .collect();
    let metadata = if group.is_empty() {
        json!({ "creationTimestamp": null })
    } else {
        json!({ "name": group, "creationTimestamp": null })
    };
    json!({ "metadata": metadata, "versions": versions })
}

/// The document for `/api` (`core == true`, the legacy group only) or
/// `/apis` (every named group).
pub fn document(reg: &Registry, core: bool, version: Version) -> Value {
    let items: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, vs)| group_entry(reg, g, vs))
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("{GROUP}/{}", version.name()),
        "metadata": {},
        "items": items,
    })
}
