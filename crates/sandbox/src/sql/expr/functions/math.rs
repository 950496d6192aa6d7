//! Mathematical functions: ABS, SIGN, CEILING, FLOOR, ROUND, POWER,
//! SQRT, EXP, LOG and LOG10, with SQL Server's result types (mostly the
//! argument's) and its overflow errors.
//!
//! <https://learn.microsoft.com/sql/t-sql/functions/mathematical-functions-transact-sql>

use sqlparser::ast::Expr;

use super::{arity, ev, int_arg, one};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::arith;
use crate::sql::expr::cast::{self, Mode, exact, float_of};
use crate::sql::expr::eval::eval;
use crate::sql::expr::num::{self, fits, pow10};
use crate::sql::expr::types::{Family, family};
use crate::sql::expr::{Scope, Typed};
use crate::sql::types::{DataType, Decimal, Value};

/// Evaluates this family's built-in `name`; `None` when it is not one.
pub(super) fn call(name: &str, args: &[&Expr], scope: &dyn Scope) -> Option<SqlResult<Typed>> {
    let r = match name {
        "ABS" => one(name, args, scope, abs),
        "CEILING" => one(name, args, scope, |v| ceiling_floor(&v, true)),
        "FLOOR" => one(name, args, scope, |v| ceiling_floor(&v, false)),
        "ROUND" => (|| {
            arity(name, args, 2, 3)?;
            let (v, n) = (ev(args, 0, scope)?, ev(args, 1, scope)?);
            let f = args.get(2).map(|e| eval(e, scope)).transpose()?;
            let truncate = match f {
                Some(f) => int_arg(&f)?.unwrap_or(0) != 0,
                None => false,
            };
            round(&v, int_arg(&n)?, truncate)
        })(),
        "POWER" => (|| {
            arity(name, args, 2, 2)?;
            power(&ev(args, 0, scope)?, &ev(args, 1, scope)?)
        })(),
        "SQRT" | "EXP" | "LOG" | "LOG10" => one(name, args, scope, |v| {
            let f = float_of(&cast::convert(&v, DataType::Float, None, Mode::Implicit)?);
            let r = f.map(|x| match name {
                "SQRT" => x.sqrt(),
                "EXP" => x.exp(),
                "LOG" => x.ln(),
                _ => x.log10(),
            });
            match r {
                Some(x) if !x.is_finite() => Err(SqlError::new(
                    3623,
                    "An invalid floating point operation occurred.",
                )),
                r => Ok(Typed::new(
                    r.map(Value::Float).unwrap_or(Value::Null),
                    DataType::Float,
                )),
            }
        }),
        "SIGN" => one(name, args, scope, sign),
        _ => return None,
    };
    Some(r)
}

fn abs(v: Typed) -> SqlResult<Typed> {
    let ty = match v.ty {
        DataType::Bit => DataType::Int,
        t if matches!(family(&t), Family::Exact | Family::Approx) => t,
        t if t.is_string() => DataType::Float,
        t => {
            return Err(SqlError::new(
                8117,
                format!(
                    "Operand data type {} is invalid for abs operator.",
                    t.name()
                ),
            ));
        }
    };
    let v = Typed::new(cast::convert(&v, ty, None, Mode::Implicit)?, ty);
    let neg = match &v.value {
        Value::Null => false,
        Value::Real(f) => *f < 0.0,
        Value::Float(f) => *f < 0.0,
        other => exact(other).is_some_and(|(x, _)| x < 0),
    };
    if neg {
        arith::negate(&v)
            .map(|n| Typed::new(n.value, ty))
            .and_then(|n| Ok(Typed::new(cast::convert(&n, ty, None, Mode::Implicit)?, ty)))
    } else {
        Ok(v)
    }
}

fn sign(v: Typed) -> SqlResult<Typed> {
    let ty = match v.ty {
        DataType::Bit | DataType::TinyInt | DataType::SmallInt => DataType::Int,
        DataType::Real => DataType::Float,
        t if matches!(family(&t), Family::Exact | Family::Approx) => t,
        t if t.is_string() => DataType::Float,
        t => {
            return Err(SqlError::new(
                8117,
                format!(
                    "Operand data type {} is invalid for sign operator.",
                    t.name()
                ),
            ));
        }
    };
    let s: Option<i32> = match &v.value {
        Value::Null => None,
        other => match exact(other) {
            Some((x, _)) => Some(x.signum() as i32),
            None => float_of(&cast::convert(&v, DataType::Float, None, Mode::Implicit)?).map(|f| {
                if f > 0.0 {
                    1
                } else if f < 0.0 {
                    -1
                } else {
                    0
                }
            }),
        },
    };
    let one = Typed::new(s.map(Value::Int).unwrap_or(Value::Null), DataType::Int);
    Ok(Typed::new(
        cast::convert(&one, ty, None, Mode::Implicit)?,
        ty,
    ))
}

