//! Reading a manifest from YAML, refusing every field the schema does not
//! know.
//!
//! A misspelt field is never ignored: `colums:` would stream every column
//! (PII included) and `delete: soft` would give hard deletes. Each unknown
//! field is reported by its path, with the nearest known name at that
//! place ("did you mean"), and the manifest is refused.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use super::source::{CdcSource, CdcSourceSpec, SOURCE_KIND};
use super::types::{CdcStream, CdcStreamSpec, CdcStreamStatus};
use super::validate::{API_VERSION, KIND};

/// A field of the manifest that the schema does not know, so that the
/// error can name where it is and what was probably meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Dotted path, e.g. `spec.source.encyrpt`.
    pub path: String,
    /// The closest known field at the same place, if one is close.
    pub suggestion: Option<String>,
}

impl fmt::Display for UnknownField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown field {}", self.path)?;
        match &self.suggestion {
            Some(name) => write!(f, " (did you mean {name}?)"),
            None => Ok(()),
        }
    }
}

/// The unknown fields of one manifest, in document order; shown one a line
/// so that each typo can be fixed from the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFields(pub Vec<UnknownField>);

impl fmt::Display for UnknownFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.0.len();
        write!(
            f,
            "{count} unknown field{} (a misspelt field would silently change what the stream does):",
            if count == 1 { "" } else { "s" }
        )?;
        for field in &self.0 {
            write!(f, "\n  {field}")?;
        }
        Ok(())
    }
}

/// The YAML is not a manifest of the expected shape.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not YAML, or a field of the wrong type (the message names the field
    /// and the value).
    #[error("invalid manifest: {0}")]
    Yaml(#[source] serde_yaml::Error),
    /// `apiVersion` or `kind` is missing or names another resource.
    #[error("{field}: expected {expected}, got {got:?}")]
    TypeMeta {
        /// `apiVersion` or `kind`.
        field: &'static str,
        /// What this schema is.
        expected: &'static str,
        /// What the document says (empty when absent).
        got: String,
    },
    /// Fields the schema does not know: refused, never ignored.
    #[error("invalid manifest: {0}")]
    UnknownFields(UnknownFields),
    /// A document of a multi-document file is invalid.
    #[error("document {index} of the file: {source}")]
    Document {
        /// 1-based, in file order.
        index: usize,
        /// What is wrong with it.
        source: Box<LoadError>,
    },
    /// A file of several documents holds other than one `CdcSource` and its
    /// `CdcStream`s.
    #[error("{0}")]
    Layout(String),
}

/// What one file holds: a stream of its own, or a source with its streams.
#[derive(Debug, Clone)]
pub enum Manifests {
    /// One `CdcStream` without `sourceRef`.
    Stream(Box<CdcStream>),
    /// One `CdcSource` and the `CdcStream`s of the file (each must name it).
    Source {
        /// The source.
        source: Box<CdcSource>,
        /// Its streams, in file order.
        streams: Vec<CdcStream>,
    },
}

/// The two fields Kubernetes uses to pick the schema.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

/// Parses one `CdcStream` YAML document. Type errors name the field and the
/// value (serde_yaml reports the path); unknown fields are refused, each
/// with its path and the nearest known name.
pub fn load_yaml(text: &str) -> Result<CdcStream, LoadError> {
    load_kind(text, KIND)
}

/// Parses one `CdcSource` YAML document, with the same checks as
/// [`load_yaml`].
pub fn load_source_yaml(text: &str) -> Result<CdcSource, LoadError> {
    load_kind(text, SOURCE_KIND)
}

/// Parses a file of one or more documents: a `CdcStream`, or one
/// `CdcSource` with `CdcStream`s. Every document is checked as
/// [`load_yaml`] checks one; an error names the document.
pub fn load_documents(text: &str) -> Result<Manifests, LoadError> {
    let mut sources = Vec::new();
    let mut streams = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let index = i + 1;
        let wrap = |source| LoadError::Document {
            index,
            source: Box::new(source),
        };
        let value = serde_yaml::Value::deserialize(document)
            .map_err(|error| wrap(LoadError::Yaml(error)))?;
        if value.is_null() {
            continue;
        }
        let text = serde_yaml::to_string(&value).map_err(|error| wrap(LoadError::Yaml(error)))?;
        let meta: TypeMeta =
            serde_yaml::from_value(value).map_err(|error| wrap(LoadError::Yaml(error)))?;
        if meta.kind == SOURCE_KIND {
            sources.push(load_source_yaml(&text).map_err(wrap)?);
        } else {
            streams.push(load_yaml(&text).map_err(wrap)?);
        }
    }
    match sources.len() {
        0 => match <[CdcStream; 1]>::try_from(streams) {
            Ok([stream]) => Ok(Manifests::Stream(Box::new(stream))),
            Err(streams) => Err(LoadError::Layout(format!(
                "the file holds {} CdcStreams and no CdcSource: several streams run together                  only as tables of one CdcSource (add it, and spec.sourceRef to each stream),                  or run each file alone",
                streams.len()
            ))),
        },
        1 => Ok(Manifests::Source {
            source: Box::new(sources.remove(0)),
            streams,
        }),
        n => Err(LoadError::Layout(format!(
            "the file holds {n} CdcSources: one worker runs one source; give each its own file"
        ))),
    }
}

