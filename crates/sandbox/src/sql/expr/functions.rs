//! Built-in scalar functions; names the sandbox does not know are offered
//! to the engine (`Scope::system_function`) before failing with 195.
//!
//! String functions: <https://learn.microsoft.com/sql/t-sql/functions/string-functions-transact-sql>
//! Math: <https://learn.microsoft.com/sql/t-sql/functions/mathematical-functions-transact-sql>
//! Dates: <https://learn.microsoft.com/sql/t-sql/functions/date-and-time-data-types-and-functions-transact-sql>

use chrono::{FixedOffset, NaiveDateTime, Offset, TimeZone};
use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, TrimWhereField,
};

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Decimal, Length, Value};
use super::arith;
use super::cast::{self, Mode, exact, float_of};
use super::datetime::{self, DatePart};
use super::eval::{branch_type, eval, truth_of};
use super::num::{self, fits, pow10};
use super::types::{self as ty, Family, family};
use super::{Scope, Typed, aggregate, compare};

fn args_of(f: &Function) -> SqlResult<Vec<&Expr>> {
    match &f.args {
        FunctionArguments::None => Ok(Vec::new()),
        FunctionArguments::Subquery(_) => Err(SqlError::unsupported(&f.to_string())),
        FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                _ => Err(SqlError::syntax(&a.to_string())),
            })
            .collect(),
    }
}

fn arity(name: &str, args: &[&Expr], min: usize, max: usize) -> SqlResult<()> {
    if args.len() < min || args.len() > max {
        let msg = if min == max {
            format!("The {name} function requires {min} argument(s).")
        } else {
            format!("The {name} function requires {min} to {max} arguments.")
        };
        return Err(SqlError::new(174, msg).with_state(1).aborting_batch());
    }
    Ok(())
}

/// Calls a function: aggregates go to the scope, built-ins are evaluated
/// here, anything else is offered to `Scope::system_function`.
pub fn call(f: &Function, scope: &dyn Scope) -> SqlResult<Typed> {
    if f.over.is_some() {
        return Err(SqlError::unsupported("OVER"));
    }
    if aggregate::classify(f).is_some() {
        return scope.aggregate(f).unwrap_or_else(|| {
            Err(SqlError::new(
                147,
                "An aggregate may not appear in the WHERE clause unless it is in a subquery contained in a HAVING clause or a select list, and the column being aggregated is an outer reference.",
            ))
        });
    }
    let parts: Vec<String> = f
        .name
        .0
        .iter()
        .map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_default())
        .collect();
    let last = parts.last().cloned().unwrap_or_default();
    let upper = last.to_uppercase();
    let args = args_of(f)?;
    if parts.len() == 1
        && let Some(r) = builtin(&upper, &args, scope)
    {
        return r;
    }
    let mut values = Vec::with_capacity(args.len());
    for a in &args {
        values.push(eval(a, scope)?);
    }
    match scope.system_function(&upper, &values) {
        Some(r) => r,
        None if parts.len() == 1 => Err(SqlError::new(195, format!("'{last}' is not a recognized built-in function name.")).with_state(10).aborting_batch()),
        None => Err(SqlError::new(
            4121,
            format!(
                "Cannot find either column \"{}\" or the user-defined function or aggregate \"{}\", or the name is ambiguous.",
                parts[0],
                parts.join(".")
            ),
        )
        .aborting_batch()),
    }
}

fn ev(args: &[&Expr], i: usize, scope: &dyn Scope) -> SqlResult<Typed> {
    eval(args[i], scope)
}

fn int_arg(v: &Typed) -> SqlResult<Option<i64>> {
    match cast::convert(v, DataType::BigInt, None, Mode::Implicit)? {
        Value::BigInt(i) => Ok(Some(i)),
        _ => Ok(None),
    }
}

fn text_of(v: &Typed) -> SqlResult<Option<String>> {
    cast::text(v, None, false)
}

