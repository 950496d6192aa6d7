//! Encoding a value after its TYPE_INFO, for ROW, NBCROW and RETURNVALUE
//! (MS-TDS 2.2.5.2). Values are coerced to the declared type where that is
//! lossless (an `Int` in a `bigint` column, a `Date` in a `datetime2`).

use std::borrow::Cow;

use bytes::BufMut;
use chrono::{FixedOffset, NaiveDateTime};

use super::EncodeError;
use super::datetime::{
    date_to_days, datetime_to_parts, smalldatetime_to_parts, time_len, time_to_increments,
};
use super::text::{encode_nvarchar, encode_varchar, write_plp};
use super::type_info::{TypeInfo, code, fixed_size};
use crate::sql::Value;

/// Writes `value` in the layout `info` announces.
pub(crate) fn encode_value(
    buf: &mut Vec<u8>,
    info: &TypeInfo,
    value: &Value,
) -> Result<(), EncodeError> {
    let fail = || EncodeError::new(value, format!("{info:?}"));
    match *info {
        TypeInfo::Null => value.is_null().then_some(()).ok_or_else(fail),
        TypeInfo::Fixed(ty) => {
            if value.is_null() {
                return Err(fail());
            }
            sized(buf, ty, fixed_size(ty), value).ok_or_else(fail)
        }
        TypeInfo::ByteLen { ty, len } => {
            if value.is_null() {
                buf.put_u8(0);
                return Ok(());
            }
            buf.put_u8(len);
            sized(buf, ty, len as usize, value).ok_or_else(fail)
        }
        TypeInfo::Decimal {
            len,
            precision,
            scale,
            ..
        } => {
            if value.is_null() {
                buf.put_u8(0);
                return Ok(());
            }
            let v = to_decimal(value, scale).ok_or_else(fail)?;
            let limit = 10i128.checked_pow(precision as u32).unwrap_or(i128::MAX);
            if v.unsigned_abs() >= limit.unsigned_abs() {
                return Err(fail());
            }
            buf.put_u8(len);
            buf.put_u8(u8::from(v >= 0));
            let magnitude = v.unsigned_abs().to_le_bytes();
            buf.extend_from_slice(&magnitude[..(len as usize - 1).min(16)]);
            Ok(())
        }
        TypeInfo::Date => {
            let date = match value {
                Value::Null => {
                    buf.put_u8(0);
                    return Ok(());
                }
                Value::Date(d) => *d,
                Value::DateTime(dt) => dt.date(),
                _ => return Err(fail()),
            };
            buf.put_u8(3);
            put_u24(buf, date_to_days(date).ok_or_else(fail)?);
            Ok(())
        }
        TypeInfo::Scaled { ty, scale } => {
            if value.is_null() {
                buf.put_u8(0);
                return Ok(());
            }
            scaled(buf, ty, scale, value).ok_or_else(fail)
        }
        TypeInfo::ShortLen { ty, max, collation } => {
            // Binary values and ASCII text (the same bytes in every
            // supported code page) are written without a copy.
            let bytes: Option<Cow<'_, [u8]>> = match (ty, value) {
                (_, Value::Null) => None,
                (code::BIGCHAR | code::BIGVARCHR, Value::String(s)) if s.is_ascii() => {
                    Some(Cow::Borrowed(s.as_bytes()))
                }
                (code::BIGCHAR | code::BIGVARCHR, Value::String(s)) => {
                    Some(Cow::Owned(encode_varchar(s, collation)))
                }
                (code::NCHAR | code::NVARCHAR, Value::String(s)) => {
                    Some(Cow::Owned(encode_nvarchar(s)))
                }
                (code::BIGBINARY | code::BIGVARBIN, Value::Binary(b)) => Some(Cow::Borrowed(b)),
                _ => return Err(fail()),
            };
            if info.is_plp() {
                write_plp(buf, bytes.as_deref());
                return Ok(());
            }
            match bytes {
                None => buf.put_u16_le(0xFFFF),
                Some(b) if b.len() <= max as usize => {
                    buf.put_u16_le(b.len() as u16);
                    buf.extend_from_slice(&b);
                }
                Some(_) => return Err(fail()),
            }
            Ok(())
        }
        TypeInfo::LongLen { .. } => Err(fail()),
    }
}

fn put_u24(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes()[..3]);
}

fn to_i64(v: &Value) -> Option<i64> {
    Some(match v {
        Value::Bit(b) => *b as i64,
        Value::TinyInt(n) => *n as i64,
        Value::SmallInt(n) => *n as i64,
        Value::Int(n) => *n as i64,
        Value::BigInt(n) => *n,
        Value::Decimal(d) => i64::try_from(
            rescale(d.value, d.scale, 0)
                .filter(|_| d.value % 10i128.checked_pow(d.scale as u32).unwrap_or(1) == 0)?,
        )
        .ok()?,
        _ => return None,
    })
}

