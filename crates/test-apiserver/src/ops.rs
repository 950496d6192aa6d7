//! Object operations (get, list, create, update, patch, apply, delete) on top
//! of the store, independent of HTTP so in-process controllers use them too.

use crate::apply::{self, Writer};
use crate::crd;
use crate::error::{ApiError, ApiResult};
use crate::patch::{self, PatchType};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::{DeleteOpts, State, Target, WriteOpts};
use crate::store::{Gr, Mutation};
use crate::write::{prepare, view};
use serde_json::{Value, json};

fn not_found(t: &Target) -> ApiError {
    ApiError::NotFound {
        resource: t.rt.qualified(),
        name: t.name.clone(),
    }
}

/// Reads one object.
pub fn get(st: &State, t: &Target) -> ApiResult<Value> {
    st.store
        .get(&t.gr(), &t.namespace, &t.name)
        .map(|o| view(t, o))
        .ok_or_else(|| not_found(t))
}

/// List parameters.
#[derive(Default)]
pub struct ListOpts {
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// A page of a list.
pub struct Page {
    pub items: Vec<Value>,
    pub rv: u64,
    pub continue_token: Option<String>,
    pub remaining: usize,
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Lists objects matching the selectors, paginated by (namespace, name).
pub fn list(st: &State, t: &Target, o: &ListOpts) -> ApiResult<Page> {
    let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
    let (all, rv) = st.store.list(&t.gr(), ns);
    let fields = o
        .fields
        .as_ref()
        .map(|s| crate::events::stored_fields(t, s));
    let mut items: Vec<Value> = all
        .into_iter()
        .filter(|x| o.labels.as_ref().is_none_or(|s| s.matches(x)))
        .filter(|x| fields.as_ref().is_none_or(|s| s.matches(x)))
        .map(|x| view(t, x))
        .collect();
    let key = |x: &Value| {
        let g = |p: &str| {
            x.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        format!("{}/{}", g("/metadata/namespace"), g("/metadata/name"))
    };
    if let Some(tok) = &o.continue_token {
        let decoded =
            unhex(tok).ok_or_else(|| ApiError::BadRequest("invalid continue token".into()))?;
        let (tok_rv, after) = decoded
            .split_once('|')
            .ok_or_else(|| ApiError::BadRequest("invalid continue token".into()))?;
        let tok_rv: u64 = tok_rv
            .parse()
            .map_err(|_| ApiError::BadRequest("invalid continue token".into()))?;
        if !st.store.is_retained(tok_rv) {
            return Err(ApiError::Gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
            ));
        }
        items.retain(|x| key(x).as_str() > after);
    }
    let mut continue_token = None;
    let mut remaining = 0;
    if let Some(limit) = o.limit.filter(|l| *l > 0)
        && items.len() > limit
    {
        remaining = items.len() - limit;
        items.truncate(limit);
        continue_token = items.last().map(|x| hex(&format!("{rv}|{}", key(x))));
    }
    Ok(Page {
        items,
        rv,
        continue_token,
        remaining,
    })
}

fn ensure_namespace(st: &State, t: &Target) -> ApiResult<()> {
    if !t.rt.namespaced {
        return Ok(());
    }
    if t.namespace.is_empty() {
        return Err(ApiError::BadRequest(
            "a namespace is required for this resource".into(),
        ));
    }
    if st
        .store
        .get(&Gr::new("", "namespaces"), "", &t.namespace)
        .is_none()
    {
        return Err(ApiError::NotFound {
            resource: "namespaces".into(),
            name: t.namespace.clone(),
        });
    }
    Ok(())
}

fn run(
    st: &State,
    t: &Target,
    dry_run: bool,
    f: impl FnOnce(Option<&Value>) -> ApiResult<Mutation>,
) -> ApiResult<Value> {
    let mut dry = None;
    let res = st.store.mutate(&t.gr(), &t.namespace, &t.name, |old| {
        let m = f(old)?;
        if dry_run {
            dry = Some(match &m {
                Mutation::Put(v) => v.clone(),
                _ => old.cloned().unwrap_or(Value::Null),
            });
            return Ok(Mutation::Keep);
        }
        Ok(m)
    })?;
    if let Some(d) = dry {
        return Ok(view(t, d));
    }
    let obj = res.ok_or_else(|| not_found(t))?;
    after_write(st, t, &obj);
    Ok(view(t, obj))
}

/// Five random characters of `[0-9a-f]`, as the API server adds to a
/// `generateName` (and the ServiceAccount plugin to a volume's name).
pub(crate) fn random_suffix() -> String {
    uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(5)
        .collect()
}

/// Creates an object (POST to a collection).
pub fn create(st: &State, t: &Target, mut body: Value, o: &WriteOpts) -> ApiResult<Value> {
    let mut t = t.clone();
    let md = body.get("metadata").cloned().unwrap_or(json!({}));
    let given = md
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let prefix = md
        .get("generateName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if given.is_empty() && prefix.is_empty() {
        return Err(ApiError::invalid(
            &t.rt.group,
            &t.qualified_kind(),
            "",
            vec![crate::error::Cause::new(
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required",
            )],
        ));
    }
    if let Some(ns) = md.get("namespace").and_then(Value::as_str)
        && t.rt.namespaced
        && !ns.is_empty()
        && ns != t.namespace
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    // Admission runs before a name is generated, so its refusals name the
    // object by its prefix (`pods "web-7c5d-" is forbidden`), as
    // kube-apiserver's do: the same refusal reads the same every time.
    let generated = given.is_empty();
    t.name = if generated { prefix.clone() } else { given };
    ensure_namespace(st, &t)?;
    crate::admission::admit_create(st, &t, &mut body)?;
    if generated {
        t.name = format!("{prefix}{}", random_suffix());
        body["metadata"]["name"] = json!(t.name);
    }
    let (rq, nm) = (t.rt.qualified(), t.name.clone());
    run(st, &t, o.dry_run, |old| {
        if old.is_some() {
            return Err(ApiError::AlreadyExists {
                resource: rq,
                name: nm,
            });
        }
        prepare(st, &t, None, body, o, false)
    })
}

/// Replaces an object (PUT).
pub fn update(st: &State, t: &Target, body: Value, o: &WriteOpts) -> ApiResult<Value> {
    if let Some(n) = body.pointer("/metadata/name").and_then(Value::as_str)
        && n != t.name
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({})",
            t.name
        )));
    }
    run(st, t, o.dry_run, |old| {
        let old = old.ok_or_else(|| not_found(t))?;
        prepare(st, t, Some(&view(t, old.clone())), body, o, false)
    })
}

