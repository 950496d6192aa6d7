//! Garbage collector: deletes objects whose owners are all gone (background
//! propagation), deletes dependents of owners being deleted in the
//! foreground and then releases them, and orphans dependents for the
//! `orphan` finalizer. It re-sweeps after every store change.

use crate::state::{DeleteOpts, State, Target, WriteOpts};
use crate::{ops, patch::PatchType};
use serde_json::{Value, json};
use std::collections::HashMap;

fn meta<'a>(o: &'a Value, f: &str) -> &'a str {
    o.pointer(&format!("/metadata/{f}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn target_of(st: &State, group: &str, plural: &str, o: &Value) -> Option<Target> {
    let rt = st
        .registry
        .all()
        .into_iter()
        .find(|t| t.group == group && t.plural == plural)?;
    let version = rt.versions.first()?.name.clone();
    Some(Target {
        rt,
        version,
        namespace: meta(o, "namespace").into(),
        name: meta(o, "name").into(),
        sub: String::new(),
    })
}

fn finalizers(o: &Value) -> Vec<String> {
    o.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn owner_uids(o: &Value) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn remove_finalizer(st: &State, t: &Target, o: &Value, f: &str) {
    let rest: Vec<String> = finalizers(o).into_iter().filter(|x| x != f).collect();
    let patch = json!({ "metadata": { "finalizers": rest, "resourceVersion": meta(o, "resourceVersion") } });
    let wo = WriteOpts {
        manager: "garbage-collector".into(),
        ..Default::default()
    };
    let _ = ops::patch(st, t, PatchType::Merge, patch.to_string().as_bytes(), &wo);
}

/// One pass over all objects; returns whether it changed anything.
pub fn sweep(st: &State) -> bool {
    let all = st.store.list_all_metadata();
    let by_uid: HashMap<String, &Value> = all
        .iter()
        .map(|(_, o)| (meta(o, "uid").to_string(), o))
        .collect();
    let mut changed = false;
    for (gr, o) in &all {
        let owners = owner_uids(o);
        if owners.is_empty() || !meta(o, "deletionTimestamp").is_empty() {
            continue;
        }
        let alive: Vec<&&Value> = owners.iter().filter_map(|u| by_uid.get(u)).collect();
        let foreground = alive
            .iter()
            .any(|w| finalizers(w).iter().any(|f| f == "foregroundDeletion"));
        let orphaning: Vec<String> = alive
            .iter()
            .filter(|w| finalizers(w).iter().any(|f| f == "orphan"))
            .map(|w| meta(w, "uid").to_string())
            .collect();
        let Some(t) = target_of(st, &gr.group, &gr.plural, o) else {
            continue;
        };
        if !orphaning.is_empty() {
            let refs: Vec<Value> = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|r| {
                    !orphaning
                        .iter()
                        .any(|u| r.get("uid").and_then(Value::as_str) == Some(u))
                })
                .cloned()
                .collect();
            let patch = json!({ "metadata": { "ownerReferences": refs } });
            let wo = WriteOpts {
                manager: "garbage-collector".into(),
                ..Default::default()
            };
            changed |=
                ops::patch(st, &t, PatchType::Merge, patch.to_string().as_bytes(), &wo).is_ok();
        } else if alive.is_empty() || foreground {
            let propagation = if foreground {
                "Foreground"
            } else {
                "Background"
            };
            let d = DeleteOpts {
                propagation: propagation.into(),
                ..Default::default()
            };
            changed |= ops::delete(st, &t, &d).is_ok();
        }
    }
    for (gr, o) in &all {
        if meta(o, "deletionTimestamp").is_empty() {
            continue;
        }
        let uid = meta(o, "uid");
        let has_dependents = all
            .iter()
            .any(|(_, d)| owner_uids(d).iter().any(|u| u == uid));
        let Some(t) = target_of(st, &gr.group, &gr.plural, o) else {
            continue;
        };
        let fins = finalizers(o);
        if !has_dependents && fins.iter().any(|f| f == "foregroundDeletion") {
            remove_finalizer(st, &t, o, "foregroundDeletion");
            changed = true;
        } else if !has_dependents && fins.iter().any(|f| f == "orphan") {
            remove_finalizer(st, &t, o, "orphan");
            changed = true;
        }
    }
    changed
}

/// Runs the collector until the store's event stream closes.
pub async fn run(st: State) {
    let mut rx = st.store.subscribe();
    loop {
        match rx.recv().await {
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                while rx.try_recv().is_ok() {}
                sweep(&st);
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}
