//! Decoding a value that follows a TYPE_INFO in an RPC parameter
//! (MS-TDS 2.2.6.6 ParamLenData, 2.2.5.2 data type definitions).

use chrono::{FixedOffset, NaiveDateTime};
use uuid::Uuid;

use super::super::error::TdsError;
use super::super::wire::Reader;
use super::datetime::{
    days_to_date, increments_to_time, parts_to_datetime, smalldatetime_from_parts, time_len,
};
use super::text::{decode_nvarchar, decode_varchar, read_plp};
use super::type_info::{TypeInfo, code, fixed_size};
use crate::sql::{Decimal, Value};

fn bad(what: &str) -> TdsError {
    TdsError::protocol(format!("invalid {what} value"))
}

/// Reads one value described by `info`.
pub(crate) fn decode_value(r: &mut Reader<'_>, info: &TypeInfo) -> Result<Value, TdsError> {
    match *info {
        TypeInfo::Null => Ok(Value::Null),
        TypeInfo::Fixed(ty) => {
            let bytes = r.bytes(fixed_size(ty))?;
            sized(ty, bytes)
        }
        TypeInfo::ByteLen { ty, .. } => {
            let n = r.u8()? as usize;
            // GEN_NULL: a zero length is NULL for every BYTELEN type.
            if n == 0 {
                return Ok(Value::Null);
            }
            let bytes = r.bytes(n)?;
            match ty {
                code::CHAR | code::VARCHAR => Ok(Value::String(decode_varchar(bytes, None))),
                code::BINARY | code::VARBINARY => Ok(Value::Binary(bytes.to_vec())),
                _ => sized(ty, bytes),
            }
        }
        TypeInfo::Decimal { scale, .. } => {
            let n = r.u8()? as usize;
            if n == 0 {
                return Ok(Value::Null);
            }
            decimal(r.bytes(n)?, scale)
        }
        TypeInfo::Date => {
            let n = r.u8()? as usize;
            match n {
                0 => Ok(Value::Null),
                3 => Ok(Value::Date(
                    days_to_date(u24(r.bytes(3)?)).ok_or_else(|| bad("date"))?,
                )),
                _ => Err(bad("date length")),
            }
        }
        TypeInfo::Scaled { ty, scale } => {
            let n = r.u8()? as usize;
            if n == 0 {
                return Ok(Value::Null);
            }
            let bytes = r.bytes(n)?;
            scaled(ty, scale, bytes)
        }
        TypeInfo::ShortLen { ty, max, collation } => {
            let bytes = if info.is_plp() {
                read_plp(r)?
            } else {
                let n = r.u16_le()?;
                if n == 0xFFFF {
                    None
                } else if n > max {
                    return Err(bad("over-long"));
                } else {
                    Some(r.bytes(n as usize)?.to_vec())
                }
            };
            bytes.map_or(Ok(Value::Null), |b| characters(ty, collation, b))
        }
        TypeInfo::LongLen { ty, collation } => {
            let n = r.u32_le()?;
            if n == u32::MAX {
                return Ok(Value::Null);
            }
            let bytes = r.bytes(n as usize)?.to_vec();
            characters(ty, collation, bytes)
        }
    }
}

fn characters(ty: u8, collation: Option<[u8; 5]>, bytes: Vec<u8>) -> Result<Value, TdsError> {
    Ok(match ty {
        code::BIGCHAR | code::BIGVARCHR | code::TEXT => {
            Value::String(decode_varchar(&bytes, collation))
        }
        code::NCHAR | code::NVARCHAR | code::NTEXT => Value::String(decode_nvarchar(&bytes)?),
        _ => Value::Binary(bytes),
    })
}

fn u24(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], 0])
}

