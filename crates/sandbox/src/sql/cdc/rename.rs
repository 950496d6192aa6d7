//! `sp_rename` of a column
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-rename-transact-sql>),
//! with the restriction CDC adds: a column a capture instance captures is
//! marked replicated, and SQL Server refuses to rename it (error 4928,
//! "Cannot alter column '...' because it is 'REPLICATED'."). Only
//! `@objtype = 'COLUMN'` is served; db_owner only.

use super::enable::require_db_owner;
use super::params::Args;
use crate::sql::catalog::same_name;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::procedures::{ProcResult, ProcedureRegistry};
use crate::sql::request::{CancelToken, Output, Param};
use crate::sql::session::Session;

pub fn register(r: &mut ProcedureRegistry) {
    r.register("sp_rename", sp_rename);
}

/// `[schema.]table.column`, brackets removed.
fn column_path(objname: &str) -> SqlResult<(Option<String>, String, String)> {
    let parts: Vec<String> = objname
        .split('.')
        .map(|p| p.trim().trim_matches(|c| c == '[' || c == ']').to_string())
        .collect();
    match parts.as_slice() {
        [table, column] => Ok((None, table.clone(), column.clone())),
        [schema, table, column] => Ok((Some(schema.clone()), table.clone(), column.clone())),
        _ => Err(no_such_object(objname)),
    }
}

fn no_such_object(objname: &str) -> SqlError {
    SqlError::new(
        15248,
        format!(
            "Either the parameter @objname is ambiguous or the claimed @objtype (COLUMN) is wrong: '{objname}'."
        ),
    )
}

fn sp_rename(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind("sp_rename", &["@objname", "@newname", "@objtype"], params)?;
    let objname = a.text("@objname").unwrap_or_default();
    let newname = a.text("@newname").unwrap_or_default();
    let objtype = a.text("@objtype").unwrap_or_default();
    if !objtype.eq_ignore_ascii_case("COLUMN") {
        return Err(SqlError::new(
            50000,
            "the sandbox's sp_rename renames columns only (@objtype = 'COLUMN')",
        ));
    }
    if newname.is_empty() {
        return Err(SqlError::new(15223, "Error: The new name is empty."));
    }
    let (schema, table, column) = column_path(&objname)?;
    s.with_write(cancel, |w| {
        let id = w.info.db_id;
        {
            let ctx = w.read();
            require_db_owner(&ctx, ctx.current_db()?)?;
        }
        let db = w
            .state
            .database_by_id_mut(id)
            .ok_or_else(|| SqlError::new(911, "The current database no longer exists."))?;
        let schema_id = db
            .schema_by_name(schema.as_deref().unwrap_or("dbo"))
            .map(|s| s.id)
            .ok_or_else(|| no_such_object(&objname))?;
        let object_id = db
            .table_id(schema_id, &table)
            .ok_or_else(|| no_such_object(&objname))?;
        let meta = &db
            .tables
            .get(&object_id)
            .ok_or_else(|| no_such_object(&objname))?
            .meta;
        let at = meta
            .column_index(&column)
            .ok_or_else(|| no_such_object(&objname))?;
        let column_id = meta.columns[at].column_id;
        if meta.column_index(&newname).is_some() {
            return Err(SqlError::new(
                15335,
                format!("Error: The new name '{newname}' is already in use as a COLUMN name and would cause a duplicate that is not permitted."),
            ));
        }
        let captured = db.cdc.instances.iter().any(|i| {
            i.source_object_id == object_id && i.captured.iter().any(|c| c.column_id == column_id)
        });
        if captured {
            return Err(SqlError::new(
                4928,
                format!(
                    "Cannot alter column '{}' because it is 'REPLICATED'.",
                    meta.columns[at].name
                ),
            ));
        }
        if let Some(c) = db
            .tables
            .get_mut(&object_id)
            .and_then(|t| t.meta.columns.iter_mut().find(|c| same_name(&c.name, &column)))
        {
            c.name = newname.clone();
        }
        Ok(())
    })?;
    Ok(ProcResult::default())
}
