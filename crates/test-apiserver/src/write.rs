//! The common write pipeline every create/update/patch/apply goes through:
//! identity and server-owned metadata, status-subresource isolation,
//! defaulting, pruning, validation, generation, managedFields and the
//! finalizer-driven final delete.

use crate::apply::{self, Writer};
use crate::error::{ApiError, ApiResult, Cause};
use crate::state::{State, Target, WriteOpts};
use crate::store::Mutation;
use crate::{builtin, crd};
use regex::Regex;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// Server-owned metadata fields carried over from the stored object.
const SERVER_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

fn name_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
            .unwrap_or_else(|_| unreachable!())
    })
}

/// The object as served through `t` (apiVersion of the requested version).
pub fn view(t: &Target, mut obj: Value) -> Value {
    if crate::events::is_events_api(&t.rt.group, &t.rt.plural) {
        return crate::events::from_core(obj);
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(t.api_version()));
    }
    obj
}

fn invalid(t: &Target, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid(&t.rt.group, &t.qualified_kind(), name, causes)
}

/// Content that drives `metadata.generation`: everything but metadata (and
/// status where status is a subresource).
fn spec_view(t: &Target, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        if t.rt.has_status(&t.version) || !t.rt.is_crd {
            m.remove("status");
        }
    }
    o
}

/// Equality that ignores resourceVersion and managedFields timestamps, used to
/// turn no-op writes into no-ops (no new resourceVersion, no watch event).
fn same(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            md.remove("resourceVersion");
            if let Some(Value::Array(mf)) = md.get_mut("managedFields") {
                for e in mf.iter_mut().filter_map(Value::as_object_mut) {
                    e.remove("time");
                }
            }
        }
        v
    };
    strip(a) == strip(b)
}

