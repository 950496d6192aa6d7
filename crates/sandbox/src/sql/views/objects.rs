//! The sys.* catalog views of what a database holds: databases, schemas,
//! tables and objects, columns and types, indexes and computed columns.

use super::{
    BIT, DATETIME, INT, SMALLINT, SYSNAME, TINYINT, ViewDef, b, col, collation_of,
    column_collation, dt, i, nvarchar, s, visible_tables,
};
use crate::sql::catalog::Database;
use crate::sql::error::SqlResult;
use crate::sql::executor::context::Ctx;
use crate::sql::request::Column;
use crate::sql::types::{DataType, Length, Value};

/// Object id of a table's primary-key constraint (tables' ids step by 16).
pub fn pk_object_id(table_id: i32) -> i32 {
    table_id + 1
}

/// Every type the sandbox supports, as sys.types lists them.
pub fn supported_types() -> Vec<(&'static str, DataType)> {
    vec![
        ("bit", DataType::Bit),
        ("tinyint", DataType::TinyInt),
        ("smallint", DataType::SmallInt),
        ("int", DataType::Int),
        ("bigint", DataType::BigInt),
        (
            "decimal",
            DataType::Decimal {
                precision: 18,
                scale: 0,
            },
        ),
        (
            "numeric",
            DataType::Decimal {
                precision: 18,
                scale: 0,
            },
        ),
        ("real", DataType::Real),
        ("float", DataType::Float),
        ("money", DataType::Money),
        ("smallmoney", DataType::SmallMoney),
        ("char", DataType::Char(8000)),
        ("varchar", DataType::VarChar(Length::Fixed(8000))),
        ("nchar", DataType::NChar(4000)),
        ("nvarchar", DataType::NVarChar(Length::Fixed(4000))),
        ("binary", DataType::Binary(8000)),
        ("varbinary", DataType::VarBinary(Length::Fixed(8000))),
        ("date", DataType::Date),
        ("time", DataType::Time { scale: 7 }),
        ("datetime", DataType::DateTime),
        ("smalldatetime", DataType::SmallDateTime),
        ("datetime2", DataType::DateTime2 { scale: 7 }),
        ("datetimeoffset", DataType::DateTimeOffset { scale: 7 }),
        ("uniqueidentifier", DataType::UniqueIdentifier),
        ("sysname", DataType::SYSNAME),
    ]
}

fn user_type_id(name: &str, ty: &DataType) -> i32 {
    match name {
        "sysname" => 256,
        "numeric" => 108,
        _ => i32::from(ty.system_type_id()),
    }
}

/// sys.databases, sys.schemas, sys.tables, sys.objects, sys.columns,
/// sys.types, sys.indexes, sys.index_columns and sys.computed_columns.
pub fn views() -> Vec<ViewDef> {
    vec![
        ViewDef {
            schema: "sys",
            name: "databases",
            object_id: -400,
            columns: databases_cols,
            rows: databases_rows,
        },
        ViewDef {
            schema: "sys",
            name: "schemas",
            object_id: -401,
            columns: schemas_cols,
            rows: schemas_rows,
        },
        ViewDef {
            schema: "sys",
            name: "tables",
            object_id: -402,
            columns: tables_cols,
            rows: tables_rows,
        },
        ViewDef {
            schema: "sys",
            name: "objects",
            object_id: -403,
            columns: objects_cols,
            rows: objects_rows,
        },
        ViewDef {
            schema: "sys",
            name: "columns",
            object_id: -404,
            columns: columns_cols,
            rows: columns_rows,
        },
        ViewDef {
            schema: "sys",
            name: "types",
            object_id: -405,
            columns: types_cols,
            rows: types_rows,
        },
        ViewDef {
            schema: "sys",
            name: "indexes",
            object_id: -406,
            columns: indexes_cols,
            rows: indexes_rows,
        },
        ViewDef {
            schema: "sys",
            name: "index_columns",
            object_id: -407,
            columns: index_columns_cols,
            rows: index_columns_rows,
        },
        ViewDef {
            schema: "sys",
            name: "computed_columns",
            object_id: -408,
            columns: computed_cols,
            rows: computed_rows,
        },
    ]
}

