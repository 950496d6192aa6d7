//! CustomResourceDefinitions: turning a CRD into a served type, and the
//! structural-schema pipeline for custom objects (prune unknown fields, apply
//! defaults, validate OpenAPI constraints and CEL rules).

use crate::cel;
use crate::error::Cause;
use crate::fieldset::{ListKind, list_kind};
use crate::resources::{ResourceType, VersionInfo};
use regex::Regex;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

/// Builds the served type of a CRD, or the causes that make the CRD invalid.
pub fn resource_type(crd: &Value) -> Result<ResourceType, Vec<Cause>> {
    let mut causes = Vec::new();
    let group = s(crd, "/spec/group");
    let kind = s(crd, "/spec/names/kind");
    let plural = s(crd, "/spec/names/plural");
    for (v, f) in [
        (group, "spec.group"),
        (kind, "spec.names.kind"),
        (plural, "spec.names.plural"),
    ] {
        if v.is_empty() {
            causes.push(Cause::new("FieldValueRequired", f, "Required value"));
        }
    }
    let name = s(crd, "/metadata/name");
    if !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let mut versions = Vec::new();
    let list = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if list.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.versions",
            "Required value",
        ));
    }
    // The storage version is listed first so it is the preferred version.
    let mut sorted = list.clone();
    sorted.sort_by_key(|v| !v.get("storage").and_then(Value::as_bool).unwrap_or(false));
    for (i, v) in sorted.iter().enumerate() {
        if !v.get("served").and_then(Value::as_bool).unwrap_or(false) {
            continue;
        }
        let schema = v.pointer("/schema/openAPIV3Schema").cloned();
        if let Some(sc) = &schema {
            check_rules(
                sc,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                &mut causes,
            );
        }
        versions.push(VersionInfo {
            name: s(v, "/name").to_string(),
            schema,
            printer_columns: v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            status_subresource: v.pointer("/subresources/status").is_some(),
        });
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    let strs = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        x => x.to_string(),
    };
    Ok(ResourceType {
        group: group.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular,
        namespaced: s(crd, "/spec/scope") != "Cluster",
        short_names: strs("/spec/names/shortNames"),
        categories: strs("/spec/names/categories"),
        versions,
        is_crd: true,
        create_only: false,
    })
}

/// Rejects CEL rules that do not compile, as the real server does at CRD write time.
fn check_rules(schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    for (i, r) in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let rule = s(r, "/rule");
        if let Err(e) = cel::check(rule) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("{path}.x-kubernetes-validations[{i}].rule"),
                format!("Invalid value: \"{rule}\": {e}"),
            ));
        }
    }
    for (k, c) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        check_rules(c, &format!("{path}.properties[{k}]"), causes);
    }
    if let Some(items) = schema.get("items") {
        check_rules(items, &format!("{path}.items"), causes);
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        check_rules(ap, &format!("{path}.additionalProperties"), causes);
    }
}

/// The status a CRD gets once accepted: NamesAccepted and Established.
pub fn accepted_status(crd: &Value, now: &str) -> Value {
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool).unwrap_or(false))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let cond = |t: &str, reason: &str, msg: &str| json!({ "type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg });
    json!({
        "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or(json!({})),
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": stored,
    })
}

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Drops fields the structural schema does not declare.
pub fn prune(obj: &mut Value, schema: &Value) {
    let Some(m) = obj.as_object_mut() else { return };
    for (k, v) in m.iter_mut() {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(cs) = schema.pointer(&format!(
            "/properties/{}",
            k.replace('~', "~0").replace('/', "~1")
        )) {
            prune_value(v, cs);
        }
    }
    m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata") || known(schema, k));
}

fn known(schema: &Value, key: &str) -> bool {
    schema.get("properties").and_then(|p| p.get(key)).is_some()
        || schema
            .get("additionalProperties")
            .is_some_and(|a| a.is_object() || a.as_bool() == Some(true))
        || preserves(schema)
}

fn prune_value(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            let embedded = schema
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            for (k, c) in m.iter_mut() {
                let cs = schema
                    .get("properties")
                    .and_then(|p| p.get(k))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(cs) = cs {
                    prune_value(c, cs);
                }
            }
            m.retain(|k, _| {
                known(schema, k)
                    || (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
            });
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                items.iter_mut().for_each(|i| prune_value(i, is));
            }
        }
        _ => {}
    }
}

