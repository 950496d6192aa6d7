//! Closed CRD schemas for the worker's largest core/v1 fields: `volumes`,
//! `affinity` and `topologySpreadConstraints`.
//!
//! The operator reads a CdcStream into k8s-openapi types, and serde drops a
//! key those do not know: a volume with `persistentVolumeClam:` would reach
//! the pod with its name alone, which Kubernetes makes an `emptyDir`, and
//! the checkpoint would land on a volume the next pod loses. So these
//! schemas list every field (the API server refuses an unknown one under
//! kubectl's default `--validate=strict`, and prunes it otherwise), and a
//! CEL rule requires each volume to have exactly one source.
//!
//! They are k8s-openapi's upstream schemas with every description cut to
//! its first sentence: in full they would push the CRD past the 256 KiB
//! `kubectl apply` (client side) can store in its annotation.

use k8s_openapi::api::core::v1::{Affinity, TopologySpreadConstraint, Volume};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Value, json};

/// The most volumes a worker pod may have. The exactly-one-source rule runs
/// once per volume, and the API server refuses a CRD whose rules could cost
/// too much on the largest list a request can carry; a bound keeps the
/// estimate small (and no worker needs more). By cel-go's estimator the
/// rule costs about 100 (two per `has`, one per `+`); unbounded, the list
/// could hold a million volumes of a 3 MiB request, 10^8 against the
/// per-rule limit of 10^7; with this bound it is about 6,400.
pub const MAX_VOLUMES: u64 = 64;

/// Longest description kept, in bytes, after cutting to the first sentence.
const MAX_DESCRIPTION: usize = 160;

/// `spec.worker.volumes`: closed core/v1 Volumes keyed by name, each with
/// exactly one source.
pub(super) fn volumes(generator: &mut SchemaGenerator) -> Schema {
    let mut item = upstream::<Volume>(generator);
    item["description"] = json!(
        "A core/v1 Volume: its name and exactly one volume source \
         (persistentVolumeClaim, secret, configMap, projected, csi, emptyDir...)."
    );
    item["required"] = json!(["name"]);
    if let Some(properties) = item.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert(
            "name".into(),
            json!({
                "type": "string",
                "minLength": 1,
                "description": "Name of the volume, as volumeMounts refer to it."
            }),
        );
    }
    if let Some(metadata) =
        item.pointer_mut("/properties/ephemeral/properties/volumeClaimTemplate/properties/metadata")
    {
        *metadata = claim_template_metadata();
    }
    let sources = volume_sources(&item);
    item["x-kubernetes-validations"] = json!([{
        "rule": exactly_one_rule(&sources),
        "message": "a volume needs exactly one source (persistentVolumeClaim, emptyDir, secret, \
                    configMap, csi, projected...); without one Kubernetes would make it an emptyDir"
    }]);
    object_schema(json!({
            "type": "array",
            "maxItems": MAX_VOLUMES,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "x-kubernetes-validations": [{
                "rule": "self.all(v, v.name != 'tmp')",
                "message": "the volume name tmp is the operator's own emptyDir on /tmp"
            }],
            "items": item
    }))
}

/// `spec.worker.affinity`: the closed core/v1 Affinity.
pub(super) fn affinity(generator: &mut SchemaGenerator) -> Schema {
    object_schema(upstream::<Affinity>(generator))
}

/// `spec.worker.topologySpreadConstraints`: closed core/v1
/// TopologySpreadConstraints, with the enums the API server checks.
pub(super) fn topology_spread(generator: &mut SchemaGenerator) -> Schema {
    let mut item = upstream::<TopologySpreadConstraint>(generator);
    item["description"] = json!("A core/v1 TopologySpreadConstraint.");
    if let Some(properties) = item.get_mut("properties").and_then(Value::as_object_mut) {
        let overrides = [
            (
                "maxSkew",
                json!({
                    "type": "integer",
                    "format": "int32",
                    "minimum": 1,
                    "description": "How unevenly the pods may be spread."
                }),
            ),
            (
                "topologyKey",
                json!({
                    "type": "string",
                    "minLength": 1,
                    "description": "The node label whose values are the domains, e.g. topology.kubernetes.io/zone."
                }),
            ),
            (
                "whenUnsatisfiable",
                json!({
                    "type": "string",
                    "enum": ["DoNotSchedule", "ScheduleAnyway"],
                    "description": "What the scheduler does when the constraint cannot be met."
                }),
            ),
        ];
        for (name, schema) in overrides {
            properties.insert(name.into(), schema);
        }
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if let Some(p) = properties.get_mut(policy) {
                p["enum"] = json!(["Honor", "Ignore"]);
            }
        }
    }
    item["required"] = json!(["maxSkew", "topologyKey", "whenUnsatisfiable"]);
    object_schema(json!({ "type": "array", "items": item }))
}

