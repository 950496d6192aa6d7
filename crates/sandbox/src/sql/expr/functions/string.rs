//! String functions: lengths (LEN, DATALENGTH), case, trimming,
//! SUBSTRING, LEFT/RIGHT, REPLACE, CHARINDEX, CONCAT, REPLICATE, REVERSE
//! and SPACE. Matching is case-insensitive, as under the default
//! collation.
//!
//! <https://learn.microsoft.com/sql/t-sql/functions/string-functions-transact-sql>

use sqlparser::ast::{Expr, TrimWhereField};

use super::{arity, ev, int_arg, int_result, one, string_result, text_of};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::eval::eval;
use crate::sql::expr::types as ty;
use crate::sql::expr::{Scope, Typed};
use crate::sql::types::{DataType, Length, Value};

/// Evaluates this family's built-in `name`; `None` when it is not one.
pub(super) fn call(name: &str, args: &[&Expr], scope: &dyn Scope) -> Option<SqlResult<Typed>> {
    let r = match name {
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
            if s.ty.is_binary() {
                return replicate_binary(&s, int_arg(&n)?);
            }
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
            let unit = if ty.is_unicode() { 2 } else { 1 };
            let bytes = (text.chars().count() as u64)
                .saturating_mul(n as u64)
                .saturating_mul(unit);
            if ty.is_max() && bytes > MAX_LOB_BYTES {
                return Err(lob_too_large());
            }
            let out = match ty::string_length(&ty) {
                // Only what the result can hold is built.
                Length::Fixed(cap) => {
                    let enough = usize::from(cap) / text.chars().count().max(1) + 1;
                    let out = text.repeat((n as usize).min(enough));
                    out.chars().take(usize::from(cap)).collect()
                }
                Length::Max => text.repeat(n as usize),
            };
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
        _ => return None,
    };
    Some(r)
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

fn length_type(t: &DataType) -> DataType {
    if t.is_max() {
        DataType::BigInt
    } else {
        DataType::Int
    }
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

/// The largest value of a `max` type (2^31 - 1 bytes).
const MAX_LOB_BYTES: u64 = 2_147_483_647;

/// Error 7119, what SQL Server raises when a `max` value would pass 2 GB.
fn lob_too_large() -> SqlError {
    SqlError::new(
        7119,
        "Attempting to grow LOB beyond maximum allowed size of 2147483647 bytes.",
    )
}

/// REPLICATE of a binary value: binary as its input (`varbinary(max)` for
/// a `max` input, otherwise at most 8,000 bytes), as SQL Server returns it.
fn replicate_binary(s: &Typed, n: Option<i64>) -> SqlResult<Typed> {
    let ty = if s.ty.is_max() {
        DataType::VarBinary(Length::Max)
    } else {
        DataType::VarBinary(Length::Fixed(8000))
    };
    let (Value::Binary(bytes), Some(n)) = (&s.value, n) else {
        return Ok(Typed::null(ty));
    };
    if n < 0 {
        return Ok(Typed::null(ty));
    }
    let total = (bytes.len() as u64).saturating_mul(n as u64);
    if ty.is_max() && total > MAX_LOB_BYTES {
        return Err(lob_too_large());
    }
    let n = if ty.is_max() {
        n as usize
    } else {
        (n as usize).min(8000 / bytes.len().max(1) + 1)
    };
    let mut out = bytes.repeat(n);
    if !ty.is_max() {
        out.truncate(8000);
    }
    Ok(Typed::new(Value::Binary(out), ty))
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
