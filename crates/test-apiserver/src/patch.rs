//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and the
//! subset of strategic merge patch that kubectl's client-side apply and
//! `kubectl patch` produce for built-in types.

use crate::error::{ApiError, ApiResult};
use serde_json::{Map, Value};

/// Content types for PATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    /// Maps a Content-Type header to a patch type.
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(ApiError::UnsupportedMediaType(other.to_string())),
        }
    }
}

/// Applies a JSON patch document.
pub fn json_patch(doc: &Value, body: &[u8]) -> ApiResult<Value> {
    let p: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
    let mut out = doc.clone();
    json_patch::patch(&mut out, &p).map_err(|e| ApiError::Invalid {
        group: String::new(),
        kind: String::new(),
        name: String::new(),
        causes: vec![crate::error::Cause::new(
            "FieldValueInvalid",
            "",
            format!("the server rejected our request due to an error in our request: {e}"),
        )],
    })?;
    Ok(out)
}

/// Applies a JSON merge patch.
pub fn merge_patch(doc: &Value, patch: &Value) -> Value {
    let mut out = doc.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// How a list field merges under strategic merge patch.
pub enum ListStrategy {
    /// Replace the whole list.
    Replace,
    /// Merge items by the named key field.
    MergeKey(&'static str),
    /// Union of primitive values.
    PrimitiveMerge,
}

/// The strategy for a built-in list field, by field name (and item shape for `ports`).
pub fn list_strategy(field: &str, items: &[Value]) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "env" => ListStrategy::MergeKey("name"),
        "volumeMounts" => ListStrategy::MergeKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeKey("devicePath"),
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => {
            ListStrategy::MergeKey("containerPort")
        }
        "ports" => ListStrategy::MergeKey("port"),
        "hostAliases" => ListStrategy::MergeKey("ip"),
        "ownerReferences" => ListStrategy::MergeKey("uid"),
        "conditions" => ListStrategy::MergeKey("type"),
        "topologySpreadConstraints" => ListStrategy::MergeKey("topologyKey"),
        "finalizers" => ListStrategy::PrimitiveMerge,
        _ => ListStrategy::Replace,
    }
}

/// Removes `$`-directives from a value about to be inserted verbatim.
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|i| i.get("$patch").is_none())
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Applies a strategic merge patch for built-in types.
pub fn strategic_merge(doc: &Value, patch: &Value) -> ApiResult<Value> {
    let mut out = doc.clone();
    smp_value(&mut out, patch)?;
    Ok(out)
}

fn smp_value(o: &mut Value, p: &Value) -> ApiResult<()> {
    let Some(pm) = p.as_object() else {
        *o = clean(p);
        return Ok(());
    };
    if pm.get("$patch").and_then(Value::as_str) == Some("replace") {
        *o = clean(p);
        return Ok(());
    }
    if !o.is_object() {
        *o = Value::Object(Map::new());
    }
    let Some(om) = o.as_object_mut() else {
        return Ok(());
    };
    if let Some(keep) = pm.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        om.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in pm {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (om.get_mut(field), v.as_array()) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                om.remove(k);
            }
            Value::Object(_) => smp_value(om.entry(k.clone()).or_insert(Value::Null), v)?,
            Value::Array(items) => {
                let merged = merge_list(om.get(k), items, k)?;
                om.insert(k.clone(), merged);
            }
            _ => {
                om.insert(k.clone(), v.clone());
            }
        }
    }
    for (k, order) in pm {
        if let (Some(field), Some(order)) = (k.strip_prefix("$setElementOrder/"), order.as_array())
            && let Some(Value::Array(list)) = om.get_mut(field)
        {
            reorder(list, order, field);
        }
    }
    Ok(())
}

fn reorder(list: &mut [Value], order: &[Value], field: &str) {
    let key = match list_strategy(field, order) {
        ListStrategy::MergeKey(k) => Some(k),
        _ => None,
    };
    let ident = |v: &Value| match key {
        Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
        None => v.clone(),
    };
    let pos = |v: &Value| {
        order
            .iter()
            .position(|o| ident(o) == ident(v))
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(pos);
}

fn merge_list(orig: Option<&Value>, items: &[Value], field: &str) -> ApiResult<Value> {
    let orig: Vec<Value> = orig.and_then(Value::as_array).cloned().unwrap_or_default();
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Ok(clean(&Value::Array(items.to_vec())));
    }
    match list_strategy(field, items) {
        ListStrategy::Replace => Ok(clean(&Value::Array(items.to_vec()))),
        ListStrategy::PrimitiveMerge => {
            let mut out = orig;
            for i in items {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
            Ok(Value::Array(out))
        }
        ListStrategy::MergeKey(key) => {
            let mut out = orig;
            for item in items {
                let id = item.get(key).cloned().unwrap_or(Value::Null);
                let existing = out.iter().position(|o| o.get(key) == Some(&id));
                if item.get("$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(i) = existing {
                        out.remove(i);
                    }
                    continue;
                }
                match existing {
                    Some(i) => smp_value(&mut out[i], item)?,
                    None => out.push(clean(item)),
                }
            }
            Ok(Value::Array(out))
        }
    }
}