fn databases_cols() -> Vec<Column> {
    vec![
        col("name", SYSNAME, false),
        col("database_id", INT, false),
        col("create_date", DATETIME, false),
        col("compatibility_level", TINYINT, false),
        col("collation_name", SYSNAME, true),
        col("state", TINYINT, true),
        col("state_desc", nvarchar(60), true),
        col("is_read_only", BIT, true),
        col("recovery_model_desc", nvarchar(60), true),
        col("is_cdc_enabled", BIT, false),
    ]
}

fn databases_rows(ctx: &Ctx<'_>, _: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(ctx
        .state
        .databases
        .values()
        .map(|d| {
            vec![
                s(&d.name),
                i(d.id),
                dt(d.create_date),
                Value::TinyInt(160),
                s(&d.collation),
                Value::TinyInt(0),
                s("ONLINE"),
                b(false),
                s("FULL"),
                b(d.is_cdc_enabled),
            ]
        })
        .collect())
}

fn schemas_cols() -> Vec<Column> {
    vec![
        col("name", SYSNAME, false),
        col("schema_id", INT, false),
        col("principal_id", INT, true),
    ]
}

fn schemas_rows(_: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(db
        .schemas
        .iter()
        .map(|sc| vec![s(&sc.name), i(sc.id), i(sc.principal_id)])
        .collect())
}

fn object_cols() -> Vec<Column> {
    vec![
        col("name", SYSNAME, false),
        col("object_id", INT, false),
        col("principal_id", INT, true),
        col("schema_id", INT, false),
        col("parent_object_id", INT, false),
        col("type", DataType::Char(2), true),
        col("type_desc", nvarchar(60), true),
        col("create_date", DATETIME, false),
        col("modify_date", DATETIME, false),
        col("is_ms_shipped", BIT, false),
    ]
}

fn tables_cols() -> Vec<Column> {
    let mut c = object_cols();
    c.push(col("is_tracked_by_cdc", BIT, true));
    c
}

fn table_object_row(t: &crate::sql::catalog::Table) -> Vec<Value> {
    vec![
        s(&t.meta.name),
        i(t.meta.object_id),
        Value::Null,
        i(t.meta.schema_id),
        i(0),
        s("U "),
        s("USER_TABLE"),
        dt(t.meta.create_date),
        dt(t.meta.modify_date),
        b(false),
    ]
}

fn tables_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(visible_tables(ctx, db)
        .into_iter()
        .map(|t| {
            let mut r = table_object_row(t);
            r.push(b(t.meta.is_tracked_by_cdc));
            r
        })
        .collect())
}

fn objects_cols() -> Vec<Column> {
    object_cols()
}

fn objects_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    for t in visible_tables(ctx, db) {
        out.push(table_object_row(t));
        if let Some(pk) = &t.meta.primary_key {
            out.push(vec![
                s(&pk.name),
                i(pk_object_id(t.meta.object_id)),
                Value::Null,
                i(t.meta.schema_id),
                i(t.meta.object_id),
                s("PK"),
                s("PRIMARY_KEY_CONSTRAINT"),
                dt(t.meta.create_date),
                dt(t.meta.modify_date),
                b(false),
            ]);
        }
    }
    Ok(out)
}

fn columns_cols() -> Vec<Column> {
    vec![
        col("object_id", INT, false),
        col("name", SYSNAME, true),
        col("column_id", INT, false),
        col("system_type_id", TINYINT, false),
        col("user_type_id", INT, false),
        col("max_length", SMALLINT, false),
        col("precision", TINYINT, false),
        col("scale", TINYINT, false),
        col("collation_name", SYSNAME, true),
        col("is_nullable", BIT, true),
        col("is_identity", BIT, false),
        col("is_computed", BIT, false),
    ]
}

fn column_type_values(ty: &DataType) -> [Value; 5] {
    [
        Value::TinyInt(ty.system_type_id()),
        i(i32::from(ty.system_type_id())),
        Value::SmallInt(ty.max_length()),
        Value::TinyInt(ty.precision()),
        Value::TinyInt(ty.scale()),
    ]
}

fn columns_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    for t in visible_tables(ctx, db) {
        for c in &t.meta.columns {
            let mut r = vec![i(t.meta.object_id), s(&c.name), i(c.column_id)];
            r.extend(column_type_values(&c.ty));
            r.extend([
                column_collation(c, db),
                b(c.nullable),
                b(c.identity),
                b(c.computed.is_some()),
            ]);
            out.push(r);
        }
    }
    Ok(out)
}