/// Prepares `new` for storage given the stored `old`. `applied` is true when
/// managedFields were already computed by server-side apply.
pub fn prepare(
    st: &State,
    t: &Target,
    old: Option<&Value>,
    mut new: Value,
    o: &WriteOpts,
    applied: bool,
) -> ApiResult<Mutation> {
    let now = st.clock.now_rfc3339();
    if !new.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be a JSON object".into(),
        ));
    }
    if crate::events::is_events_api(&t.rt.group, &t.rt.plural) {
        // Validated in its own API's shape, stored as the core Event.
        let causes = builtin::validate(&t.rt.group, &t.rt.kind, &new);
        if !causes.is_empty() {
            return Err(invalid(t, &t.name, causes));
        }
        let core = crate::events::core_target(st, t)?;
        let old = old.cloned().map(crate::events::to_core);
        return prepare(
            st,
            &core,
            old.as_ref(),
            crate::events::to_core(new),
            o,
            applied,
        );
    }
    if let Some(k) = new.get("kind").and_then(Value::as_str)
        && k != t.rt.kind
    {
        return Err(ApiError::BadRequest(format!(
            "the kind \"{k}\" does not match the expected kind \"{}\"",
            t.rt.kind
        )));
    }
    new["apiVersion"] = json!(t.api_version());
    new["kind"] = json!(t.rt.kind);
    if !new.get("metadata").is_some_and(Value::is_object) {
        new["metadata"] = json!({});
    }
    let name = t.name.clone();
    new["metadata"]["name"] = json!(name);
    if t.rt.namespaced {
        new["metadata"]["namespace"] = json!(t.namespace);
    } else if let Some(md) = new["metadata"].as_object_mut() {
        md.remove("namespace");
    }
    // RBAC objects only need to be path segments (`system:discovery`).
    let path_segment = t.rt.group == "rbac.authorization.k8s.io"
        && !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '%']);
    if !path_segment && (name.len() > 253 || !name_re().is_match(&name)) {
        return Err(invalid(
            t,
            &name,
            vec![Cause::new(
                "FieldValueInvalid",
                "metadata.name",
                format!(
                    "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                ),
            )],
        ));
    }
    if let Some(old) = old {
        let want = new
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let have = old
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !want.is_empty() && want != have {
            return Err(ApiError::Conflict {
                resource: t.rt.qualified(),
                name: name.clone(),
                message: format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    t.rt.qualified()
                ),
                causes: vec![],
            });
        }
        for f in SERVER_META {
            match old.pointer(&format!("/metadata/{f}")) {
                Some(v) => new["metadata"][*f] = v.clone(),
                None => {
                    if let Some(md) = new["metadata"].as_object_mut() {
                        md.remove(*f);
                    }
                }
            }
        }
    } else {
        if let Some(md) = new["metadata"].as_object_mut() {
            md.remove("resourceVersion");
            md.remove("deletionTimestamp");
        }
        new["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
        new["metadata"]["creationTimestamp"] = json!(now);
        new["metadata"]["generation"] = json!(1);
    }
    isolate_status(t, old, &mut new);
    if let Some(md) = new["metadata"].as_object_mut() {
        md.remove("selfLink");
    }
    let group = t.rt.group.clone();
    let kind = t.rt.kind.clone();
    let mut causes: Vec<Cause> = crate::annotations::validate(&new).into_iter().collect();
    if let Some(schema) = t.schema().cloned() {
        let before = new.clone();
        crd::prune(&mut new, &schema);
        if o.strict && before != new {
            let unknown = crd::unknown_fields(&before, &new);
            return Err(ApiError::BadRequest(format!(
                "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                kind,
                t.version,
                kind,
                unknown
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        crd::default(&mut new, &schema);
        let old_view = old.map(|o| view(t, o.clone()));
        crd::validate(&new, &schema, "", old_view.as_ref(), &mut causes);
    } else if !t.rt.is_crd {
        builtin::apply_defaults(&group, &kind, &mut new, || st.cluster_ip());
        causes.extend(builtin::validate(&group, &kind, &new));
    }
    if group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition" && causes.is_empty() {
        match crd::resource_type(&new) {
            Ok(_) => new["status"] = crd::accepted_status(&new, &now),
            Err(c) => causes.extend(c),
        }
    }
    if !causes.is_empty() {
        return Err(invalid(t, &name, causes));
    }
    if let Some(old) = old {
        let bump = (t.rt.is_crd || builtin::has_spec_generation(&kind))
            && spec_view(t, old) != spec_view(t, &new);
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        new["metadata"]["generation"] = json!(if bump { g + 1 } else { g });
    }
    if !applied {
        let writer = Writer {
            manager: &o.manager,
            api_version: &t.api_version(),
            subresource: &t.sub,
            now: &now,
            schema: t.schema(),
        };
        track_preserving(old, &mut new, &writer);
    }
    let deleting = old.is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some());
    let no_finalizers = new
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|f| f.is_empty());
    if deleting && no_finalizers {
        return Ok(Mutation::Delete);
    }
    if let Some(old) = old
        && same(old, &new)
    {
        return Ok(Mutation::Keep);
    }
    Ok(Mutation::Put(new))
}

/// Records managedFields for an update; clients that send managedFields
/// themselves (e.g. `[]` to reset) are honoured.
fn track_preserving(old: Option<&Value>, new: &mut Value, w: &Writer) {
    let sent = new.pointer("/metadata/managedFields").cloned();
    match sent {
        Some(Value::Array(a)) if a.is_empty() => {
            if let Some(md) = new["metadata"].as_object_mut() {
                md.remove("managedFields");
            }
        }
        Some(_) => {}
        None => {
            if let Some(mf) = old
                .and_then(|o| o.pointer("/metadata/managedFields"))
                .cloned()
            {
                new["metadata"]["managedFields"] = mf;
            }
        }
    }
    let base = old.map(|o| {
        let mut b = o.clone();
        if let Some(mf) = new.pointer("/metadata/managedFields").cloned() {
            b["metadata"]["managedFields"] = mf;
        } else if let Some(md) = b["metadata"].as_object_mut() {
            md.remove("managedFields");
        }
        b
    });
    apply::track_update(base.as_ref(), new, w);
}

/// With a status subresource, the main resource cannot change status and
/// `/status` can change nothing but status (and labels/annotations).
fn isolate_status(t: &Target, old: Option<&Value>, new: &mut Value) {
    if !t.rt.has_status(&t.version) {
        return;
    }
    if t.sub == "status" {
        let Some(old) = old else { return };
        let mut out = old.clone();
        out["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        if out["status"].is_null()
            && let Some(m) = out.as_object_mut()
        {
            m.remove("status");
        }
        if let Some(rv) = new.pointer("/metadata/resourceVersion").cloned() {
            out["metadata"]["resourceVersion"] = rv;
        }
        out["apiVersion"] = new["apiVersion"].clone();
        if let Some(mf) = new.pointer("/metadata/managedFields").cloned() {
            out["metadata"]["managedFields"] = mf;
        }
        *new = out;
    } else if let Some(m) = new.as_object_mut() {
        match old.and_then(|o| o.get("status")) {
            Some(s) => {
                m.insert("status".into(), s.clone());
            }
            None => {
                if t.rt.is_crd {
                    m.remove("status");
                }
            }
        }
    }
}
