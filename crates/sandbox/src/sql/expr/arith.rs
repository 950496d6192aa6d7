//! Arithmetic, concatenation and bitwise operators with SQL Server's
//! result types.
//!
//! Result types: <https://learn.microsoft.com/sql/t-sql/data-types/precision-scale-and-length-transact-sql>
//! Operators: <https://learn.microsoft.com/sql/t-sql/language-elements/arithmetic-operators-transact-sql>

use chrono::Duration;

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Decimal, Length, Value};
use super::Typed;
use super::cast::{self, Mode, exact, float_of};
use super::chart;
use super::datetime;
use super::num::{self, MAX_PRECISION, fits, pow10};
use super::types::{Family, add_lengths, decimal_shape, family, higher};

/// An arithmetic or bitwise operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Sub => "subtract",
            Op::Mul => "multiply",
            Op::Div => "divide",
            Op::Mod => "modulo",
            Op::BitAnd => "boolean AND",
            Op::BitOr => "boolean OR",
            Op::BitXor => "boolean XOR",
        }
    }
}

fn incompatible(a: &DataType, b: &DataType, op: Op) -> SqlError {
    SqlError::new(
        402,
        format!(
            "The data types {} and {} are incompatible in the {} operator.",
            a.name(),
            b.name(),
            op.name()
        ),
    )
    .with_state(1)
}

/// 8115 for a result that leaves its type; 220 for the small integers.
pub fn overflow(ty: DataType, value: Option<i128>) -> SqlError {
    match (ty, value) {
        (DataType::TinyInt | DataType::SmallInt, Some(v)) => SqlError::new(
            220,
            format!(
                "Arithmetic overflow error for data type {}, value = {v}.",
                ty.name()
            ),
        ),
        (DataType::Decimal { .. }, _) => SqlError::new(
            8115,
            "Arithmetic overflow error converting expression to data type numeric.",
        ),
        _ => SqlError::new(
            8115,
            format!(
                "Arithmetic overflow error converting expression to data type {}.",
                ty.name()
            ),
        ),
    }
}

/// decimal result precision and scale of `op` over two decimal shapes,
/// capped at 38 with the scale reduced (not below 6) to keep the
/// integral part.
pub fn decimal_result(op: Op, (p1, s1): (u8, u8), (p2, s2): (u8, u8)) -> (u8, u8) {
    let (p1, s1, p2, s2) = (i32::from(p1), i32::from(s1), i32::from(p2), i32::from(s2));
    let (p, s) = match op {
        Op::Mul => (p1 + p2 + 1, s1 + s2),
        Op::Div => {
            let s = 6.max(s1 + p2 + 1);
            (p1 - s1 + s2 + s, s)
        }
        Op::Mod => ((p1 - s1).min(p2 - s2) + s1.max(s2), s1.max(s2)),
        _ => (s1.max(s2) + (p1 - s1).max(p2 - s2) + 1, s1.max(s2)),
    };
    let max = i32::from(MAX_PRECISION);
    let (p, s) = if p > max {
        (max, (s - (p - max)).max(s.min(6)))
    } else {
        (p, s)
    };
    (p.clamp(1, max) as u8, s.clamp(0, p.clamp(1, max)) as u8)
}

fn int_type(ty: &DataType) -> bool {
    matches!(
        ty,
        DataType::Bit | DataType::TinyInt | DataType::SmallInt | DataType::Int | DataType::BigInt
    )
}

fn datetime_like(ty: &DataType) -> bool {
    matches!(ty, DataType::DateTime | DataType::SmallDateTime)
}

