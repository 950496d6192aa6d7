//! SQL Server data types and values as the sandbox stores and sends them.
//!
//! `DataType` is a declared type with its length, precision and scale, so
//! the TDS layer can describe columns exactly as SQL Server would, and
//! `Value` holds one typed datum without losing precision (decimal(38) and
//! datetime2(7) included).

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime};
use uuid::Uuid;

/// Character or byte length of a variable-size type: `n` or `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Length {
    /// Declared length: characters for (n)char/(n)varchar, bytes for binary.
    Fixed(u16),
    /// `(max)`: sent as a partially length-prefixed (PLP) stream.
    Max,
}

/// A declared SQL Server type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Bit,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    /// decimal/numeric(precision, scale); precision 1..=38.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// real = float(24).
    Real,
    /// float = float(53).
    Float,
    Money,
    SmallMoney,
    Char(u16),
    VarChar(Length),
    NChar(u16),
    NVarChar(Length),
    Binary(u16),
    VarBinary(Length),
    Date,
    /// time(scale), scale 0..=7.
    Time {
        scale: u8,
    },
    DateTime,
    SmallDateTime,
    /// datetime2(scale), scale 0..=7.
    DateTime2 {
        scale: u8,
    },
    /// datetimeoffset(scale), scale 0..=7.
    DateTimeOffset {
        scale: u8,
    },
    UniqueIdentifier,
}

impl DataType {
    /// `sysname`, SQL Server's type for object names: nvarchar(128).
    pub const SYSNAME: DataType = DataType::NVarChar(Length::Fixed(128));

    /// The name `sys.types` and error messages use.
    pub fn name(&self) -> &'static str {
        match self {
            DataType::Bit => "bit",
            DataType::TinyInt => "tinyint",
            DataType::SmallInt => "smallint",
            DataType::Int => "int",
            DataType::BigInt => "bigint",
            DataType::Decimal { .. } => "decimal",
            DataType::Real => "real",
            DataType::Float => "float",
            DataType::Money => "money",
            DataType::SmallMoney => "smallmoney",
            DataType::Char(_) => "char",
            DataType::VarChar(_) => "varchar",
            DataType::NChar(_) => "nchar",
            DataType::NVarChar(_) => "nvarchar",
            DataType::Binary(_) => "binary",
            DataType::VarBinary(_) => "varbinary",
            DataType::Date => "date",
            DataType::Time { .. } => "time",
            DataType::DateTime => "datetime",
            DataType::SmallDateTime => "smalldatetime",
            DataType::DateTime2 { .. } => "datetime2",
            DataType::DateTimeOffset { .. } => "datetimeoffset",
            DataType::UniqueIdentifier => "uniqueidentifier",
        }
    }

    /// The type as T-SQL spells it, e.g. `decimal(38,10)` or `nvarchar(max)`.
    pub fn sql_name(&self) -> String {
        let len = |l: &Length| match l {
            Length::Fixed(n) => n.to_string(),
            Length::Max => "max".to_string(),
        };
        match self {
            DataType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            DataType::Char(n) | DataType::NChar(n) | DataType::Binary(n) => {
                format!("{}({n})", self.name())
            }
            DataType::VarChar(l) | DataType::NVarChar(l) | DataType::VarBinary(l) => {
                format!("{}({})", self.name(), len(l))
            }
            DataType::Time { scale }
            | DataType::DateTime2 { scale }
            | DataType::DateTimeOffset { scale } => format!("{}({scale})", self.name()),
            _ => self.name().to_string(),
        }
    }

    /// `sys.types.system_type_id`, as SQL Server numbers its types.
    pub fn system_type_id(&self) -> u8 {
        match self {
            DataType::Bit => 104,
            DataType::TinyInt => 48,
            DataType::SmallInt => 52,
            DataType::Int => 56,
            DataType::BigInt => 127,
            DataType::Decimal { .. } => 106,
            DataType::Real => 59,
            DataType::Float => 62,
            DataType::Money => 60,
            DataType::SmallMoney => 122,
            DataType::Char(_) => 175,
            DataType::VarChar(_) => 167,
            DataType::NChar(_) => 239,
            DataType::NVarChar(_) => 231,
            DataType::Binary(_) => 173,
            DataType::VarBinary(_) => 165,
            DataType::Date => 40,
            DataType::Time { .. } => 41,
            DataType::DateTime => 61,
            DataType::SmallDateTime => 58,
            DataType::DateTime2 { .. } => 42,
            DataType::DateTimeOffset { .. } => 43,
            DataType::UniqueIdentifier => 36,
        }
    }

    /// `sys.columns.max_length`: bytes, -1 for `(max)`.
    pub fn max_length(&self) -> i16 {
        let var = |l: &Length, per_char: i16| match l {
            Length::Fixed(n) => (*n as i16).saturating_mul(per_char),
            Length::Max => -1,
        };
        match self {
            DataType::Bit | DataType::TinyInt => 1,
            DataType::SmallInt => 2,
            DataType::Int | DataType::Real | DataType::SmallMoney | DataType::SmallDateTime => 4,
            DataType::BigInt | DataType::Float | DataType::Money | DataType::DateTime => 8,
            DataType::Decimal { precision, .. } => decimal_storage_bytes(*precision) as i16,
            DataType::Char(n) | DataType::Binary(n) => *n as i16,
            DataType::NChar(n) => (*n as i16).saturating_mul(2),
            DataType::VarChar(l) | DataType::VarBinary(l) => var(l, 1),
            DataType::NVarChar(l) => var(l, 2),
            DataType::Date => 3,
            DataType::Time { scale } => 3 + time_extra_bytes(*scale) as i16,
            DataType::DateTime2 { scale } => 6 + time_extra_bytes(*scale) as i16,
            DataType::DateTimeOffset { scale } => 8 + time_extra_bytes(*scale) as i16,
            DataType::UniqueIdentifier => 16,
        }
    }

    /// `sys.columns.precision`.
    pub fn precision(&self) -> u8 {
        match self {
            DataType::Bit => 1,
            DataType::TinyInt => 3,
            DataType::SmallInt => 5,
            DataType::Int => 10,
            DataType::BigInt => 19,
            DataType::Decimal { precision, .. } => *precision,
            DataType::Real => 24,
            DataType::Float => 53,
            DataType::Money => 19,
            DataType::SmallMoney => 10,
            DataType::Date => 10,
            DataType::Time { scale } => {
                if *scale == 0 {
                    8
                } else {
                    9 + *scale
                }
            }
            DataType::DateTime => 23,
            DataType::SmallDateTime => 16,
            DataType::DateTime2 { scale } => {
                if *scale == 0 {
                    19
                } else {
                    20 + *scale
                }
            }
            DataType::DateTimeOffset { scale } => {
                if *scale == 0 {
                    26
                } else {
                    27 + *scale
                }
            }
            _ => 0,
        }
    }

    /// `sys.columns.scale`.
    pub fn scale(&self) -> u8 {
        match self {
            DataType::Decimal { scale, .. }
            | DataType::Time { scale }
            | DataType::DateTime2 { scale }
            | DataType::DateTimeOffset { scale } => *scale,
            DataType::Money | DataType::SmallMoney => 4,
            DataType::DateTime => 3,
            _ => 0,
        }
    }

    pub fn is_string(&self) -> bool {
        matches!(
            self,
            DataType::Char(_) | DataType::VarChar(_) | DataType::NChar(_) | DataType::NVarChar(_)
        )
    }

    pub fn is_unicode(&self) -> bool {
        matches!(self, DataType::NChar(_) | DataType::NVarChar(_))
    }

    pub fn is_binary(&self) -> bool {
        matches!(self, DataType::Binary(_) | DataType::VarBinary(_))
    }

    /// True for types sent as PLP streams (`(max)` lengths).
    pub fn is_max(&self) -> bool {
        matches!(
            self,
            DataType::VarChar(Length::Max)
                | DataType::NVarChar(Length::Max)
                | DataType::VarBinary(Length::Max)
        )
    }
}