/// The string type a string function returns for an argument:
/// char(n) becomes varchar(n); non-strings their text length.
fn string_type(t: &DataType) -> DataType {
    match t {
        DataType::Char(n) => DataType::VarChar(Length::Fixed(*n)),
        DataType::NChar(n) => DataType::NVarChar(Length::Fixed(*n)),
        DataType::VarChar(_) | DataType::NVarChar(_) => *t,
        other => ty::varchar(ty::text_length(other)),
    }
}

fn string_result(s: Option<String>, ty: DataType) -> Typed {
    Typed::new(s.map(Value::String).unwrap_or(Value::Null), ty)
}

fn length_type(t: &DataType) -> DataType {
    if t.is_max() {
        DataType::BigInt
    } else {
        DataType::Int
    }
}

fn int_result(v: Option<i64>, ty: DataType) -> Typed {
    let value = match (v, ty) {
        (None, _) => Value::Null,
        (Some(i), DataType::BigInt) => Value::BigInt(i),
        (Some(i), _) => Value::Int(i32::try_from(i).unwrap_or(i32::MAX)),
    };
    Typed::new(value, ty)
}

fn datepart_arg(e: &Expr, function: &str) -> SqlResult<DatePart> {
    let name = match e {
        Expr::Identifier(id) => id.value.clone(),
        other => other.to_string(),
    };
    DatePart::parse(&name).ok_or_else(|| {
        SqlError::new(
            155,
            format!("'{name}' is not a recognized {function} option."),
        )
        .with_state(1)
        .aborting_batch()
    })
}

/// A local date-time with its offset (datetimeoffset only).
type Moment = (NaiveDateTime, Option<FixedOffset>);

/// A date/time argument as its local date-time and offset, with the type
/// it has (strings are read as datetime2, or datetime for DATEADD).
fn moment(v: &Typed, string_as: DataType) -> SqlResult<(Option<Moment>, DataType)> {
    let t = match family(&v.ty) {
        Family::Temporal => v.clone(),
        Family::String => Typed::new(
            cast::convert(v, string_as, None, Mode::Implicit)?,
            string_as,
        ),
        _ => Typed::new(
            cast::convert(v, DataType::DateTime, None, Mode::Implicit)?,
            DataType::DateTime,
        ),
    };
    let m = match &t.value {
        Value::Null => None,
        Value::Date(d) => Some((d.and_time(chrono::NaiveTime::MIN), None)),
        Value::Time(x) => Some((datetime::base_date().and_time(*x), None)),
        Value::DateTime(dt) => Some((*dt, None)),
        Value::DateTimeOffset(dto) => Some((dto.naive_local(), Some(*dto.offset()))),
        _ => None,
    };
    Ok((m, t.ty))
}

fn now(scope: &dyn Scope, local: bool) -> NaiveDateTime {
    let utc = scope.now_utc();
    if local {
        utc + chrono::Duration::seconds(i64::from(scope.server_offset().local_minus_utc()))
    } else {
        utc
    }
}

fn datetime_value(dt: NaiveDateTime) -> Typed {
    Typed::new(
        datetime::round_datetime(dt)
            .map(Value::DateTime)
            .unwrap_or(Value::Null),
        DataType::DateTime,
    )
}

fn datetime2_value(dt: NaiveDateTime) -> Typed {
    let d = datetime::round_fraction(dt, 7).unwrap_or(dt);
    Typed::new(Value::DateTime(d), DataType::DateTime2 { scale: 7 })
}

