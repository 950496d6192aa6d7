//! Decoder for the Kubernetes protobuf envelope (`k8s\0` + `runtime.Unknown`)
//! for the kinds client-go's typed clients send as protobuf in our flows:
//! Deployment (`kubectl create deployment`), Secret and ConfigMap (Helm's
//! release storage, `kubectl create secret/configmap`), Namespace and
//! ServiceAccount. kubectl sends these as protobuf whatever the server
//! advertises, so the server must read them. Other kinds, and fields the
//! tables do not know, get 415 so the caller sees a clear error.

mod message;
mod schema;
mod wire;

pub use message::DecodeError;
use serde_json::{Value, json};
use wire::{Field, fields};

/// Decodes a protobuf-encoded request body into JSON. `Err` carries the
/// kind that is not supported (or a parse failure description).
pub fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    let bad = |what: &str| DecodeError::Malformed(what.to_string());
    let inner = body.strip_prefix(b"k8s\0").ok_or_else(|| bad("envelope"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(inner).ok_or_else(|| bad("envelope"))? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm).ok_or_else(|| bad("typeMeta"))? {
                    match (tn, tf) {
                        (1, Field::Bytes(v)) => api_version = String::from_utf8_lossy(v).into(),
                        (2, Field::Bytes(k)) => kind = String::from_utf8_lossy(k).into(),
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let msg = schema::for_kind(&api_version, &kind)
        .ok_or_else(|| DecodeError::UnsupportedKind(format!("{api_version} {kind}")))?;
    let mut obj = message::message(raw, msg, &kind)?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}
