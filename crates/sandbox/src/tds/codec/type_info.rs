//! TYPE_INFO (MS-TDS 2.2.5.6): how a parameter or column declares its type,
//! and the mapping to and from the engine's `DataType`.

use bytes::BufMut;

use super::super::error::TdsError;
use super::super::wire::Reader;
use crate::sql::types::decimal_storage_bytes;
use crate::sql::{DataType, Length};

/// Type codes (MS-TDS 2.2.5.4).
pub(crate) mod code {
    pub const NULL: u8 = 0x1F;
    pub const INT1: u8 = 0x30;
    pub const BIT: u8 = 0x32;
    pub const INT2: u8 = 0x34;
    pub const INT4: u8 = 0x38;
    pub const DATETIM4: u8 = 0x3A;
    pub const FLT4: u8 = 0x3B;
    pub const MONEY: u8 = 0x3C;
    pub const DATETIME: u8 = 0x3D;
    pub const FLT8: u8 = 0x3E;
    pub const MONEY4: u8 = 0x7A;
    pub const INT8: u8 = 0x7F;

    pub const GUID: u8 = 0x24;
    pub const INTN: u8 = 0x26;
    pub const BITN: u8 = 0x68;
    pub const FLTN: u8 = 0x6D;
    pub const MONEYN: u8 = 0x6E;
    pub const DATETIMN: u8 = 0x6F;
    pub const DECIMAL: u8 = 0x37;
    pub const NUMERIC: u8 = 0x3F;
    pub const DECIMALN: u8 = 0x6A;
    pub const NUMERICN: u8 = 0x6C;
    pub const DATEN: u8 = 0x28;
    pub const TIMEN: u8 = 0x29;
    pub const DATETIME2N: u8 = 0x2A;
    pub const DATETIMEOFFSETN: u8 = 0x2B;

    pub const CHAR: u8 = 0x2F;
    pub const VARCHAR: u8 = 0x27;
    pub const BINARY: u8 = 0x2D;
    pub const VARBINARY: u8 = 0x25;
    pub const BIGVARBIN: u8 = 0xA5;
    pub const BIGVARCHR: u8 = 0xA7;
    pub const BIGBINARY: u8 = 0xAD;
    pub const BIGCHAR: u8 = 0xAF;
    pub const NVARCHAR: u8 = 0xE7;
    pub const NCHAR: u8 = 0xEF;

    pub const TEXT: u8 = 0x23;
    pub const IMAGE: u8 = 0x22;
    pub const NTEXT: u8 = 0x63;
}

/// SQL_Latin1_General_CP1_CI_AS (LCID 0x0409, sort id 52), the collation
/// the sandbox reports for every character column.
pub(crate) const DEFAULT_COLLATION: [u8; 5] = [0x09, 0x04, 0xD0, 0x00, 0x34];

/// USHORTLEN max length announcing a `(max)` type sent as PLP.
pub(crate) const MAX_LEN: u16 = 0xFFFF;

/// Largest byte length of a non-`(max)` character or binary type.
const MAX_INLINE: u16 = 8000;

/// One decoded TYPE_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TypeInfo {
    /// NULLTYPE: an untyped NULL parameter, no value bytes follow.
    Null,
    /// FIXEDLENTYPE: the value has the type's size and cannot be NULL.
    Fixed(u8),
    /// BYTELEN types (INTN, BITN, FLTN, MONEYN, DATETIMN, GUID, legacy
    /// char/binary): a one-byte length before each value.
    ByteLen { ty: u8, len: u8 },
    /// DECIMALN / NUMERICN (and the legacy DECIMAL / NUMERIC).
    Decimal {
        ty: u8,
        len: u8,
        precision: u8,
        scale: u8,
    },
    /// DATENTYPE: no length in TYPE_INFO.
    Date,
    /// TIMEN, DATETIME2N, DATETIMEOFFSETN with their scale.
    Scaled { ty: u8, scale: u8 },
    /// USHORTLEN types; `max == MAX_LEN` means PLP.
    ShortLen {
        ty: u8,
        max: u16,
        collation: Option<[u8; 5]>,
    },
    /// LONGLEN TEXT, NTEXT, IMAGE (legacy parameters).
    LongLen { ty: u8, collation: Option<[u8; 5]> },
}

