//! INSERT ... VALUES / SELECT / DEFAULT VALUES: every new row is built
//! (defaults, identity, computed columns) against the unchanged table,
//! then the rows are added and journaled.
//! <https://learn.microsoft.com/en-us/sql/t-sql/statements/insert-transact-sql>

use sqlparser::ast::{Insert, ObjectName, SetExpr, TableObject};

use super::context::{Ctx, WriteCtx};
use super::dml::{DmlOutcome, duplicate_key, finish_row, is_default_keyword, table_cols};
use super::resolve::{table_by_id, table_for_write};
use super::scope::RowScope;
use crate::sql::catalog::TableMeta;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::{self, Typed};
use crate::sql::storage::{Row, RowKey};
use crate::sql::transaction::{ChangeOp, RowUndo, UndoEntry};
use crate::sql::types::{DataType, Decimal, Value};

/// INSERT ... VALUES / SELECT / DEFAULT VALUES.
pub fn insert(w: &mut WriteCtx<'_>, ins: &Insert) -> SqlResult<DmlOutcome> {
    if ins.output.is_some() || ins.returning.is_some() {
        return Err(SqlError::unsupported("OUTPUT"));
    }
    let TableObject::TableName(name) = &ins.table else {
        return Err(SqlError::unsupported("INSERT into a table function"));
    };
    let (db_id, oid, rows, mut identity) = {
        let ctx = w.read();
        let (db_id, oid) = table_for_write(&ctx, name, "INSERT")?;
        let db = ctx
            .state
            .database_by_id(db_id)
            .ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
        let table = table_by_id(ctx.state, db_id, oid)?;
        let meta = &table.meta;
        let targets: Vec<usize> = if ins.columns.is_empty() {
            (0..meta.columns.len())
                .filter(|i| !meta.columns[*i].identity && meta.columns[*i].computed.is_none())
                .collect()
        } else {
            ins.columns
                .iter()
                .map(|c| insert_column(meta, c))
                .collect::<SqlResult<_>>()?
        };
        let source = source_rows(&ctx, ins, targets.len())?;
        let cols = table_cols(meta);
        let mut identity = meta.identity.clone();
        let mut rows = Vec::with_capacity(source.len());
        for src in source {
            ctx.cancel.check()?;
            let mut row = vec![Value::Null; meta.columns.len()];
            let mut given = vec![false; meta.columns.len()];
            for (t, v) in targets.iter().zip(src) {
                let c = &meta.columns[*t];
                if let Some(v) = v {
                    row[*t] = expr::assign_collated(&v, c.ty, c.collation, &c.name)?;
                    given[*t] = true;
                }
            }
            for (i, c) in meta.columns.iter().enumerate() {
                if given[i] || c.computed.is_some() {
                    continue;
                }
                if c.identity {
                    if let Some(id) = identity.as_mut() {
                        let v = Typed::new(
                            Value::Decimal(Decimal::new(id.next_value(), 0)),
                            DataType::Decimal {
                                precision: 38,
                                scale: 0,
                            },
                        );
                        row[i] = expr::assign_collated(&v, c.ty, c.collation, &c.name)?;
                    }
                } else if let Some(d) = &c.default {
                    let v = expr::eval(d, &RowScope::new(&ctx, &[], &[], None))?;
                    row[i] = expr::assign_collated(&v, c.ty, c.collation, &c.name)?;
                }
            }
            finish_row(&ctx, db, table, &cols, &mut row, "INSERT")?;
            rows.push(row);
        }
        (db_id, oid, rows, identity)
    };
    let spid = w.info.spid;
    let table = w
        .state
        .database_by_id_mut(db_id)
        .and_then(|d| d.tables.get_mut(&oid))
        .ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
    let last_identity = identity.as_ref().and_then(|i| i.last);
    if let Some(id) = identity.take() {
        table.meta.identity = Some(id);
    }
    table.dirty_by = Some(spid);
    let pk = table.meta.primary_key.as_ref().map(|p| p.columns.clone());
    let collations = table.meta.collations();
    let mut changes = Vec::with_capacity(rows.len());
    let mut failed = None;
    for row in rows {
        let row: Row = row.into();
        let key = match &pk {
            Some(cols) => RowKey::for_columns_in(&row, cols, &collations),
            None => table.data.next_heap_key(),
        };
        if !table.data.insert(key.clone(), row.clone()) {
            failed = Some(row);
            break;
        }
        changes.push(RowUndo {
            op: ChangeOp::Insert,
            before: None,
            after: Some((key, row)),
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
            .ok_or_else(|| SqlError::invalid_object(&name.to_string()))?;
        let table = table_by_id(w.state, db_id, oid)?;
        return Err(duplicate_key(db, table, &row));
    }
    Ok(DmlOutcome {
        rows: count,
        identity: last_identity,
    })
}

fn insert_column(meta: &TableMeta, name: &ObjectName) -> SqlResult<usize> {
    let col = name.0.last().map(|p| p.to_string()).unwrap_or_default();
    let col = col.trim_matches(|c| c == '[' || c == ']' || c == '"');
    let i = meta
        .column_index(col)
        .ok_or_else(|| SqlError::invalid_column(col))?;
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
            544,
            format!(
                "Cannot insert explicit value for identity column in table '{}' when IDENTITY_INSERT is set to OFF.",
                meta.name
            ),
        ));
    }
    Ok(i)
}

/// The rows to insert; `None` marks DEFAULT.
fn source_rows(ctx: &Ctx<'_>, ins: &Insert, width: usize) -> SqlResult<Vec<Vec<Option<Typed>>>> {
    let Some(q) = &ins.source else {
        return Ok(vec![Vec::new()]);
    };
    let rows: Vec<Vec<Option<Typed>>> = match q.body.as_ref() {
        SetExpr::Values(values) if q.order_by.is_none() => {
            let scope = RowScope::new(ctx, &[], &[], None);
            values
                .rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|e| {
                            if is_default_keyword(e) {
                                Ok(None)
                            } else {
                                expr::eval(e, &scope).map(Some)
                            }
                        })
                        .collect::<SqlResult<Vec<_>>>()
                })
                .collect::<SqlResult<_>>()?
        }
        _ => {
            let rel = super::query::run_query(ctx, q, None)?;
            let tys: Vec<DataType> = rel.cols.iter().map(|c| c.ty).collect();
            rel.rows
                .into_iter()
                .map(|r| {
                    r.into_iter()
                        .zip(&tys)
                        .map(|(v, t)| Some(Typed::new(v, *t)))
                        .collect()
                })
                .collect()
        }
    };
    for r in &rows {
        if r.len() > width {
            return Err(SqlError::new(110, "There are fewer columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.").aborting_batch());
        }
        if r.len() < width {
            return Err(SqlError::new(109, "There are more columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.").aborting_batch());
        }
    }
    Ok(rows)
}