fn types_cols() -> Vec<Column> {
    vec![
        col("name", SYSNAME, false),
        col("system_type_id", TINYINT, false),
        col("user_type_id", INT, false),
        col("schema_id", INT, false),
        col("max_length", SMALLINT, false),
        col("precision", TINYINT, false),
        col("scale", TINYINT, false),
        col("collation_name", SYSNAME, true),
        col("is_nullable", BIT, true),
        col("is_user_defined", BIT, false),
    ]
}

fn types_rows(_: &Ctx<'_>, _: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(supported_types()
        .into_iter()
        .map(|(name, ty)| {
            let nullable = name != "sysname";
            vec![
                s(name),
                Value::TinyInt(ty.system_type_id()),
                i(user_type_id(name, &ty)),
                i(4),
                Value::SmallInt(ty.max_length()),
                Value::TinyInt(ty.precision()),
                Value::TinyInt(ty.scale()),
                collation_of(&ty),
                b(nullable),
                b(false),
            ]
        })
        .collect())
}

fn indexes_cols() -> Vec<Column> {
    vec![
        col("object_id", INT, false),
        col("name", SYSNAME, true),
        col("index_id", INT, false),
        col("type", TINYINT, false),
        col("type_desc", nvarchar(60), true),
        col("is_unique", BIT, true),
        col("is_primary_key", BIT, true),
        col("is_unique_constraint", BIT, true),
        col("is_disabled", BIT, true),
        col("is_hypothetical", BIT, true),
        col("has_filter", BIT, true),
        col("filter_definition", DataType::NVarChar(Length::Max), true),
    ]
}

fn indexes_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    for t in visible_tables(ctx, db) {
        // The sandbox's only indexes are the heap or clustered index and a
        // primary key, so is_unique and is_primary_key agree.
        let row = |name: Value, index_id: i32, ty: u8, unique: bool| {
            let type_desc = ["HEAP", "CLUSTERED", "NONCLUSTERED"][usize::from(ty)];
            vec![
                i(t.meta.object_id),
                name,
                i(index_id),
                Value::TinyInt(ty),
                s(type_desc),
                b(unique),
                b(unique),
                b(false),
                // Never disabled, hypothetical or filtered.
                b(false),
                b(false),
                b(false),
                Value::Null,
            ]
        };
        match &t.meta.primary_key {
            Some(pk) if pk.clustered => out.push(row(s(&pk.name), 1, 1, true)),
            Some(pk) => {
                out.push(row(Value::Null, 0, 0, false));
                out.push(row(s(&pk.name), 2, 2, true));
            }
            None => out.push(row(Value::Null, 0, 0, false)),
        }
    }
    Ok(out)
}

fn index_columns_cols() -> Vec<Column> {
    vec![
        col("object_id", INT, false),
        col("index_id", INT, false),
        col("index_column_id", INT, false),
        col("column_id", INT, false),
        col("key_ordinal", TINYINT, false),
        col("is_descending_key", BIT, true),
        col("is_included_column", BIT, true),
    ]
}

fn index_columns_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    for t in visible_tables(ctx, db) {
        let Some(pk) = &t.meta.primary_key else {
            continue;
        };
        let index_id = if pk.clustered { 1 } else { 2 };
        for (n, c) in pk.columns.iter().enumerate() {
            let column_id = t.meta.columns.get(*c).map(|c| c.column_id).unwrap_or(0);
            let ordinal = n as i32 + 1;
            out.push(vec![
                i(t.meta.object_id),
                i(index_id),
                i(ordinal),
                i(column_id),
                Value::TinyInt(ordinal as u8),
                b(false),
                b(false),
            ]);
        }
    }
    Ok(out)
}

fn computed_cols() -> Vec<Column> {
    vec![
        col("object_id", INT, false),
        col("name", SYSNAME, true),
        col("column_id", INT, false),
        col("system_type_id", TINYINT, false),
        col("user_type_id", INT, false),
        col("max_length", SMALLINT, false),
        col("precision", TINYINT, false),
        col("scale", TINYINT, false),
        col("definition", DataType::NVarChar(Length::Max), true),
        col("is_persisted", BIT, false),
    ]
}

fn computed_rows(ctx: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    for t in visible_tables(ctx, db) {
        for c in &t.meta.columns {
            let Some(comp) = &c.computed else { continue };
            let mut r = vec![i(t.meta.object_id), s(&c.name), i(c.column_id)];
            r.extend(column_type_values(&c.ty));
            r.extend([s(&comp.definition), b(false)]);
            out.push(r);
        }
    }
    Ok(out)
}