/// Fills in `default` values for absent properties.
pub fn default(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    if !m.contains_key(k)
                        && let Some(d) = ps.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, c) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        default(c, ps);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                m.values_mut().for_each(|c| default(c, ap));
            }
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                items.iter_mut().for_each(|i| default(i, is));
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Validates a value against its schema node, collecting causes. `old` is the
/// correlated previous value, used for CEL transition rules.
pub fn validate(
    v: &Value,
    schema: &Value,
    path: &str,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    let invalid = |causes: &mut Vec<Cause>, msg: String| {
        causes.push(Cause::new(
            "FieldValueInvalid",
            path,
            format!("Invalid value: {}: {msg}", show(v)),
        ))
    };
    if v.is_null() {
        if !schema
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            && schema.get("type").is_some()
        {
            let t = s(schema, "/type");
            invalid(
                causes,
                format!("{path} in body must be of type {t}: \"null\""),
            );
        }
        return;
    }
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(v);
        let ok = actual == t || (t == "number" && actual == "integer");
        if !(ok || (int_or_string && matches!(actual, "integer" | "string"))) {
            invalid(
                causes,
                format!("{path} in body must be of type {t}: \"{actual}\""),
            );
            return;
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        let supported: Vec<String> = e.iter().map(|x| x.to_string()).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                show(v),
                supported.join(", ")
            ),
        ));
    }
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    if let Some(x) = v.as_f64() {
        let excl_max = schema
            .get("exclusiveMaximum")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let excl_min = schema
            .get("exclusiveMinimum")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if let Some(max) = num("maximum")
            && (x > max || (excl_max && x >= max))
        {
            let rel = if excl_max {
                "less than"
            } else {
                "less than or equal to"
            };
            invalid(
                causes,
                format!("{path} in body should be {rel} {}", schema["maximum"]),
            );
        }
        if let Some(min) = num("minimum")
            && (x < min || (excl_min && x <= min))
        {
            let rel = if excl_min {
                "greater than"
            } else {
                "greater than or equal to"
            };
            invalid(
                causes,
                format!("{path} in body should be {rel} {}", schema["minimum"]),
            );
        }
    }
    if let Some(st) = v.as_str() {
        let len = st.chars().count() as f64;
        if let Some(max) = num("maxLength")
            && len > max
        {
            causes.push(Cause::new(
                "FieldValueTooLong",
                path,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(min) = num("minLength")
            && len < min
        {
            invalid(
                causes,
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && pattern(p).is_some_and(|re| !re.is_match(st))
        {
            invalid(causes, format!("{path} in body should match '{p}'"));
        }
    }
    match v {
        Value::Object(m) => validate_object(m, schema, path, old, causes),
        Value::Array(items) => validate_array(items, schema, path, old, causes),
        _ => {}
    }
    for r in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        validate_rule(r, v, path, old, causes);
    }
}

/// A schema's `pattern`, compiled once per process (None when it does not
/// compile, which the schema's check reports): every write of every
/// object validates its strings, and compiling each pattern again made a
/// write cost more than the rest of its validation.
fn pattern(source: &str) -> Option<Arc<Regex>> {
    static COMPILED: OnceLock<Mutex<HashMap<String, Option<Arc<Regex>>>>> = OnceLock::new();
    let mut compiled = COMPILED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    compiled
        .entry(source.to_string())
        .or_insert_with(|| Regex::new(source).ok().map(Arc::new))
        .clone()
}

fn validate_object(
    m: &Map<String, Value>,
    schema: &Value,
    path: &str,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    for req in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !m.contains_key(req) {
            causes.push(Cause::new(
                "FieldValueRequired",
                join(path, req),
                "Required value",
            ));
        }
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && m.len() as u64 > max
    {
        causes.push(Cause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {}: must have at most {max} items", m.len()),
        ));
    }
    for (k, c) in m {
        if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let cs = schema
            .get("properties")
            .and_then(|p| p.get(k))
            .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
        if let Some(cs) = cs {
            validate(c, cs, &join(path, k), old.and_then(|o| o.get(k)), causes);
        }
    }
}

fn validate_array(
    items: &[Value],
    schema: &Value,
    path: &str,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && items.len() as u64 > max
    {
        causes.push(Cause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {}: must have at most {max} items", items.len()),
        ));
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            path,
            format!("Invalid value: \"array\": {path} in body should have at least {min} items"),
        ));
    }
    let Some(is) = schema.get("items") else {
        return;
    };
    let kind = list_kind(Some(schema), "", items);
    let old_items = old.and_then(Value::as_array);
    for (i, item) in items.iter().enumerate() {
        let old_item = match (&kind, old_items) {
            (ListKind::Map(keys), Some(olds)) => olds
                .iter()
                .find(|o| keys.iter().all(|k| o.get(k) == item.get(k))),
            _ => None,
        };
        validate(item, is, &format!("{path}[{i}]"), old_item, causes);
    }
}

