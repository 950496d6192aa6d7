//! CREATE/DROP TABLE, CREATE SCHEMA, CREATE/DROP DATABASE (ALTER TABLE is
//! `alter`'s).
//! Table DDL is journaled, so it rolls back with its transaction as in
//! SQL Server (<https://learn.microsoft.com/en-us/sql/t-sql/statements/create-table-transact-sql>).

use sqlparser::ast::{Expr, ObjectName};

use super::context::{Ctx, WriteCtx};
use super::dml::table_cols;
use super::relation::ColMeta;
use super::resolve::database_for;
use super::scope::RowScope;
use crate::sql::catalog::{
    ColumnMeta, Computed, IdentityState, PrimaryKey, QualifiedName, SCHEMA_DBO, Table, TableMeta,
};
use crate::sql::collation::{self, Collation};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr;
use crate::sql::parse::{ColumnSpec, TableElement};
use crate::sql::storage::TableData;
use crate::sql::transaction::{DdlEvent, UndoEntry};
use crate::sql::types::{DataType, Value};

pub(super) const ROLE_DB_DDLADMIN: i32 = 16387;

/// Resolves `[db.][schema.]name` for DDL: (database id, schema id, name).
fn ddl_target(ctx: &Ctx<'_>, name: &ObjectName) -> SqlResult<(i32, i32, String)> {
    let q = QualifiedName::from_object_name(name)?;
    let db = database_for(ctx, &q)?;
    let schema_id = match &q.schema {
        None => SCHEMA_DBO,
        Some(s) => db.schema_by_name(s).map(|s| s.id).ok_or_else(|| {
            SqlError::new(
                2760,
                format!("The specified schema name \"{s}\" either does not exist or you do not have permission to use it."),
            )
        })?,
    };
    Ok((db.id, schema_id, q.name))
}

fn const_int(ctx: &Ctx<'_>, e: &Expr) -> SqlResult<i128> {
    let v = expr::eval(e, &RowScope::new(ctx, &[], &[], None))?;
    match expr::convert(
        &v,
        DataType::Decimal {
            precision: 38,
            scale: 0,
        },
    )? {
        Value::Decimal(d) => Ok(d.value),
        _ => Err(SqlError::syntax(&e.to_string())),
    }
}

fn is_identity_type(ty: &DataType) -> bool {
    matches!(
        ty,
        DataType::TinyInt
            | DataType::SmallInt
            | DataType::Int
            | DataType::BigInt
            | DataType::Decimal { scale: 0, .. }
    )
}

/// Builds column metadata; computed columns get their type by evaluating
/// their expression over a row of typed NULLs.
fn column_meta(
    ctx: &Ctx<'_>,
    table: &str,
    spec: &ColumnSpec,
    column_id: i32,
    existing: &[ColMeta],
) -> SqlResult<ColumnMeta> {
    let name = spec.name.value.clone();
    if let Some(e) = &spec.computed {
        let row = vec![Value::Null; existing.len()];
        let ty = expr::eval(e, &RowScope::new(ctx, existing, &row, None))?.ty;
        return Ok(ColumnMeta {
            column_id,
            name,
            ty,
            nullable: spec.nullable.unwrap_or(true),
            default: None,
            identity: false,
            computed: Some(Computed {
                expr: e.clone(),
                definition: format!("({e})"),
            }),
            collation: None,
        });
    }
    let ast_ty = spec
        .data_type
        .as_ref()
        .ok_or_else(|| SqlError::syntax(&name))?;
    let ty = expr::data_type(ast_ty)?;
    let collation = match &spec.collation {
        Some(name) => Some(column_collation(&ty, &name.value)?),
        None => None,
    };
    if spec.identity.is_some() && !is_identity_type(&ty) {
        return Err(SqlError::new(
            2749,
            format!(
                "Identity column '{name}' must be of data type int, bigint, smallint, tinyint, or decimal or numeric with a scale of 0, and constrained to be nonnullable."
            ),
        ));
    }
    let is_key = spec.primary_key.is_some();
    if is_key && spec.nullable == Some(true) {
        return Err(SqlError::new(
            8111,
            format!("Cannot define PRIMARY KEY constraint on nullable column in table '{table}'."),
        ));
    }
    let nullable = spec
        .nullable
        .unwrap_or(!(is_key || spec.identity.is_some()));
    Ok(ColumnMeta {
        column_id,
        name,
        ty,
        nullable,
        default: spec.default.clone(),
        identity: spec.identity.is_some(),
        computed: None,
        collation,
    })
}

