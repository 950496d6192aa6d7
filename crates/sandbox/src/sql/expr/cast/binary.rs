//! Conversions to binary and varbinary: strings (as bytes, or as hex
//! under CONVERT styles 1 and 2), integers big-endian, decimal in its
//! storage form, datetime as days and ticks.

use super::text::{bytes_of_string, hex};
use super::{Mode, string_kind, truncation};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::Typed;
use crate::sql::expr::chart::clash;
use crate::sql::expr::datetime;
use crate::sql::expr::types::is_datetime_like;
use crate::sql::types::{DataType, Decimal, Length, Value};

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s = if s.len() % 2 == 1 {
        format!("0{s}")
    } else {
        s.to_string()
    };
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// decimal's binary form: precision, scale, sign (1 = positive), then
/// the magnitude little-endian.
fn decimal_binary(d: &Decimal, precision: u8) -> Vec<u8> {
    let mut out = vec![precision, d.scale, u8::from(d.value >= 0)];
    let size = usize::from(crate::sql::types::decimal_storage_bytes(precision)) - 1;
    out.extend_from_slice(&d.value.unsigned_abs().to_le_bytes()[..size]);
    out
}

pub(super) fn decimal_from_binary(b: &[u8]) -> Option<(i128, u8)> {
    let (&[_, scale, sign], rest) = (b.get(..3)?, &b[3..]) else {
        return None;
    };
    if rest.len() > 16 {
        return None;
    }
    let mut buf = [0u8; 16];
    buf[..rest.len()].copy_from_slice(rest);
    let v = i128::try_from(u128::from_le_bytes(buf)).ok()?;
    Some((if sign == 1 { v } else { -v }, scale))
}

pub(super) fn to_binary(
    value: &Typed,
    to: DataType,
    style: Option<i32>,
    mode: Mode<'_>,
) -> SqlResult<Value> {
    let mut numeric = false;
    let bytes = match &value.value {
        Value::String(s) => match style.unwrap_or(0) {
            1 | 2 => {
                let t = s.trim();
                let digits = if style == Some(1) {
                    t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))
                } else {
                    Some(t)
                };
                digits.and_then(parse_hex).ok_or_else(|| {
                    SqlError::conversion(
                        8114,
                        format!(
                            "Error converting data type {} to {}.",
                            string_kind(&value.ty),
                            to.name()
                        ),
                    )
                })?
            }
            _ => bytes_of_string(
                s,
                value.ty.is_unicode(),
                value.collation.map(|l| l.collation),
            ),
        },
        Value::Binary(b) => b.clone(),
        Value::Guid(g) => g.to_bytes_le().to_vec(),
        Value::Bit(b) => vec![u8::from(*b)],
        Value::TinyInt(v) => vec![*v],
        Value::SmallInt(v) => {
            numeric = true;
            v.to_be_bytes().to_vec()
        }
        Value::Int(v) => {
            numeric = true;
            v.to_be_bytes().to_vec()
        }
        Value::BigInt(v) | Value::Money(v) => {
            numeric = true;
            v.to_be_bytes().to_vec()
        }
        Value::Decimal(d) => decimal_binary(d, value.ty.precision().max(1)),
        Value::DateTime(dt) if is_datetime_like(&value.ty) => {
            numeric = true;
            let days = (dt.date() - datetime::base_date()).num_days() as i32;
            let ns = i64::from(chrono::Timelike::num_seconds_from_midnight(&dt.time()))
                * 1_000_000_000
                + i64::from(chrono::Timelike::nanosecond(&dt.time()));
            let ticks = ((ns * 3 + 5_000_000) / 10_000_000) as u32;
            let mut out = days.to_be_bytes().to_vec();
            out.extend_from_slice(&ticks.to_be_bytes());
            out
        }
        _ => return Err(clash(&value.ty, &to)),
    };
    let (limit, fixed) = match to {
        DataType::Binary(n) => (Some(usize::from(n)), true),
        DataType::VarBinary(Length::Fixed(n)) => (Some(usize::from(n)), false),
        _ => (None, false),
    };
    let mut bytes = bytes;
    if let Some(n) = limit {
        if bytes.len() > n {
            if let Mode::Assign(target) = mode
                && !target.starts_with('@')
            {
                return Err(truncation(target, &format!("0x{}", hex(&bytes[..n]))));
            }
            bytes = if numeric {
                bytes[bytes.len() - n..].to_vec()
            } else {
                bytes[..n].to_vec()
            };
        }
        if fixed && bytes.len() < n {
            if numeric {
                let mut padded = vec![0; n - bytes.len()];
                padded.extend_from_slice(&bytes);
                bytes = padded;
            } else {
                bytes.resize(n, 0);
            }
        }
    }
    Ok(Value::Binary(bytes))
}
