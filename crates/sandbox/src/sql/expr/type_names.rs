//! T-SQL type names to sandbox types: declarations (`decimal(10,2)`,
//! `nvarchar(max)`, `sysname`...) and CAST/CONVERT targets, with SQL
//! Server's errors for unknown types and bad lengths.
//!
//! <https://learn.microsoft.com/sql/t-sql/data-types/data-types-transact-sql>

use sqlparser::ast::{self, BinaryLength, CharacterLength, ExactNumberInfo};

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Length};
use super::num::MAX_PRECISION;

fn unknown_type(name: &str, ordinal: usize) -> SqlError {
    SqlError::new(
        2715,
        format!("Column, parameter, or variable #{ordinal}: Cannot find data type {name}."),
    )
    .with_state(3)
    .aborting_batch()
}

fn char_len(
    len: &Option<CharacterLength>,
    default: u16,
    max: u16,
    name: &str,
) -> SqlResult<Length> {
    match len {
        None => Ok(Length::Fixed(default)),
        Some(CharacterLength::Max) => Ok(Length::Max),
        Some(CharacterLength::IntegerLength { length, .. }) => {
            fixed_len(*length, max, name).map(Length::Fixed)
        }
    }
}

fn fixed_len(length: u64, max: u16, name: &str) -> SqlResult<u16> {
    if length == 0 {
        return Err(SqlError::new(
            1001,
            "Line 1: Length or precision specification 0 is invalid.",
        )
        .aborting_batch());
    }
    if length > u64::from(max) {
        return Err(SqlError::new(
            131,
            format!("The size ({length}) given to the type '{name}' exceeds the maximum allowed for any data type ({max})."),
        )
        .aborting_batch());
    }
    Ok(length as u16)
}

fn fixed_only(len: Length, name: &str) -> SqlResult<u16> {
    match len {
        Length::Fixed(n) => Ok(n),
        Length::Max => Err(SqlError::new(
            2716,
            format!("Column, parameter, or variable #1: Cannot specify a column width on data type {name}."),
        )
        .aborting_batch()),
    }
}

fn exact(info: &ExactNumberInfo) -> SqlResult<DataType> {
    let (p, s) = match info {
        ExactNumberInfo::None => (18, 0),
        ExactNumberInfo::Precision(p) => (*p, 0),
        ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s),
    };
    if p == 0 || p > u64::from(MAX_PRECISION) {
        return Err(SqlError::new(
            2750,
            format!("Column or parameter #1: Specified column precision {p} is greater than the maximum precision of 38."),
        )
        .aborting_batch());
    }
    if s < 0 || s as u64 > p {
        return Err(SqlError::new(
            2751,
            format!("Column or parameter #1: Specified column scale {s} is greater than the specified precision of {p}."),
        )
        .aborting_batch());
    }
    Ok(DataType::Decimal {
        precision: p as u8,
        scale: s as u8,
    })
}

fn fraction_scale(p: Option<u64>, name: &str) -> SqlResult<u8> {
    match p {
        None => Ok(7),
        Some(n) if n <= 7 => Ok(n as u8),
        Some(n) => Err(SqlError::new(
            1002,
            format!("Line 1: Specified scale {n} is invalid. '{name}' datatype must have scale between 0 and 7."),
        )
        .aborting_batch()),
    }
}

