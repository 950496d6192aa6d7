//! SQL Server column types and their lossless Arrow/Delta counterparts.
//!
//! Delta has no unsigned, time-of-day or 100-ns timestamp types, so:
//! `tinyint` widens to Int16, `time` becomes text (`HH:MM:SS.fffffff`), and
//! `datetime2(7)`/`time(7)` keep microseconds in timestamps (the text form of
//! `time` keeps all seven digits). `money` is read as `decimal(19,4)` because
//! tiberius decodes money through f64.

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Field, TimeUnit};

use super::SourceError;

/// One column as SQL Server describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlColumn {
    /// Column name.
    pub name: String,
    /// Type name from `sys.types` (lower case), e.g. `nvarchar`.
    pub type_name: String,
    /// `sys.columns.max_length` (-1 for `max`).
    pub max_length: i16,
    /// `sys.columns.precision`.
    pub precision: u8,
    /// `sys.columns.scale`.
    pub scale: u8,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// The source table's `column_id` of a captured column
    /// (`cdc.captured_columns.column_id`): `sp_rename` keeps it, so a
    /// column renamed between two capture instances is known by it.
    /// `None` where the column was not read from a capture instance.
    pub column_id: Option<i32>,
    /// `sys.columns.collation_name` of a character column: its code page
    /// decides which characters a `char`/`varchar` value can hold.
    pub collation: Option<String>,
}

/// How a column's values are turned into Arrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// bit
    Bool,
    /// tinyint (widened), smallint
    Int16,
    /// int
    Int32,
    /// bigint
    Int64,
    /// real
    Float32,
    /// float
    Float64,
    /// decimal, numeric, money, smallmoney
    Decimal {
        /// Total digits.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// character and XML types
    Text,
    /// uniqueidentifier, as upper-case text like SQL Server prints it
    Guid,
    /// binary types and rowversion
    Binary,
    /// date
    Date,
    /// time, as text with all fractional digits
    Time,
    /// datetime, smalldatetime, datetime2: local wall-clock time
    TimestampNtz,
    /// datetimeoffset: an instant, stored in UTC
    TimestampUtc,
}

impl ValueKind {
    /// The Arrow type of the bronze column.
    pub fn arrow_type(self) -> DataType {
        match self {
            ValueKind::Bool => DataType::Boolean,
            ValueKind::Int16 => DataType::Int16,
            ValueKind::Int32 => DataType::Int32,
            ValueKind::Int64 => DataType::Int64,
            ValueKind::Float32 => DataType::Float32,
            ValueKind::Float64 => DataType::Float64,
            ValueKind::Decimal { precision, scale } => {
                DataType::Decimal128(precision, i8::try_from(scale).unwrap_or(i8::MAX))
            }
            ValueKind::Text | ValueKind::Guid | ValueKind::Time => DataType::Utf8,
            ValueKind::Binary => DataType::Binary,
            ValueKind::Date => DataType::Date32,
            ValueKind::TimestampNtz => DataType::Timestamp(TimeUnit::Microsecond, None),
            ValueKind::TimestampUtc => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC")))
            }
        }
    }
}

