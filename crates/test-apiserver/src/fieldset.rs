//! Field sets in the `FieldsV1` format used by `metadata.managedFields`:
//! paths of `f:<field>`, `k:<json keys>` and `v:<json value>` elements.
//! List semantics come from the CRD schema (`x-kubernetes-list-type`) or,
//! for built-ins, from the strategic-merge keys in [`crate::patch`].

use crate::patch::{ListStrategy, list_strategy};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// One path in a field set.
pub type Path = Vec<String>;
/// A set of owned paths.
pub type FieldSet = BTreeSet<Path>;

/// How a list field is identified element-wise.
pub enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// The list kind from a schema node (CRDs) or the built-in field name.
pub fn list_kind(schema: Option<&Value>, field: &str, items: &[Value]) -> ListKind {
    if let Some(s) = schema {
        return match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => ListKind::Map(
                s.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListKind::Atomic,
        };
    }
    match list_strategy(field, items) {
        ListStrategy::MergeKey(k) => ListKind::Map(vec![k.to_string()]),
        ListStrategy::PrimitiveMerge => ListKind::Set,
        ListStrategy::Replace => ListKind::Atomic,
    }
}

/// Schema of a map child.
pub fn child_schema<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let s = schema?;
    s.get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

/// Schema of list items.
pub fn item_schema(schema: Option<&Value>) -> Option<&Value> {
    schema?.get("items")
}

fn key_element(item: &Value, keys: &[String]) -> String {
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), item.get(k).cloned().unwrap_or(Value::Null));
    }
    format!("k:{}", Value::Object(m))
}

/// Collects the leaf paths (and list-item nodes) set in `v`.
pub fn collect(v: &Value, schema: Option<&Value>, prefix: &Path, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    for (k, child) in m {
        let mut p = prefix.clone();
        p.push(format!("f:{k}"));
        let cs = child_schema(schema, k);
        match child {
            Value::Object(cm) if !cm.is_empty() => collect(child, cs, &p, out),
            Value::Array(items) => match list_kind(cs, k, items) {
                ListKind::Atomic => {
                    out.insert(p);
                }
                ListKind::Set => {
                    for i in items {
                        let mut ip = p.clone();
                        ip.push(format!("v:{i}"));
                        out.insert(ip);
                    }
                }
                ListKind::Map(keys) => {
                    let is = item_schema(cs);
                    for i in items {
                        let mut ip = p.clone();
                        ip.push(key_element(i, &keys));
                        out.insert(ip.clone());
                        collect(i, is, &ip, out);
                    }
                }
            },
            _ => {
                out.insert(p);
            }
        }
    }
}

/// Field paths of an object that a manager can own: everything but identity
/// and server-managed metadata (and `status` unless `status_only`).
pub fn object_fields(obj: &Value, schema: Option<&Value>, status_only: bool) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(m) = obj.as_object() else { return out };
    for (k, v) in m {
        let owned = match k.as_str() {
            "apiVersion" | "kind" => false,
            "status" => status_only,
            "metadata" => !status_only,
            _ => !status_only,
        };
        if !owned {
            continue;
        }
        let p = vec![format!("f:{k}")];
        if k == "metadata" {
            let mut md = Map::new();
            for f in ["labels", "annotations", "finalizers", "ownerReferences"] {
                if let Some(x) = v.get(f) {
                    md.insert(f.into(), x.clone());
                }
            }
            collect(&Value::Object(md), None, &p, &mut out);
            continue;
        }
        let cs = child_schema(schema, k);
        match v {
            Value::Object(cm) if !cm.is_empty() => collect(v, cs, &p, &mut out),
            _ => {
                let mut one = Map::new();
                one.insert(k.clone(), v.clone());
                collect(&Value::Object(one), schema, &vec![], &mut out);
            }
        }
    }
    out
}

/// Looks up the value at a path.
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        cur = step(cur, el)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, el: &str) -> Option<&'a Value> {
    if let Some(f) = el.strip_prefix("f:") {
        return cur.get(f);
    }
    let list = cur.as_array()?;
    if let Some(k) = el.strip_prefix("k:") {
        let keys: Map<String, Value> = serde_json::from_str(k).ok()?;
        return list.iter().find(|i| {
            keys.iter()
                .all(|(kk, kv)| i.get(kk).unwrap_or(&Value::Null) == kv)
        });
    }
    if let Some(v) = el.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        return list.iter().find(|i| **i == want);
    }
    None
}

/// Removes the value at a path (no-op when absent).
pub fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for el in parent_path {
        let next = if let Some(f) = el.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            let found = step(cur, el).cloned();
            match (cur.as_array_mut(), found) {
                (Some(list), Some(f)) => list.iter_mut().find(|i| **i == f),
                _ => None,
            }
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(target) = step(cur, last).cloned()
        && let Some(list) = cur.as_array_mut()
    {
        list.retain(|i| *i != target);
    }
}

/// Renders a field set as a `FieldsV1` object. Nodes that are owned
/// themselves and also have owned children get a `"."` marker.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = json!({});
    let mut paths: Vec<Path> = set.iter().cloned().collect();
    for p in set {
        if set.iter().any(|q| q.len() > p.len() && q.starts_with(p)) {
            let mut dot = p.clone();
            dot.push(".".into());
            paths.push(dot);
        }
    }
    for p in &paths {
        let mut cur = &mut root;
        for el in p {
            let Some(m) = cur.as_object_mut() else { break };
            cur = m.entry(el.clone()).or_insert_with(|| json!({}));
        }
    }
    root
}

/// Parses a `FieldsV1` object into a field set.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
        let Some(m) = v.as_object() else { return };
        if !prefix.is_empty() && (m.is_empty() || m.contains_key(".")) {
            out.insert(prefix.clone());
        }
        for (k, c) in m {
            if k == "." {
                continue;
            }
            prefix.push(k.clone());
            walk(c, prefix, out);
            prefix.pop();
        }
    }
    let mut out = FieldSet::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// Renders a path the way conflict messages show it (`.spec.containers[name="a"].image`).
pub fn display(path: &[String]) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let inner: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            s.push_str(&format!("[{v}]"));
        }
    }
    s
}

/// Merges an applied configuration into a live object (SSA merge semantics).
pub fn merge_applied(live: &mut Value, applied: &Value, schema: Option<&Value>) {
    let (Some(lm), Some(am)) = (live.as_object_mut(), applied.as_object()) else {
        *live = applied.clone();
        return;
    };
    for (k, av) in am {
        let cs = child_schema(schema, k);
        match (lm.get_mut(k), av) {
            (Some(lv @ Value::Object(_)), Value::Object(_)) => merge_applied(lv, av, cs),
            (Some(Value::Array(ll)), Value::Array(al)) => match list_kind(cs, k, al) {
                ListKind::Atomic => *ll = al.clone(),
                ListKind::Set => {
                    for i in al {
                        if !ll.contains(i) {
                            ll.push(i.clone());
                        }
                    }
                }
                ListKind::Map(keys) => {
                    let is = item_schema(cs);
                    for ai in al {
                        let id = key_element(ai, &keys);
                        match ll.iter_mut().find(|li| key_element(li, &keys) == id) {
                            Some(li) => merge_applied(li, ai, is),
                            None => ll.push(ai.clone()),
                        }
                    }
                }
            },
            _ => {
                lm.insert(k.clone(), av.clone());
            }
        }
    }
}
