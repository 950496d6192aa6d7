//! Garbage collector: deletes objects whose owners are all gone (background
//! propagation), deletes dependents of owners being deleted in the
//! foreground and then releases them, and orphans dependents for the
//! `orphan` finalizer. It re-sweeps after the store changes in a way that
//! concerns it.

use crate::state::{DeleteOpts, State, Target, WriteOpts};
use crate::store::{Event, EventType};
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

/// One pass over all objects; returns whether an object is still being
/// deleted (so that any later change may let the collector release it).
pub fn sweep(st: &State) -> bool {
    let all = st.store.list_all_metadata();
    let by_uid: HashMap<String, &Value> = all
        .iter()
        .map(|(_, o)| (meta(o, "uid").to_string(), o))
        .collect();
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
            let _ = ops::patch(st, &t, PatchType::Merge, patch.to_string().as_bytes(), &wo);
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
            let _ = ops::delete(st, &t, &d);
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
        } else if !has_dependents && fins.iter().any(|f| f == "orphan") {
            remove_finalizer(st, &t, o, "orphan");
        }
    }
    all.iter()
        .any(|(_, o)| !meta(o, "deletionTimestamp").is_empty())
}

/// Whether a change can give the collector work: something was deleted
/// (its dependents may be orphans now, a deleting owner may have no
/// dependents left), an object has owners (a new dependent, or owners
/// changed), or an object is being deleted (foreground and orphan
/// finalizers). Any other change, a status write above all, cannot, and
/// sweeping the whole store after each of them made every write cost as
/// much as the store's size.
fn concerns_collection(event: &Event) -> bool {
    let metadata = event.object.get("metadata");
    let has = |field: &str| {
        metadata
            .and_then(|m| m.get(field))
            .is_some_and(|v| !v.is_null())
    };
    event.kind == EventType::Deleted || has("ownerReferences") || has("deletionTimestamp")
}

/// Runs the collector until the store's event stream closes: one sweep
/// after each run of changes that concerns it, after a lag (when what was
/// missed is unknown), and after every change while an object is being
/// deleted (a dependent that loses its owner reference no longer names
/// the owner that waits for it).
pub async fn run(st: State) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let mut rx = st.store.subscribe();
    let mut deleting = false;
    loop {
        let mut due = match rx.recv().await {
            Ok(event) => deleting || concerns_collection(&event),
            Err(RecvError::Lagged(_)) => true,
            Err(RecvError::Closed) => return,
        };
        loop {
            match rx.try_recv() {
                Ok(event) => due |= concerns_collection(&event),
                Err(TryRecvError::Lagged(_)) => due = true,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
        if due {
            deleting = sweep(&st);
        }
    }
}
