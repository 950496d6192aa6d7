//! Date and time functions: the clock (GETDATE, SYSDATETIME...), DATEADD,
//! DATEDIFF, DATEPART, DATENAME, YEAR/MONTH/DAY and EOMONTH. The
//! calendar arithmetic itself is in `expr::datetime`; this file reads the
//! arguments and gives the results their types.
//!
//! <https://learn.microsoft.com/sql/t-sql/functions/date-and-time-data-types-and-functions-transact-sql>

use chrono::{FixedOffset, NaiveDateTime, Offset, TimeZone};
use sqlparser::ast::Expr;

use super::{arity, ev, int_arg, int_result, string_result};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::cast::{self, Mode};
use crate::sql::expr::datetime::{self, DatePart};
use crate::sql::expr::eval::eval;
use crate::sql::expr::num::pow10;
use crate::sql::expr::types::{Family, family};
use crate::sql::expr::{Scope, Typed};
use crate::sql::types::{DataType, Length, Value};

/// Evaluates this family's built-in `name`; `None` when it is not one.
pub(super) fn call(name: &str, args: &[&Expr], scope: &dyn Scope) -> Option<SqlResult<Typed>> {
    let r = match name {
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
        _ => return None,
    };
    Some(r)
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