/// The result type of `l op r`, independent of the values.
pub fn result_type(op: Op, l: &DataType, r: &DataType) -> SqlResult<DataType> {
    let (fl, fr) = (family(l), family(r));
    if matches!(op, Op::BitAnd | Op::BitOr | Op::BitXor) {
        let ok = |t: &DataType| int_type(t) || t.is_string() || t.is_binary();
        if !ok(l) || !ok(r) || (!int_type(l) && !int_type(r)) {
            return Err(incompatible(l, r, op));
        }
        return Ok(if int_type(l) && int_type(r) {
            higher(*l, *r)
        } else if int_type(l) {
            *l
        } else {
            *r
        });
    }
    if op == Op::Add && fl == Family::String && fr == Family::String {
        let len = add_lengths(
            super::types::string_length(l),
            super::types::string_length(r),
            if l.is_unicode() || r.is_unicode() {
                4000
            } else {
                8000
            },
        );
        let fixed = matches!(l, DataType::Char(_) | DataType::NChar(_))
            && matches!(r, DataType::Char(_) | DataType::NChar(_));
        return Ok(match (l.is_unicode() || r.is_unicode(), fixed, len) {
            (true, true, Length::Fixed(n)) => DataType::NChar(n),
            (false, true, Length::Fixed(n)) => DataType::Char(n),
            (true, _, l) => DataType::NVarChar(l),
            (false, _, l) => DataType::VarChar(l),
        });
    }
    if op == Op::Add && fl == Family::Binary && fr == Family::Binary {
        let len = add_lengths(
            super::types::string_length(l),
            super::types::string_length(r),
            8000,
        );
        return Ok(DataType::VarBinary(len));
    }
    // A string meets a non-string at the other type.
    let (l, r) = (
        if fl == Family::String && fr != Family::String {
            *r
        } else {
            *l
        },
        if fr == Family::String && fl != Family::String {
            *l
        } else {
            *r
        },
    );
    let (fl, fr) = (family(&l), family(&r));
    if fl == Family::Temporal || fr == Family::Temporal {
        let dt_ok =
            |t: &DataType| datetime_like(t) || matches!(family(t), Family::Exact | Family::Approx);
        if matches!(op, Op::Add | Op::Sub) && dt_ok(&l) && dt_ok(&r) {
            return Ok(if datetime_like(&l) {
                higher(l, if datetime_like(&r) { r } else { l })
            } else {
                r
            });
        }
        let (t, o) = if fl == Family::Temporal {
            (l, r)
        } else {
            (r, l)
        };
        return Err(chart::clash(&o, &t));
    }
    let numeric = |f: Family| matches!(f, Family::Exact | Family::Approx);
    if !numeric(fl) || !numeric(fr) || (l == DataType::Bit && r == DataType::Bit) {
        return Err(incompatible(&l, &r, op));
    }
    let hi = higher(l, r);
    if op == Op::Mod && matches!(hi, DataType::Real | DataType::Float) {
        return Err(incompatible(&l, &r, op));
    }
    Ok(match hi {
        DataType::Decimal { .. } => {
            let (a, b) = (
                decimal_shape(&l).unwrap_or((38, 0)),
                decimal_shape(&r).unwrap_or((38, 0)),
            );
            let (precision, scale) = decimal_result(op, a, b);
            DataType::Decimal { precision, scale }
        }
        // bit with an integer is the integer.
        DataType::Bit => DataType::Int,
        other => other,
    })
}

/// Evaluates `l op r`.
pub fn binary(op: Op, l: &Typed, r: &Typed) -> SqlResult<Typed> {
    let mut out = binary_value(op, l, r)?;
    // A concatenation keeps its operands' collation (explicit first).
    if out.ty.is_string() {
        out.collation = match (l.collation, r.collation) {
            (Some(a), _) if a.explicit => Some(a),
            (_, Some(b)) if b.explicit => Some(b),
            (a, b) => a.or(b),
        };
    }
    Ok(out)
}