/// Bytes a decimal of this precision occupies (MS-TDS 2.2.5.5.1.6).
pub fn decimal_storage_bytes(precision: u8) -> u8 {
    match precision {
        0..=9 => 5,
        10..=19 => 9,
        20..=28 => 13,
        _ => 17,
    }
}

/// Extra bytes the fractional seconds of time(n)-based types take.
pub fn time_extra_bytes(scale: u8) -> u8 {
    match scale {
        0..=2 => 3,
        3..=4 => 4,
        _ => 5,
    }
}

/// An exact decimal: `value * 10^-scale`, wide enough for decimal(38,s).
/// Aligned to 8 bytes rather than i128's 16, which keeps every [`Value`]
/// at 32 bytes instead of 48 (rows are vectors of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, packed(8))]
pub struct Decimal {
    pub value: i128,
    pub scale: u8,
}

impl Decimal {
    pub fn new(value: i128, scale: u8) -> Self {
        Self { value, scale }
    }
}

/// One datum. `Null` carries no type; the column or parameter does.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bit(bool),
    TinyInt(u8),
    SmallInt(i16),
    Int(i32),
    BigInt(i64),
    Decimal(Decimal),
    Real(f32),
    Float(f64),
    /// money and smallmoney: ten-thousandths.
    Money(i64),
    /// char, varchar, nchar, nvarchar.
    String(String),
    Binary(Vec<u8>),
    Date(NaiveDate),
    /// Nanosecond precision; SQL Server keeps 100 ns.
    Time(NaiveTime),
    /// datetime, smalldatetime and datetime2.
    DateTime(NaiveDateTime),
    DateTimeOffset(DateTime<FixedOffset>),
    Guid(Uuid),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_four_words() {
        // Rows are vectors of values; a 16-byte-aligned decimal would make
        // each one 48 bytes.
        assert_eq!(std::mem::size_of::<Value>(), 32);
        let d = Decimal::new(-12345678901234567890123456789, 7);
        let copy = d;
        assert_eq!({ copy.value }, -12345678901234567890123456789);
        assert_eq!(copy, d);
    }
}
