//! Conversions between SQL Server types: explicit (CAST, CONVERT),
//! implicit (operators, comparisons) and on assignment (INSERT, UPDATE,
//! SET), with SQL Server's error numbers.
//!
//! Which conversions exist: <https://learn.microsoft.com/sql/t-sql/data-types/data-type-conversion-database-engine>
//! Truncation, rounding and styles: <https://learn.microsoft.com/sql/t-sql/functions/cast-and-convert-transact-sql>

use chrono::{NaiveDateTime, NaiveTime, Offset, TimeZone, Utc};
use uuid::Uuid;

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Decimal, Length, Value};
use super::Typed;
use super::datetime::{self, Parts};
use super::num::{self, fits, pow10};
use super::types::{Family, family};

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

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Allowed {
    No,
    Explicit,
    Implicit,
}

fn is_datetime_like(ty: &DataType) -> bool {
    matches!(ty, DataType::DateTime | DataType::SmallDateTime)
}

/// The conversion chart, as far as the sandbox's types go.
fn allowed(from: &DataType, to: &DataType) -> Allowed {
    use Family::*;
    match (family(from), family(to)) {
        (Temporal, Temporal) => match (from, to) {
            (DataType::Date, DataType::Time { .. }) | (DataType::Time { .. }, DataType::Date) => {
                Allowed::No
            }
            _ => Allowed::Implicit,
        },
        (a, b) if a == b => Allowed::Implicit,
        (Exact | Approx, Exact | Approx) => Allowed::Implicit,
        (String, Binary) => Allowed::Explicit,
        (String, _) | (_, String) => Allowed::Implicit,
        (Exact, Binary) | (Binary, Exact) => Allowed::Implicit,
        (Guid, Binary) | (Binary, Guid) => Allowed::Implicit,
        (Temporal, Exact | Approx) if is_datetime_like(from) => Allowed::Explicit,
        (Exact | Approx, Temporal) if is_datetime_like(to) => Allowed::Implicit,
        (Temporal, Binary) if is_datetime_like(from) => Allowed::Implicit,
        (Binary, Temporal) if is_datetime_like(to) => Allowed::Implicit,
        _ => Allowed::No,
    }
}

/// 529 when CAST/CONVERT cannot convert between the types.
pub fn check_explicit(from: &DataType, to: &DataType) -> SqlResult<()> {
    if allowed(from, to) == Allowed::No {
        return Err(SqlError::new(
            529,
            format!(
                "Explicit conversion from data type {} to {} is not allowed.",
                from.name(),
                to.name()
            ),
        )
        .with_state(2));
    }
    Ok(())
}

/// 206 when the types are incompatible, 257 when only an explicit
/// conversion exists.
pub fn check_implicit(from: &DataType, to: &DataType) -> SqlResult<()> {
    match allowed(from, to) {
        Allowed::Implicit => Ok(()),
        Allowed::Explicit => Err(SqlError::new(
            257,
            format!(
                "Implicit conversion from data type {} to {} is not allowed. Use the CONVERT function to run this query.",
                from.name(),
                to.name()
            ),
        )
        .with_state(3)),
        Allowed::No => Err(clash(from, to)),
    }
}

