//! `meta.k8s.io/v1` Table responses (`Accept: ...;as=Table`), which is what
//! `kubectl get` prints: Name, the CRD's additionalPrinterColumns evaluated as
//! simple JSONPath, and Age; built-in kinds get the real server's columns
//! (see `printers`).

use crate::clock::parse_time;
use crate::printers::{CellFn, builtin_columns, builtin_table};
use crate::resources::ResourceType;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// Whether an Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// What an Accept header asks a GET for, by its first range (the real
/// server's preference, which clients use to fall back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// The objects themselves.
    Objects,
    /// A `meta.k8s.io/v1` Table.
    Table,
    /// `PartialObjectMetadata` (one object) or `PartialObjectMetadataList`
    /// (a list): only each object's metadata.
    Metadata,
}

/// The rendering `accept` asks for; `as=PartialObjectMetadata` and
/// `as=PartialObjectMetadataList` (of `g=meta.k8s.io;v=v1`) both ask for
/// metadata, as the real server serves either on a list or a single GET.
pub fn rendering(accept: &str) -> Rendering {
    let first = accept.split(',').next().unwrap_or_default();
    let params: Vec<&str> = first.split(';').map(str::trim).collect();
    if wants_table(accept) {
        return Rendering::Table;
    }
    let metadata = params.iter().any(|p| {
        matches!(
            *p,
            "as=PartialObjectMetadata" | "as=PartialObjectMetadataList"
        )
    });
    if metadata && params.contains(&"g=meta.k8s.io") && params.contains(&"v=v1") {
        Rendering::Metadata
    } else {
        Rendering::Objects
    }
}

/// `obj` as `PartialObjectMetadata`: its metadata (managedFields
/// included, as the real server sends them), none of its data.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A list page as `PartialObjectMetadataList`.
pub fn partial_metadata_list(items: &[Value], metadata: Value) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "items": items.iter().map(partial_metadata).collect::<Vec<_>>(),
    })
}

/// Evaluates a JSONPath of the forms printer columns use: `.a.b`,
/// `.a[0].b`, `.a[*].b`, `{.a.b}` and filters such as
/// `.a[?(@.type=="Ready")].status`.
pub fn jsonpath(obj: &Value, path: &str) -> Vec<Value> {
    let p = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut cur = vec![obj.clone()];
    for raw in segments(p) {
        let (name, index) = match raw.split_once('[') {
            Some((n, rest)) => (n, Some(rest.strip_suffix(']').unwrap_or(rest))),
            None => (raw, None),
        };
        let mut next = Vec::new();
        for c in cur {
            let v = if name.is_empty() {
                Some(c)
            } else {
                c.get(name).cloned()
            };
            match (v, index) {
                (Some(v), None) => next.push(v),
                (Some(Value::Array(a)), Some("*")) => next.extend(a),
                (Some(Value::Array(a)), Some(i)) if i.starts_with('?') => {
                    next.extend(a.into_iter().filter(|item| filter_matches(item, i)));
                }
                (Some(Value::Array(a)), Some(i)) => {
                    if let Some(x) = i.parse::<usize>().ok().and_then(|i| a.get(i)) {
                        next.push(x.clone());
                    }
                }
                _ => {}
            }
        }
        cur = next;
    }
    cur
}

/// Splits a path at the dots outside brackets.
fn segments(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, ch) in path.char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                if i > start {
                    out.push(&path[start..i]);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < path.len() {
        out.push(&path[start..]);
    }
    out
}

/// `?(@.a.b=="x")` or `?(@.a!="x")`: compares a field of `item` with a
/// quoted string or a bare literal.
fn filter_matches(item: &Value, filter: &str) -> bool {
    let expr = filter
        .trim_start_matches('?')
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .trim();
    let (lhs, rhs, equal) = match (expr.split_once("!="), expr.split_once("==")) {
        (Some((l, r)), _) => (l, r, false),
        (None, Some((l, r))) => (l, r, true),
        (None, None) => return false,
    };
    let Some(field) = lhs.trim().strip_prefix('@') else {
        return false;
    };
    let rhs = rhs.trim();
    let wanted = rhs
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| rhs.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(rhs);
    let found = jsonpath(item, field).into_iter().next().map(|v| match v {
        Value::String(s) => s,
        other => other.to_string(),
    });
    (found.as_deref() == Some(wanted)) == equal
}