fn to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Real(f) => Some(*f as f64),
        Value::Float(f) => Some(*f),
        other => to_i64(other).map(|n| n as f64),
    }
}

/// Changes the scale of `value * 10^-from`, rounding half away from zero.
pub(crate) fn rescale(value: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        value.checked_mul(10i128.checked_pow((to - from) as u32)?)
    } else {
        let div = 10i128.checked_pow((from - to) as u32)?;
        let (q, r) = (value / div, value % div);
        Some(if r.unsigned_abs() * 2 >= div.unsigned_abs() {
            q + value.signum()
        } else {
            q
        })
    }
}

fn to_decimal(v: &Value, scale: u8) -> Option<i128> {
    match v {
        Value::Decimal(d) => rescale(d.value, d.scale, scale),
        Value::Money(m) => rescale(*m as i128, 4, scale),
        other => rescale(to_i64(other)? as i128, 0, scale),
    }
}

fn to_money(v: &Value) -> Option<i64> {
    match v {
        Value::Money(m) => Some(*m),
        other => i64::try_from(to_decimal(other, 4)?).ok(),
    }
}

fn to_datetime(v: &Value) -> Option<NaiveDateTime> {
    match v {
        Value::DateTime(dt) => Some(*dt),
        Value::Date(d) => d.and_hms_opt(0, 0, 0),
        _ => None,
    }
}

/// The fixed-size families by type code and byte length.
fn sized(buf: &mut Vec<u8>, ty: u8, len: usize, v: &Value) -> Option<()> {
    match (ty, len) {
        (code::BIT | code::BITN, 1) => buf.put_u8(u8::from(to_i64(v)? != 0)),
        (code::INT1 | code::INTN, 1) => buf.put_u8(u8::try_from(to_i64(v)?).ok()?),
        (code::INT2 | code::INTN, 2) => buf.put_i16_le(i16::try_from(to_i64(v)?).ok()?),
        (code::INT4 | code::INTN, 4) => buf.put_i32_le(i32::try_from(to_i64(v)?).ok()?),
        (code::INT8 | code::INTN, 8) => buf.put_i64_le(to_i64(v)?),
        (code::FLT4 | code::FLTN, 4) => buf.put_f32_le(to_f64(v)? as f32),
        (code::FLT8 | code::FLTN, 8) => buf.put_f64_le(to_f64(v)?),
        (code::MONEY4 | code::MONEYN, 4) => buf.put_i32_le(i32::try_from(to_money(v)?).ok()?),
        (code::MONEY | code::MONEYN, 8) => {
            let m = to_money(v)?;
            buf.put_i32_le((m >> 32) as i32);
            buf.put_u32_le(m as u32);
        }
        (code::DATETIM4 | code::DATETIMN, 4) => {
            let (days, minutes) = smalldatetime_to_parts(to_datetime(v)?)?;
            buf.put_u16_le(days);
            buf.put_u16_le(minutes);
        }
        (code::DATETIME | code::DATETIMN, 8) => {
            let (days, ticks) = datetime_to_parts(to_datetime(v)?)?;
            buf.put_i32_le(days);
            buf.put_u32_le(ticks);
        }
        (code::GUID, 16) => match v {
            Value::Guid(g) => buf.extend_from_slice(&g.to_bytes_le()),
            _ => return None,
        },
        _ => return None,
    }
    Some(())
}

fn scaled(buf: &mut Vec<u8>, ty: u8, scale: u8, v: &Value) -> Option<()> {
    let t = time_len(scale);
    let (time, date, offset) = match (ty, v) {
        (code::TIMEN, Value::Time(time)) => (*time, None, None),
        (code::DATETIME2N, other) => {
            let dt = to_datetime(other)?;
            (dt.time(), Some(dt.date()), None)
        }
        (code::DATETIMEOFFSETN, Value::DateTimeOffset(dto)) => {
            let utc = dto.naive_utc();
            (
                utc.time(),
                Some(utc.date()),
                Some(dto.offset().local_minus_utc() / 60),
            )
        }
        (code::DATETIMEOFFSETN, Value::DateTime(naive)) => {
            let utc = naive
                .and_utc()
                .with_timezone(&FixedOffset::east_opt(0)?)
                .naive_utc();
            (utc.time(), Some(utc.date()), Some(0))
        }
        _ => return None,
    };
    let days = date.map(date_to_days);
    if matches!(days, Some(None)) {
        return None;
    }
    let total = t + if date.is_some() { 3 } else { 0 } + if offset.is_some() { 2 } else { 0 };
    buf.put_u8(total as u8);
    buf.extend_from_slice(&time_to_increments(time, scale).to_le_bytes()[..t]);
    if let Some(Some(days)) = days {
        put_u24(buf, days);
    }
    if let Some(minutes) = offset {
        buf.put_i16_le(i16::try_from(minutes).ok()?);
    }
    Some(())
}
