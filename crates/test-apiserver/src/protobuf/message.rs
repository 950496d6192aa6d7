//! Table-driven decoding of one protobuf message into the JSON the API
//! uses, following Go's JSON conventions: unset and zero-valued non-pointer
//! fields are omitted, pointer fields keep explicit zeros.

use super::schema::{F, Msg, Ty};
use super::wire::{Field, fields};
use base64::Engine;
use serde_json::{Map, Value, json};

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("malformed protobuf at {0}")]
    Malformed(String),
    #[error(
        "protobuf field {num} of {path} is not supported by the test apiserver; send JSON instead"
    )]
    UnsupportedField { path: String, num: u64 },
    #[error("protobuf encoding of {0} is not supported by the test apiserver; send JSON instead")]
    UnsupportedKind(String),
}

fn malformed(path: &str) -> DecodeError {
    DecodeError::Malformed(path.to_string())
}

/// Whether an unknown field carries nothing: Go emits every non-pointer
/// field, so empty strings and all-zero nested structs are common.
fn is_empty_payload(f: &Field<'_>) -> bool {
    match f {
        Field::Varint(v) => *v == 0,
        Field::Fixed => true,
        Field::Bytes(b) => {
            b.is_empty() || fields(b).is_some_and(|fs| fs.iter().all(|(_, f)| is_empty_payload(f)))
        }
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

fn bytes<'a>(f: Field<'a>, path: &str) -> Result<&'a [u8], DecodeError> {
    match f {
        Field::Bytes(b) => Ok(b),
        _ => Err(malformed(path)),
    }
}

fn varint(f: Field<'_>, path: &str) -> Result<u64, DecodeError> {
    match f {
        Field::Varint(v) => Ok(v),
        _ => Err(malformed(path)),
    }
}

fn text(b: &[u8], path: &str) -> Result<String, DecodeError> {
    String::from_utf8(b.to_vec()).map_err(|_| malformed(path))
}

fn time(b: &[u8], path: &str) -> Result<Value, DecodeError> {
    if b.is_empty() {
        return Ok(Value::Null);
    }
    let mut secs = 0i64;
    for (n, f) in fields(b).ok_or_else(|| malformed(path))? {
        if n == 1 {
            // int64 on the wire: two's complement in 64 bits.
            secs = varint(f, path)? as i64;
        }
    }
    let t = chrono::DateTime::from_timestamp(secs, 0).ok_or_else(|| malformed(path))?;
    Ok(json!(crate::clock::fmt_time(t)))
}

fn int_or_string(b: &[u8], path: &str) -> Result<Value, DecodeError> {
    let (mut is_str, mut int, mut s) = (false, 0i64, String::new());
    for (n, f) in fields(b).ok_or_else(|| malformed(path))? {
        match n {
            1 => is_str = varint(f, path)? == 1,
            2 => int = varint(f, path)? as i64,
            3 => s = text(bytes(f, path)?, path)?,
            _ => {}
        }
    }
    Ok(if is_str { json!(s) } else { json!(int) })
}

fn quantity(b: &[u8], path: &str) -> Result<Value, DecodeError> {
    let mut s = String::new();
    for (n, f) in fields(b).ok_or_else(|| malformed(path))? {
        if n == 1 {
            s = text(bytes(f, path)?, path)?;
        }
    }
    Ok(json!(s))
}

/// Decodes a scalar or message payload of type `ty`.
fn value(ty: &Ty, f: Field<'_>, path: &str) -> Result<Value, DecodeError> {
    Ok(match ty {
        Ty::Str => json!(text(bytes(f, path)?, path)?),
        Ty::Bytes => json!(base64::engine::general_purpose::STANDARD.encode(bytes(f, path)?)),
        // int32 and int64 both sign-extend to 64 bits on the wire.
        Ty::Int => json!(varint(f, path)? as i64),
        Ty::Bool => json!(varint(f, path)? != 0),
        Ty::Msg(m) | Ty::Inline(m) => Value::Object(message(bytes(f, path)?, m, path)?),
        Ty::Time => time(bytes(f, path)?, path)?,
        Ty::IntOrString => int_or_string(bytes(f, path)?, path)?,
        Ty::Quantity => quantity(bytes(f, path)?, path)?,
        Ty::Map(_) => return Err(malformed(path)),
    })
}

fn map_entry(vty: &Ty, b: &[u8], path: &str) -> Result<(String, Value), DecodeError> {
    let (mut k, mut v) = (String::new(), None);
    for (n, f) in fields(b).ok_or_else(|| malformed(path))? {
        match n {
            1 => k = text(bytes(f, path)?, path)?,
            2 => v = Some(value(vty, f, path)?),
            _ => {}
        }
    }
    // A missing value is the type's zero value, which is "" for every map
    // value type Kubernetes uses.
    Ok((k, v.unwrap_or_else(|| json!(""))))
}

fn put(
    out: &mut Map<String, Value>,
    spec: &F,
    f: Field<'_>,
    path: &str,
) -> Result<(), DecodeError> {
    let here = format!("{path}.{}", spec.name);
    match &spec.ty {
        Ty::Map(vty) => {
            let (k, v) = map_entry(vty, bytes(f, &here)?, &here)?;
            let slot = out.entry(spec.name).or_insert_with(|| json!({}));
            if let Value::Object(m) = slot {
                m.insert(k, v);
            }
        }
        Ty::Inline(m) => out.extend(message(bytes(f, &here)?, m, path)?),
        ty if spec.repeated => {
            let v = value(ty, f, &here)?;
            let slot = out.entry(spec.name).or_insert_with(|| json!([]));
            if let Value::Array(a) = slot {
                a.push(v);
            }
        }
        ty => {
            let v = value(ty, f, &here)?;
            if spec.keep_zero && !v.is_null() || !is_zero(&v) {
                out.insert(spec.name.into(), v);
            }
        }
    }
    Ok(())
}

/// Decodes the message `b` described by `msg`; `path` names it in errors.
pub fn message(b: &[u8], msg: Msg, path: &str) -> Result<Map<String, Value>, DecodeError> {
    let mut out = Map::new();
    for (num, f) in fields(b).ok_or_else(|| malformed(path))? {
        match msg.iter().find(|s| s.num == num) {
            Some(spec) => put(&mut out, spec, f, path)?,
            None if is_empty_payload(&f) => {}
            None => {
                return Err(DecodeError::UnsupportedField {
                    path: path.to_string(),
                    num,
                });
            }
        }
    }
    Ok(out)
}