/// Human-readable age like kubectl's (`5s`, `3m`, `2h`, `4d`).
pub fn age(ts: &str, now: DateTime<Utc>) -> String {
    let Some(t) = parse_time(ts) else {
        return "<unknown>".into();
    };
    let secs = (now - t).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 2 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn cell(vals: &[Value], ty: &str, now: DateTime<Utc>) -> Value {
    if vals.is_empty() {
        return Value::Null;
    }
    if ty == "date" {
        return json!(vals[0].as_str().map(|s| age(s, now)).unwrap_or_default());
    }
    if vals.len() == 1 {
        return typed(&vals[0], ty);
    }
    let parts: Vec<String> = vals
        .iter()
        .map(|v| {
            v.as_str()
                .map(String::from)
                .unwrap_or_else(|| v.to_string())
        })
        .collect();
    json!(parts.join(","))
}

/// A single value as the CRD table converter types it: an `integer`
/// column drops a number's fraction (Go's float-to-int64 conversion), other
/// types keep the value.
fn typed(value: &Value, ty: &str) -> Value {
    match value.as_f64() {
        Some(number) if ty == "integer" && !(value.is_i64() || value.is_u64()) => {
            json!(number.trunc() as i64)
        }
        _ => value.clone(),
    }
}

/// Where a column's cells come from.
enum Source {
    /// A printer-column JSONPath, with its type (`date` prints as an age).
    Path(String, String),
    /// A built-in printer.
    Computed(CellFn),
}

struct Col {
    name: String,
    ty: String,
    format: String,
    priority: u8,
    source: Source,
}

fn path_col(name: &str, ty: &str, path: &str, format: &str, priority: u8) -> Col {
    Col {
        name: name.into(),
        ty: if ty == "date" {
            "string".into()
        } else {
            ty.into()
        },
        format: format.into(),
        priority,
        source: Source::Path(path.into(), ty.into()),
    }
}

fn age_col() -> Col {
    path_col("Age", "date", ".metadata.creationTimestamp", "", 0)
}

fn columns(rt: &ResourceType, version: &str) -> Vec<Col> {
    if !rt.is_crd
        && let Some(table) = builtin_table(&rt.group, &rt.kind)
    {
        return table
            .iter()
            .map(|c| Col {
                name: c.name.into(),
                ty: c.ty.into(),
                format: if c.name == "Name" {
                    "name".into()
                } else {
                    String::new()
                },
                priority: c.priority,
                source: Source::Computed(c.cell),
            })
            .collect();
    }
    let mut cols = vec![path_col("Name", "string", ".metadata.name", "name", 0)];
    if !rt.is_crd
        && let Some(builtin) = builtin_columns(&rt.group, &rt.kind)
    {
        // Age goes after the always-shown columns, before the wide ones.
        let mut age = Some(age_col());
        for c in builtin {
            if c.priority > 0
                && let Some(a) = age.take()
            {
                cols.push(a);
            }
            cols.push(Col {
                name: c.name.into(),
                ty: c.ty.into(),
                format: String::new(),
                priority: c.priority,
                source: Source::Computed(c.cell),
            });
        }
        cols.extend(age);
        return cols;
    }
    let printer = rt
        .version(version)
        .map(|v| v.printer_columns.clone())
        .unwrap_or_default();
    if printer.is_empty() {
        cols.push(age_col());
    }
    for c in printer {
        let g = |k: &str| {
            c.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let priority = c
            .get("priority")
            .and_then(Value::as_u64)
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(0);
        cols.push(path_col(
            &g("name"),
            &g("type"),
            &g("jsonPath"),
            &g("format"),
            priority,
        ));
    }
    cols
}

/// Builds the Table for a list of objects (or one object).
pub fn table(
    rt: &ResourceType,
    version: &str,
    items: &[Value],
    rv: &str,
    cont: Option<&str>,
    now: DateTime<Utc>,
) -> Value {
    let cols = columns(rt, version);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            json!({ "name": c.name, "type": c.ty, "format": c.format, "description": "", "priority": c.priority })
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols
                .iter()
                .map(|c| match &c.source {
                    Source::Path(path, ty) => cell(&jsonpath(o, path), ty, now),
                    Source::Computed(f) => f(o, now),
                })
                .collect();
            json!({ "cells": cells, "object": partial_metadata(o) })
        })
        .collect();
    let mut md = json!({ "resourceVersion": rv });
    if let Some(c) = cont {
        md["continue"] = json!(c);
    }
    json!({ "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows })
}

#[cfg(test)]
mod tests {
    use super::{jsonpath, typed};
    use serde_json::json;

    #[test]
    fn integer_columns_drop_the_fraction_of_numbers() {
        assert_eq!(typed(&json!(70.75), "integer"), json!(70));
        assert_eq!(typed(&json!(-1.5), "integer"), json!(-1));
        assert_eq!(typed(&json!(42), "integer"), json!(42));
        assert_eq!(typed(&json!(70.75), "number"), json!(70.75));
        assert_eq!(typed(&json!("n/a"), "integer"), json!("n/a"));
    }

    #[test]
    fn filters_select_list_items_by_field() {
        let obj = json!({"status": {"conditions": [
            {"type": "Live", "status": "False"},
            {"type": "Ready", "status": "True"}
        ]}});
        let ready = jsonpath(&obj, r#".status.conditions[?(@.type=="Ready")].status"#);
        assert_eq!(ready, vec![json!("True")]);
        let not_ready = jsonpath(&obj, r#".status.conditions[?(@.type!="Ready")].type"#);
        assert_eq!(not_ready, vec![json!("Live")]);
        assert!(jsonpath(&obj, r#".status.conditions[?(@.type=="Gone")].status"#).is_empty());
        assert_eq!(
            jsonpath(&obj, ".status.conditions[1].type"),
            vec![json!("Ready")]
        );
    }
}
