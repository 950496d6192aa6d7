//! ALTER TABLE: ADD, DROP COLUMN and ALTER COLUMN. The previous table is
//! journaled whole and its rows rewritten, so the change rolls back with
//! its transaction; cdc.ddl_history gets the statement's text.
//! <https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql>

use sqlparser::ast::ObjectName;

use super::context::{Ctx, WriteCtx};
use super::ddl::{ROLE_DB_DDLADMIN, add_elements, column_collation, find_table};
use super::dml::table_cols;
use super::scope::RowScope;
use crate::sql::catalog::Table;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::{self, Typed};
use crate::sql::parse::{AlterAction, TableElement};
use crate::sql::storage::RowKey;
use crate::sql::transaction::{DdlEvent, UndoEntry};
use crate::sql::types::{DataType, Decimal, Value};

/// The statement text cdc.ddl_history shows for an ALTER TABLE.
fn alter_text(name: &ObjectName, action: &AlterAction) -> String {
    let what = match action {
        AlterAction::Add(elements) => {
            let parts: Vec<String> = elements
                .iter()
                .map(|e| match e {
                    TableElement::Column(c) => match &c.data_type {
                        Some(t) => format!("{} {t}", c.name),
                        None => c.name.to_string(),
                    },
                    TableElement::PrimaryKey { columns, .. } => format!(
                        "PRIMARY KEY ({})",
                        columns
                            .iter()
                            .map(|c| c.value.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
                .collect();
            format!("ADD {}", parts.join(", "))
        }
        AlterAction::DropColumns(cols) => format!(
            "DROP COLUMN {}",
            cols.iter()
                .map(|c| c.value.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        AlterAction::AlterColumn {
            name, data_type, ..
        } => format!("ALTER COLUMN {name} {data_type}"),
    };
    format!("ALTER TABLE {name} {what}")
}

/// ALTER TABLE ADD / DROP COLUMN / ALTER COLUMN. The previous table is
/// journaled whole, then rows are rewritten.
pub fn alter_table(w: &mut WriteCtx<'_>, name: &ObjectName, action: &AlterAction) -> SqlResult<()> {
    let (db_id, oid) =
        find_table(&w.read(), name)?.ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
    w.require_db_role(db_id, ROLE_DB_DDLADMIN, "ALTER TABLE")?;
    let now = w.read().now_utc();
    let old = w
        .state
        .database_by_id(db_id)
        .and_then(|d| d.tables.get(&oid))
        .cloned()
        .ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
    let mut new = old.clone();
    {
        let ctx = w.read();
        alter_meta(&ctx, &mut new, action)?;
    }
    new.meta.modify_date = now;
    new.dirty_by = Some(w.info.spid);
    let db = w
        .state
        .database_by_id_mut(db_id)
        .ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
    let retyped = new
        .meta
        .columns
        .iter()
        .filter(|n| {
            old.meta
                .columns
                .iter()
                .any(|o| n.column_id == o.column_id && n.ty != o.ty)
        })
        .map(|c| (c.column_id, c.ty))
        .collect();
    db.tables.insert(oid, new);
    w.txn.entries.push(UndoEntry::RestoreTable {
        db: db_id,
        table: Box::new(old),
    });
    w.txn.entries.push(UndoEntry::Ddl {
        db: db_id,
        event: DdlEvent {
            object_id: oid,
            command: alter_text(name, action),
            dropped: false,
            retyped,
        },
    });
    Ok(())
}

fn alter_meta(ctx: &Ctx<'_>, table: &mut Table, action: &AlterAction) -> SqlResult<()> {
    let old_width = table.meta.columns.len();
    match action {
        AlterAction::Add(elements) => {
            let had_pk = table.meta.primary_key.is_some();
            add_elements(ctx, &mut table.meta, elements)?;
            let rows = table.data.take_all();
            let cols = table_cols(&table.meta);
            let mut rebuilt = std::collections::BTreeMap::new();
            for (key, row) in rows {
                let mut r = row.into_vec();
                for i in old_width..table.meta.columns.len() {
                    let c = &table.meta.columns[i];
                    let v = if c.identity {
                        let id = table
                            .meta
                            .identity
                            .as_mut()
                            .map(|s| s.next_value())
                            .unwrap_or(0);
                        expr::assign_collated(
                            &Typed::new(
                                Value::Decimal(Decimal::new(id, 0)),
                                DataType::Decimal {
                                    precision: 38,
                                    scale: 0,
                                },
                            ),
                            c.ty,
                            c.collation,
                            &c.name,
                        )?
                    } else if let (Some(d), false) = (&c.default, c.nullable) {
                        expr::assign_collated(
                            &expr::eval(d, &RowScope::new(ctx, &[], &[], None))?,
                            c.ty,
                            c.collation,
                            &c.name,
                        )?
                    } else {
                        Value::Null
                    };
                    r.push(v);
                }
                for i in old_width..table.meta.columns.len() {
                    let c = &table.meta.columns[i];
                    if let Some(comp) = &c.computed {
                        r[i] = expr::eval(&comp.expr, &RowScope::new(ctx, &cols, &r, None))?.value;
                    }
                    if !c.nullable && r[i].is_null() {
                        return Err(SqlError::new(
                            4901,
                            format!(
                                "ALTER TABLE only allows columns to be added that can contain nulls, or have a DEFAULT definition specified, or the column being added is an identity or timestamp column, or alternatively if none of the previous conditions are satisfied the table must be empty to allow addition of this column. Column '{}' cannot be added to non-empty table '{}' because it does not satisfy these conditions.",
                                c.name, table.meta.name
                            ),
                        ));
                    }
                }
                let key = match (&table.meta.primary_key, had_pk) {
                    (Some(pk), false) => {
                        RowKey::for_columns_in(&r, &pk.columns, &table.meta.collations())
                    }
                    _ => key,
                };
                if rebuilt.insert(key, r.into_boxed_slice()).is_some() {
                    return Err(SqlError::new(
                        1505,
                        format!(
                            "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name '{}'.",
                            table.meta.name
                        ),
                    ));
                }
            }
            table.data.replace_all(rebuilt);
        }
        AlterAction::DropColumns(names) => {
            for n in names {
                let i = table.meta.column_index(&n.value).ok_or_else(|| {
                    SqlError::new(4924, format!("ALTER TABLE DROP COLUMN failed because column '{}' does not exist in table '{}'.", n.value, table.meta.name))
                })?;
                if let Some(pk) = table
                    .meta
                    .primary_key
                    .as_ref()
                    .filter(|pk| pk.columns.contains(&i))
                {
                    return Err(SqlError::new(
                        5074,
                        format!(
                            "The object '{}' is dependent on column '{}'.",
                            pk.name, n.value
                        ),
                    ));
                }
                table.meta.columns.remove(i);
                if let Some(pk) = table.meta.primary_key.as_mut() {
                    pk.columns.iter_mut().for_each(|c| {
                        if *c > i {
                            *c -= 1
                        }
                    });
                }
                match table.meta.identity.as_ref().map(|s| s.column) {
                    Some(c) if c == i => table.meta.identity = None,
                    Some(c) if c > i => {
                        if let Some(s) = table.meta.identity.as_mut() {
                            s.column -= 1;
                        }
                    }
                    _ => {}
                }
                let rows = table.data.take_all();
                let rows = rows
                    .into_iter()
                    .map(|(k, r)| {
                        let mut v = r.into_vec();
                        v.remove(i);
                        (k, v.into_boxed_slice())
                    })
                    .collect();
                table.data.replace_all(rows);
            }
        }
        AlterAction::AlterColumn {
            name,
            data_type,
            collation,
            nullable,
        } => {
            let i = table
                .meta
                .column_index(&name.value)
                .ok_or_else(|| SqlError::invalid_column(&name.value))?;
            let ty = expr::data_type(data_type)?;
            // Without COLLATE, ALTER COLUMN gives the database default.
            let new_collation = match collation {
                Some(c) => Some(column_collation(&ty, &c.value)?),
                None => None,
            };
            let old_ty = table.meta.columns[i].ty;
            let col = &mut table.meta.columns[i];
            col.ty = ty;
            col.nullable = nullable.unwrap_or(true);
            col.collation = new_collation;
            let (col_name, col_nullable) = (col.name.clone(), col.nullable);
            let pk = table.meta.primary_key.as_ref().map(|p| p.columns.clone());
            let collations = table.meta.collations();
            let rows = table.data.take_all();
            let mut rebuilt = std::collections::BTreeMap::new();
            for (k, r) in rows {
                let mut v = r.into_vec();
                v[i] = expr::assign_collated(
                    &Typed::new(v[i].clone(), old_ty),
                    ty,
                    new_collation,
                    &col_name,
                )?;
                if v[i].is_null() && !col_nullable {
                    return Err(SqlError::new(515, format!("Cannot insert the value NULL into column '{col_name}', table '{}'; column does not allow nulls. UPDATE fails.", table.meta.name)).with_state(2));
                }
                let key = match &pk {
                    Some(cols) => RowKey::for_columns_in(&v, cols, &collations),
                    None => k,
                };
                rebuilt.insert(key, v.into_boxed_slice());
            }
            table.data.replace_all(rebuilt);
        }
    }
    Ok(())
}
