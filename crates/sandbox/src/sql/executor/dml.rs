//! UPDATE and DELETE, and what they share with INSERT (`insert`): each
//! first evaluates every new row against the unchanged state (so a
//! statement never sees its own changes), then applies the changes and
//! journals them for rollback and the log.
//!
//! Error numbers: 515 NULL into NOT NULL, 2627 duplicate primary key,
//! 544 explicit identity value, 271 computed column, 8102 identity update
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors>).

use sqlparser::ast::{
    AssignmentTarget, Delete, Expr, FromTable, ObjectName, TableFactor, TableWithJoins, Update,
    UpdateTableFromKind,
};

use super::context::{Ctx, WriteCtx};
use super::from::{DmlTarget, FromBuilder};
use super::relation::ColMeta;
use super::resolve::{check_table_permission, table_by_id};
use super::scope::RowScope;
use crate::sql::catalog::{Database, Table, TableMeta};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::{self, Typed};
use crate::sql::storage::{Row, RowKey};
use crate::sql::transaction::{ChangeOp, RowUndo, UndoEntry};
use crate::sql::types::{DataType, Value};

/// Rows affected, and the last identity value generated.
#[derive(Debug, Default)]
pub struct DmlOutcome {
    pub rows: u64,
    pub identity: Option<i128>,
}

/// The table's columns as a relation, for computed columns and defaults.
pub fn table_cols(meta: &TableMeta) -> Vec<ColMeta> {
    meta.columns
        .iter()
        .map(|c| {
            ColMeta::new(c.name.clone(), c.ty, c.nullable)
                .qualified(Some(&meta.name), None)
                .collated(c.collation)
        })
        .collect()
}

fn full_name(db: &Database, table: &Table) -> String {
    format!(
        "{}.{}.{}",
        db.name,
        db.schema_name(table.meta.schema_id).unwrap_or("dbo"),
        table.meta.name
    )
}

/// Evaluates computed columns of `row` in place and checks NOT NULL.
pub(super) fn finish_row(
    ctx: &Ctx<'_>,
    db: &Database,
    table: &Table,
    cols: &[ColMeta],
    row: &mut [Value],
    verb: &str,
) -> SqlResult<()> {
    for (i, c) in table.meta.columns.iter().enumerate() {
        if let Some(comp) = &c.computed {
            let v = expr::eval(&comp.expr, &RowScope::new(ctx, cols, row, None))?;
            row[i] = if v.ty == c.ty || v.value.is_null() {
                v.value
            } else {
                expr::convert(&v, c.ty)?
            };
        }
    }
    for (i, c) in table.meta.columns.iter().enumerate() {
        if !c.nullable && row[i].is_null() {
            return Err(SqlError::new(
                515,
                format!(
                    "Cannot insert the value NULL into column '{}', table '{}'; column does not allow nulls. {verb} fails.",
                    c.name,
                    full_name(db, table)
                ),
            )
            .with_state(2));
        }
    }
    Ok(())
}

/// Text of a value in a duplicate-key message.
fn key_text(row: &[Value], pk: &[usize]) -> String {
    let parts: Vec<String> = pk
        .iter()
        .map(|i| match row.get(*i) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => "<NULL>".into(),
            Some(v) => expr::convert(&Typed::new(v.clone(), DataType::SYSNAME), DataType::SYSNAME)
                .ok()
                .and_then(|v| {
                    if let Value::String(s) = v {
                        Some(s)
                    } else {
                        None
                    }
                })
                .unwrap_or_else(|| format!("{v:?}")),
        })
        .collect();
    parts.join(", ")
}

pub(super) fn duplicate_key(db: &Database, table: &Table, row: &[Value]) -> SqlError {
    let pk = table.meta.primary_key.as_ref();
    let name = pk.map(|p| p.name.as_str()).unwrap_or("PK");
    let cols: Vec<usize> = pk.map(|p| p.columns.clone()).unwrap_or_default();
    SqlError::new(
        2627,
        format!(
            "Violation of PRIMARY KEY constraint '{name}'. Cannot insert duplicate key in object '{}.{}'. The duplicate key value is ({}).",
            db.schema_name(table.meta.schema_id).unwrap_or("dbo"),
            table.meta.name,
            key_text(row, &cols)
        ),
    )
    .with_class(14)
}

pub(super) fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// Name (alias or table name) designating the target in UPDATE/DELETE.
fn target_name(tf: &TableFactor) -> SqlResult<(String, ObjectName)> {
    match tf {
        TableFactor::Table { name, alias, .. } => {
            let n = alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .or_else(|| {
                    name.0
                        .last()
                        .and_then(|p| p.as_ident())
                        .map(|i| i.value.clone())
                })
                .unwrap_or_default();
            Ok((n, name.clone()))
        }
        other => Err(SqlError::unsupported(&other.to_string())),
    }
}