fn binary_value(op: Op, l: &Typed, r: &Typed) -> SqlResult<Typed> {
    let ty = result_type(op, &l.ty, &r.ty)?;
    if l.value.is_null() || r.value.is_null() {
        return Ok(Typed::null(ty));
    }
    let (l, r) = (&coerce(l, &r.ty)?, &coerce(r, &l.ty)?);
    let value = match ty {
        DataType::Char(_) | DataType::VarChar(_) | DataType::NChar(_) | DataType::NVarChar(_) => {
            let a = cast::text(l, None, ty.is_unicode())?.unwrap_or_default();
            let b = cast::text(r, None, ty.is_unicode())?.unwrap_or_default();
            let mut s = a + &b;
            if let Length::Fixed(n) = super::types::string_length(&ty)
                && s.chars().count() > usize::from(n)
            {
                s = s.chars().take(usize::from(n)).collect();
            }
            Value::String(s)
        }
        DataType::VarBinary(_) if op == Op::Add => match (&l.value, &r.value) {
            (Value::Binary(a), Value::Binary(b)) => {
                let mut v = a.clone();
                v.extend_from_slice(b);
                Value::Binary(v)
            }
            _ => return Err(incompatible(&l.ty, &r.ty, op)),
        },
        DataType::DateTime | DataType::SmallDateTime => datetime_arith(op, l, r, ty)?,
        _ if matches!(op, Op::BitAnd | Op::BitOr | Op::BitXor) => bitwise(op, l, r, ty)?,
        DataType::Real | DataType::Float => {
            let a =
                float_of(&cast::convert(l, DataType::Float, None, Mode::Implicit)?).unwrap_or(0.0);
            let b =
                float_of(&cast::convert(r, DataType::Float, None, Mode::Implicit)?).unwrap_or(0.0);
            let v = match op {
                Op::Add => a + b,
                Op::Sub => a - b,
                Op::Mul => a * b,
                Op::Div if b == 0.0 => return Err(SqlError::divide_by_zero()),
                Op::Div => a / b,
                _ => return Err(incompatible(&l.ty, &r.ty, op)),
            };
            if !v.is_finite() || (ty == DataType::Real && v.abs() > f64::from(f32::MAX)) {
                return Err(overflow(ty, None));
            }
            if ty == DataType::Real {
                Value::Real(v as f32)
            } else {
                Value::Float(v)
            }
        }
        DataType::Decimal { precision, scale } => {
            let a = exact_operand(l)?;
            let b = exact_operand(r)?;
            Value::Decimal(decimal_op(op, a, b, precision, scale)?)
        }
        DataType::Money | DataType::SmallMoney => {
            let a = exact_operand(l)?;
            let b = exact_operand(r)?;
            let d = decimal_op(op, a, b, 38, 4)?;
            let lim = if ty == DataType::SmallMoney {
                i128::from(i32::MAX)
            } else {
                i128::from(i64::MAX)
            };
            if d.value.abs() > lim {
                return Err(overflow(ty, None));
            }
            Value::Money(d.value as i64)
        }
        _ => {
            let (a, _) = exact_operand(l)?;
            let (b, _) = exact_operand(r)?;
            let v = match op {
                Op::Add => a.checked_add(b),
                Op::Sub => a.checked_sub(b),
                Op::Mul => a.checked_mul(b),
                Op::Div if b == 0 => return Err(SqlError::divide_by_zero()),
                Op::Div => a.checked_div(b),
                Op::Mod if b == 0 => return Err(SqlError::divide_by_zero()),
                Op::Mod => a.checked_rem(b),
                _ => None,
            };
            integer(v, ty)?
        }
    };
    Ok(Typed::new(value, ty))
}

/// An integer result checked against its type's range.
pub fn integer(v: Option<i128>, ty: DataType) -> SqlResult<Value> {
    let v = v.ok_or_else(|| overflow(ty, None))?;
    let ok = match ty {
        DataType::TinyInt => (0..=255).contains(&v),
        DataType::SmallInt => i16::try_from(v).is_ok(),
        DataType::Int => i32::try_from(v).is_ok(),
        _ => i64::try_from(v).is_ok(),
    };
    if !ok {
        return Err(overflow(ty, Some(v)));
    }
    Ok(match ty {
        DataType::TinyInt => Value::TinyInt(v as u8),
        DataType::SmallInt => Value::SmallInt(v as i16),
        DataType::Int => Value::Int(v as i32),
        DataType::Bit => Value::Bit(v != 0),
        _ => Value::BigInt(v as i64),
    })
}

