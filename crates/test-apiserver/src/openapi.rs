//! OpenAPI v3 documents (`/openapi/v3` index and one document per
//! group/version). They carry what kubectl needs: PATCH operations that
//! advertise the `fieldValidation` query parameter (so kubectl validates on
//! the server instead of downloading OpenAPI v2), and CRD schemas tagged with
//! `x-kubernetes-group-version-kind` for `kubectl explain`; built-in kinds
//! get their full schemas from `builtin_schemas`. Built-in PATCH
//! operations carry no request body, which makes kubectl compute strategic
//! merge patches from its compiled-in types instead of from these documents.

use crate::builtin_schemas;
use crate::resources::ResourceType;
use crate::state::State;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Serves `/openapi/v3[/...]`; `None` means 404.
pub fn serve(st: &State, rest: &[&str], _q: &HashMap<String, String>) -> Option<Value> {
    match rest {
        ["v3"] => Some(index(st)),
        ["v3", path @ ..] => {
            let key = path.join("/");
            gv_doc(st, &key)
        }
        _ => None,
    }
}

fn hash(v: &Value) -> String {
    let mut h = DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

fn index(st: &State) -> Value {
    let mut paths = Map::new();
    for (g, versions) in st.registry.groups() {
        for v in versions {
            let key = gv_key(&g, &v);
            let h = gv_doc(st, &key).map(|d| hash(&d)).unwrap_or_default();
            paths.insert(
                key.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={h}") }),
            );
        }
    }
    json!({ "paths": paths })
}

fn schema_name(rt: &ResourceType, version: &str) -> String {
    let group = if rt.group.is_empty() {
        "io.k8s.api.core".to_string()
    } else {
        rt.group.split('.').rev().collect::<Vec<_>>().join(".")
    };
    format!("{group}.{version}.{}", rt.kind)
}

fn gvk(rt: &ResourceType, version: &str) -> Value {
    json!([{ "group": rt.group, "version": version, "kind": rt.kind }])
}

fn params() -> Value {
    let q = |n: &str, d: &str| json!({ "name": n, "in": "query", "description": d, "schema": { "type": "string", "uniqueItems": true } });
    json!([
        q(
            "dryRun",
            "When present, indicates that modifications should not be persisted."
        ),
        q(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes."
        ),
        q(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields."
        ),
        q("force", "Force is going to \"force\" Apply requests."),
    ])
}

fn gv_doc(st: &State, key: &str) -> Option<Value> {
    let types: Vec<_> = st
        .registry
        .all()
        .into_iter()
        .flat_map(|rt| {
            rt.versions
                .iter()
                .map(|v| (rt.clone(), v.name.clone()))
                .collect::<Vec<_>>()
        })
        .filter(|(rt, v)| gv_key(&rt.group, v) == key)
        .collect();
    if types.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(OBJECT_META.into(), object_meta());
    let mut generator = builtin_schemas::Generator::default();
    let mut tagged = Vec::new();
    for (rt, v) in &types {
        let ns = if rt.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let path = format!("/{key}{ns}/{}/{{name}}", rt.plural);
        let name = schema_name(rt, v);
        let mut op = json!({
            "operationId": format!("patch{}", rt.kind),
            "parameters": params(),
            "responses": { "200": { "description": "OK" } },
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk(rt, v)[0].clone(),
        });
        if rt.is_crd {
            let body = json!({ "schema": { "$ref": format!("#/components/schemas/{name}") } });
            op["requestBody"] = json!({ "content": {
                "application/json-patch+json": body,
                "application/merge-patch+json": body,
                "application/apply-patch+yaml": body,
            }});
        }
        paths.insert(path, json!({ "patch": op }));
        if !rt.is_crd
            && let Some(builtin) = generator.kind(&rt.group, &rt.kind)
        {
            tagged.push((builtin, gvk(rt, v)));
            continue;
        }
        let mut schema = rt
            .version(v)
            .and_then(|x| x.schema.clone())
            .unwrap_or_else(|| json!({ "type": "object", "description": format!("{} is a built-in type.", rt.kind) }));
        decorate(&mut schema);
        schema["x-kubernetes-group-version-kind"] = gvk(rt, v);
        schemas.insert(name, schema);
    }
    // Built-in kinds (and everything they reference) from k8s-openapi;
    // this also replaces the stub ObjectMeta with the full one.
    schemas.extend(generator.into_schemas());
    for (name, kind) in tagged {
        if let Some(s) = schemas.get_mut(&name) {
            s["x-kubernetes-group-version-kind"] = kind;
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.32.0" },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}

/// Adds the standard apiVersion/kind/metadata properties a served schema has.
fn decorate(schema: &mut Value) {
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema["properties"] = json!({});
    }
    let props = &mut schema["properties"];
    props["apiVersion"] = json!({ "type": "string", "description": "APIVersion defines the versioned schema of this representation of an object." });
    props["kind"] = json!({ "type": "string", "description": "Kind is a string value representing the REST resource this object represents." });
    props["metadata"] = json!({
        "description": "Standard object's metadata.",
        "allOf": [{ "$ref": format!("#/components/schemas/{OBJECT_META}") }],
        "default": {},
    });
}

fn object_meta() -> Value {
    let s = |d: &str| json!({ "type": "string", "description": d });
    let m = |d: &str| json!({ "type": "object", "description": d, "additionalProperties": { "type": "string", "default": "" } });
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": s("Name must be unique within a namespace."),
            "generateName": s("GenerateName is an optional prefix, used by the server, to generate a unique name."),
            "namespace": s("Namespace defines the space within which each name must be unique."),
            "uid": s("UID is the unique in time and space value for this object."),
            "resourceVersion": s("An opaque value that represents the internal version of this object."),
            "generation": { "type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state." },
            "creationTimestamp": s("CreationTimestamp is a timestamp representing the server time when this object was created."),
            "deletionTimestamp": s("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."),
            "labels": m("Map of string keys and values that can be used to organize and categorize objects."),
            "annotations": m("Annotations is an unstructured key value map stored with a resource."),
            "finalizers": { "type": "array", "items": { "type": "string", "default": "" }, "description": "Must be empty before the object is deleted from the registry." },
            "ownerReferences": { "type": "array", "items": { "type": "object" }, "description": "List of objects depended by this object." },
            "managedFields": { "type": "array", "items": { "type": "object" }, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow." },
        },
    })
}