fn validate_rule(r: &Value, v: &Value, path: &str, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let rule = s(r, "/rule");
    let transition = cel::is_transition_rule(rule);
    if transition && old.is_none() {
        return;
    }
    let field = match s(r, "/fieldPath") {
        "" => path.to_string(),
        fp => format!("{path}{fp}"),
    };
    let shown = match v {
        Value::Object(_) => "\"object\"".to_string(),
        Value::Array(_) => "\"array\"".to_string(),
        x => x.to_string(),
    };
    let old = if transition { old } else { None };
    match cel::eval(rule, v, old) {
        Ok(true) => {}
        Ok(false) => {
            let msg = r
                .get("messageExpression")
                .and_then(Value::as_str)
                .and_then(|e| cel::eval_message(e, v, old))
                .or_else(|| r.get("message").and_then(Value::as_str).map(String::from))
                .unwrap_or_else(|| format!("failed rule: {rule}"));
            let reason = match s(r, "/reason") {
                "FieldValueForbidden" => "FieldValueForbidden",
                "FieldValueRequired" => "FieldValueRequired",
                "FieldValueDuplicate" => "FieldValueDuplicate",
                _ => "FieldValueInvalid",
            };
            causes.push(Cause::new(
                reason,
                field,
                format!("Invalid value: {shown}: {msg}"),
            ));
        }
        Err(e) => causes.push(Cause::new(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {shown}: rule evaluation error: {e} (rule: {rule})"),
        )),
    }
}

/// Dotted paths present in `before` but pruned from `after`.
pub fn unknown_fields(before: &Value, after: &Value) -> Vec<String> {
    fn walk(b: &Value, a: Option<&Value>, path: &str, out: &mut Vec<String>) {
        match (b, a) {
            (Value::Object(bm), Some(Value::Object(am))) => {
                for (k, v) in bm {
                    walk(v, am.get(k), &join(path, k), out);
                }
            }
            (Value::Array(bl), Some(Value::Array(al))) => {
                for (i, v) in bl.iter().enumerate() {
                    walk(v, al.get(i), &format!("{path}[{i}]"), out);
                }
            }
            (_, None) => out.push(path.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(before, Some(after), "", &mut out);
    out
}

/// Formats apiextensions' `validation/formats.go` knows in every version
/// (its 1.0 set), compared after normalisation (lower case, no `-`/`_`).
const KNOWN_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The formats of `crd`'s schemas that the API server does not know and
/// that `old` (the stored CRD an update replaces) did not use, each as the
/// warning a write returns (`unrecognized format "uint64"`). As API servers
/// before 1.35 do, a format is checked whatever the type it is on, so
/// `int32` and `int64` are reported too.
pub fn format_warnings(crd: &Value, old: Option<&Value>) -> Vec<String> {
    let before = old.map(unrecognized_formats).unwrap_or_default();
    let mut warnings: Vec<String> = unrecognized_formats(crd)
        .into_iter()
        .filter(|f| !before.contains(f))
        .map(|f| format!("unrecognized format {f:?}"))
        .collect();
    warnings.dedup();
    warnings
}

fn unrecognized_formats(crd: &Value) -> Vec<String> {
    fn walk(node: &Value, out: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(format)) = map.get("format") {
                    let normal: String = format
                        .chars()
                        .filter(|c| *c != '-' && *c != '_')
                        .collect::<String>()
                        .to_lowercase();
                    if !KNOWN_FORMATS.contains(&normal.as_str()) && !out.contains(format) {
                        out.push(format.clone());
                    }
                }
                for (key, child) in map {
                    // `format` under `properties` is a field named so.
                    if key != "format" || child.is_object() {
                        walk(child, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for version in crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            walk(schema, &mut out);
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod format_tests {
    use super::*;

    fn crd_with(formats: &[(&str, &str)]) -> Value {
        let properties: Map<String, Value> = formats
            .iter()
            .enumerate()
            .map(|(i, (ty, f))| (format!("f{i}"), json!({"type": ty, "format": f})))
            .collect();
        json!({"spec": {"versions": [{"schema": {"openAPIV3Schema": {
            "type": "object", "properties": properties}}}]}})
    }

    #[test]
    fn unknown_formats_warn_once_each_and_known_ones_do_not() {
        let crd = crd_with(&[
            ("integer", "uint64"),
            ("integer", "uint64"),
            ("integer", "int32"),
            ("string", "date-time"),
            ("string", "byte"),
        ]);
        assert_eq!(
            format_warnings(&crd, None),
            vec![
                "unrecognized format \"int32\"".to_string(),
                "unrecognized format \"uint64\"".to_string()
            ]
        );
    }

    #[test]
    fn an_update_warns_only_about_formats_it_introduces() {
        let old = crd_with(&[("integer", "uint64")]);
        let new = crd_with(&[("integer", "uint64"), ("number", "double")]);
        assert_eq!(
            format_warnings(&new, Some(&old)),
            vec!["unrecognized format \"double\"".to_string()]
        );
    }

    #[test]
    fn a_property_named_format_is_not_a_format() {
        let crd = json!({"spec": {"versions": [{"schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"format": {"type": "string"}}}}}]}});
        assert_eq!(format_warnings(&crd, None), Vec::<String>::new());
    }
}