/// An exact operand as (unscaled, scale).
fn exact_operand(v: &Typed) -> SqlResult<(i128, u8)> {
    if let Some(e) = exact(&v.value) {
        return Ok(e);
    }
    let target = DataType::Decimal {
        precision: 38,
        scale: 10,
    };
    exact(&cast::convert(v, target, None, Mode::Implicit)?).ok_or_else(|| overflow(target, None))
}

/// A string operand meeting a non-string one is converted to the other's
/// type (a decimal keeps the string's own digits), as precedence says.
fn coerce(v: &Typed, other: &DataType) -> SqlResult<Typed> {
    if !v.ty.is_string() || other.is_string() || other.is_binary() {
        return Ok(v.clone());
    }
    let target = match (other, &v.value) {
        (DataType::Decimal { .. }, Value::String(text)) => match num::Parsed::read(text.trim()) {
            Some(p) => {
                let (prec, scale) = p.shape();
                super::types::decimal(prec.max(scale), scale)
            }
            None => *other,
        },
        _ => *other,
    };
    Ok(Typed::new(
        cast::convert(v, target, None, Mode::Implicit)?,
        target,
    ))
}

fn decimal_op(
    op: Op,
    (a, sa): (i128, u8),
    (b, sb): (i128, u8),
    precision: u8,
    scale: u8,
) -> SqlResult<Decimal> {
    let ty = DataType::Decimal { precision, scale };
    let v = match op {
        Op::Add | Op::Sub => {
            let s = sa.max(sb);
            let (x, y) = (num::rescale(a, sa, s), num::rescale(b, sb, s));
            let sum = match (x, y) {
                (Some(x), Some(y)) => {
                    if op == Op::Add {
                        x.checked_add(y)
                    } else {
                        x.checked_sub(y)
                    }
                }
                _ => None,
            };
            sum.and_then(|v| num::rescale(v, s, scale))
        }
        // a*b has scale sa+sb; bring it to `scale`.
        Op::Mul => {
            let from = u32::from(sa) + u32::from(sb);
            if from >= u32::from(scale) {
                let shift = (from - u32::from(scale)) as u8;
                if shift > 38 {
                    Some(0)
                } else {
                    num::muldiv(a, b, pow10(shift))
                }
            } else {
                a.checked_mul(b)
                    .and_then(|p| p.checked_mul(pow10(scale - from as u8)))
            }
        }
        Op::Div => {
            if b == 0 {
                return Err(SqlError::divide_by_zero());
            }
            // a/b at `scale`: a * 10^(scale + sb - sa) / b.
            let shift = i32::from(scale) + i32::from(sb) - i32::from(sa);
            if shift >= 0 {
                num::muldiv(a, pow10(shift as u8), b)
            } else {
                num::muldiv(
                    a,
                    1,
                    b.checked_mul(pow10((-shift) as u8)).unwrap_or(i128::MAX),
                )
            }
        }
        Op::Mod => {
            if b == 0 {
                return Err(SqlError::divide_by_zero());
            }
            let s = sa.max(sb);
            match (num::rescale(a, sa, s), num::rescale(b, sb, s)) {
                (Some(x), Some(y)) => num::rescale(x % y, s, scale),
                _ => None,
            }
        }
        _ => None,
    };
    match v {
        Some(v) if fits(v, precision) => Ok(Decimal::new(v, scale)),
        _ => Err(overflow(ty, None)),
    }
}

fn bitwise(op: Op, l: &Typed, r: &Typed, ty: DataType) -> SqlResult<Value> {
    let get = |v: &Typed| -> SqlResult<i128> {
        match &v.value {
            Value::Binary(b) => Ok(b.iter().fold(0i128, |acc, x| (acc << 8) | i128::from(*x))),
            other => exact(other)
                .map(|(x, _)| x)
                .ok_or_else(|| incompatible(&l.ty, &r.ty, op)),
        }
    };
    let (a, b) = (get(l)?, get(r)?);
    let v = match op {
        Op::BitAnd => a & b,
        Op::BitOr => a | b,
        _ => a ^ b,
    };
    // Wrap into the type's width: bitwise results never overflow.
    let v = match ty {
        DataType::Bit => v & 1,
        DataType::TinyInt => v & 0xFF,
        DataType::SmallInt => i128::from(v as i16),
        DataType::Int => i128::from(v as i32),
        _ => i128::from(v as i64),
    };
    integer(Some(v), ty)
}