impl SqlColumn {
    /// The value kind, or why the type cannot be streamed.
    pub fn kind(&self) -> Result<ValueKind, SourceError> {
        let unsupported = |reason: &str| SourceError::UnsupportedType {
            column: self.name.clone(),
            sql_type: self.type_name.clone(),
            reason: reason.to_string(),
        };
        Ok(match self.type_name.as_str() {
            "bit" => ValueKind::Bool,
            "tinyint" | "smallint" => ValueKind::Int16,
            "int" => ValueKind::Int32,
            "bigint" => ValueKind::Int64,
            "real" => ValueKind::Float32,
            "float" => ValueKind::Float64,
            "decimal" | "numeric" => ValueKind::Decimal {
                precision: self.precision.clamp(1, 38),
                scale: self.scale.min(self.precision.clamp(1, 38)),
            },
            "money" => ValueKind::Decimal {
                precision: 19,
                scale: 4,
            },
            "smallmoney" => ValueKind::Decimal {
                precision: 10,
                scale: 4,
            },
            "char" | "varchar" | "nchar" | "nvarchar" | "text" | "ntext" | "xml" | "sysname" => {
                ValueKind::Text
            }
            "uniqueidentifier" => ValueKind::Guid,
            "binary" | "varbinary" | "image" | "timestamp" | "rowversion" => ValueKind::Binary,
            "date" => ValueKind::Date,
            "time" => ValueKind::Time,
            "datetime" | "smalldatetime" | "datetime2" => ValueKind::TimestampNtz,
            "datetimeoffset" => ValueKind::TimestampUtc,
            "sql_variant" => {
                return Err(unsupported(
                    "a value's type varies per row; leave the column out of spec.source.columns",
                ));
            }
            "geography" | "geometry" | "hierarchyid" => {
                return Err(unsupported(
                    "CLR types arrive as opaque bytes; leave the column out of spec.source.columns or capture a computed text column",
                ));
            }
            other => {
                return Err(unsupported(&format!(
                    "unknown type {other}; leave the column out of spec.source.columns"
                )));
            }
        })
    }

    /// The bronze field (always nullable: deletes and schema changes can
    /// leave any column empty).
    pub fn field(&self) -> Result<Field, SourceError> {
        Ok(Field::new(&self.name, self.kind()?.arrow_type(), true))
    }

    /// A query parameter compared with this column, in the column's own
    /// type where it matters. tiberius sends text as `nvarchar`; compared
    /// with a `char`/`varchar` column that makes SQL Server compare in
    /// Unicode rules, which under a `SQL_*` collation do not order rows as
    /// the column's own `ORDER BY` does. Cast to the column's type, both
    /// agree. The parameter is given the column's collation before the
    /// cast: SQL Server converts Unicode to `varchar` through the code page
    /// of the input's collation, the database's default otherwise, which
    /// would turn a key the column holds (Cyrillic in a Latin1 database, or
    /// anything outside Latin1 in a `_UTF8` column) into `?`s, and a resume
    /// after it would skip or repeat rows.
    pub fn parameter_expr(&self, parameter: &str) -> String {
        match self.type_name.as_str() {
            "char" | "varchar" => {
                let length = if self.max_length < 0 {
                    "max".to_string()
                } else {
                    self.max_length.max(1).to_string()
                };
                let collated = match self.collation.as_deref().filter(|c| is_collation_name(c)) {
                    Some(collation) => format!("{parameter} COLLATE {collation}"),
                    None => parameter.to_string(),
                };
                format!("CAST({collated} AS {}({length}))", self.type_name)
            }
            _ => parameter.to_string(),
        }
    }

    /// The select-list expression that reads the column losslessly; a
    /// value `limit` may hold too much of is sent as NULL when it is over
    /// (the guard columns of [`ValueLimit::guard_columns`] say so).
    pub fn select_expr(&self, alias: Option<&str>, limit: ValueLimit) -> String {
        let column = self.reference(alias);
        match self.type_name.as_str() {
            "money" => format!("CAST({column} AS decimal(19,4))"),
            "smallmoney" => format!("CAST({column} AS decimal(10,4))"),
            _ if limit.guards(self) => format!(
                "CASE WHEN DATALENGTH({column}) > {} THEN NULL ELSE {column} END",
                limit.bytes()
            ),
            _ => column,
        }
    }

    fn reference(&self, alias: Option<&str>) -> String {
        match alias {
            Some(alias) => format!("{alias}.{}", quote_ident(&self.name)),
            None => quote_ident(&self.name),
        }
    }
}

/// The largest value of one column a read lets SQL Server send
/// (`spec.maxValueBytes`). SQL Server measures each value of a column that
/// can exceed it (`DATALENGTH`) and sends NULL in its place, with two
/// guard columns after the row's own naming the first column over and its
/// size: the value is never sent, so no read buffers more than the limit
/// per value, and the reader stops the table with `ValueTooLarge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueLimit(u64);