/// CEILING/FLOOR: integers unchanged, decimal(p,s) to decimal(p,0)
/// (one more digit when rounding up could need it), floats stay float.
pub fn ceiling_floor(v: &Typed, ceiling: bool) -> SqlResult<Typed> {
    match v.ty {
        DataType::Decimal { precision, scale } => {
            let ty = DataType::Decimal {
                precision: (precision - scale).max(1),
                scale: 0,
            };
            let Value::Decimal(d) = &v.value else {
                return Ok(Typed::null(ty));
            };
            let p = pow10(d.scale);
            let q = d.value.div_euclid(p);
            let r = d.value.rem_euclid(p);
            let out = if ceiling && r != 0 { q + 1 } else { q };
            let ty = if fits(out, (precision - scale).max(1)) {
                ty
            } else {
                DataType::Decimal {
                    precision: (precision - scale + 1).min(38),
                    scale: 0,
                }
            };
            Ok(Typed::new(Value::Decimal(Decimal::new(out, 0)), ty))
        }
        DataType::Money | DataType::SmallMoney => {
            let Value::Money(m) = v.value else {
                return Ok(Typed::null(v.ty));
            };
            let q = m.div_euclid(10_000);
            let r = m.rem_euclid(10_000);
            let out = if ceiling && r != 0 { q + 1 } else { q };
            Ok(Typed::new(Value::Money(out * 10_000), v.ty))
        }
        t if matches!(family(&t), Family::Exact) => Ok(v.clone()),
        DataType::Real | DataType::Float => {
            let f = float_of(&v.value).map(|f| if ceiling { f.ceil() } else { f.floor() });
            Ok(Typed::new(
                f.map(Value::Float).unwrap_or(Value::Null),
                DataType::Float,
            ))
        }
        t if t.is_string() => {
            let f = Typed::new(
                cast::convert(v, DataType::Float, None, Mode::Implicit)?,
                DataType::Float,
            );
            ceiling_floor(&f, ceiling)
        }
        t => Err(SqlError::new(
            8117,
            format!(
                "Operand data type {} is invalid for {} function.",
                t.name(),
                if ceiling { "ceiling" } else { "floor" }
            ),
        )),
    }
}

/// ROUND(x, n [, truncate]): the type of x; rounding that needs a digit
/// more than the type has is 8115, as in SQL Server.
fn round(v: &Typed, n: Option<i64>, truncate: bool) -> SqlResult<Typed> {
    let ty = match v.ty {
        DataType::Bit | DataType::TinyInt | DataType::SmallInt => DataType::Int,
        DataType::Real => DataType::Float,
        t if t.is_string() => DataType::Float,
        t => t,
    };
    let Some(n) = n else {
        return Ok(Typed::null(ty));
    };
    let v = Typed::new(cast::convert(v, ty, None, Mode::Implicit)?, ty);
    if v.value.is_null() {
        return Ok(v);
    }
    if let Some((x, s)) = exact(&v.value) {
        // Round x*10^-s at n decimal places, keeping scale s.
        let keep = i64::from(s) - n;
        let r = if keep <= 0 {
            x
        } else if keep > 38 {
            0
        } else {
            let unit = pow10(keep as u8);
            let q = if truncate {
                x / unit
            } else {
                num::muldiv(x, 1, unit).unwrap_or(0)
            };
            q * unit
        };
        let value = match ty {
            DataType::Decimal { precision, scale } => {
                if !fits(r, precision) {
                    return Err(cast::overflow("expression", ty));
                }
                Value::Decimal(Decimal::new(r, scale))
            }
            DataType::Money | DataType::SmallMoney => {
                Value::Money(i64::try_from(r).map_err(|_| cast::overflow("expression", ty))?)
            }
            _ => arith::integer(Some(r), ty)?,
        };
        return Ok(Typed::new(value, ty));
    }
    let f = float_of(&v.value).unwrap_or(0.0);
    let m = 10f64.powi(n.clamp(-300, 300) as i32);
    let r = if truncate {
        (f * m).trunc() / m
    } else {
        (f * m).round() / m
    };
    Ok(Typed::new(Value::Float(r), DataType::Float))
}

/// POWER(x, y): the type of x (ints stay integers, decimal(p,s) becomes
/// decimal(38,s)), computed in floating point.
fn power(x: &Typed, y: &Typed) -> SqlResult<Typed> {
    let ty = match x.ty {
        DataType::Bit | DataType::TinyInt | DataType::SmallInt => DataType::Int,
        DataType::Decimal { scale, .. } => DataType::Decimal {
            precision: 38,
            scale,
        },
        DataType::Real => DataType::Float,
        t if t.is_string() => DataType::Float,
        t => t,
    };
    let (Some(a), Some(b)) = (
        float_of(&cast::convert(x, DataType::Float, None, Mode::Implicit)?),
        float_of(&cast::convert(y, DataType::Float, None, Mode::Implicit)?),
    ) else {
        return Ok(Typed::null(ty));
    };
    let r = a.powf(b);
    if !r.is_finite() {
        return Err(SqlError::new(
            3623,
            "An invalid floating point operation occurred.",
        ));
    }
    let f = Typed::new(Value::Float(r), DataType::Float);
    let value = match ty {
        DataType::Int | DataType::BigInt => arith::integer(Some(r.trunc() as i128), ty)?,
        _ => cast::convert(&f, ty, None, Mode::Implicit)?,
    };
    Ok(Typed::new(value, ty))
}