fn le_uint(b: &[u8]) -> u64 {
    let mut out = [0u8; 8];
    out[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(out)
}

/// Values of the fixed-size families, by type code and actual length.
fn sized(ty: u8, b: &[u8]) -> Result<Value, TdsError> {
    let mut r = Reader::new(b);
    let v = match (ty, b.len()) {
        (code::BIT | code::BITN, 1) => Value::Bit(b[0] != 0),
        (code::INT1 | code::INTN, 1) => Value::TinyInt(b[0]),
        (code::INT2 | code::INTN, 2) => Value::SmallInt(r.i16_le()?),
        (code::INT4 | code::INTN, 4) => Value::Int(r.i32_le()?),
        (code::INT8 | code::INTN, 8) => Value::BigInt(r.i64_le()?),
        (code::FLT4 | code::FLTN, 4) => Value::Real(r.f32_le()?),
        (code::FLT8 | code::FLTN, 8) => Value::Float(r.f64_le()?),
        (code::MONEY4 | code::MONEYN, 4) => Value::Money(r.i32_le()? as i64),
        (code::MONEY | code::MONEYN, 8) => {
            let high = r.i32_le()? as i64;
            let low = r.u32_le()? as i64;
            Value::Money((high << 32) | low)
        }
        (code::DATETIM4 | code::DATETIMN, 4) => {
            let days = r.u16_le()?;
            let minutes = r.u16_le()?;
            Value::DateTime(
                smalldatetime_from_parts(days, minutes).ok_or_else(|| bad("smalldatetime"))?,
            )
        }
        (code::DATETIME | code::DATETIMN, 8) => {
            let days = r.i32_le()?;
            let ticks = r.u32_le()?;
            Value::DateTime(parts_to_datetime(days, ticks).ok_or_else(|| bad("datetime"))?)
        }
        (code::GUID, 16) => {
            let mut raw = [0u8; 16];
            raw.copy_from_slice(b);
            Value::Guid(Uuid::from_bytes_le(raw))
        }
        _ => return Err(bad("fixed-size")),
    };
    Ok(v)
}

/// DECIMALN/NUMERICN (MS-TDS 2.2.5.5.1.6): sign byte (1 = positive) then
/// the magnitude, little-endian.
fn decimal(b: &[u8], scale: u8) -> Result<Value, TdsError> {
    let (sign, magnitude) = b.split_first().ok_or_else(|| bad("decimal"))?;
    if magnitude.len() > 16 {
        return Err(bad("decimal length"));
    }
    let mut raw = [0u8; 16];
    raw[..magnitude.len()].copy_from_slice(magnitude);
    let magnitude = i128::try_from(u128::from_le_bytes(raw)).map_err(|_| bad("decimal"))?;
    let value = if *sign == 0 { -magnitude } else { magnitude };
    Ok(Value::Decimal(Decimal::new(value, scale)))
}

/// TIMEN, DATETIME2N, DATETIMEOFFSETN: time of day in 10^-scale s, then
/// days since 0001-01-01, then the offset in minutes.
fn scaled(ty: u8, scale: u8, b: &[u8]) -> Result<Value, TdsError> {
    let t = time_len(scale);
    let expected = match ty {
        code::TIMEN => t,
        code::DATETIME2N => t + 3,
        _ => t + 5,
    };
    if b.len() != expected {
        return Err(bad("time length"));
    }
    let time = increments_to_time(le_uint(&b[..t]), scale).ok_or_else(|| bad("time"))?;
    if ty == code::TIMEN {
        return Ok(Value::Time(time));
    }
    let date = days_to_date(u24(&b[t..t + 3])).ok_or_else(|| bad("date"))?;
    let naive = NaiveDateTime::new(date, time);
    if ty == code::DATETIME2N {
        return Ok(Value::DateTime(naive));
    }
    let minutes = i16::from_le_bytes([b[t + 3], b[t + 4]]) as i32;
    let offset = FixedOffset::east_opt(minutes * 60).ok_or_else(|| bad("offset"))?;
    Ok(Value::DateTimeOffset(
        naive.and_utc().with_timezone(&offset),
    ))
}