/// The collation `COLLATE name` gives a column of type `ty`: 447 for a
/// type that has none, 448 for an unknown name.
pub(super) fn column_collation(ty: &DataType, name: &str) -> SqlResult<Collation> {
    if !ty.is_string() {
        return Err(collation::not_collatable(ty));
    }
    collation::lookup(name)
}

/// Adds column and constraint elements to `meta` (CREATE and ALTER ADD).
pub(super) fn add_elements(
    ctx: &Ctx<'_>,
    meta: &mut TableMeta,
    elements: &[TableElement],
) -> SqlResult<()> {
    let mut pk_specs: Vec<(Option<String>, Vec<String>, bool)> = Vec::new();
    for el in elements {
        match el {
            TableElement::Column(spec) => {
                if meta.column_index(&spec.name.value).is_some() {
                    return Err(SqlError::new(
                        2705,
                        format!(
                            "Column names in each table must be unique. Column name '{}' in table '{}' is specified more than once.",
                            spec.name.value, meta.name
                        ),
                    ));
                }
                let existing = table_cols(meta);
                let col = column_meta(ctx, &meta.name, spec, meta.next_column_id, &existing)?;
                meta.next_column_id += 1;
                if let Some((seed, inc)) = &spec.identity {
                    if meta.identity.is_some() {
                        return Err(SqlError::new(
                            2744,
                            format!(
                                "Multiple identity columns specified for table '{}'. Only one identity column per table is allowed.",
                                meta.name
                            ),
                        ));
                    }
                    meta.identity = Some(IdentityState {
                        column: meta.columns.len(),
                        seed: const_int(ctx, seed)?,
                        increment: const_int(ctx, inc)?,
                        last: None,
                    });
                }
                if let Some((name, clustered)) = &spec.primary_key {
                    pk_specs.push((
                        name.as_ref().map(|n| n.value.clone()),
                        vec![spec.name.value.clone()],
                        *clustered,
                    ));
                }
                meta.columns.push(col);
            }
            TableElement::PrimaryKey {
                name,
                columns,
                clustered,
            } => pk_specs.push((
                name.as_ref().map(|n| n.value.clone()),
                columns.iter().map(|c| c.value.clone()).collect(),
                *clustered,
            )),
        }
    }
    for (name, cols, clustered) in pk_specs {
        if meta.primary_key.is_some() {
            return Err(SqlError::new(
                8110,
                format!(
                    "Cannot add multiple PRIMARY KEY constraints to table '{}'.",
                    meta.name
                ),
            ));
        }
        let mut idx = Vec::new();
        for c in &cols {
            let i = meta.column_index(c).ok_or_else(|| {
                SqlError::new(
                    1911,
                    format!("Column name '{c}' does not exist in the target table or view."),
                )
            })?;
            if meta.columns[i].nullable && meta.columns[i].computed.is_none() {
                // Columns in a PRIMARY KEY are NOT NULL unless declared NULL.
                meta.columns[i].nullable = false;
            }
            idx.push(i);
        }
        let name = name.unwrap_or_else(|| {
            format!(
                "PK__{}__{:016X}",
                meta.name,
                meta.object_id as u64 * 0x9E37_79B9
            )
        });
        meta.primary_key = Some(PrimaryKey {
            name,
            columns: idx,
            clustered,
        });
    }
    Ok(())
}

/// CREATE TABLE.
pub fn create_table(
    w: &mut WriteCtx<'_>,
    name: &ObjectName,
    elements: &[TableElement],
) -> SqlResult<()> {
    let (db_id, schema_id, table_name) = ddl_target(&w.read(), name)?;
    w.require_db_role(db_id, ROLE_DB_DDLADMIN, "CREATE TABLE")?;
    let now = w.read().now_utc();
    let object_id = w.state.allocate_object_id();
    let meta = {
        let ctx = w.read();
        let db = ctx
            .state
            .database_by_id(db_id)
            .ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
        if db.table_id(schema_id, &table_name).is_some() {
            return Err(SqlError::new(
                2714,
                format!("There is already an object named '{table_name}' in the database."),
            ));
        }
        let mut meta = TableMeta {
            object_id,
            schema_id,
            name: table_name.clone(),
            columns: Vec::new(),
            next_column_id: 1,
            primary_key: None,
            identity: None,
            create_date: now,
            modify_date: now,
            is_tracked_by_cdc: false,
        };
        add_elements(&ctx, &mut meta, elements)?;
        meta
    };
    let spid = w.info.spid;
    let db = w
        .state
        .database_by_id_mut(db_id)
        .ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
    db.tables.insert(
        object_id,
        Table {
            meta,
            data: TableData::default(),
            dirty_by: Some(spid),
        },
    );
    w.txn.entries.push(UndoEntry::CreateTable {
        db: db_id,
        object_id,
    });
    Ok(())
}

