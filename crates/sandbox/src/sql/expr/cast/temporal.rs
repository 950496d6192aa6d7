//! Conversions to the date and time types: strings (with CONVERT's
//! styles), other date/time types, binary and numbers as datetime
//! does them, rounded to the target's precision.

use chrono::{Offset, TimeZone, Utc};

use super::{float_of, overflow, string_kind};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::Typed;
use crate::sql::expr::chart::clash;
use crate::sql::expr::datetime::{self, Parts};
use crate::sql::expr::types::is_datetime_like;
use crate::sql::types::{DataType, Value};

fn date_error(value: &Typed, to: DataType) -> SqlError {
    match to {
        DataType::SmallDateTime => SqlError::conversion(
            295,
            "Conversion failed when converting character string to smalldatetime data type.",
        ),
        _ if value.ty.is_string() => SqlError::conversion(
            241,
            "Conversion failed when converting date and/or time from character string.",
        ),
        _ => overflow("expression", to),
    }
}

fn out_of_range(value: &Typed, to: DataType) -> SqlError {
    if value.ty.is_string() {
        SqlError::conversion(
            242,
            format!(
                "The conversion of a {} data type to a {} data type resulted in an out-of-range value.",
                string_kind(&value.ty),
                to.name()
            ),
        )
    } else {
        overflow("expression", to)
    }
}

pub(super) fn to_temporal(value: &Typed, to: DataType, style: Option<i32>) -> SqlResult<Value> {
    let parts = match &value.value {
        Value::String(s) => datetime::parse(s, style).ok_or_else(|| date_error(value, to))?,
        Value::Date(d) => Parts {
            date: Some(*d),
            ..Parts::default()
        },
        Value::Time(t) => Parts {
            time: Some(*t),
            ..Parts::default()
        },
        Value::DateTime(dt) => Parts {
            date: Some(dt.date()),
            time: Some(dt.time()),
            offset: None,
        },
        Value::DateTimeOffset(dto) => {
            let l = dto.naive_local();
            Parts {
                date: Some(l.date()),
                time: Some(l.time()),
                offset: Some(*dto.offset()),
            }
        }
        Value::Binary(b) if is_datetime_like(&to) => {
            let mut buf = [0u8; 8];
            let tail = &b[b.len().saturating_sub(8)..];
            buf[8 - tail.len()..].copy_from_slice(tail);
            let days = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let ticks = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
            let dt = datetime::base_datetime()
                .checked_add_signed(chrono::Duration::days(i64::from(days)))
                .and_then(|d| {
                    d.checked_add_signed(chrono::Duration::nanoseconds(
                        (i64::from(ticks) * 10_000_000 + 1) / 3,
                    ))
                })
                .ok_or_else(|| overflow("expression", to))?;
            Parts {
                date: Some(dt.date()),
                time: Some(dt.time()),
                offset: None,
            }
        }
        other => {
            let days = float_of(other).ok_or_else(|| clash(&value.ty, &to))?;
            let dt = (days.abs() < 3_000_000.0)
                .then(|| {
                    let ns = (days * 86_400e9).round() as i64;
                    datetime::base_datetime().checked_add_signed(chrono::Duration::nanoseconds(ns))
                })
                .flatten()
                .ok_or_else(|| overflow("expression", to))?;
            Parts {
                date: Some(dt.date()),
                time: Some(dt.time()),
                offset: None,
            }
        }
    };
    let local = parts.local();
    Ok(match to {
        DataType::Date => Value::Date(local.date()),
        DataType::Time { scale } => Value::Time(datetime::round_time(local.time(), scale)),
        DataType::DateTime => {
            Value::DateTime(datetime::round_datetime(local).ok_or_else(|| out_of_range(value, to))?)
        }
        DataType::SmallDateTime => Value::DateTime(
            datetime::round_smalldatetime(local).ok_or_else(|| out_of_range(value, to))?,
        ),
        DataType::DateTime2 { scale } => Value::DateTime(
            datetime::round_fraction(local, scale).ok_or_else(|| out_of_range(value, to))?,
        ),
        DataType::DateTimeOffset { scale } => {
            let local =
                datetime::round_fraction(local, scale).ok_or_else(|| out_of_range(value, to))?;
            let offset = parts.offset.unwrap_or_else(|| Utc.fix());
            let dto = offset
                .from_local_datetime(&local)
                .single()
                .ok_or_else(|| out_of_range(value, to))?;
            Value::DateTimeOffset(dto)
        }
        _ => return Err(clash(&value.ty, &to)),
    })
}