/// Evaluates a built-in; `None` when `name` is not one.
fn builtin(name: &str, args: &[&Expr], scope: &dyn Scope) -> Option<SqlResult<Typed>> {
    let r = match name {
        "ISNULL" => isnull(args, scope),
        "COALESCE" => coalesce(args, scope),
        "NULLIF" => nullif(args, scope),
        "IIF" => iif(args, scope),
        "DATEADD" => dateadd(args, scope),
        "DATEDIFF" => datediff(args, scope, false),
        "DATEDIFF_BIG" => datediff(args, scope, true),
        "DATEPART" => datepart(args, scope, false),
        "DATENAME" => datepart(args, scope, true),
        "YEAR" | "MONTH" | "DAY" => ymd(name, args, scope),
        "EOMONTH" => eomonth(args, scope),
        "SYSUTCDATETIME" | "SYSDATETIME" | "GETDATE" | "GETUTCDATE" | "CURRENT_TIMESTAMP"
        | "SYSDATETIMEOFFSET" => arity(name, args, 0, 0).map(|()| match name {
            "SYSUTCDATETIME" => datetime2_value(now(scope, false)),
            "SYSDATETIME" => datetime2_value(now(scope, true)),
            "GETUTCDATE" => datetime_value(now(scope, false)),
            "SYSDATETIMEOFFSET" => {
                let o = scope.server_offset();
                let local = datetime::round_fraction(now(scope, true), 7)
                    .unwrap_or_else(|| now(scope, true));
                let v = o
                    .from_local_datetime(&local)
                    .single()
                    .map(Value::DateTimeOffset)
                    .unwrap_or(Value::Null);
                Typed::new(v, DataType::DateTimeOffset { scale: 7 })
            }
            _ => datetime_value(now(scope, true)),
        }),
        "LEN" => one(name, args, scope, |v| {
            let t = text_of(&v)?;
            Ok(int_result(
                t.map(|s| s.trim_end_matches(' ').chars().count() as i64),
                length_type(&v.ty),
            ))
        }),
        "DATALENGTH" => one(name, args, scope, |v| {
            let n = match &v.value {
                Value::Null => None,
                Value::String(s) if v.ty.is_unicode() => Some(s.encode_utf16().count() as i64 * 2),
                Value::String(s) => Some(s.chars().count() as i64),
                Value::Binary(b) => Some(b.len() as i64),
                _ => Some(i64::from(v.ty.max_length())),
            };
            Ok(int_result(n, length_type(&v.ty)))
        }),
        "UPPER" | "LOWER" => one(name, args, scope, |v| {
            let t = text_of(&v)?.map(|s| {
                if name == "UPPER" {
                    s.to_uppercase()
                } else {
                    s.to_lowercase()
                }
            });
            Ok(string_result(t, string_type(&v.ty)))
        }),
        "LTRIM" | "RTRIM" => (|| {
            arity(name, args, 1, 2)?;
            let v = ev(args, 0, scope)?;
            let chars = args.get(1).map(|e| eval(e, scope)).transpose()?;
            let side = if name == "LTRIM" {
                TrimWhereField::Leading
            } else {
                TrimWhereField::Trailing
            };
            trim(&v, chars.as_ref(), Some(&side))
        })(),
        "SUBSTRING" => (|| {
            arity(name, args, 3, 3)?;
            substring(
                &ev(args, 0, scope)?,
                Some(&ev(args, 1, scope)?),
                Some(&ev(args, 2, scope)?),
            )
        })(),
        "LEFT" | "RIGHT" => (|| {
            arity(name, args, 2, 2)?;
            let (s, n) = (ev(args, 0, scope)?, ev(args, 1, scope)?);
            let ty = string_type(&s.ty);
            let (Some(text), Some(n)) = (text_of(&s)?, int_arg(&n)?) else {
                return Ok(Typed::null(ty));
            };
            if n < 0 {
                return Err(SqlError::new(
                    536,
                    format!(
                        "Invalid length parameter passed to the {} function.",
                        name.to_lowercase()
                    ),
                ));
            }
            let chars: Vec<char> = text.chars().collect();
            let n = (n as usize).min(chars.len());
            let out: String = if name == "LEFT" {
                chars[..n].iter().collect()
            } else {
                chars[chars.len() - n..].iter().collect()
            };
            Ok(string_result(Some(out), ty))
        })(),
        "REPLACE" => (|| {
            arity(name, args, 3, 3)?;
            let (s, from, to) = (
                ev(args, 0, scope)?,
                ev(args, 1, scope)?,
                ev(args, 2, scope)?,
            );
            let unicode = s.ty.is_unicode() || from.ty.is_unicode() || to.ty.is_unicode();
            let ty = match (s.ty.is_max(), unicode) {
                (true, true) => DataType::NVarChar(Length::Max),
                (true, false) => DataType::VarChar(Length::Max),
                (false, true) => DataType::NVarChar(Length::Fixed(4000)),
                (false, false) => DataType::VarChar(Length::Fixed(8000)),
            };
            let (Some(s), Some(from), Some(to)) = (text_of(&s)?, text_of(&from)?, text_of(&to)?)
            else {
                return Ok(Typed::null(ty));
            };
            Ok(string_result(Some(replace_ci(&s, &from, &to)), ty))
        })(),
        "CHARINDEX" => (|| {
            arity(name, args, 2, 3)?;
            let (n, h) = (ev(args, 0, scope)?, ev(args, 1, scope)?);
            let start = args.get(2).map(|e| eval(e, scope)).transpose()?;
            charindex(&n, &h, start.as_ref())
        })(),
        "CONCAT" => concat(args, scope),
        "REPLICATE" => (|| {
            arity(name, args, 2, 2)?;
            let (s, n) = (ev(args, 0, scope)?, ev(args, 1, scope)?);
            let base = string_type(&s.ty);
            let ty = if base.is_max() {
                base
            } else if base.is_unicode() {
                DataType::NVarChar(Length::Fixed(4000))
            } else {
                DataType::VarChar(Length::Fixed(8000))
            };
            let (Some(text), Some(n)) = (text_of(&s)?, int_arg(&n)?) else {
                return Ok(Typed::null(ty));
            };
            if n < 0 {
                return Ok(Typed::null(ty));
            }
            let mut out = text.repeat(n.min(1_000_000) as usize);
            if let Length::Fixed(cap) = ty::string_length(&ty) {
                out = out.chars().take(usize::from(cap)).collect();
            }
            Ok(string_result(Some(out), ty))
        })(),
        "REVERSE" => one(name, args, scope, |v| {
            Ok(string_result(
                text_of(&v)?.map(|s| s.chars().rev().collect()),
                string_type(&v.ty),
            ))
        }),
        "SPACE" => one(name, args, scope, |v| {
            let n = int_arg(&v)?;
            Ok(string_result(
                n.filter(|n| *n >= 0)
                    .map(|n| " ".repeat(n.min(8000) as usize)),
                DataType::VarChar(Length::Fixed(8000)),
            ))
        }),
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
        "NEWID" => arity(name, args, 0, 0).map(|()| {
            Typed::new(
                Value::Guid(uuid::Uuid::new_v4()),
                DataType::UniqueIdentifier,
            )
        }),
        "ISNUMERIC" => one(name, args, scope, |v| {
            let ok = match &v.value {
                Value::Null => false,
                Value::String(s) => {
                    let t: String = s
                        .trim()
                        .chars()
                        .filter(|c| *c != ',' && *c != '$')
                        .collect();
                    !t.is_empty()
                        && (num::Parsed::read(&t).is_some()
                            || (t.parse::<f64>().is_ok_and(f64::is_finite)
                                && t.bytes()
                                    .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))))
                }
                _ => matches!(family(&v.ty), Family::Exact | Family::Approx),
            };
            Ok(Typed::new(Value::Int(i32::from(ok)), DataType::Int))
        }),
        _ => return None,
    };
    Some(r)
}