fn load_kind<T: serde::de::DeserializeOwned>(
    text: &str,
    kind: &'static str,
) -> Result<T, LoadError> {
    let type_meta: TypeMeta = serde_yaml::from_str(text).map_err(LoadError::Yaml)?;
    for (field, expected, got) in [
        ("apiVersion", API_VERSION, type_meta.api_version),
        ("kind", kind, type_meta.kind),
    ] {
        if got != expected {
            return Err(LoadError::TypeMeta {
                field,
                expected,
                got,
            });
        }
    }
    let mut paths: Vec<Vec<String>> = Vec::new();
    let deserializer = serde_yaml::Deserializer::from_str(text);
    let manifest: T = serde_ignored::deserialize(deserializer, |path| {
        let mut segments = Vec::new();
        collect_segments(&path, &mut segments);
        // apiVersion and kind are checked above; the derived type has no field for them.
        if !matches!(segments.as_slice(), [one] if one == "apiVersion" || one == "kind") {
            paths.push(segments);
        }
    })
    .map_err(LoadError::Yaml)?;
    if !paths.is_empty() {
        let unknown = paths
            .iter()
            .map(|segments| describe(kind, segments))
            .collect();
        return Err(LoadError::UnknownFields(UnknownFields(unknown)));
    }
    Ok(manifest)
}

fn collect_segments(path: &serde_ignored::Path<'_>, out: &mut Vec<String>) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, index } => {
            collect_segments(parent, out);
            out.push(index.to_string());
        }
        Path::Map { parent, key } => {
            collect_segments(parent, out);
            out.push(key.clone());
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => collect_segments(parent, out),
    }
}

fn describe(kind: &str, segments: &[String]) -> UnknownField {
    let path = segments.join(".");
    let Some((unknown, parent)) = segments.split_last() else {
        return UnknownField {
            path,
            suggestion: None,
        };
    };
    let known = known_fields(kind, parent);
    let suggestion = known
        .into_iter()
        .map(|name| (strsim::damerau_levenshtein(unknown, &name), name))
        .filter(|(distance, name)| *distance <= (name.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name);
    UnknownField { path, suggestion }
}

/// Field names the schema knows at `parent` (a path of keys and indices).
fn known_fields(kind: &str, parent: &[String]) -> Vec<String> {
    let Some((first, rest)) = parent.split_first() else {
        return ["apiVersion", "kind", "metadata", "spec", "status"]
            .map(String::from)
            .to_vec();
    };
    let root = match first.as_str() {
        "spec" if kind == SOURCE_KIND => schemars::schema_for!(CdcSourceSpec),
        "spec" => schemars::schema_for!(CdcStreamSpec),
        "status" if kind == KIND => schemars::schema_for!(CdcStreamStatus),
        "metadata" => schemars::schema_for!(ObjectMeta),
        _ => return Vec::new(),
    };
    let root = root.as_value();
    let mut node = root;
    for segment in rest {
        match child(root, node, segment) {
            Some(next) => node = next,
            None => return Vec::new(),
        }
    }
    let mut names = Vec::new();
    property_names(root, node, &mut names);
    names
}

fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference
            .strip_prefix("#/")
            .and_then(|pointer| root.pointer(&format!("/{pointer}")))
            .unwrap_or(node),
        None => node,
    }
}

fn branches(node: &Value) -> impl Iterator<Item = &Value> {
    ["anyOf", "oneOf", "allOf"]
        .into_iter()
        .filter_map(|key| node.get(key).and_then(Value::as_array))
        .flatten()
}

fn child<'a>(root: &'a Value, node: &'a Value, segment: &str) -> Option<&'a Value> {
    let node = resolve(root, node);
    if let Some(found) = node.get("properties").and_then(|p| p.get(segment)) {
        return Some(found);
    }
    if segment.parse::<usize>().is_ok()
        && let Some(items) = node.get("items")
    {
        return Some(items);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        return Some(values);
    }
    branches(node).find_map(|branch| child(root, branch, segment))
}