/// Builds the FROM relation with the target located; adds the target
/// table when FROM does not mention it.
fn build_target(
    ctx: &Ctx<'_>,
    target: &TableWithJoins,
    from: Option<&[TableWithJoins]>,
    selection: Option<&Expr>,
) -> SqlResult<(super::relation::Relation, DmlTarget)> {
    let (name, _) = target_name(&target.relation)?;
    let run = |tables: &[TableWithJoins]| -> SqlResult<(super::relation::Relation, DmlTarget)> {
        let mut b = FromBuilder::new(ctx, None);
        b.target = Some(DmlTarget {
            name: name.clone(),
            ..DmlTarget::default()
        });
        let rel = b.build(tables, selection)?;
        Ok((rel, b.target.take().unwrap_or_default()))
    };
    match from {
        None => run(std::slice::from_ref(target)),
        Some(tables) => {
            let (rel, t) = run(tables)?;
            if t.found.is_some() {
                return Ok((rel, t));
            }
            let mut all = vec![target.clone()];
            all.extend_from_slice(tables);
            run(&all)
        }
    }
}

/// UPDATE ... SET ... [FROM ...] [WHERE ...].
pub fn update(w: &mut WriteCtx<'_>, upd: &Update) -> SqlResult<DmlOutcome> {
    if upd.output.is_some() || upd.returning.is_some() {
        return Err(SqlError::unsupported("OUTPUT"));
    }
    if upd.limit.is_some() || !upd.order_by.is_empty() {
        return Err(SqlError::unsupported("UPDATE TOP/ORDER BY"));
    }
    let from = match &upd.from {
        None => None,
        Some(UpdateTableFromKind::BeforeSet(t)) | Some(UpdateTableFromKind::AfterSet(t)) => {
            Some(t.as_slice())
        }
    };
    let (db_id, oid, pairs) = {
        let ctx = w.read();
        let (rel, target) = build_target(&ctx, &upd.table, from, upd.selection.as_ref())?;
        let Some((db_id, oid, start, locator)) = target.found else {
            return Err(SqlError::invalid_object(&upd.table.relation.to_string()));
        };
        let db = ctx
            .state
            .database_by_id(db_id)
            .ok_or_else(|| SqlError::invalid_object(&upd.table.to_string()))?;
        let table = table_by_id(ctx.state, db_id, oid)?;
        check_table_permission(&ctx, "UPDATE", db, table)?;
        let meta = &table.meta;
        let mut sets = Vec::new();
        for a in &upd.assignments {
            let AssignmentTarget::ColumnName(col) = &a.target else {
                return Err(SqlError::unsupported("tuple assignment"));
            };
            let last = col
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.clone())
                .unwrap_or_default();
            let i = meta
                .column_index(&last)
                .ok_or_else(|| SqlError::invalid_column(&last))?;
            let c = &meta.columns[i];
            if c.computed.is_some() {
                return Err(SqlError::new(
                    271,
                    format!(
                        "The column \"{}\" cannot be modified because it is either a computed column or is the result of a UNION operator.",
                        c.name
                    ),
                ));
            }
            if c.identity {
                return Err(SqlError::new(
                    8102,
                    format!("Cannot update identity column '{}'.", c.name),
                ));
            }
            sets.push((i, &a.value));
        }
        let cols = table_cols(meta);
        let width = meta.columns.len();
        let mut seen = std::collections::HashSet::new();
        let mut pairs = Vec::new();
        for row in &rel.rows {
            ctx.cancel.check()?;
            let Some(Value::BigInt(loc)) = row.get(locator) else {
                continue;
            };
            if !seen.insert(*loc) {
                continue;
            }
            let Some(key) = target.keys.get(*loc as usize) else {
                continue;
            };
            let old: Vec<Value> = row
                .get(start..start + width)
                .map(<[Value]>::to_vec)
                .unwrap_or_default();
            let mut new = old.clone();
            let scope = RowScope::new(&ctx, &rel.cols, row, None);
            for (i, e) in &sets {
                let c = &meta.columns[*i];
                new[*i] = if is_default_keyword(e) {
                    match &c.default {
                        Some(d) => expr::assign_collated(
                            &expr::eval(d, &scope)?,
                            c.ty,
                            c.collation,
                            &c.name,
                        )?,
                        None => Value::Null,
                    }
                } else {
                    expr::assign_collated(&expr::eval(e, &scope)?, c.ty, c.collation, &c.name)?
                };
            }
            finish_row(&ctx, db, table, &cols, &mut new, "UPDATE")?;
            pairs.push((key.clone(), Row::from(old), Row::from(new)));
        }
        (db_id, oid, pairs)
    };
    apply_update(w, db_id, oid, pairs)
}