/// Patches an object with any of the four patch types.
pub fn patch(
    st: &State,
    t: &Target,
    ty: PatchType,
    body: &[u8],
    o: &WriteOpts,
) -> ApiResult<Value> {
    if ty == PatchType::Apply {
        return server_side_apply(st, t, body, o);
    }
    if ty == PatchType::Strategic && t.rt.is_crd {
        return Err(ApiError::UnsupportedMediaType(
            "strategic merge patch is not supported for custom resources".into(),
        ));
    }
    let parsed: Option<Value> = match ty {
        PatchType::Json => None,
        _ => Some(
            serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("invalid patch body: {e}")))?,
        ),
    };
    run(st, t, o.dry_run, |old| {
        let old = view(t, old.ok_or_else(|| not_found(t))?.clone());
        let patched = match (ty, &parsed) {
            (PatchType::Merge, Some(p)) => patch::merge_patch(&old, p),
            (PatchType::Strategic, Some(p)) => patch::strategic_merge(&old, p)?,
            _ => patch::json_patch(&old, body)?,
        };
        prepare(st, t, Some(&old), patched, o, false)
    })
}

fn server_side_apply(st: &State, t: &Target, body: &[u8], o: &WriteOpts) -> ApiResult<Value> {
    if o.manager.is_empty() {
        return Err(ApiError::BadRequest(
            "PATCH, application/apply-patch+yaml requests require a fieldManager".into(),
        ));
    }
    let applied: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
    let name = applied
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !name.is_empty() && name != t.name {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            t.name
        )));
    }
    for f in ["apiVersion", "kind"] {
        if applied
            .get(f)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::BadRequest(format!(
                "{f} must be set in an apply request"
            )));
        }
    }
    ensure_namespace(st, t)?;
    let now = st.clock.now_rfc3339();
    run(st, t, o.dry_run, |old| {
        let old = old.map(|x| view(t, x.clone()));
        let w = Writer {
            manager: &o.manager,
            api_version: &t.api_version(),
            subresource: &t.sub,
            now: &now,
            schema: t.schema(),
        };
        // Apply's merge must see the applied config already pruned and defaulted
        // the same way the stored object is, so ownership paths line up.
        let mut cfg = applied.clone();
        if let Some(schema) = t.schema() {
            crd::prune(&mut cfg, schema);
        }
        let merged = apply::apply(old.as_ref(), &cfg, &w, o.force, &t.rt.qualified(), &t.name)?;
        prepare(st, t, old.as_ref(), merged, o, true)
    })
}