fn fixed_len(ty: u8) -> Option<usize> {
    Some(match ty {
        code::INT1 | code::BIT => 1,
        code::INT2 => 2,
        code::INT4 | code::DATETIM4 | code::FLT4 | code::MONEY4 => 4,
        code::MONEY | code::DATETIME | code::FLT8 | code::INT8 => 8,
        _ => return None,
    })
}

fn collation(r: &mut Reader<'_>) -> Result<[u8; 5], TdsError> {
    let mut out = [0u8; 5];
    out.copy_from_slice(r.bytes(5)?);
    Ok(out)
}

impl TypeInfo {
    /// Reads a TYPE_INFO as a client sends it for an RPC parameter.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, TdsError> {
        let ty = r.u8()?;
        let info = match ty {
            code::NULL => TypeInfo::Null,
            t if fixed_len(t).is_some() => TypeInfo::Fixed(t),
            code::GUID
            | code::INTN
            | code::BITN
            | code::FLTN
            | code::MONEYN
            | code::DATETIMN
            | code::CHAR
            | code::VARCHAR
            | code::BINARY
            | code::VARBINARY => TypeInfo::ByteLen { ty, len: r.u8()? },
            code::DECIMAL | code::NUMERIC | code::DECIMALN | code::NUMERICN => TypeInfo::Decimal {
                ty,
                len: r.u8()?,
                precision: r.u8()?,
                scale: r.u8()?,
            },
            code::DATEN => TypeInfo::Date,
            code::TIMEN | code::DATETIME2N | code::DATETIMEOFFSETN => {
                TypeInfo::Scaled { ty, scale: r.u8()? }
            }
            code::BIGVARBIN | code::BIGBINARY => TypeInfo::ShortLen {
                ty,
                max: r.u16_le()?,
                collation: None,
            },
            code::BIGVARCHR | code::BIGCHAR | code::NVARCHAR | code::NCHAR => TypeInfo::ShortLen {
                ty,
                max: r.u16_le()?,
                collation: Some(collation(r)?),
            },
            code::TEXT | code::NTEXT | code::IMAGE => {
                let _max = r.u32_le()?;
                let collation = if ty == code::IMAGE {
                    None
                } else {
                    Some(collation(r)?)
                };
                TypeInfo::LongLen { ty, collation }
            }
            other => {
                return Err(TdsError::protocol(format!(
                    "data type {other:#04x} is not supported"
                )));
            }
        };
        info.validate()?;
        Ok(info)
    }

    fn validate(&self) -> Result<(), TdsError> {
        let ok = match *self {
            TypeInfo::ByteLen { ty, len } => match ty {
                code::INTN => matches!(len, 1 | 2 | 4 | 8),
                code::BITN => len == 1,
                code::FLTN | code::MONEYN | code::DATETIMN => matches!(len, 4 | 8),
                code::GUID => len == 16,
                _ => true,
            },
            TypeInfo::Decimal {
                precision, scale, ..
            } => (1..=38).contains(&precision) && scale <= precision,
            TypeInfo::Scaled { scale, .. } => scale <= 7,
            TypeInfo::ShortLen { ty, max, .. } => {
                max == MAX_LEN
                    || (max <= MAX_INLINE
                        && !(matches!(ty, code::NVARCHAR | code::NCHAR) && max % 2 == 1))
            }
            _ => true,
        };
        if ok {
            Ok(())
        } else {
            Err(TdsError::protocol(format!("invalid TYPE_INFO {self:?}")))
        }
    }

    /// The declared type this TYPE_INFO stands for. An untyped NULL
    /// parameter is reported as `int`, the type SQL Server gives a bare NULL.
    pub(crate) fn data_type(&self) -> DataType {
        let var = |max: u16, per_char: u16| {
            if max == MAX_LEN {
                Length::Max
            } else {
                Length::Fixed(max / per_char)
            }
        };
        match *self {
            TypeInfo::Null => DataType::Int,
            TypeInfo::Fixed(ty) => fixed_type(ty),
            TypeInfo::ByteLen { ty, len } => match (ty, len) {
                (code::INTN, 1) => DataType::TinyInt,
                (code::INTN, 2) => DataType::SmallInt,
                (code::INTN, 4) => DataType::Int,
                (code::INTN, _) => DataType::BigInt,
                (code::BITN, _) => DataType::Bit,
                (code::FLTN, 4) => DataType::Real,
                (code::FLTN, _) => DataType::Float,
                (code::MONEYN, 4) => DataType::SmallMoney,
                (code::MONEYN, _) => DataType::Money,
                (code::DATETIMN, 4) => DataType::SmallDateTime,
                (code::DATETIMN, _) => DataType::DateTime,
                (code::GUID, _) => DataType::UniqueIdentifier,
                (code::CHAR, n) => DataType::Char(n.max(1) as u16),
                (code::VARCHAR, n) => DataType::VarChar(Length::Fixed(n.max(1) as u16)),
                (code::BINARY, n) => DataType::Binary(n.max(1) as u16),
                (_, n) => DataType::VarBinary(Length::Fixed(n.max(1) as u16)),
            },
            TypeInfo::Decimal {
                precision, scale, ..
            } => DataType::Decimal { precision, scale },
            TypeInfo::Date => DataType::Date,
            TypeInfo::Scaled {
                ty: code::TIMEN,
                scale,
            } => DataType::Time { scale },
            TypeInfo::Scaled {
                ty: code::DATETIME2N,
                scale,
            } => DataType::DateTime2 { scale },
            TypeInfo::Scaled { scale, .. } => DataType::DateTimeOffset { scale },
            TypeInfo::ShortLen { ty, max, .. } => match ty {
                code::BIGCHAR => DataType::Char(max.max(1)),
                code::BIGVARCHR => DataType::VarChar(var(max, 1)),
                code::NCHAR => DataType::NChar((max / 2).max(1)),
                code::NVARCHAR => DataType::NVarChar(var(max, 2)),
                code::BIGBINARY => DataType::Binary(max.max(1)),
                _ => DataType::VarBinary(var(max, 1)),
            },
            TypeInfo::LongLen { ty: code::TEXT, .. } => DataType::VarChar(Length::Max),
            TypeInfo::LongLen {
                ty: code::NTEXT, ..
            } => DataType::NVarChar(Length::Max),
            TypeInfo::LongLen { .. } => DataType::VarBinary(Length::Max),
        }
    }

    /// How the server describes a column or output parameter of type `ty`.
    /// NOT NULL fixed-size types use the fixed codes, as SQL Server does.
    pub(crate) fn for_type(ty: &DataType, nullable: bool) -> Self {
        Self::for_type_collated(ty, nullable, None)
    }

    /// [`Self::for_type`] for a character column of collation `collation`
    /// (5-byte TDS form; `None` for the default collation).
    pub(crate) fn for_type_collated(
        ty: &DataType,
        nullable: bool,
        collation: Option<[u8; 5]>,
    ) -> Self {
        let sized = |fixed: u8, nullable_code: u8, len: u8| {
            if nullable {
                TypeInfo::ByteLen {
                    ty: nullable_code,
                    len,
                }
            } else {
                TypeInfo::Fixed(fixed)
            }
        };
        let short = |ty: u8, bytes: u32, collation: Option<[u8; 5]>| TypeInfo::ShortLen {
            ty,
            max: if bytes > MAX_INLINE as u32 {
                MAX_LEN
            } else {
                bytes.max(1) as u16
            },
            collation,
        };
        let var_bytes = |len: &Length, per_char: u32| match len {
            Length::Fixed(n) => *n as u32 * per_char,
            Length::Max => u32::MAX,
        };
        let coll = Some(collation.unwrap_or(DEFAULT_COLLATION));
        match ty {
            DataType::Bit => sized(code::BIT, code::BITN, 1),
            DataType::TinyInt => sized(code::INT1, code::INTN, 1),
            DataType::SmallInt => sized(code::INT2, code::INTN, 2),
            DataType::Int => sized(code::INT4, code::INTN, 4),
            DataType::BigInt => sized(code::INT8, code::INTN, 8),
            DataType::Real => sized(code::FLT4, code::FLTN, 4),
            DataType::Float => sized(code::FLT8, code::FLTN, 8),
            DataType::Money => sized(code::MONEY, code::MONEYN, 8),
            DataType::SmallMoney => sized(code::MONEY4, code::MONEYN, 4),
            DataType::DateTime => sized(code::DATETIME, code::DATETIMN, 8),
            DataType::SmallDateTime => sized(code::DATETIM4, code::DATETIMN, 4),
            DataType::Decimal { precision, scale } => {
                let precision = (*precision).clamp(1, 38);
                TypeInfo::Decimal {
                    ty: code::DECIMALN,
                    len: decimal_storage_bytes(precision),
                    precision,
                    scale: (*scale).min(precision),
                }
            }
            DataType::Char(n) => short(code::BIGCHAR, (*n as u32).min(MAX_INLINE as u32), coll),
            DataType::VarChar(len) => short(code::BIGVARCHR, var_bytes(len, 1), coll),
            DataType::NChar(n) => short(code::NCHAR, (*n as u32 * 2).min(MAX_INLINE as u32), coll),
            DataType::NVarChar(len) => short(code::NVARCHAR, var_bytes(len, 2), coll),
            DataType::Binary(n) => short(code::BIGBINARY, (*n as u32).min(MAX_INLINE as u32), None),
            DataType::VarBinary(len) => short(code::BIGVARBIN, var_bytes(len, 1), None),
            DataType::Date => TypeInfo::Date,
            DataType::Time { scale } => TypeInfo::Scaled {
                ty: code::TIMEN,
                scale: (*scale).min(7),
            },
            DataType::DateTime2 { scale } => TypeInfo::Scaled {
                ty: code::DATETIME2N,
                scale: (*scale).min(7),
            },
            DataType::DateTimeOffset { scale } => TypeInfo::Scaled {
                ty: code::DATETIMEOFFSETN,
                scale: (*scale).min(7),
            },
            DataType::UniqueIdentifier => TypeInfo::ByteLen {
                ty: code::GUID,
                len: 16,
            },
        }
    }

    /// Writes the TYPE_INFO (COLMETADATA, RETURNVALUE, or a parameter).
    pub(crate) fn encode(&self, buf: &mut Vec<u8>) {
        match *self {
            TypeInfo::Null => buf.put_u8(code::NULL),
            TypeInfo::Fixed(ty) => buf.put_u8(ty),
            TypeInfo::ByteLen { ty, len } => {
                buf.put_u8(ty);
                buf.put_u8(len);
            }
            TypeInfo::Decimal {
                ty,
                len,
                precision,
                scale,
            } => buf.extend_from_slice(&[ty, len, precision, scale]),
            TypeInfo::Date => buf.put_u8(code::DATEN),
            TypeInfo::Scaled { ty, scale } => buf.extend_from_slice(&[ty, scale]),
            TypeInfo::ShortLen { ty, max, collation } => {
                buf.put_u8(ty);
                buf.put_u16_le(max);
                if let Some(c) = collation {
                    buf.extend_from_slice(&c);
                }
            }
            TypeInfo::LongLen { ty, collation } => {
                buf.put_u8(ty);
                buf.put_u32_le(i32::MAX as u32);
                if let Some(c) = collation {
                    buf.extend_from_slice(&c);
                }
            }
        }
    }

    /// True for `(max)` types, whose values are PLP streams.
    pub(crate) fn is_plp(&self) -> bool {
        matches!(self, TypeInfo::ShortLen { max: MAX_LEN, .. })
    }
}

fn fixed_type(ty: u8) -> DataType {
    match ty {
        code::INT1 => DataType::TinyInt,
        code::BIT => DataType::Bit,
        code::INT2 => DataType::SmallInt,
        code::INT4 => DataType::Int,
        code::DATETIM4 => DataType::SmallDateTime,
        code::FLT4 => DataType::Real,
        code::MONEY => DataType::Money,
        code::DATETIME => DataType::DateTime,
        code::FLT8 => DataType::Float,
        code::MONEY4 => DataType::SmallMoney,
        _ => DataType::BigInt,
    }
}

/// Byte size of a fixed-length type's value.
pub(crate) fn fixed_size(ty: u8) -> usize {
    fixed_len(ty).unwrap_or(0)
}