fn datetime_arith(op: Op, l: &Typed, r: &Typed, ty: DataType) -> SqlResult<Value> {
    // datetime arithmetic counts days from 1900-01-01.
    let days = |v: &Typed| -> SqlResult<f64> {
        match &v.value {
            Value::DateTime(dt) => {
                let d = *dt - datetime::base_datetime();
                Ok(d.num_nanoseconds()
                    .map(|n| n as f64 / 86_400e9)
                    .unwrap_or(d.num_seconds() as f64 / 86_400.0))
            }
            Value::String(_) => {
                days_of(&cast::convert(v, DataType::DateTime, None, Mode::Implicit)?)
            }
            other => float_of(other).ok_or_else(|| incompatible(&l.ty, &r.ty, op)),
        }
    };
    let (a, b) = (days(l)?, days(r)?);
    let total = if op == Op::Add { a + b } else { a - b };
    let dt = (total.abs() < 3_000_000.0)
        .then(|| {
            datetime::base_datetime()
                .checked_add_signed(Duration::nanoseconds((total * 86_400e9).round() as i64))
        })
        .flatten();
    let rounded = dt.and_then(|d| {
        if ty == DataType::SmallDateTime {
            datetime::round_smalldatetime(d)
        } else {
            datetime::round_datetime(d)
        }
    });
    rounded
        .map(Value::DateTime)
        .ok_or_else(|| overflow(ty, None))
}

fn days_of(v: &Value) -> SqlResult<f64> {
    match v {
        Value::DateTime(dt) => {
            let d = *dt - datetime::base_datetime();
            Ok(d.num_seconds() as f64 / 86_400.0 + f64::from(d.subsec_nanos()) / 86_400e9)
        }
        _ => Ok(0.0),
    }
}

/// Unary minus: the same type, overflowing at the type's minimum.
pub fn negate(v: &Typed) -> SqlResult<Typed> {
    let ty = match v.ty {
        DataType::Bit | DataType::TinyInt => DataType::Int,
        t if t.is_string()
            || t.is_binary()
            || matches!(family(&t), Family::Temporal | Family::Guid) =>
        {
            return Err(SqlError::new(
                8117,
                format!(
                    "Operand data type {} is invalid for minus operator.",
                    t.name()
                ),
            ));
        }
        t => t,
    };
    let value = match &v.value {
        Value::Null => Value::Null,
        Value::Real(f) => Value::Real(-f),
        Value::Float(f) => Value::Float(-f),
        Value::Decimal(d) => Value::Decimal(Decimal::new(-d.value, d.scale)),
        Value::Money(m) => Value::Money(m.checked_neg().ok_or_else(|| overflow(ty, None))?),
        other => integer(exact(other).map(|(x, _)| -x), ty)?,
    };
    Ok(Typed::new(value, ty))
}

/// `~x` on integer types.
pub fn bit_not(v: &Typed) -> SqlResult<Typed> {
    if !int_type(&v.ty) {
        return Err(SqlError::new(
            8117,
            format!(
                "Operand data type {} is invalid for '~' operator.",
                v.ty.name()
            ),
        ));
    }
    let value = match &v.value {
        Value::Null => Value::Null,
        Value::Bit(b) => Value::Bit(!b),
        Value::TinyInt(x) => Value::TinyInt(!x),
        Value::SmallInt(x) => Value::SmallInt(!x),
        Value::Int(x) => Value::Int(!x),
        Value::BigInt(x) => Value::BigInt(!x),
        _ => Value::Null,
    };
    Ok(Typed::new(value, v.ty))
}

#[cfg(test)]
#[path = "arith_tests.rs"]
mod tests;
