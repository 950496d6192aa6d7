//! Literals: the value and type SQL Server gives a constant (int, then
//! decimal(p,s) by its digits, float with an exponent, varchar or
//! nvarchar by length, varbinary for hex).
//!
//! <https://learn.microsoft.com/sql/t-sql/data-types/constants-transact-sql>

use sqlparser::ast::{Ident, Value as AstValue};

use super::num::{self, MAX_PRECISION};
use super::types as ty;
use super::{Scope, Typed};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::types::{DataType, Length, Value};

fn string_literal(s: &str, unicode: bool) -> Typed {
    let n = s.chars().count().max(1);
    let ty = if unicode {
        ty::nvarchar(Length::Fixed(n.min(4001) as u16))
    } else {
        ty::varchar(Length::Fixed(n.min(8001) as u16))
    };
    Typed::new(Value::String(s.to_string()), ty)
}

/// A literal's value and type: integers are int, then decimal(p,0);
/// `1.5` is decimal(2,1); `1e3` float; `'abc'` varchar(3); `N'abc'`
/// nvarchar(3); `0x0A0B` varbinary(2); NULL is an int NULL.
/// <https://learn.microsoft.com/sql/t-sql/data-types/constants-transact-sql>
pub fn literal(v: &AstValue, scope: &dyn Scope) -> SqlResult<Typed> {
    match v {
        AstValue::Number(text, _) => number(text),
        AstValue::SingleQuotedString(s) => Ok(string_literal(s, false)),
        AstValue::NationalStringLiteral(s) => Ok(string_literal(s, true)),
        AstValue::HexStringLiteral(h) => {
            let h = if h.len() % 2 == 1 {
                format!("0{h}")
            } else {
                h.clone()
            };
            let bytes: Option<Vec<u8>> = (0..h.len())
                .step_by(2)
                .map(|i| h.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
                .collect();
            let bytes = bytes.ok_or_else(|| SqlError::syntax(&format!("0x{h}")))?;
            let n = bytes.len().clamp(1, 8001);
            let ty = if n > 8000 {
                DataType::VarBinary(Length::Max)
            } else {
                DataType::VarBinary(Length::Fixed(n as u16))
            };
            Ok(Typed::new(Value::Binary(bytes), ty))
        }
        AstValue::Boolean(b) => Ok(Typed::new(Value::Bit(*b), DataType::Bit)),
        AstValue::Null => Ok(Typed::null(DataType::Int)),
        AstValue::Placeholder(p) if p.starts_with('@') => scope.variable(p),
        AstValue::DoubleQuotedString(s) => scope.column(&[Ident::with_quote('"', s.clone())]),
        other => Err(SqlError::unsupported(&other.to_string())),
    }
}

fn number(text: &str) -> SqlResult<Typed> {
    if text.contains(['e', 'E']) {
        let f: f64 = text.parse().map_err(|_| SqlError::syntax(text))?;
        return Ok(Typed::new(Value::Float(f), DataType::Float));
    }
    let parsed = num::Parsed::read(text).ok_or_else(|| SqlError::syntax(text))?;
    let (p, s) = parsed.shape();
    if !text.contains('.')
        && let Ok(i) = text.parse::<i32>()
    {
        return Ok(Typed::new(Value::Int(i), DataType::Int));
    }
    if p > usize::from(MAX_PRECISION) {
        return Err(SqlError::new(
            1007,
            format!("The number '{text}' is out of the range for numeric representation (maximum precision 38)."),
        )
        .aborting_batch());
    }
    let ty = ty::decimal(p, s);
    let v = parsed
        .scaled(s as u8)
        .ok_or_else(|| SqlError::syntax(text))?;
    Ok(Typed::new(
        Value::Decimal(crate::sql::types::Decimal::new(v, s as u8)),
        ty,
    ))
}