fn one(
    name: &str,
    args: &[&Expr],
    scope: &dyn Scope,
    f: impl FnOnce(Typed) -> SqlResult<Typed>,
) -> SqlResult<Typed> {
    arity(name, args, 1, 1)?;
    f(ev(args, 0, scope)?)
}

fn isnull(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("isnull", args, 2, 2)?;
    let a = ev(args, 0, scope)?;
    if !a.value.is_null() {
        return Ok(a);
    }
    let b = ev(args, 1, scope)?;
    Ok(Typed::new(
        cast::convert(&b, a.ty, None, Mode::Implicit)?,
        a.ty,
    ))
}

fn coalesce(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    if args.len() < 2 {
        return Err(
            SqlError::new(189, "The coalesce function requires 2 to 254 arguments.")
                .aborting_batch(),
        );
    }
    for (i, e) in args.iter().enumerate() {
        let v = eval(e, scope)?;
        if !v.value.is_null() || i + 1 == args.len() {
            let others: Vec<&Expr> = args
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, e)| *e)
                .collect();
            let ty = branch_type(Some((&v, args[i])), &others, scope)?;
            return Ok(Typed::new(cast::convert(&v, ty, None, Mode::Implicit)?, ty));
        }
    }
    Ok(Typed::null(DataType::Int))
}