/// The upstream schema of `T`, inlined, with short descriptions.
fn upstream<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    let mut schema = generator.subschema_for::<T>().to_value();
    shorten_descriptions(&mut schema);
    schema
}

fn object_schema(value: Value) -> Schema {
    Schema::from(value.as_object().cloned().unwrap_or_default())
}

/// The keys of a volume other than its name: its possible sources.
fn volume_sources(item: &Value) -> Vec<String> {
    item.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().filter(|k| *k != "name").cloned().collect())
        .unwrap_or_default()
}

/// A CEL rule true when exactly one of `keys` is set. Ternaries and sums
/// keep the estimated cost low (about three per key).
fn exactly_one_rule(keys: &[String]) -> String {
    let terms: Vec<String> = keys
        .iter()
        .map(|k| format!("(has(self.{k}) ? 1 : 0)"))
        .collect();
    format!("{} == 1", terms.join(" + "))
}

/// An ephemeral volume's claim template takes labels and annotations only
/// (the API server refuses any other metadata there).
fn claim_template_metadata() -> Value {
    let strings = json!({ "type": "object", "additionalProperties": { "type": "string" } });
    let mut labels = strings.clone();
    labels["description"] = json!("Labels copied into the PersistentVolumeClaim.");
    let mut annotations = strings;
    annotations["description"] = json!("Annotations copied into the PersistentVolumeClaim.");
    json!({
        "type": "object",
        "description": "Labels and annotations of the PersistentVolumeClaim; no other metadata is allowed.",
        "properties": { "labels": labels, "annotations": annotations }
    })
}

/// Cuts every description in a schema (not a property named
/// `description`) to its first sentence.
fn shorten_descriptions(schema: &mut Value) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::String(d)) = node.get_mut("description") {
        *d = short_description(d);
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        properties.values_mut().for_each(shorten_descriptions);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get_mut(key) {
            shorten_descriptions(child);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(children)) = node.get_mut(key) {
            children.iter_mut().for_each(shorten_descriptions);
        }
    }
}

/// The first sentence of `text`, and whether the rest deprecates the
/// field (in-tree volume plugins mostly are).
fn short_description(text: &str) -> String {
    let sentence = first_sentence(text);
    let deprecated = |t: &str| t.to_ascii_lowercase().contains("deprecated");
    if deprecated(text) && !deprecated(&sentence) {
        format!("{sentence} (Deprecated.)")
    } else {
        sentence
    }
}

/// The first sentence of `text` (an abbreviation such as "e.g." does not
/// end one), at most [`MAX_DESCRIPTION`] bytes.
fn first_sentence(text: &str) -> String {
    let mut end = text.len();
    for (i, _) in text.match_indices(['.', '\n']) {
        let before = &text[..i];
        let after = &text[i + 1..];
        let is_break = text[i..].starts_with('\n');
        let ends_sentence = after.is_empty() || after.starts_with([' ', '\n']);
        let abbreviation = ["e.g", "i.e", "etc", "vs"]
            .iter()
            .any(|a| before.ends_with(a));
        if is_break || (ends_sentence && !abbreviation) {
            end = if is_break { i } else { i + 1 };
            break;
        }
    }
    let sentence = text[..end].trim_end();
    if sentence.len() <= MAX_DESCRIPTION {
        return sentence.to_string();
    }
    let mut cut = MAX_DESCRIPTION;
    while !sentence.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = sentence[..cut].rfind(' ').unwrap_or(cut);
    format!("{}...", &sentence[..cut])
}

#[cfg(test)]
#[path = "worker_schema_tests.rs"]
mod tests;
