//! Name resolution for tables and catalog views, with the permission
//! checks SQL Server makes when a statement touches an object.

use sqlparser::ast::ObjectName;

use super::context::Ctx;
use crate::sql::catalog::{Database, QualifiedName, SCHEMA_DBO, Table, same_name};
use crate::sql::engine::ServerState;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::parse::parse_object_name_text;
use crate::sql::views::ViewDef;

/// A FROM-clause name after lookup.
pub enum Resolved<'a> {
    Table { db: &'a Database, table: &'a Table },
    View { db: &'a Database, view: &'a ViewDef },
}

/// The database a (possibly three-part) name lives in.
pub fn database_for<'a>(ctx: &Ctx<'a>, name: &QualifiedName) -> SqlResult<&'a Database> {
    match &name.database {
        Some(db) => ctx
            .state
            .database(db)
            .ok_or_else(|| SqlError::invalid_object(&name.display())),
        None => ctx.current_db(),
    }
}

/// Looks a relation up: catalog views first for `sys`/`INFORMATION_SCHEMA`
/// names, then user tables (default schema dbo). 208 when unknown.
pub fn resolve<'a>(ctx: &Ctx<'a>, name: &ObjectName) -> SqlResult<Resolved<'a>> {
    let q = QualifiedName::from_object_name(name)?;
    let db = database_for(ctx, &q)?;
    ctx.user_in(db)?;
    if let Some(schema) = &q.schema
        && let Some(view) = ctx.shared.views.lookup(schema, &q.name)
    {
        return Ok(Resolved::View { db, view });
    }
    let schema_id = match &q.schema {
        Some(s) => db
            .schema_by_name(s)
            .map(|s| s.id)
            .ok_or_else(|| SqlError::invalid_object(&q.display()))?,
        None => SCHEMA_DBO,
    };
    let id = db
        .table_id(schema_id, &q.name)
        .ok_or_else(|| SqlError::invalid_object(&q.display()))?;
    let table = db
        .tables
        .get(&id)
        .ok_or_else(|| SqlError::invalid_object(&q.display()))?;
    Ok(Resolved::Table { db, table })
}

/// 229: `permission` denied on a table
/// (<https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-0-to-999>).
pub fn permission_denied(permission: &str, db: &Database, table: &Table) -> SqlError {
    SqlError::new(
        229,
        format!(
            "The {permission} permission was denied on the object '{}', database '{}', schema '{}'.",
            table.meta.name,
            db.name,
            db.schema_name(table.meta.schema_id).unwrap_or("dbo")
        ),
    )
    .with_class(14)
    .with_state(5)
}

/// Checks `permission` (SELECT, INSERT, UPDATE, DELETE) on a table.
pub fn check_table_permission(
    ctx: &Ctx<'_>,
    permission: &str,
    db: &Database,
    table: &Table,
) -> SqlResult<()> {
    if ctx.info.is_sysadmin {
        return Ok(());
    }
    let user = ctx.user_in(db)?;
    if db.security.has_object_permission(
        user,
        permission,
        table.meta.schema_id,
        Some(table.meta.object_id),
    ) {
        Ok(())
    } else {
        Err(permission_denied(permission, db, table))
    }
}

/// The (database id, object id) of a user table for INSERT/UPDATE/DELETE.
pub fn table_for_write(
    ctx: &Ctx<'_>,
    name: &ObjectName,
    permission: &str,
) -> SqlResult<(i32, i32)> {
    match resolve(ctx, name)? {
        Resolved::Table { db, table } => {
            check_table_permission(ctx, permission, db, table)?;
            Ok((db.id, table.meta.object_id))
        }
        Resolved::View { view, .. } => Err(SqlError::new(
            4406,
            format!(
                "Update or insert of view or function '{}.{}' failed because it contains a derived or constant field.",
                view.schema, view.name
            ),
        )),
    }
}

/// OBJECT_ID('name'): user tables and catalog views.
pub fn object_id(ctx: &Ctx<'_>, text: &str) -> Option<i32> {
    let name = parse_object_name_text(text)?;
    match resolve(ctx, &name).ok()? {
        Resolved::Table { table, .. } => Some(table.meta.object_id),
        Resolved::View { view, .. } => Some(view.object_id),
    }
}

/// A table by ids.
pub fn table_by_id(state: &ServerState, db: i32, object_id: i32) -> SqlResult<&Table> {
    state
        .database_by_id(db)
        .and_then(|d| d.tables.get(&object_id))
        .ok_or_else(|| SqlError::invalid_object(&object_id.to_string()))
}

/// Whether `name` names `table` in a FROM clause (by alias or table name).
pub fn names_table(name: &str, alias: Option<&str>, table_name: &str) -> bool {
    match alias {
        Some(a) => same_name(a, name),
        None => same_name(table_name, name),
    }
}
