//! Conversions to uniqueidentifier, from strings (with or without
//! braces) and binary (the GUID's mixed-endian bytes).

use uuid::Uuid;

use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::Typed;
use crate::sql::expr::chart::clash;
use crate::sql::types::{DataType, Value};

pub(super) fn to_guid(value: &Typed) -> SqlResult<Value> {
    let to = DataType::UniqueIdentifier;
    match &value.value {
        Value::Guid(g) => Ok(Value::Guid(*g)),
        Value::String(s) => {
            let t = s.trim();
            let t = t
                .strip_prefix('{')
                .and_then(|x| x.strip_suffix('}'))
                .unwrap_or(t);
            // SQL Server reads the first 36 characters and ignores the rest.
            let t = if t.len() > 36 && t.is_char_boundary(36) {
                &t[..36]
            } else {
                t
            };
            if t.len() != 36 {
                return Err(guid_error());
            }
            Uuid::parse_str(t)
                .map(Value::Guid)
                .map_err(|_| guid_error())
        }
        Value::Binary(b) => {
            let mut buf = [0u8; 16];
            let n = b.len().min(16);
            buf[..n].copy_from_slice(&b[..n]);
            Ok(Value::Guid(Uuid::from_bytes_le(buf)))
        }
        _ => Err(clash(&value.ty, &to)),
    }
}

fn guid_error() -> SqlError {
    SqlError::conversion(
        8169,
        "Conversion failed when converting from a character string to uniqueidentifier.",
    )
}