fn nullif(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("nullif", args, 2, 2)?;
    let (a, b) = (ev(args, 0, scope)?, ev(args, 1, scope)?);
    if compare::compare(&a, &b)? == Some(std::cmp::Ordering::Equal) {
        Ok(Typed::null(a.ty))
    } else {
        Ok(a)
    }
}

fn iif(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("iif", args, 3, 3)?;
    let c = truth_of(&ev(args, 0, scope)?, "IIF")?;
    let (pick, other) = if c == Some(true) { (1, 2) } else { (2, 1) };
    let v = ev(args, pick, scope)?;
    let ty = branch_type(Some((&v, args[pick])), &[args[other]], scope)?;
    Ok(Typed::new(cast::convert(&v, ty, None, Mode::Implicit)?, ty))
}

fn dateadd(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("dateadd", args, 3, 3)?;
    let part = datepart_arg(args[0], "dateadd")?;
    let n = ev(args, 1, scope)?;
    let (m, ty) = moment(&ev(args, 2, scope)?, DataType::DateTime)?;
    datetime::check_part(part, &ty, "dateadd")?;
    let n = match &n.value {
        Value::Null => None,
        Value::Decimal(d) => Some(i64::try_from(d.value / pow10(d.scale)).unwrap_or(i64::MAX)),
        _ => int_arg(&n)?,
    };
    let (Some((local, offset)), Some(n)) = (m, n) else {
        return Ok(Typed::null(ty));
    };
    let overflow = || {
        SqlError::new(
            517,
            format!(
                "Adding a value to a '{}' column caused an overflow.",
                ty.name()
            ),
        )
    };
    let added = datetime::add(part, n, local).ok_or_else(overflow)?;
    let value = match ty {
        DataType::Date => Value::Date(added.date()),
        // time wraps around midnight.
        DataType::Time { .. } => Value::Time(added.time()),
        DataType::DateTime => {
            Value::DateTime(datetime::round_datetime(added).ok_or_else(overflow)?)
        }
        DataType::SmallDateTime => {
            Value::DateTime(datetime::round_smalldatetime(added).ok_or_else(overflow)?)
        }
        DataType::DateTimeOffset { .. } => {
            let o = offset.unwrap_or_else(|| chrono::Utc.fix());
            Value::DateTimeOffset(
                o.from_local_datetime(&added)
                    .single()
                    .ok_or_else(overflow)?,
            )
        }
        _ => Value::DateTime(added),
    };
    Ok(Typed::new(value, ty))
}

