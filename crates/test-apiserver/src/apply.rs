//! Server-side apply and `metadata.managedFields` bookkeeping: every write
//! records which manager owns which fields; apply merges an applied
//! configuration, removes fields its manager stopped applying and reports
//! conflicts with other managers unless forced.

use crate::error::{ApiError, ApiResult, Cause};
use crate::fieldset::{self, FieldSet};
use serde_json::{Value, json};

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    set: FieldSet,
}

fn read_entries(obj: Option<&Value>) -> Vec<Entry> {
    let Some(list) = obj
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
    else {
        return vec![];
    };
    list.iter()
        .map(|e| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            Entry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                set: e
                    .get("fieldsV1")
                    .map(fieldset::from_fields_v1)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": fieldset::to_fields_v1(&e.set),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            md.remove("managedFields");
        } else {
            md.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who is writing, and how.
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub now: &'a str,
    pub schema: Option<&'a Value>,
}

impl Writer<'_> {
    fn status_only(&self) -> bool {
        self.subresource == "status"
    }

    fn is_mine(&self, e: &Entry, op: &str) -> bool {
        e.manager == self.manager && e.operation == op && e.subresource == self.subresource
    }
}

/// Records a non-apply write (create, update, patch): the writer takes
/// ownership of every field it changed; other managers lose those fields.
pub fn track_update(old: Option<&Value>, new: &mut Value, w: &Writer) {
    let mut entries = read_entries(old);
    let new_fields = fieldset::object_fields(new, w.schema, w.status_only());
    let old_fields = old
        .map(|o| fieldset::object_fields(o, w.schema, w.status_only()))
        .unwrap_or_default();
    let changed: FieldSet = new_fields
        .iter()
        .filter(|p| old.is_none_or(|o| fieldset::value_at(o, p) != fieldset::value_at(new, p)))
        .cloned()
        .collect();
    let removed: FieldSet = old_fields.difference(&new_fields).cloned().collect();
    if changed.is_empty() && removed.is_empty() {
        write_entries(new, &entries);
        return;
    }
    for e in entries.iter_mut().filter(|e| !w.is_mine(e, "Update")) {
        e.set
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    match entries.iter_mut().find(|e| w.is_mine(e, "Update")) {
        Some(e) => {
            e.set.extend(changed);
            e.set.retain(|p| !removed.contains(p));
            e.time = w.now.to_string();
            e.api_version = w.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: w.manager.to_string(),
            operation: "Update".into(),
            api_version: w.api_version.to_string(),
            time: w.now.to_string(),
            subresource: w.subresource.to_string(),
            set: changed,
        }),
    }
    write_entries(new, &entries);
}

/// Server-side apply of `applied` onto `live` (or onto nothing, to create).
/// `resource` and `name` are used in the conflict error.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    w: &Writer,
    force: bool,
    resource: &str,
    name: &str,
) -> ApiResult<Value> {
    let mut entries = read_entries(live);
    let new_set = fieldset::object_fields(applied, w.schema, w.status_only());
    let mut conflicts: Vec<(String, Vec<String>)> = Vec::new();
    if let Some(live) = live {
        for e in entries.iter().filter(|e| !w.is_mine(e, "Apply")) {
            for p in new_set.intersection(&e.set) {
                let (lv, av) = (fieldset::value_at(live, p), fieldset::value_at(applied, p));
                let leaf = !matches!(av, Some(Value::Object(_)));
                if leaf && lv != av {
                    let who = if e.operation == "Update" {
                        format!("\"{}\" using {}", e.manager, e.api_version)
                    } else {
                        format!("\"{}\"", e.manager)
                    };
                    conflicts.push((who, p.clone()));
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(resource, name, &conflicts));
    }
    let conflicted: FieldSet = conflicts.iter().map(|(_, p)| p.clone()).collect();
    for e in entries.iter_mut().filter(|e| !w.is_mine(e, "Apply")) {
        e.set.retain(|p| !conflicted.contains(p));
    }
    let mut result = match live {
        Some(l) => l.clone(),
        None => json!({ "metadata": {} }),
    };
    let mut to_merge = applied.clone();
    if let Some(m) = to_merge.as_object_mut() {
        if w.status_only() {
            m.retain(|k, _| k == "status");
        } else {
            m.remove("status");
        }
    }
    fieldset::merge_applied(&mut result, &to_merge, w.schema);
    let old_mine = entries
        .iter()
        .find(|e| w.is_mine(e, "Apply"))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let others: FieldSet = entries
        .iter()
        .filter(|e| !w.is_mine(e, "Apply"))
        .flat_map(|e| e.set.iter().cloned())
        .collect();
    for p in old_mine.difference(&new_set) {
        if !others.contains(p) {
            fieldset::remove_at(&mut result, p);
        }
    }
    entries.retain(|e| !w.is_mine(e, "Apply"));
    entries.push(Entry {
        manager: w.manager.to_string(),
        operation: "Apply".into(),
        api_version: w.api_version.to_string(),
        time: w.now.to_string(),
        subresource: w.subresource.to_string(),
        set: new_set,
    });
    // Apply managers come first, as the real server orders them.
    entries.sort_by_key(|e| e.operation != "Apply");
    write_entries(&mut result, &entries);
    Ok(result)
}

fn conflict_error(resource: &str, name: &str, conflicts: &[(String, Vec<String>)]) -> ApiError {
    let n = conflicts.len();
    let message = if n == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].0,
            fieldset::display(&conflicts[0].1)
        )
    } else {
        let lines: Vec<String> = conflicts
            .iter()
            .map(|(m, p)| format!("conflict with {m}: {}", fieldset::display(p)))
            .collect();
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    };
    let causes = conflicts
        .iter()
        .map(|(m, p)| {
            Cause::new(
                "FieldManagerConflict",
                fieldset::display(p),
                format!("conflict with {m}"),
            )
        })
        .collect();
    ApiError::Conflict {
        resource: resource.into(),
        name: name.into(),
        message,
        causes,
    }
}
