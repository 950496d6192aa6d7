//! The INFORMATION_SCHEMA views (COLUMNS, TABLES): the ISO names for what
//! sys.columns and sys.tables say, with ISO type facets.

use super::{
    INT, SMALLINT, SYSNAME, TINYINT, ViewDef, col, column_collation, i, nvarchar, s, visible_tables,
};
use crate::sql::catalog::Database;
use crate::sql::error::SqlResult;
use crate::sql::executor::context::Ctx;
use crate::sql::request::Column;
use crate::sql::types::{DataType, Length, Value};

/// INFORMATION_SCHEMA.COLUMNS and INFORMATION_SCHEMA.TABLES.
pub fn views() -> Vec<ViewDef> {
    vec![
        ViewDef {
            schema: "INFORMATION_SCHEMA",
            name: "COLUMNS",
            object_id: -412,
            columns: is_columns_cols,
            rows: is_columns_rows,
        },
        ViewDef {
            schema: "INFORMATION_SCHEMA",
            name: "TABLES",
            object_id: -413,
            columns: is_tables_cols,
            rows: is_tables_rows,
        },
    ]
}

fn is_columns_cols() -> Vec<Column> {
    vec![
        col("TABLE_CATALOG", nvarchar(128), true),
        col("TABLE_SCHEMA", nvarchar(128), true),
        col("TABLE_NAME", nvarchar(128), false),
        col("COLUMN_NAME", nvarchar(128), true),
        col("ORDINAL_POSITION", INT, true),
        col("COLUMN_DEFAULT", nvarchar(4000), true),
        col("IS_NULLABLE", DataType::VarChar(Length::Fixed(3)), true),
        col("DATA_TYPE", nvarchar(128), true),
        col("CHARACTER_MAXIMUM_LENGTH", INT, true),
        col("CHARACTER_OCTET_LENGTH", INT, true),
        col("NUMERIC_PRECISION", TINYINT, true),
        col("NUMERIC_PRECISION_RADIX", SMALLINT, true),
        col("NUMERIC_SCALE", INT, true),
        col("DATETIME_PRECISION", SMALLINT, true),
        col("COLLATION_NAME", nvarchar(128), true),
    ]
}

/// The numeric/character facets INFORMATION_SCHEMA.COLUMNS reports
/// (<https://learn.microsoft.com/en-us/sql/relational-databases/system-information-schema-views/columns-transact-sql>).
fn is_type_facets(ty: &DataType) -> [Value; 6] {
    let chars = |l: &Length, per: i32| match l {
        Length::Fixed(n) => (i(i32::from(*n)), i(i32::from(*n) * per)),
        Length::Max => (i(-1), i(-1)),
    };
    let (max_len, octets) = match ty {
        DataType::Char(n) | DataType::Binary(n) => (i(i32::from(*n)), i(i32::from(*n))),
        DataType::NChar(n) => (i(i32::from(*n)), i(i32::from(*n) * 2)),
        DataType::VarChar(l) | DataType::VarBinary(l) => chars(l, 1),
        DataType::NVarChar(l) => chars(l, 2),
        _ => (Value::Null, Value::Null),
    };
    let exact = matches!(
        ty,
        DataType::TinyInt
            | DataType::SmallInt
            | DataType::Int
            | DataType::BigInt
            | DataType::Decimal { .. }
            | DataType::Money
            | DataType::SmallMoney
    );
    let approx = matches!(ty, DataType::Real | DataType::Float);
    let (precision, radix, scale) = if exact {
        (
            Value::TinyInt(ty.precision()),
            Value::SmallInt(10),
            i(i32::from(ty.scale())),
        )
    } else if approx {
        (
            Value::TinyInt(ty.precision()),
            Value::SmallInt(2),
            Value::Null,
        )
    } else {
        (Value::Null, Value::Null, Value::Null)
    };
    let datetime_precision = match ty {
        DataType::Date | DataType::SmallDateTime => Value::SmallInt(0),
        DataType::DateTime => Value::SmallInt(3),
        DataType::Time { scale }
        | DataType::DateTime2 { scale }
        | DataType::DateTimeOffset { scale } => Value::SmallInt(i16::from(*scale)),
        _ => Value::Null,
    };
    [max_len, octets, precision, radix, scale, datetime_precision]
}

fn is_columns_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    for t in visible_tables(ctx, db) {
        let schema = db.schema_name(t.meta.schema_id).unwrap_or("dbo");
        for (n, c) in t.meta.columns.iter().enumerate() {
            let mut r = vec![
                s(&db.name),
                s(schema),
                s(&t.meta.name),
                s(&c.name),
                i(n as i32 + 1),
                c.default
                    .as_ref()
                    .map(|d| s(&format!("({d})")))
                    .unwrap_or(Value::Null),
                s(if c.nullable { "YES" } else { "NO" }),
                s(c.ty.name()),
            ];
            r.extend(is_type_facets(&c.ty));
            r.push(column_collation(c, db));
            out.push(r);
        }
    }
    Ok(out)
}

fn is_tables_cols() -> Vec<Column> {
    vec![
        col("TABLE_CATALOG", nvarchar(128), true),
        col("TABLE_SCHEMA", nvarchar(128), true),
        col("TABLE_NAME", SYSNAME, false),
        col("TABLE_TYPE", DataType::VarChar(Length::Fixed(10)), true),
    ]
}

fn is_tables_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(visible_tables(ctx, db)
        .into_iter()
        .map(|t| {
            vec![
                s(&db.name),
                s(db.schema_name(t.meta.schema_id).unwrap_or("dbo")),
                s(&t.meta.name),
                s("BASE TABLE"),
            ]
        })
        .collect())
}
