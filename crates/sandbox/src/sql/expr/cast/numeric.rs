//! Conversions to numbers: integers, decimal, float/real and money,
//! from numbers, strings, binary and the datetime types.

use chrono::NaiveDateTime;

use super::binary::decimal_from_binary;
use super::{exact, float_of, overflow, source_kind, string_kind};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::Typed;
use crate::sql::expr::chart::clash;
use crate::sql::expr::datetime;
use crate::sql::expr::num::{self, fits, pow10};
use crate::sql::expr::types::is_datetime_like;
use crate::sql::types::{DataType, Decimal, Value};

/// Days since 1900-01-01 as a fraction, the numeric view of datetime.
fn datetime_days(dt: &NaiveDateTime) -> f64 {
    let d = *dt - datetime::base_datetime();
    d.num_nanoseconds()
        .map(|n| n as f64 / 86_400e9)
        .unwrap_or_else(|| d.num_seconds() as f64 / 86_400.0)
}

fn integer_range(to: DataType) -> (i128, i128) {
    match to {
        DataType::TinyInt => (0, 255),
        DataType::SmallInt => (i128::from(i16::MIN), i128::from(i16::MAX)),
        DataType::Int => (i128::from(i32::MIN), i128::from(i32::MAX)),
        _ => (i128::from(i64::MIN), i128::from(i64::MAX)),
    }
}

fn make_integer(n: i128, to: DataType) -> Value {
    match to {
        DataType::Bit => Value::Bit(n != 0),
        DataType::TinyInt => Value::TinyInt(n as u8),
        DataType::SmallInt => Value::SmallInt(n as i16),
        DataType::Int => Value::Int(n as i32),
        _ => Value::BigInt(n as i64),
    }
}

fn conversion_failed(value: &str, from: &DataType, to: DataType) -> SqlError {
    SqlError::conversion(
        245,
        format!(
            "Conversion failed when converting the {} value '{value}' to data type {}.",
            string_kind(from),
            to.name()
        ),
    )
}

pub(super) fn to_integer(value: &Typed, to: DataType) -> SqlResult<Value> {
    let n: i128 = match &value.value {
        Value::String(s) => {
            let t = s.trim();
            if to == DataType::Bit {
                if t.eq_ignore_ascii_case("true") {
                    return Ok(Value::Bit(true));
                }
                if t.eq_ignore_ascii_case("false") {
                    return Ok(Value::Bit(false));
                }
            }
            let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
            if !digits.bytes().all(|b| b.is_ascii_digit()) || (digits.is_empty() && !t.is_empty()) {
                return Err(conversion_failed(s, &value.ty, to));
            }
            let n = if digits.is_empty() {
                Some(0)
            } else {
                t.parse::<i128>().ok()
            };
            let (lo, hi) = integer_range(to);
            match n {
                Some(n) if to == DataType::Bit || (lo..=hi).contains(&n) => n,
                _ => {
                    let (number, column) = match to {
                        DataType::TinyInt => (244, "INT1"),
                        DataType::SmallInt => (244, "INT2"),
                        DataType::Int => (248, "int"),
                        _ => (248, "bigint"),
                    };
                    let tail = if number == 244 {
                        " Use a larger integer column."
                    } else {
                        ""
                    };
                    return Err(SqlError::conversion(
                        number,
                        format!(
                            "The conversion of the {} value '{s}' overflowed an {column} column.{tail}",
                            string_kind(&value.ty)
                        ),
                    ));
                }
            }
        }
        Value::Decimal(d) => d.value / pow10(d.scale),
        // money to an integer rounds.
        Value::Money(m) => num::rescale(i128::from(*m), 4, 0).unwrap_or(0),
        Value::Real(_) | Value::Float(_) => {
            let f = float_of(&value.value).unwrap_or(0.0).trunc();
            if !f.is_finite() || f.abs() > 1e20 {
                return Err(overflow("expression", to));
            }
            f as i128
        }
        Value::Binary(b) => {
            let size = usize::try_from(to.max_length()).unwrap_or(8);
            let tail = &b[b.len().saturating_sub(size)..];
            let mut n: i128 = 0;
            for byte in tail {
                n = (n << 8) | i128::from(*byte);
            }
            // Reinterpret as the target's two's complement.
            let bits = (tail.len() * 8) as u32;
            if tail.len() == size
                && bits > 0
                && bits < 128
                && n >> (bits - 1) & 1 == 1
                && to != DataType::TinyInt
            {
                n -= 1i128 << bits;
            }
            n
        }
        Value::DateTime(dt) if is_datetime_like(&value.ty) => datetime_days(dt).round() as i128,
        other => match exact(other) {
            Some((v, _)) => v,
            None => return Err(clash(&value.ty, &to)),
        },
    };
    if to == DataType::Bit {
        return Ok(Value::Bit(n != 0));
    }
    let (lo, hi) = integer_range(to);
    if !(lo..=hi).contains(&n) {
        return Err(match value.value {
            Value::Bit(_)
            | Value::TinyInt(_)
            | Value::SmallInt(_)
            | Value::Int(_)
            | Value::BigInt(_)
                if matches!(to, DataType::TinyInt | DataType::SmallInt) =>
            {
                SqlError::new(
                    220,
                    format!(
                        "Arithmetic overflow error for data type {}, value = {n}.",
                        to.name()
                    ),
                )
            }
            _ => overflow(source_kind(value), to),
        });
    }
    Ok(make_integer(n, to))
}