fn datediff(args: &[&Expr], scope: &dyn Scope, big: bool) -> SqlResult<Typed> {
    let fname = if big { "datediff_big" } else { "datediff" };
    arity(fname, args, 3, 3)?;
    let part = datepart_arg(args[0], fname)?;
    let dt2 = DataType::DateTime2 { scale: 7 };
    let (a, ta) = moment(&ev(args, 1, scope)?, dt2)?;
    let (b, tb) = moment(&ev(args, 2, scope)?, dt2)?;
    datetime::check_part(part, &ta, fname)?;
    datetime::check_part(part, &tb, fname)?;
    let rty = if big { DataType::BigInt } else { DataType::Int };
    let (Some((a, oa)), Some((b, ob))) = (a, b) else {
        return Ok(Typed::null(rty));
    };
    // datetimeoffset values are compared in UTC.
    let utc = |d: NaiveDateTime, o: Option<FixedOffset>| {
        d - chrono::Duration::seconds(i64::from(o.map(|o| o.local_minus_utc()).unwrap_or(0)))
    };
    let (a, b) = if oa.is_some() || ob.is_some() {
        (utc(a, oa), utc(b, ob))
    } else {
        (a, b)
    };
    let n = datetime::diff(part, a, b);
    let fits = if big {
        i64::try_from(n).is_ok()
    } else {
        i32::try_from(n).is_ok()
    };
    if !fits {
        return Err(SqlError::new(
            535,
            format!(
                "The {fname} function resulted in an overflow. The number of dateparts separating two date/time instances is too large. Try to use {fname} with a less precise datepart."
            ),
        ));
    }
    Ok(int_result(Some(n as i64), rty))
}

fn datepart(args: &[&Expr], scope: &dyn Scope, name: bool) -> SqlResult<Typed> {
    let fname = if name { "datename" } else { "datepart" };
    arity(fname, args, 2, 2)?;
    let part = datepart_arg(args[0], fname)?;
    let (m, ty) = moment(&ev(args, 1, scope)?, DataType::DateTime2 { scale: 7 })?;
    datetime::check_part(part, &ty, fname)?;
    if name {
        let t = DataType::NVarChar(Length::Fixed(30));
        return Ok(string_result(m.map(|(d, o)| datetime::name(part, d, o)), t));
    }
    Ok(int_result(
        m.map(|(d, o)| datetime::part(part, d, o)),
        DataType::Int,
    ))
}

fn ymd(name: &str, args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity(name, args, 1, 1)?;
    let (m, _) = moment(&ev(args, 0, scope)?, DataType::DateTime2 { scale: 7 })?;
    let part = match name {
        "YEAR" => DatePart::Year,
        "MONTH" => DatePart::Month,
        _ => DatePart::Day,
    };
    Ok(int_result(
        m.map(|(d, o)| datetime::part(part, d, o)),
        DataType::Int,
    ))
}

fn eomonth(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("eomonth", args, 1, 2)?;
    let (m, _) = moment(&ev(args, 0, scope)?, DataType::Date)?;
    let add = match args.get(1) {
        Some(e) => int_arg(&eval(e, scope)?)?,
        None => Some(0),
    };
    let (Some((d, _)), Some(add)) = (m, add) else {
        return Ok(Typed::null(DataType::Date));
    };
    let shifted = datetime::add(DatePart::Month, add, d).ok_or_else(|| {
        SqlError::new(517, "Adding a value to a 'date' column caused an overflow.")
    })?;
    let date = shifted.date();
    let last = datetime::last_day(
        chrono::Datelike::year(&date),
        chrono::Datelike::month(&date),
    )
    .unwrap_or(28);
    let v = chrono::NaiveDate::from_ymd_opt(
        chrono::Datelike::year(&date),
        chrono::Datelike::month(&date),
        last,
    );
    Ok(Typed::new(
        v.map(Value::Date).unwrap_or(Value::Null),
        DataType::Date,
    ))
}

/// SUBSTRING(s, start, length) with 1-based, possibly non-positive start.
pub fn substring(s: &Typed, from: Option<&Typed>, len: Option<&Typed>) -> SqlResult<Typed> {
    let ty = if s.ty.is_binary() {
        s.ty
    } else {
        string_type(&s.ty)
    };
    let ty = match ty {
        DataType::Binary(n) => DataType::VarBinary(Length::Fixed(n)),
        t => t,
    };
    let start = match from {
        Some(f) => int_arg(f)?,
        None => Some(1),
    };
    let length = match len {
        Some(l) => int_arg(l)?,
        None => Some(i64::MAX / 4),
    };
    let (Some(start), Some(length)) = (start, length) else {
        return Ok(Typed::null(ty));
    };
    if length < 0 {
        return Err(SqlError::new(
            537,
            "Invalid length parameter passed to the substring function.",
        ));
    }
    // Characters from max(start, 1) up to start + length - 1.
    let first = start.max(1);
    let end = start.saturating_add(length);
    let take = (end - first).max(0) as usize;
    let skip = (first - 1) as usize;
    match &s.value {
        Value::Null => Ok(Typed::null(ty)),
        Value::Binary(b) => Ok(Typed::new(
            Value::Binary(b.iter().skip(skip).take(take).copied().collect()),
            ty,
        )),
        _ => {
            let text = text_of(s)?.unwrap_or_default();
            Ok(string_result(
                Some(text.chars().skip(skip).take(take).collect()),
                ty,
            ))
        }
    }
}