/// The sandbox type for a T-SQL type name; `ordinal` numbers the column,
/// parameter or variable in the 2715 message.
pub fn data_type_numbered(ty: &ast::DataType, ordinal: usize) -> SqlResult<DataType> {
    use ast::DataType as A;
    Ok(match ty {
        A::Bit(_) | A::Bool | A::Boolean => DataType::Bit,
        A::TinyInt(_) => DataType::TinyInt,
        A::SmallInt(_) => DataType::SmallInt,
        A::Int(_) | A::Integer(_) => DataType::Int,
        A::BigInt(_) => DataType::BigInt,
        A::Decimal(i) | A::Numeric(i) | A::Dec(i) => exact(i)?,
        A::Real => DataType::Real,
        A::Float(ExactNumberInfo::None) | A::DoublePrecision | A::Double(ExactNumberInfo::None) => {
            DataType::Float
        }
        A::Float(ExactNumberInfo::Precision(n)) => match n {
            1..=24 => DataType::Real,
            25..=53 => DataType::Float,
            _ => {
                return Err(SqlError::new(
                    2750,
                    format!("Column or parameter #{ordinal}: Specified column precision {n} is greater than the maximum precision of 53."),
                )
                .aborting_batch());
            }
        },
        A::Char(l) | A::Character(l) => {
            DataType::Char(fixed_only(char_len(l, 1, 8000, "char")?, "char")?)
        }
        A::Varchar(l) | A::CharVarying(l) | A::CharacterVarying(l) => {
            DataType::VarChar(char_len(l, 1, 8000, "varchar")?)
        }
        A::Nvarchar(l) => DataType::NVarChar(char_len(l, 1, 4000, "nvarchar")?),
        A::Binary(l) => DataType::Binary(fixed_len(l.unwrap_or(1), 8000, "binary")?),
        A::Varbinary(l) => DataType::VarBinary(match l {
            None => Length::Fixed(1),
            Some(BinaryLength::Max) => Length::Max,
            Some(BinaryLength::IntegerLength { length }) => {
                Length::Fixed(fixed_len(*length, 8000, "varbinary")?)
            }
        }),
        A::Text => DataType::VarChar(Length::Max),
        A::Date => DataType::Date,
        A::Time(p, _) => DataType::Time {
            scale: fraction_scale(*p, "time")?,
        },
        A::Datetime(None) => DataType::DateTime,
        A::Uuid => DataType::UniqueIdentifier,
        A::Custom(name, args) => {
            let last = name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.to_ascii_lowercase());
            let last = last.unwrap_or_default();
            let arg = |i: usize| args.get(i).map(|a| a.trim().to_ascii_lowercase());
            let num = |i: usize| -> SqlResult<Option<u64>> {
                match arg(i) {
                    None => Ok(None),
                    Some(a) => a.parse().map(Some).map_err(|_| SqlError::syntax(&a)),
                }
            };
            let len = |max: u16, name: &str| -> SqlResult<Length> {
                match arg(0).as_deref() {
                    None => Ok(Length::Fixed(1)),
                    Some("max") => Ok(Length::Max),
                    Some(a) => {
                        let n: u64 = a.parse().map_err(|_| SqlError::syntax(a))?;
                        fixed_len(n, max, name).map(Length::Fixed)
                    }
                }
            };
            match last.as_str() {
                "money" => DataType::Money,
                "smallmoney" => DataType::SmallMoney,
                "smalldatetime" => DataType::SmallDateTime,
                "datetime" => DataType::DateTime,
                "datetime2" => DataType::DateTime2 {
                    scale: fraction_scale(num(0)?, "datetime2")?,
                },
                "datetimeoffset" => DataType::DateTimeOffset {
                    scale: fraction_scale(num(0)?, "datetimeoffset")?,
                },
                "time" => DataType::Time {
                    scale: fraction_scale(num(0)?, "time")?,
                },
                "uniqueidentifier" => DataType::UniqueIdentifier,
                "sysname" => DataType::SYSNAME,
                "nchar" | "national char" => {
                    DataType::NChar(fixed_only(len(4000, "nchar")?, "nchar")?)
                }
                "nvarchar" => DataType::NVarChar(len(4000, "nvarchar")?),
                "varchar" => DataType::VarChar(len(8000, "varchar")?),
                "char" => DataType::Char(fixed_only(len(8000, "char")?, "char")?),
                "binary" => DataType::Binary(fixed_only(len(8000, "binary")?, "binary")?),
                "varbinary" => DataType::VarBinary(len(8000, "varbinary")?),
                "ntext" => DataType::NVarChar(Length::Max),
                "image" => DataType::VarBinary(Length::Max),
                "bit" => DataType::Bit,
                "tinyint" => DataType::TinyInt,
                "smallint" => DataType::SmallInt,
                "int" => DataType::Int,
                "bigint" => DataType::BigInt,
                "real" => DataType::Real,
                "float" => DataType::Float,
                "date" => DataType::Date,
                "decimal" | "numeric" => {
                    let info = match (num(0)?, num(1)?) {
                        (None, _) => ExactNumberInfo::None,
                        (Some(p), None) => ExactNumberInfo::Precision(p),
                        (Some(p), Some(s)) => ExactNumberInfo::PrecisionAndScale(p, s as i64),
                    };
                    exact(&info)?
                }
                _ => return Err(unknown_type(&name.to_string(), ordinal)),
            }
        }
        other => return Err(unknown_type(&other.to_string(), ordinal)),
    })
}