pub(super) fn to_decimal(value: &Typed, precision: u8, scale: u8) -> SqlResult<Decimal> {
    let to = DataType::Decimal { precision, scale };
    let scaled = match &value.value {
        Value::String(s) => {
            let parsed = num::Parsed::read(s.trim()).ok_or_else(|| {
                SqlError::conversion(
                    8114,
                    format!(
                        "Error converting data type {} to numeric.",
                        string_kind(&value.ty)
                    ),
                )
            })?;
            parsed.scaled(scale)
        }
        Value::Real(_) | Value::Float(_) => {
            num::from_f64(float_of(&value.value).unwrap_or(0.0), scale)
        }
        Value::DateTime(dt) if is_datetime_like(&value.ty) => {
            num::from_f64(datetime_days(dt), scale)
        }
        Value::Binary(b) => decimal_from_binary(b).and_then(|(v, s)| num::rescale(v, s, scale)),
        other => match exact(other) {
            Some((v, s)) => num::rescale(v, s, scale),
            None => return Err(clash(&value.ty, &to)),
        },
    };
    match scaled {
        Some(v) if fits(v, precision) => Ok(Decimal::new(v, scale)),
        _ => Err(overflow(source_kind(value), to)),
    }
}

pub(super) fn to_float(value: &Typed, to: DataType) -> SqlResult<f64> {
    match &value.value {
        Value::String(s) => {
            let t = s.trim();
            if t.is_empty() {
                return Ok(0.0);
            }
            let ok = t
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'));
            match t.parse::<f64>() {
                Ok(f) if ok && f.is_finite() => Ok(f),
                _ => Err(SqlError::conversion(
                    8114,
                    format!(
                        "Error converting data type {} to {}.",
                        string_kind(&value.ty),
                        to.name()
                    ),
                )),
            }
        }
        Value::DateTime(dt) if is_datetime_like(&value.ty) => Ok(datetime_days(dt)),
        other => float_of(other).ok_or_else(|| clash(&value.ty, &to)),
    }
}

pub(super) fn to_money(value: &Typed, to: DataType) -> SqlResult<Value> {
    let units = match &value.value {
        Value::String(s) => {
            let t: String = s
                .trim()
                .chars()
                .filter(|c| *c != ',' && *c != '$')
                .collect();
            let parsed = num::Parsed::read(t.trim()).ok_or_else(|| {
                SqlError::conversion(
                    235,
                    "Cannot convert a char value to money. The char value has incorrect syntax.",
                )
            })?;
            parsed.scaled(4)
        }
        Value::Real(_) | Value::Float(_) => num::from_f64(float_of(&value.value).unwrap_or(0.0), 4),
        Value::DateTime(dt) if is_datetime_like(&value.ty) => num::from_f64(datetime_days(dt), 4),
        Value::Binary(b) => {
            let tail = &b[b.len().saturating_sub(8)..];
            let mut buf = [0u8; 8];
            buf[8 - tail.len()..].copy_from_slice(tail);
            Some(i128::from(i64::from_be_bytes(buf)))
        }
        other => match exact(other) {
            Some((v, s)) => num::rescale(v, s, 4),
            None => return Err(clash(&value.ty, &to)),
        },
    };
    let (lo, hi) = if to == DataType::SmallMoney {
        (i128::from(i32::MIN), i128::from(i32::MAX))
    } else {
        (i128::from(i64::MIN), i128::from(i64::MAX))
    };
    match units {
        Some(u) if (lo..=hi).contains(&u) => Ok(Value::Money(u as i64)),
        _ => Err(overflow("expression", to)),
    }
}