fn property_names(root: &Value, node: &Value, out: &mut Vec<String>) {
    let node = resolve(root, node);
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        out.extend(properties.keys().cloned());
    }
    for branch in branches(node) {
        property_names(root, branch, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {name: orders}
spec:
  appId: orders-v1
  source:
    host: 127.0.0.1
    database: shop
    table: dbo.orders
    credentials: {username: cdc_reader, passwordFrom: {env: MSSQL_PASSWORD}}
  target: {name: bronze.orders, location: ./lake/bronze/orders}
  checkpoint: ./lake/_checkpoints/orders
  facts: {name: ops.ingestion_facts, location: ./lake/ops/ingestion_facts}
"#;

    fn with(extra_path: &str, line: &str) -> String {
        // Inserts `line` right after the line that ends with `extra_path:`.
        let mut out = String::new();
        for l in BASE.lines() {
            out.push_str(l);
            out.push('\n');
            if l.trim_end().ends_with(extra_path) {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    fn unknown(text: &str) -> Vec<String> {
        match load_yaml(text) {
            Err(LoadError::UnknownFields(fields)) => {
                fields.0.iter().map(ToString::to_string).collect()
            }
            Err(other) => panic!("not an unknown-field error: {other}"),
            Ok(_) => Vec::new(),
        }
    }

    #[test]
    fn refuses_unknown_fields_with_their_path_and_the_nearest_name() {
        let cases = [
            (
                "  source:",
                "    colums: [id, total]",
                "unknown field spec.source.colums (did you mean columns?)",
            ),
            (
                "  source:",
                "    encyrpt: off",
                "unknown field spec.source.encyrpt (did you mean encrypt?)",
            ),
            (
                "spec:",
                "  silver: {name: silver.orders, location: ./lake/silver/orders, delete: soft}",
                "unknown field spec.silver.delete (did you mean deletes?)",
            ),
            (
                "spec:",
                "  maxCommitPerBatch: 5",
                "unknown field spec.maxCommitPerBatch (did you mean maxCommitsPerBatch?)",
            ),
            (
                "spec:",
                "  trigger: {procesingTime: 5s}",
                "unknown field spec.trigger.procesingTime (did you mean processingTime?)",
            ),
            (
                "spec:",
                "  snapshot: {chunkrows: 5}",
                "unknown field spec.snapshot.chunkrows (did you mean chunkRows?)",
            ),
            ("spec:", "  colour: blue", "unknown field spec.colour"),
            (
                "kind: CdcStream",
                "spek: {}",
                "unknown field spek (did you mean spec?)",
            ),
        ];
        for (anchor, line, expected) in cases {
            assert_eq!(unknown(&with(anchor, line)), [expected], "{line}");
        }
        assert_eq!(unknown(BASE), Vec::<String>::new());
    }

    #[test]
    fn the_error_lists_every_unknown_field_one_a_line() {
        let text = with("  source:", "    colums: [id]\n    colour: blue");
        let message = load_yaml(&text).unwrap_err().to_string();
        assert_eq!(
            message,
            "invalid manifest: 2 unknown fields (a misspelt field would silently change what \
             the stream does):\n  unknown field spec.source.colums (did you mean columns?)\n  \
             unknown field spec.source.colour"
        );
    }

    #[test]
    fn refuses_nested_unknown_fields_in_credentials() {
        let text = BASE.replace(
            "{env: MSSQL_PASSWORD}",
            "{env: MSSQL_PASSWORD, optional: true}",
        );
        let shown = unknown(&text);
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(
            shown[0].starts_with("unknown field spec.source.credentials.passwordFrom"),
            "{shown:?}"
        );
    }

    #[test]
    fn type_errors_name_the_field_and_value() {
        let cases = [
            (
                "spec:",
                "  maxCommitsPerBatch: lots",
                ["maxCommitsPerBatch", "lots"],
            ),
            ("  source:", "    encrypt: maybe", ["encrypt", "maybe"]),
            ("  source:", "    port: 70000", ["port", "70000"]),
            (
                "spec:",
                "  snapshot: {mode: sometimes}",
                ["mode", "sometimes"],
            ),
        ];
        for (anchor, line, needles) in cases {
            let err = load_yaml(&with(anchor, line)).unwrap_err().to_string();
            for needle in needles {
                assert!(err.contains(needle), "{line}: {err}");
            }
        }
    }

    #[test]
    fn checks_api_version_and_kind() {
        let cases = [
            (
                "apiVersion: mssql-cdc.io/v1alpha1",
                "apiVersion: mssql-cdc.io/v1",
                "apiVersion: expected mssql-cdc.io/v1alpha1, got \"mssql-cdc.io/v1\"",
            ),
            (
                "kind: CdcStream",
                "kind: Pod",
                "kind: expected CdcStream, got \"Pod\"",
            ),
            ("kind: CdcStream", "", "kind: expected CdcStream, got \"\""),
        ];
        for (from, to, expected) in cases {
            let err = load_yaml(&BASE.replace(from, to)).unwrap_err();
            assert_eq!(err.to_string(), expected);
        }
    }

    #[test]
    fn applies_defaults() {
        let spec = load_yaml(BASE).unwrap().spec;
        assert_eq!(spec.source.port, 1433);
        let config = spec.validate().unwrap();
        assert_eq!(config.max_commits_per_batch.get(), 10_000);
        assert_eq!(config.snapshot_chunk_rows.get(), 100_000);
        assert_eq!(spec.source.encrypt, crate::spec::Encrypt::Required);
        assert!(!spec.source.trust_server_certificate);
    }
}