/// The type a CAST or CONVERT target names: like a declaration, except
/// that a string or binary type without a length is 30 long.
/// <https://learn.microsoft.com/sql/t-sql/functions/cast-and-convert-transact-sql>
pub fn cast_target(ty: &ast::DataType) -> SqlResult<DataType> {
    use ast::DataType as A;
    let no_len = match ty {
        A::Char(None)
        | A::Character(None)
        | A::Varchar(None)
        | A::Nvarchar(None)
        | A::Binary(None)
        | A::Varbinary(None) => true,
        A::Custom(_, args) => args.is_empty(),
        _ => false,
    };
    let t = data_type_numbered(ty, 1)?;
    Ok(if no_len {
        match t {
            DataType::Char(_) => DataType::Char(30),
            DataType::VarChar(_) => DataType::VarChar(Length::Fixed(30)),
            DataType::NChar(_) => DataType::NChar(30),
            DataType::NVarChar(l) if t != DataType::SYSNAME || l != Length::Fixed(128) => {
                DataType::NVarChar(Length::Fixed(30))
            }
            DataType::Binary(_) => DataType::Binary(30),
            DataType::VarBinary(_) => DataType::VarBinary(Length::Fixed(30)),
            other => other,
        }
    } else {
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MsSqlDialect;
    use sqlparser::parser::Parser;

    fn parse(ty: &str) -> SqlResult<DataType> {
        let ast = Parser::new(&MsSqlDialect {})
            .try_with_sql(ty)
            .and_then(|mut p| p.parse_data_type())
            .map_err(|e| SqlError::syntax(&e.to_string()))?;
        data_type_numbered(&ast, 1)
    }

    #[test]
    fn maps_every_supported_type_name() {
        use DataType::*;
        let cases: &[(&str, DataType)] = &[
            ("bit", Bit),
            ("tinyint", TinyInt),
            ("smallint", SmallInt),
            ("int", Int),
            ("integer", Int),
            ("bigint", BigInt),
            (
                "decimal",
                Decimal {
                    precision: 18,
                    scale: 0,
                },
            ),
            (
                "numeric(10)",
                Decimal {
                    precision: 10,
                    scale: 0,
                },
            ),
            (
                "decimal(38,10)",
                Decimal {
                    precision: 38,
                    scale: 10,
                },
            ),
            (
                "dec(5,2)",
                Decimal {
                    precision: 5,
                    scale: 2,
                },
            ),
            ("real", Real),
            ("float", Float),
            ("float(24)", Real),
            ("float(25)", Float),
            ("money", Money),
            ("smallmoney", SmallMoney),
            ("char", Char(1)),
            ("char(10)", Char(10)),
            ("varchar", VarChar(Length::Fixed(1))),
            ("varchar(max)", VarChar(Length::Max)),
            ("varchar(8000)", VarChar(Length::Fixed(8000))),
            ("nchar(3)", NChar(3)),
            ("nvarchar(max)", NVarChar(Length::Max)),
            ("nvarchar(20)", NVarChar(Length::Fixed(20))),
            ("binary(4)", Binary(4)),
            ("varbinary(max)", VarBinary(Length::Max)),
            ("varbinary(16)", VarBinary(Length::Fixed(16))),
            ("date", Date),
            ("time", Time { scale: 7 }),
            ("time(3)", Time { scale: 3 }),
            ("datetime", DateTime),
            ("smalldatetime", SmallDateTime),
            ("datetime2", DateTime2 { scale: 7 }),
            ("datetime2(0)", DateTime2 { scale: 0 }),
            ("datetimeoffset(3)", DateTimeOffset { scale: 3 }),
            ("uniqueidentifier", UniqueIdentifier),
            ("sysname", DataType::SYSNAME),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).as_ref(), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_bad_types_with_sql_server_numbers() {
        let err = |t: &str| parse(t).err().map(|e| (e.number, e.message));
        assert_eq!(
            err("xyz"),
            Some((
                2715,
                "Column, parameter, or variable #1: Cannot find data type xyz.".into()
            ))
        );
        assert_eq!(err("decimal(39,2)").map(|e| e.0), Some(2750));
        assert_eq!(err("varchar(9000)").map(|e| e.0), Some(131));
        assert_eq!(err("nvarchar(4001)").map(|e| e.0), Some(131));
        assert_eq!(err("datetime2(8)").map(|e| e.0), Some(1002));
    }
}