fn apply_update(
    w: &mut WriteCtx<'_>,
    db_id: i32,
    oid: i32,
    pairs: Vec<(RowKey, Row, Row)>,
) -> SqlResult<DmlOutcome> {
    let spid = w.info.spid;
    let table = w
        .state
        .database_by_id_mut(db_id)
        .and_then(|d| d.tables.get_mut(&oid))
        .ok_or_else(|| SqlError::invalid_object(&oid.to_string()))?;
    table.dirty_by = Some(spid);
    let pk = table.meta.primary_key.as_ref().map(|p| p.columns.clone());
    let collations = table.meta.collations();
    for (k, _, _) in &pairs {
        table.data.remove(k);
    }
    let mut changes = Vec::with_capacity(pairs.len());
    let mut failed = None;
    for (old_key, old, new) in pairs {
        let new_key = match &pk {
            Some(cols) => RowKey::for_columns_in(&new, cols, &collations),
            None => old_key.clone(),
        };
        let inserted = failed.is_none() && table.data.insert(new_key.clone(), new.clone());
        if !inserted && failed.is_none() {
            failed = Some(new.clone());
        }
        changes.push(RowUndo {
            op: ChangeOp::Update,
            before: Some((old_key, old)),
            after: if inserted { Some((new_key, new)) } else { None },
        });
    }
    let count = changes.len() as u64;
    w.txn.entries.push(UndoEntry::Rows {
        db: db_id,
        object_id: oid,
        changes,
    });
    if let Some(row) = failed {
        let db = w
            .state
            .database_by_id(db_id)
            .ok_or_else(|| SqlError::invalid_object(&oid.to_string()))?;
        return Err(duplicate_key(db, table_by_id(w.state, db_id, oid)?, &row));
    }
    Ok(DmlOutcome {
        rows: count,
        identity: None,
    })
}

/// DELETE [t] FROM ... [WHERE ...].
pub fn delete(w: &mut WriteCtx<'_>, del: &Delete) -> SqlResult<DmlOutcome> {
    if del.output.is_some() || del.returning.is_some() {
        return Err(SqlError::unsupported("OUTPUT"));
    }
    if del.limit.is_some() || !del.order_by.is_empty() || del.using.is_some() {
        return Err(SqlError::unsupported("DELETE TOP/ORDER BY/USING"));
    }
    let tables = match &del.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    let Some(first) = tables.first() else {
        return Err(SqlError::syntax("DELETE"));
    };
    let (db_id, oid, keys) = {
        let ctx = w.read();
        let (rel, target) = match del.tables.first() {
            Some(name) => {
                let target = TableWithJoins {
                    relation: TableFactor::Table {
                        name: name.clone(),
                        alias: None,
                        args: None,
                        with_hints: vec![],
                        version: None,
                        with_ordinality: false,
                        partitions: vec![],
                        json_path: None,
                        sample: None,
                        index_hints: vec![],
                    },
                    joins: vec![],
                };
                build_target(&ctx, &target, Some(tables), del.selection.as_ref())?
            }
            None => build_target(
                &ctx,
                first,
                if tables.len() > 1 || !first.joins.is_empty() {
                    Some(tables)
                } else {
                    None
                },
                del.selection.as_ref(),
            )?,
        };
        let Some((db_id, oid, _, locator)) = target.found else {
            return Err(SqlError::invalid_object(&first.relation.to_string()));
        };
        let db = ctx
            .state
            .database_by_id(db_id)
            .ok_or_else(|| SqlError::invalid_object(&first.to_string()))?;
        check_table_permission(&ctx, "DELETE", db, table_by_id(ctx.state, db_id, oid)?)?;
        let mut seen = std::collections::HashSet::new();
        let keys: Vec<RowKey> = rel
            .rows
            .iter()
            .filter_map(|r| match r.get(locator) {
                Some(Value::BigInt(l)) if seen.insert(*l) => target.keys.get(*l as usize).cloned(),
                _ => None,
            })
            .collect();
        (db_id, oid, keys)
    };
    let spid = w.info.spid;
    let table = w
        .state
        .database_by_id_mut(db_id)
        .and_then(|d| d.tables.get_mut(&oid))
        .ok_or_else(|| SqlError::invalid_object(&oid.to_string()))?;
    table.dirty_by = Some(spid);
    let mut changes = Vec::with_capacity(keys.len());
    for k in keys {
        if let Some(row) = table.data.remove(&k) {
            changes.push(RowUndo {
                op: ChangeOp::Delete,
                before: Some((k, row)),
                after: None,
            });
        }
    }
    let count = changes.len() as u64;
    w.txn.entries.push(UndoEntry::Rows {
        db: db_id,
        object_id: oid,
        changes,
    });
    Ok(DmlOutcome {
        rows: count,
        identity: None,
    })
}

#[cfg(test)]
#[path = "dml_tests.rs"]
mod tests;