/// Names of the two guard columns (never a captured column's: `$` is not
/// in CDC's column names' reach, and the prefix is ours).
const GUARD_COLUMN: &str = "[__mssql_cdc$too_large]";
const GUARD_BYTES: &str = "[__mssql_cdc$too_large_bytes]";

impl ValueLimit {
    /// At most `bytes` per value.
    pub fn new(bytes: u64) -> Self {
        ValueLimit(bytes)
    }

    /// No limit a value of SQL Server can reach (2 GiB): no guard.
    pub fn none() -> Self {
        ValueLimit(u64::from(u32::MAX))
    }

    /// The limit in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// Whether a value of `column` can exceed the limit: a `max` type
    /// (`varchar(max)`, `nvarchar(max)`, `varbinary(max)`, `xml`, CLR
    /// types), `text`, `ntext`, `image`, or a character or binary type
    /// declared longer than it. Fixed-size types never are.
    pub fn guards(self, column: &SqlColumn) -> bool {
        let unbounded = column.max_length < 0
            || matches!(
                column.type_name.as_str(),
                "text" | "ntext" | "image" | "xml"
            );
        let sized = matches!(
            column.type_name.as_str(),
            "char" | "varchar" | "nchar" | "nvarchar" | "binary" | "varbinary" | "sql_variant"
        );
        let declared = u64::try_from(column.max_length).unwrap_or(0);
        (unbounded && self.0 < u64::from(u32::MAX)) || (sized && declared > self.0)
    }

    /// Whether any of `columns` is guarded: the rows then carry the guard
    /// columns.
    pub fn guards_any(self, columns: &[SqlColumn]) -> bool {
        columns.iter().any(|c| self.guards(c))
    }

    /// The two guard columns' select-list expressions (`None` when no
    /// column is guarded): the first guarded column whose value is over
    /// the limit, and that value's size in bytes; both NULL otherwise.
    pub fn guard_columns(self, columns: &[SqlColumn], alias: Option<&str>) -> Option<String> {
        let (mut names, mut sizes) = (Vec::new(), Vec::new());
        for column in columns.iter().filter(|c| self.guards(c)) {
            let length = format!("DATALENGTH({})", column.reference(alias));
            let test = format!("{length} > {}", self.0);
            names.push(format!("WHEN {test} THEN {}", quote_literal(&column.name)));
            sizes.push(format!("WHEN {test} THEN CAST({length} AS bigint)"));
        }
        if names.is_empty() {
            return None;
        }
        Some(format!(
            "CASE {} END AS {GUARD_COLUMN}, CASE {} END AS {GUARD_BYTES}",
            names.join(" "),
            sizes.join(" ")
        ))
    }
}

