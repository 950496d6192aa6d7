//! Minimal decoder for the Kubernetes protobuf envelope (`k8s\0` +
//! `runtime.Unknown`), covering the types client-go's typed clients send as
//! protobuf in our flows: Secret and ConfigMap (Helm's release storage,
//! `kubectl create secret/configmap`). Other types get 415 so the caller
//! sees a clear error.

use base64::Engine;
use serde_json::{Map, Value, json};

/// Wire-format field value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (b, rest) = self.0.split_first()?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn next(&mut self) -> Option<Option<(u64, Field<'a>)>> {
        if self.0.is_empty() {
            return Some(None);
        }
        let key = self.varint()?;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                if len > self.0.len() {
                    return None;
                }
                let (b, rest) = self.0.split_at(len);
                self.0 = rest;
                Field::Bytes(b)
            }
            1 => {
                self.0 = self.0.get(8..)?;
                Field::Varint(0)
            }
            5 => {
                self.0 = self.0.get(4..)?;
                Field::Varint(0)
            }
            _ => return None,
        };
        Some(Some((key >> 3, field)))
    }

    fn fields(bytes: &'a [u8]) -> Option<Vec<(u64, Field<'a>)>> {
        let mut r = Reader(bytes);
        let mut out = Vec::new();
        while let Some(f) = r.next()? {
            out.push(f);
        }
        Some(out)
    }
}

fn string(b: &[u8]) -> Value {
    json!(String::from_utf8_lossy(b))
}

fn map_entry(b: &[u8], bytes_value: bool) -> Option<(String, Value)> {
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (n, f) in Reader::fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = String::from_utf8_lossy(x).into_owned(),
            (2, Field::Bytes(x)) if bytes_value => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(x))
            }
            (2, Field::Bytes(x)) => v = string(x),
            _ => {}
        }
    }
    Some((k, v))
}

fn time(b: &[u8]) -> Option<Value> {
    let mut secs = 0i64;
    for (n, f) in Reader::fields(b)? {
        if let (1, Field::Varint(v)) = (n, f) {
            secs = v as i64;
        }
    }
    chrono::DateTime::from_timestamp(secs, 0).map(|t| json!(crate::clock::fmt_time(t)))
}

fn owner_ref(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    for (n, f) in Reader::fields(b)? {
        let key = match n {
            1 => "kind",
            3 => "name",
            4 => "uid",
            5 => "apiVersion",
            6 => "controller",
            7 => "blockOwnerDeletion",
            _ => continue,
        };
        let v = match f {
            Field::Bytes(x) => string(x),
            Field::Varint(x) => json!(x != 0),
        };
        m.insert(key.into(), v);
    }
    Some(Value::Object(m))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = Vec::new();
    let mut owners = Vec::new();
    for (n, f) in Reader::fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => _ = m.insert("name".into(), string(x)),
            (2, Field::Bytes(x)) => _ = m.insert("generateName".into(), string(x)),
            (3, Field::Bytes(x)) => _ = m.insert("namespace".into(), string(x)),
            (5, Field::Bytes(x)) => _ = m.insert("uid".into(), string(x)),
            (6, Field::Bytes(x)) => _ = m.insert("resourceVersion".into(), string(x)),
            (8, Field::Bytes(x)) => {
                if let Some(t) = time(x) {
                    m.insert("creationTimestamp".into(), t);
                }
            }
            (11, Field::Bytes(x)) => {
                let (k, v) = map_entry(x, false)?;
                labels.insert(k, v);
            }
            (12, Field::Bytes(x)) => {
                let (k, v) = map_entry(x, false)?;
                annotations.insert(k, v);
            }
            (13, Field::Bytes(x)) => owners.push(owner_ref(x)?),
            (14, Field::Bytes(x)) => finalizers.push(string(x)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !owners.is_empty() {
        m.insert("ownerReferences".into(), Value::Array(owners));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

fn secret_or_configmap(kind: &str, raw: &[u8]) -> Option<Value> {
    let secret = kind == "Secret";
    let mut obj = Map::new();
    let (mut data, mut other) = (Map::new(), Map::new());
    for (n, f) in Reader::fields(raw)? {
        match (n, f) {
            (1, Field::Bytes(x)) => _ = obj.insert("metadata".into(), object_meta(x)?),
            (2, Field::Bytes(x)) => {
                let (k, v) = map_entry(x, secret)?;
                data.insert(k, v);
            }
            (3, Field::Bytes(x)) if secret => _ = obj.insert("type".into(), string(x)),
            (3, Field::Bytes(x)) => {
                let (k, v) = map_entry(x, true)?;
                other.insert(k, v);
            }
            (4, Field::Bytes(x)) if secret => {
                let (k, v) = map_entry(x, false)?;
                other.insert(k, v);
            }
            (4, Field::Varint(v)) if !secret => _ = obj.insert("immutable".into(), json!(v != 0)),
            (5, Field::Varint(v)) if secret => _ = obj.insert("immutable".into(), json!(v != 0)),
            _ => {}
        }
    }
    obj.insert("apiVersion".into(), json!("v1"));
    obj.insert("kind".into(), json!(kind));
    if !data.is_empty() {
        obj.insert("data".into(), Value::Object(data));
    }
    if !other.is_empty() {
        obj.insert(
            if secret { "stringData" } else { "binaryData" }.into(),
            Value::Object(other),
        );
    }
    Some(Value::Object(obj))
}

/// Decodes a protobuf-encoded request body into JSON. `Err` carries the
/// kind that is not supported (or a parse failure description).
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let inner = body
        .strip_prefix(b"k8s\0")
        .ok_or("missing protobuf envelope")?;
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in Reader::fields(inner).ok_or("malformed protobuf")? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in Reader::fields(tm).ok_or("malformed typeMeta")? {
                    if let (2, Field::Bytes(k)) = (tn, tf) {
                        kind = String::from_utf8_lossy(k).into_owned();
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    match kind.as_str() {
        "Secret" | "ConfigMap" => {
            secret_or_configmap(&kind, raw).ok_or_else(|| format!("malformed {kind}"))
        }
        other => Err(format!(
            "protobuf encoding of {other} is not supported by the test apiserver; use JSON"
        )),
    }
}