/// Deletes an object, honouring finalizers and propagation policy.
pub fn delete(st: &State, t: &Target, o: &DeleteOpts) -> ApiResult<Value> {
    let now = st.clock.now_rfc3339();
    let mut deleted = false;
    let out = run(st, t, o.dry_run, |old| {
        let old = old.ok_or_else(|| not_found(t))?;
        let md = old.get("metadata").cloned().unwrap_or(json!({}));
        let uid = md.get("uid").and_then(Value::as_str).unwrap_or_default();
        if o.precondition_uid.as_deref().is_some_and(|u| u != uid) {
            return Err(ApiError::Conflict {
                resource: t.rt.qualified(),
                name: t.name.clone(),
                message: format!(
                    "Precondition failed: UID in precondition: {}, UID in object meta: {uid}",
                    o.precondition_uid.clone().unwrap_or_default()
                ),
                causes: vec![],
            });
        }
        let rv = md
            .get("resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if o.precondition_rv.as_deref().is_some_and(|r| r != rv) {
            return Err(ApiError::Conflict {
                resource: t.rt.qualified(),
                name: t.name.clone(),
                message: "Precondition failed: ResourceVersion in precondition does not match"
                    .into(),
                causes: vec![],
            });
        }
        let mut finalizers: Vec<Value> = md
            .get("finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let extra = match o.propagation.as_str() {
            "Foreground" => Some("foregroundDeletion"),
            "Orphan" => Some("orphan"),
            _ => None,
        };
        if let Some(f) = extra
            && !finalizers.contains(&json!(f))
        {
            finalizers.push(json!(f));
        }
        // A pod a kubelet runs goes gracefully: it stays, terminating,
        // until the kubelet has stopped its containers and deletes it.
        if let Some(grace) = pod_grace(t, old, o) {
            if md.get("deletionTimestamp").is_some() {
                return Ok(Mutation::Keep);
            }
            let mut new = old.clone();
            new["metadata"]["deletionTimestamp"] = json!(now);
            new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            return Ok(Mutation::Put(new));
        }
        if finalizers.is_empty() {
            deleted = true;
            return Ok(Mutation::Delete);
        }
        let mut new = old.clone();
        new["metadata"]["finalizers"] = Value::Array(finalizers);
        if md.get("deletionTimestamp").is_none() {
            new["metadata"]["deletionTimestamp"] = json!(now);
            new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
        if new == *old {
            Ok(Mutation::Keep)
        } else {
            Ok(Mutation::Put(new))
        }
    })?;
    if deleted && !o.dry_run {
        after_delete(st, t, &out);
    }
    Ok(out)
}

/// The grace period of a pod bound to a node (the harness kubelet's), as
/// kube-apiserver gives it: the request's, else the pod's
/// `terminationGracePeriodSeconds`, else 30; `None` for any other object,
/// a pod no kubelet runs, and a grace period of 0.
fn pod_grace(t: &Target, pod: &Value, o: &DeleteOpts) -> Option<i64> {
    if !t.rt.group.is_empty() || t.rt.kind != "Pod" || pod.pointer("/spec/nodeName").is_none() {
        return None;
    }
    let grace = o.grace_period_seconds.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
    });
    (grace > 0).then_some(grace)
}