/// 206: the types cannot meet.
pub fn clash(from: &DataType, to: &DataType) -> SqlError {
    SqlError::new(
        206,
        format!(
            "Operand type clash: {} is incompatible with {}",
            from.name(),
            to.name()
        ),
    )
    .with_state(2)
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

fn to_integer(value: &Typed, to: DataType) -> SqlResult<Value> {
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

fn to_decimal(value: &Typed, precision: u8, scale: u8) -> SqlResult<Decimal> {
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

fn to_float(value: &Typed, to: DataType) -> SqlResult<f64> {
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

fn to_money(value: &Typed, to: DataType) -> SqlResult<Value> {
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

/// Characters varchar (code page 1252) can hold; others become '?'.
fn cp1252(c: char) -> bool {
    let u = c as u32;
    u < 0x80 || (0xA0..=0xFF).contains(&u) || "€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ".contains(c)
}

fn bytes_of_string(s: &str, unicode: bool) -> Vec<u8> {
    if unicode {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    } else {
        let mapped: String = s.chars().map(|c| if cp1252(c) { c } else { '?' }).collect();
        encoding_rs::WINDOWS_1252.encode(&mapped).0.into_owned()
    }
}

fn string_of_bytes(b: &[u8], unicode: bool) -> String {
    if unicode {
        let units: Vec<u16> = b
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        encoding_rs::WINDOWS_1252
            .decode_without_bom_handling(b)
            .0
            .into_owned()
    }
}

/// Upper-case hex, as CONVERT styles 1 and 2 write binary.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// float/real as text. Style 0: at most 6 significant digits, scientific
/// (`1.23457e+006`) beyond; 1: 8 digits; 2: 16 digits; 3: 17 digits.
pub fn float_text(f: f64, style: i32) -> String {
    let digits = match style {
        1 => 8,
        2 => 16,
        3 => 17,
        _ => 6,
    };
    if f == 0.0 {
        return if style == 0 {
            "0".into()
        } else {
            format!("{:.*}e+000", digits - 1, 0.0)
        };
    }
    let sci = format!("{:.*e}", digits - 1, f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if f < 0.0 { "-" } else { "" };
    let exp_text = format!("e{}{:03}", if exp < 0 { '-' } else { '+' }, exp.abs());
    if style != 0 {
        return format!("{sign}{mantissa}{exp_text}");
    }
    let all: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        let m = mantissa.trim_end_matches('0').trim_end_matches('.');
        return format!("{sign}{m}{exp_text}");
    }
    let text = if exp >= 0 {
        let point = (exp + 1) as usize;
        format!("{}.{}", &all[..point], &all[point..])
    } else {
        format!("0.{}{}", "0".repeat((-exp - 1) as usize), all)
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{sign}{text}")
}

fn money_text(m: i64, style: i32) -> String {
    let v = i128::from(m);
    match style {
        2 => num::format(v, 4),
        1 => {
            let text = num::format(num::rescale(v, 4, 2).unwrap_or(0), 2);
            let (int, frac) = text.split_once('.').unwrap_or((&text, "00"));
            let (sign, int) = int.strip_prefix('-').map(|i| ("-", i)).unwrap_or(("", int));
            let mut grouped = String::new();
            for (i, c) in int.chars().enumerate() {
                if i > 0 && (int.len() - i) % 3 == 0 {
                    grouped.push(',');
                }
                grouped.push(c);
            }
            format!("{sign}{grouped}.{frac}")
        }
        _ => num::format(num::rescale(v, 4, 2).unwrap_or(0), 2),
    }
}

/// A value as text, as CONVERT to a string type with `style` writes it.
pub fn text(value: &Typed, style: Option<i32>, unicode: bool) -> SqlResult<Option<String>> {
    let s = style.unwrap_or(0);
    Ok(Some(match &value.value {
        Value::Null => return Ok(None),
        Value::Bit(b) => if *b { "1" } else { "0" }.to_string(),
        Value::TinyInt(v) => v.to_string(),
        Value::SmallInt(v) => v.to_string(),
        Value::Int(v) => v.to_string(),
        Value::BigInt(v) => v.to_string(),
        Value::Decimal(d) => num::format(d.value, d.scale),
        Value::Real(f) => float_text(f64::from(*f), s),
        Value::Float(f) => float_text(*f, s),
        Value::Money(m) => money_text(*m, s),
        Value::String(t) => t.clone(),
        Value::Binary(b) => match s {
            1 => format!("0x{}", hex(b)),
            2 => hex(b),
            _ => string_of_bytes(b, unicode),
        },
        Value::Date(d) => datetime::format(d.and_time(NaiveTime::MIN), None, &value.ty, style)?,
        Value::Time(t) => {
            datetime::format(datetime::base_date().and_time(*t), None, &value.ty, style)?
        }
        Value::DateTime(dt) => datetime::format(*dt, None, &value.ty, style)?,
        Value::DateTimeOffset(dto) => {
            datetime::format(dto.naive_local(), Some(*dto.offset()), &value.ty, style)?
        }
        Value::Guid(g) => g.hyphenated().to_string().to_uppercase(),
    }))
}

fn truncation(target: &str, kept: &str) -> SqlError {
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

fn to_string(value: &Typed, to: DataType, style: Option<i32>, mode: Mode<'_>) -> SqlResult<Value> {
    let unicode = to.is_unicode();
    let mut s = text(value, style, unicode)?.unwrap_or_default();
    if !unicode && value.ty.is_unicode() {
        s = s.chars().map(|c| if cp1252(c) { c } else { '?' }).collect();
    }
    let (limit, fixed) = match to {
        DataType::Char(n) | DataType::NChar(n) => (Some(usize::from(n)), true),
        DataType::VarChar(Length::Fixed(n)) | DataType::NVarChar(Length::Fixed(n)) => {
            (Some(usize::from(n)), false)
        }
        _ => (None, false),
    };
    if let Some(n) = limit {
        let len = s.chars().count();
        if len > n {
            let kept: String = s.chars().take(n).collect();
            let only_spaces = s.chars().skip(n).all(|c| c == ' ');
            match family(&value.ty) {
                Family::Exact
                    if !matches!(
                        value.ty,
                        DataType::Decimal { .. } | DataType::Money | DataType::SmallMoney
                    ) && !unicode
                        && mode == Mode::Explicit =>
                {
                    s = "*".to_string();
                }
                Family::Exact | Family::Approx => return Err(overflow("expression", to)),
                Family::Guid => {
                    return Err(SqlError::new(
                        8170,
                        format!(
                            "Insufficient result space to convert uniqueidentifier value to {}.",
                            to.name()
                        ),
                    ));
                }
                _ => {
                    if let Mode::Assign(target) = mode
                        && !target.starts_with('@')
                        && !only_spaces
                    {
                        return Err(truncation(target, &kept));
                    }
                    s = kept;
                }
            }
        }
        if fixed {
            let len = s.chars().count();
            if len < n {
                s.push_str(&" ".repeat(n - len));
            }
        }
    }
    Ok(Value::String(s))
}

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
    let size = usize::from(super::super::types::decimal_storage_bytes(precision)) - 1;
    out.extend_from_slice(&d.value.unsigned_abs().to_le_bytes()[..size]);
    out
}

fn decimal_from_binary(b: &[u8]) -> Option<(i128, u8)> {
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

fn to_binary(value: &Typed, to: DataType, style: Option<i32>, mode: Mode<'_>) -> SqlResult<Value> {
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
            _ => bytes_of_string(s, value.ty.is_unicode()),
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

fn to_temporal(value: &Typed, to: DataType, style: Option<i32>) -> SqlResult<Value> {
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

fn to_guid(value: &Typed) -> SqlResult<Value> {
    let to = DataType::UniqueIdentifier;
    match &value.value {
        Value::Guid(g) => Ok(Value::Guid(*g)),
        Value::String(s) => {
            let t = s.trim();
            let t = t
                .strip_prefix('{')
                .and_then(|x| x.strip_suffix('}'))
                .unwrap_or(t);
            // SQL Server reads the first 36 characters and ignores the rest.
            let t = if t.len() > 36 && t.is_char_boundary(36) {
                &t[..36]
            } else {
                t
            };
            if t.len() != 36 {
                return Err(guid_error());
            }
            Uuid::parse_str(t)
                .map(Value::Guid)
                .map_err(|_| guid_error())
        }
        Value::Binary(b) => {
            let mut buf = [0u8; 16];
            let n = b.len().min(16);
            buf[..n].copy_from_slice(&b[..n]);
            Ok(Value::Guid(Uuid::from_bytes_le(buf)))
        }
        _ => Err(clash(&value.ty, &to)),
    }
}

fn guid_error() -> SqlError {
    SqlError::conversion(
        8169,
        "Conversion failed when converting from a character string to uniqueidentifier.",
    )
}
