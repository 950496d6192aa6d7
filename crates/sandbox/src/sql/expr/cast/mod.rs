//! Conversions of values between SQL Server types: explicit (CAST,
//! CONVERT), implicit (operators, comparisons) and on assignment (INSERT,
//! UPDATE, SET), with SQL Server's error numbers. Whether a conversion
//! exists at all is the chart's (`expr::chart`); this folder converts the
//! value, one file per target kind.
//!
//! Truncation, rounding and styles: <https://learn.microsoft.com/sql/t-sql/functions/cast-and-convert-transact-sql>

use super::Typed;
use super::chart::{check_explicit, check_implicit};
use super::num;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::types::{DataType, Value};

mod binary;
mod guid;
mod numeric;
mod temporal;
mod text;

#[cfg(test)]
mod tests;

use binary::to_binary;
use guid::to_guid;
use numeric::{to_decimal, to_float, to_integer, to_money};
use temporal::to_temporal;
pub use text::text;
use text::to_string;

/// How a conversion was asked for: it decides which conversions exist and
/// what happens to values that do not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode<'a> {
    /// CAST, CONVERT: strings truncate silently.
    Explicit,
    /// Operators and comparisons.
    Implicit,
    /// Storing into a column (`table.column`) or variable (`@name`): a
    /// column refuses to truncate (2628), a variable truncates.
    Assign(&'a str),
}

/// Converts `value` to `to`.
pub fn convert(
    value: &Typed,
    to: DataType,
    style: Option<i32>,
    mode: Mode<'_>,
) -> SqlResult<Value> {
    if value.value.is_null() {
        return Ok(Value::Null);
    }
    match mode {
        Mode::Explicit => check_explicit(&value.ty, &to)?,
        _ => check_implicit(&value.ty, &to)?,
    }
    use DataType::*;
    match to {
        Bit | TinyInt | SmallInt | Int | BigInt => to_integer(value, to),
        Decimal { precision, scale } => to_decimal(value, precision, scale).map(Value::Decimal),
        Real => {
            let f = to_float(value, to)?;
            if f.abs() > f64::from(f32::MAX) {
                return Err(overflow("expression", to));
            }
            Ok(Value::Real(f as f32))
        }
        Float => to_float(value, to).map(Value::Float),
        Money | SmallMoney => to_money(value, to),
        Char(_) | VarChar(_) | NChar(_) | NVarChar(_) => to_string(value, to, style, mode),
        Binary(_) | VarBinary(_) => to_binary(value, to, style, mode),
        Date
        | Time { .. }
        | DateTime
        | SmallDateTime
        | DateTime2 { .. }
        | DateTimeOffset { .. } => to_temporal(value, to, style),
        UniqueIdentifier => to_guid(value),
    }
}

/// 8115-style overflow naming the source kind (`numeric`, `float`...).
pub fn overflow(source: &str, to: DataType) -> SqlError {
    let name = match to {
        DataType::Decimal { .. } => "numeric",
        other => other.name(),
    };
    SqlError::new(
        8115,
        format!("Arithmetic overflow error converting {source} to data type {name}."),
    )
}

fn string_kind(ty: &DataType) -> &'static str {
    if ty.is_unicode() {
        "nvarchar"
    } else {
        "varchar"
    }
}

fn source_kind(value: &Typed) -> &'static str {
    match value.ty {
        DataType::Decimal { .. } => "numeric",
        DataType::Real | DataType::Float => "float",
        DataType::Int
        | DataType::SmallInt
        | DataType::TinyInt
        | DataType::BigInt
        | DataType::Bit => "int",
        ref t if t.is_string() => string_kind(t),
        _ => "expression",
    }
}

/// An exact numeric value as (unscaled, scale).
pub fn exact(value: &Value) -> Option<(i128, u8)> {
    Some(match value {
        Value::Bit(b) => (i128::from(*b), 0),
        Value::TinyInt(v) => (i128::from(*v), 0),
        Value::SmallInt(v) => (i128::from(*v), 0),
        Value::Int(v) => (i128::from(*v), 0),
        Value::BigInt(v) => (i128::from(*v), 0),
        Value::Decimal(d) => (d.value, d.scale),
        Value::Money(m) => (i128::from(*m), 4),
        _ => return None,
    })
}

/// A numeric value as f64 (exact types via their decimal text).
pub fn float_of(value: &Value) -> Option<f64> {
    match value {
        Value::Real(f) => Some(f64::from(*f)),
        Value::Float(f) => Some(*f),
        other => exact(other).map(|(v, s)| num::to_f64(v, s)),
    }
}

pub(super) fn truncation(target: &str, kept: &str) -> SqlError {
    match target.rsplit_once('.') {
        Some((table, column)) => SqlError::new(
            2628,
            format!(
                "String or binary data would be truncated in table '{table}', column '{column}'. Truncated value: '{kept}'."
            ),
        ),
        // Only the column is known: name it alone.
        None => SqlError::new(
            2628,
            format!(
                "String or binary data would be truncated in column '{target}'. Truncated value: '{kept}'."
            ),
        ),
    }
}