/// Side effects of a stored write: CRDs (re)register their served type.
fn after_write(st: &State, t: &Target, obj: &Value) {
    if t.rt.group == "apiextensions.k8s.io" && t.rt.kind == "CustomResourceDefinition" {
        if let Ok(rt) = crd::resource_type(obj) {
            st.registry.upsert_crd(rt);
        }
    } else if t.rt.group.is_empty()
        && t.rt.kind == "Namespace"
        && obj.pointer("/metadata/deletionTimestamp").is_none()
    {
        ensure_default_service_account(st, &t.name);
        ensure_root_ca(st, &t.name);
    }
}

/// The root CA publisher: `kube-root-ca.crt` with the CA in every namespace.
fn ensure_root_ca(st: &State, ns: &str) {
    let gr = Gr::new("", "configmaps");
    if st.store.get(&gr, ns, crate::admission::ROOT_CA).is_some() {
        return;
    }
    if let Some(rt) = st.registry.by_kind("", "ConfigMap") {
        let t = Target {
            rt,
            version: "v1".into(),
            namespace: ns.into(),
            name: crate::admission::ROOT_CA.into(),
            sub: String::new(),
        };
        let o = WriteOpts {
            manager: "kube-controller-manager".into(),
            ..Default::default()
        };
        let cm = json!({
            "metadata": { "name": crate::admission::ROOT_CA },
            "data": { "ca.crt": st.auth.pki.ca_pem },
        });
        let _ = create(st, &t, cm, &o);
    }
}

fn ensure_default_service_account(st: &State, ns: &str) {
    let gr = Gr::new("", "serviceaccounts");
    if st.store.get(&gr, ns, "default").is_some() {
        return;
    }
    if let Some(rt) = st.registry.by_kind("", "ServiceAccount") {
        let t = Target {
            rt,
            version: "v1".into(),
            namespace: ns.into(),
            name: "default".into(),
            sub: String::new(),
        };
        let o = WriteOpts {
            manager: "kube-controller-manager".into(),
            ..Default::default()
        };
        let _ = create(st, &t, json!({ "metadata": { "name": "default" } }), &o);
    }
}

/// Cascades after a final delete: a CRD takes its objects with it, a namespace its contents.
fn after_delete(st: &State, t: &Target, obj: &Value) {
    if t.rt.group == "apiextensions.k8s.io" && t.rt.kind == "CustomResourceDefinition" {
        let group = obj
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let plural = obj
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let gr = Gr::new(group, plural);
        for o in st.store.list(&gr, None).0 {
            let ns = o
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let n = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let _ = st.store.mutate(&gr, &ns, &n, |_| Ok(Mutation::Delete));
        }
        st.registry.remove_crd(group, plural);
    } else if t.rt.group.is_empty() && t.rt.kind == "Namespace" {
        for rt in st.registry.all().into_iter().filter(|r| r.namespaced) {
            let Some(v) = rt.versions.first().map(|v| v.name.clone()) else {
                continue;
            };
            // events.k8s.io's Events are the core ones, deleted once.
            if crate::events::is_events_api(&rt.group, &rt.plural) {
                continue;
            }
            let gr = Gr::new(&rt.group, &rt.plural);
            for o in st.store.list(&gr, Some(&t.name)).0 {
                let n = o
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let dt = Target {
                    rt: rt.clone(),
                    version: v.clone(),
                    namespace: t.name.clone(),
                    name: n,
                    sub: String::new(),
                };
                let _ = delete(st, &dt, &DeleteOpts::default());
            }
        }
    }
}
