//! How SQL Server types relate: families, precedence, decimal shapes and
//! the lengths of strings.
//!
//! Precedence: <https://learn.microsoft.com/sql/t-sql/data-types/data-type-precedence-transact-sql>
//! Result precision and scale: <https://learn.microsoft.com/sql/t-sql/data-types/precision-scale-and-length-transact-sql>

use super::super::types::{DataType, Length};
use super::num::MAX_PRECISION;

/// What a type is for conversion and comparison purposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// bit, integers, decimal, money: compared exactly.
    Exact,
    /// real, float.
    Approx,
    String,
    Binary,
    /// date, time, datetime, smalldatetime, datetime2, datetimeoffset.
    Temporal,
    Guid,
}

pub fn family(ty: &DataType) -> Family {
    use DataType::*;
    match ty {
        Bit | TinyInt | SmallInt | Int | BigInt | Decimal { .. } | Money | SmallMoney => {
            Family::Exact
        }
        Real | Float => Family::Approx,
        Char(_) | VarChar(_) | NChar(_) | NVarChar(_) => Family::String,
        Binary(_) | VarBinary(_) => Family::Binary,
        Date
        | Time { .. }
        | DateTime
        | SmallDateTime
        | DateTime2 { .. }
        | DateTimeOffset { .. } => Family::Temporal,
        UniqueIdentifier => Family::Guid,
    }
}

/// datetime and smalldatetime: the types that convert to and from numbers
/// (days since 1900-01-01).
pub fn is_datetime_like(ty: &DataType) -> bool {
    matches!(ty, DataType::DateTime | DataType::SmallDateTime)
}

/// Position in SQL Server's precedence list: lower wins.
pub fn precedence(ty: &DataType) -> u8 {
    use DataType::*;
    match ty {
        DateTimeOffset { .. } => 4,
        DateTime2 { .. } => 5,
        DateTime => 6,
        SmallDateTime => 7,
        Date => 8,
        Time { .. } => 9,
        Float => 10,
        Real => 11,
        Decimal { .. } => 12,
        Money => 13,
        SmallMoney => 14,
        BigInt => 15,
        Int => 16,
        SmallInt => 17,
        TinyInt => 18,
        Bit => 19,
        UniqueIdentifier => 24,
        NVarChar(_) => 25,
        NChar(_) => 26,
        VarChar(_) => 27,
        Char(_) => 28,
        VarBinary(_) => 29,
        Binary(_) => 30,
    }
}

/// The type of higher precedence of two.
pub fn higher(a: DataType, b: DataType) -> DataType {
    if precedence(&b) < precedence(&a) {
        b
    } else {
        a
    }
}

/// Precision and scale of an exact numeric type seen as a decimal
/// (int is decimal(10,0), money decimal(19,4)...).
pub fn decimal_shape(ty: &DataType) -> Option<(u8, u8)> {
    use DataType::*;
    Some(match ty {
        Bit => (1, 0),
        TinyInt => (3, 0),
        SmallInt => (5, 0),
        Int => (10, 0),
        BigInt => (19, 0),
        Decimal { precision, scale } => (*precision, *scale),
        Money => (19, 4),
        SmallMoney => (10, 4),
        _ => return None,
    })
}

/// decimal(p, s) with p capped at 38 and s at p.
pub fn decimal(precision: usize, scale: usize) -> DataType {
    let p = precision.clamp(1, usize::from(MAX_PRECISION)) as u8;
    let s = scale.min(usize::from(p)) as u8;
    DataType::Decimal {
        precision: p,
        scale: s,
    }
}

/// Characters a value of this type needs as text (for CONCAT and
/// implicit conversions to strings).
pub fn text_length(ty: &DataType) -> Length {
    use DataType::*;
    let n: u16 = match ty {
        Bit => 1,
        TinyInt => 3,
        SmallInt => 6,
        Int => 11,
        BigInt => 20,
        Decimal { precision, .. } => u16::from(*precision) + 2,
        Real => 14,
        Float => 23,
        Money | SmallMoney => 22,
        Char(n) | NChar(n) | Binary(n) => *n,
        VarChar(l) | NVarChar(l) | VarBinary(l) => return *l,
        Date => 10,
        Time { scale } => 8 + if *scale > 0 { 1 + u16::from(*scale) } else { 0 },
        DateTime | SmallDateTime => 23,
        DateTime2 { scale } => 19 + if *scale > 0 { 1 + u16::from(*scale) } else { 0 },
        DateTimeOffset { scale } => 26 + if *scale > 0 { 1 + u16::from(*scale) } else { 0 },
        UniqueIdentifier => 36,
    };
    Length::Fixed(n)
}

/// Adds two lengths the way concatenation does: capped at `cap`
/// (8000 bytes / 4000 characters) unless either side is `max`.
pub fn add_lengths(a: Length, b: Length, cap: u16) -> Length {
    match (a, b) {
        (Length::Fixed(x), Length::Fixed(y)) => Length::Fixed(x.saturating_add(y).min(cap)),
        _ => Length::Max,
    }
}

/// The length of a string type as a variable length.
pub fn string_length(ty: &DataType) -> Length {
    match ty {
        DataType::Char(n) | DataType::NChar(n) | DataType::Binary(n) => Length::Fixed(*n),
        DataType::VarChar(l) | DataType::NVarChar(l) | DataType::VarBinary(l) => *l,
        other => text_length(other),
    }
}

/// An nvarchar of `len` characters: beyond 4000 it becomes nvarchar(max).
pub fn nvarchar(len: Length) -> DataType {
    match len {
        Length::Fixed(n) if n > 4000 => DataType::NVarChar(Length::Max),
        l => DataType::NVarChar(l),
    }
}

/// A varchar of `len` characters: beyond 8000 it becomes varchar(max).
pub fn varchar(len: Length) -> DataType {
    match len {
        Length::Fixed(n) if n > 8000 => DataType::VarChar(Length::Max),
        l => DataType::VarChar(l),
    }
}
