//! Conversions to and from text: a value as CAST or CONVERT (with a
//! style) writes it, code page 1252 for varchar, and storing into a
//! string type with its truncation rules.

use chrono::NaiveTime;

use super::{Mode, overflow, truncation};
use crate::sql::collation::{Collation, default_collation};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::Typed;
use crate::sql::expr::datetime;
use crate::sql::expr::num;
use crate::sql::expr::types::{Family, family};
use crate::sql::types::{DataType, Length, Value};

/// The bytes of a string: UTF-16 LE for Unicode, else the code page of
/// `collation` (the database default's when `None`), `?` for what it lacks.
pub(super) fn bytes_of_string(s: &str, unicode: bool, collation: Option<Collation>) -> Vec<u8> {
    if unicode {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    } else {
        let c = collation.unwrap_or_else(default_collation);
        crate::sql::collation::encode(c.encoding(), s)
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

pub(super) fn to_string(
    value: &Typed,
    to: DataType,
    style: Option<i32>,
    mode: Mode<'_>,
) -> SqlResult<Value> {
    let unicode = to.is_unicode();
    let mut s = text(value, style, unicode)?.unwrap_or_default();
    // Unicode becoming char/varchar keeps what the code page of its own
    // collation holds; on assignment the target's code page decides, which
    // `expr::assign_collated` applies after the conversion.
    if !unicode && value.ty.is_unicode() && !matches!(mode, Mode::Assign(_)) {
        let c = value
            .collation
            .map_or_else(default_collation, |l| l.collation);
        if let std::borrow::Cow::Owned(kept) = c.to_code_page(&s) {
            s = kept;
        }
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