pub(super) fn find_table(ctx: &Ctx<'_>, name: &ObjectName) -> SqlResult<Option<(i32, i32)>> {
    let (db_id, schema_id, table) = ddl_target(ctx, name)?;
    Ok(ctx
        .state
        .database_by_id(db_id)
        .and_then(|d| d.table_id(schema_id, &table))
        .map(|id| (db_id, id)))
}

/// DROP TABLE [IF EXISTS] a, b.
pub fn drop_tables(w: &mut WriteCtx<'_>, names: &[ObjectName], if_exists: bool) -> SqlResult<()> {
    for name in names {
        let Some((db_id, oid)) = find_table(&w.read(), name)? else {
            if if_exists {
                continue;
            }
            return Err(SqlError::new(
                3701,
                format!(
                    "Cannot drop the table '{name}', because it does not exist or you do not have permission."
                ),
            ));
        };
        w.require_db_role(db_id, ROLE_DB_DDLADMIN, "DROP TABLE")?;
        if let Some(t) = w
            .state
            .database_by_id_mut(db_id)
            .and_then(|d| d.tables.remove(&oid))
        {
            w.txn.entries.push(UndoEntry::RestoreTable {
                db: db_id,
                table: Box::new(t),
            });
            w.txn.entries.push(UndoEntry::Ddl {
                db: db_id,
                event: DdlEvent {
                    object_id: oid,
                    command: format!("DROP TABLE {name}"),
                    dropped: true,
                    retyped: Vec::new(),
                },
            });
        }
    }
    Ok(())
}

/// CREATE SCHEMA name [AUTHORIZATION owner].
pub fn create_schema(w: &mut WriteCtx<'_>, name: &str) -> SqlResult<()> {
    let db_id = w.info.db_id;
    w.require_db_role(db_id, ROLE_DB_DDLADMIN, "CREATE SCHEMA")?;
    let db = w
        .state
        .database_by_id_mut(db_id)
        .ok_or_else(|| SqlError::invalid_object(name))?;
    db.create_schema(name, 1).map(|_| ())
}

/// CREATE DATABASE: sysadmin only, not inside a user transaction
/// (<https://learn.microsoft.com/en-us/sql/t-sql/statements/create-database-transact-sql>).
pub fn create_database(w: &mut WriteCtx<'_>, name: &str) -> SqlResult<()> {
    if !w.info.is_sysadmin {
        return Err(SqlError::new(
            262,
            "CREATE DATABASE permission denied in database 'master'.",
        )
        .with_class(14));
    }
    if w.info.trancount > 0 {
        return Err(SqlError::new(
            226,
            "CREATE DATABASE statement not allowed within multi-statement transaction.",
        ));
    }
    if w.state.database(name).is_some() {
        return Err(SqlError::new(
            1801,
            format!("Database '{name}' already exists. Choose a different database name."),
        ));
    }
    let now = w.read().now_utc();
    w.state.create_database(name, now);
    Ok(())
}

/// DROP DATABASE: sysadmin only.
pub fn drop_database(w: &mut WriteCtx<'_>, name: &str, if_exists: bool) -> SqlResult<()> {
    if !w.info.is_sysadmin {
        return Err(SqlError::new(
            3701,
            format!(
                "Cannot drop the database '{name}', because it does not exist or you do not have permission."
            ),
        ));
    }
    let Some(id) = w.state.database(name).map(|d| d.id) else {
        if if_exists {
            return Ok(());
        }
        return Err(SqlError::new(
            3701,
            format!(
                "Cannot drop the database '{name}', because it does not exist or you do not have permission."
            ),
        ));
    };
    if id <= 4 || id == w.info.db_id {
        return Err(SqlError::new(
            3702,
            format!("Cannot drop database \"{name}\" because it is currently in use."),
        ));
    }
    w.state.databases.remove(&id);
    Ok(())
}

#[cfg(test)]
#[path = "ddl_tests.rs"]
mod tests;