/// Quotes an identifier as `[name]`, doubling `]`.
pub fn quote_ident(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

/// `table` as `[schema].[table]`, each part quoted.
pub fn quote_table(table: &crate::domain::TableName) -> String {
    format!(
        "{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.table)
    )
}

/// Quotes a string as an N'...' literal, doubling `'`.
pub fn quote_literal(text: &str) -> String {
    format!("N'{}'", text.replace('\'', "''"))
}

/// Whether `name` can be a collation name spliced into SQL (letters,
/// digits and underscores, as every SQL Server collation name is).
fn is_collation_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(type_name: &str, precision: u8, scale: u8) -> SqlColumn {
        SqlColumn {
            name: "c".into(),
            type_name: type_name.into(),
            max_length: 8,
            precision,
            scale,
            nullable: true,
            column_id: None,
            collation: None,
        }
    }

    #[test]
    fn text_parameters_take_the_type_of_a_non_unicode_column() {
        let mut varchar = column("varchar", 0, 0);
        varchar.max_length = 20;
        let mut max = column("varchar", 0, 0);
        max.max_length = -1;
        let mut cyrillic = varchar.clone();
        cyrillic.collation = Some("Cyrillic_General_CI_AS".into());
        let mut odd = varchar.clone();
        odd.collation = Some("x]; DROP TABLE t --".into());
        let cases = [
            (
                cyrillic,
                "CAST(@P1 COLLATE Cyrillic_General_CI_AS AS varchar(20))",
            ),
            (odd, "CAST(@P1 AS varchar(20))"),
            (varchar, "CAST(@P1 AS varchar(20))"),
            (max, "CAST(@P1 AS varchar(max))"),
            (column("char", 0, 0), "CAST(@P1 AS char(8))"),
            (column("nvarchar", 0, 0), "@P1"),
            (column("int", 0, 0), "@P1"),
        ];
        for (column, expected) in cases {
            assert_eq!(
                column.parameter_expr("@P1"),
                expected,
                "{}",
                column.type_name
            );
        }
    }

    #[test]
    fn decimals_keep_precision_and_money_is_exact() {
        assert_eq!(
            column("decimal", 38, 10).kind().ok(),
            Some(ValueKind::Decimal {
                precision: 38,
                scale: 10
            })
        );
        assert_eq!(
            column("money", 19, 4)
                .field()
                .map(|f| f.data_type().clone())
                .ok(),
            Some(DataType::Decimal128(19, 4))
        );
        assert_eq!(
            column("money", 19, 4).select_expr(Some("c"), ValueLimit::none()),
            "CAST(c.[c] AS decimal(19,4))"
        );
    }

    #[test]
    fn unsupported_types_name_the_column() {
        let err = column("sql_variant", 0, 0)
            .kind()
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("column c") && e.contains("sql_variant")));
    }

    #[test]
    fn identifiers_and_literals_are_quoted() {
        assert_eq!(quote_ident("a]b"), "[a]]b]");
        assert_eq!(quote_literal("o'neil"), "N'o''neil'");
    }

    #[test]
    fn a_value_limit_guards_only_the_columns_that_can_pass_it() {
        let limit = ValueLimit::new(1000);
        let cases = [
            ("nvarchar", -1, true),
            ("varbinary", -1, true),
            ("xml", -1, true),
            ("geography", -1, true),
            ("ntext", 16, true),
            ("nvarchar", 4000, true),
            ("varchar", 1000, false),
            ("char", 10, false),
            ("int", 4, false),
            ("datetime2", 8, false),
        ];
        for (type_name, max_length, guarded) in cases {
            let mut c = column(type_name, 0, 0);
            c.max_length = max_length;
            assert_eq!(limit.guards(&c), guarded, "{type_name}({max_length})");
        }
        let mut none = column("nvarchar", 0, 0);
        none.max_length = -1;
        assert!(!ValueLimit::none().guards(&none), "no limit guards nothing");
        assert!(
            ValueLimit::none()
                .guard_columns(&[none.clone()], None)
                .is_none()
        );
    }

    #[test]
    fn a_guarded_column_is_sent_as_null_over_the_limit_and_named_in_the_guard_columns() {
        let mut body = column("nvarchar", 0, 0);
        body.name = "body".into();
        body.max_length = -1;
        let mut id = column("int", 10, 0);
        id.name = "id".into();
        let limit = ValueLimit::new(64);
        assert_eq!(
            body.select_expr(Some("c"), limit),
            "CASE WHEN DATALENGTH(c.[body]) > 64 THEN NULL ELSE c.[body] END"
        );
        assert_eq!(id.select_expr(Some("c"), limit), "c.[id]");
        assert_eq!(
            limit.guard_columns(&[id, body], Some("c")).as_deref(),
            Some(
                "CASE WHEN DATALENGTH(c.[body]) > 64 THEN N'body' END AS [__mssql_cdc$too_large], \
                 CASE WHEN DATALENGTH(c.[body]) > 64 THEN CAST(DATALENGTH(c.[body]) AS bigint) END \
                 AS [__mssql_cdc$too_large_bytes]"
            )
        );
    }
}