/// TRIM/LTRIM/RTRIM: spaces, or the given characters.
pub fn trim(s: &Typed, chars: Option<&Typed>, side: Option<&TrimWhereField>) -> SqlResult<Typed> {
    let ty = string_type(&s.ty);
    let set: Vec<char> = match chars {
        Some(c) => match text_of(c)? {
            Some(t) => t.chars().collect(),
            None => return Ok(Typed::null(ty)),
        },
        None => vec![' '],
    };
    let Some(text) = text_of(s)? else {
        return Ok(Typed::null(ty));
    };
    let is = |c: char| set.contains(&c);
    let out = match side {
        Some(TrimWhereField::Leading) => text.trim_start_matches(is),
        Some(TrimWhereField::Trailing) => text.trim_end_matches(is),
        _ => text.trim_matches(is),
    };
    Ok(string_result(Some(out.to_string()), ty))
}

fn fold(s: &str) -> Vec<char> {
    s.chars()
        .map(|c| c.to_uppercase().next().unwrap_or(c))
        .collect()
}

/// REPLACE, matching case-insensitively as the default collation does.
fn replace_ci(s: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return s.to_string();
    }
    let (hay, needle): (Vec<char>, Vec<char>) = (fold(s), fold(from));
    let orig: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < orig.len() {
        if i + needle.len() <= hay.len() && hay[i..i + needle.len()] == needle[..] {
            out.push_str(to);
            i += needle.len();
        } else {
            out.push(orig[i]);
            i += 1;
        }
    }
    out
}

/// CHARINDEX(needle, haystack [, start]): 1-based, 0 when absent.
pub fn charindex(needle: &Typed, hay: &Typed, start: Option<&Typed>) -> SqlResult<Typed> {
    let ty = if needle.ty.is_max() || hay.ty.is_max() {
        DataType::BigInt
    } else {
        DataType::Int
    };
    let start = match start {
        Some(s) => int_arg(s)?,
        None => Some(1),
    };
    let (Some(n), Some(h), Some(start)) = (text_of(needle)?, text_of(hay)?, start) else {
        return Ok(Typed::null(ty));
    };
    let (n, h) = (fold(&n), fold(&h));
    if n.is_empty() {
        return Ok(int_result(Some(0), ty));
    }
    let from = (start.max(1) - 1) as usize;
    let pos = (from..h.len()).find(|i| i + n.len() <= h.len() && h[*i..*i + n.len()] == n[..]);
    Ok(int_result(Some(pos.map(|p| p as i64 + 1).unwrap_or(0)), ty))
}

fn concat(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    if args.len() < 2 {
        return Err(
            SqlError::new(189, "The concat function requires 2 to 254 arguments.").aborting_batch(),
        );
    }
    let mut out = String::new();
    let mut unicode = false;
    let mut len = Length::Fixed(0);
    for e in args {
        let v = eval(e, scope)?;
        unicode |= v.ty.is_unicode();
        len = ty::add_lengths(len, ty::string_length(&string_type(&v.ty)), u16::MAX);
        if let Some(t) = text_of(&v)? {
            out.push_str(&t);
        }
    }
    let ty = if unicode {
        ty::nvarchar(len)
    } else {
        ty::varchar(len)
    };
    Ok(string_result(Some(out), ty))
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
