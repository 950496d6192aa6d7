//! A SELECT's output rows between evaluation and the result: the SELECT
//! items and ORDER BY keys bound to source columns once per query, rows
//! built by moving source values rather than copying them, and ORDER BY.
//!
//! Values are kept apart from their types: a source column's type is the
//! column's, so only expression items carry a type per row, and a row
//! becomes a result row without being copied again.

use std::cmp::Ordering;

use sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, FunctionArguments};

use super::context::Ctx;
use super::relation::ColMeta;
use super::scope::{RowScope, find_column};
use crate::sql::collation::Collation;
use crate::sql::error::SqlResult;
use crate::sql::expr::{self, Scope, Typed};
use crate::sql::types::{DataType, Value};

/// One output column of a SELECT list.
pub(super) enum Item<'q> {
    Source(usize),
    Expr(&'q Expr),
}

/// A sort key: an output column, a source column, or an expression over
/// the source row.
pub(super) enum SortKey<'q> {
    Output(usize),
    Source(usize),
    Expr(&'q Expr),
}

/// The column a plain column reference names among `cols`, if it names
/// exactly one of them.
fn bound_column(e: &Expr, cols: &[ColMeta]) -> Option<usize> {
    let parts = match e {
        Expr::Identifier(id) => std::slice::from_ref(id),
        Expr::CompoundIdentifier(parts) => parts.as_slice(),
        _ => return None,
    };
    find_column(cols, parts).ok().flatten()
}

/// The collation a SELECT item has of its own, as the result column's:
/// `x COLLATE name`, a character column's, or either through
/// parentheses and CAST/CONVERT to a character type.
pub(super) fn expr_collation(e: &Expr, cols: &[ColMeta]) -> Option<Collation> {
    match e {
        Expr::Collate { collation, .. } => {
            let name = collation.0.last().and_then(|p| p.as_ident())?;
            crate::sql::collation::lookup(&name.value).ok()
        }
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
            bound_column(e, cols).and_then(|i| cols.get(i)?.collation)
        }
        Expr::Nested(inner) => expr_collation(inner, cols),
        Expr::Cast {
            expr: inner,
            data_type,
            ..
        }
        | Expr::Convert {
            expr: inner,
            data_type: Some(data_type),
            ..
        } => {
            if expr::cast_type(data_type).is_ok_and(|t| t.is_string()) {
                expr_collation(inner, cols)
            } else {
                None
            }
        }
        // Concatenation and string functions keep their operands'
        // collation (the result column keeps it only when it is a string).
        Expr::BinaryOp { left, right, .. } => {
            expr_collation(left, cols).or_else(|| expr_collation(right, cols))
        }
        Expr::Function(f) => match &f.args {
            FunctionArguments::List(list) => list.args.iter().find_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => expr_collation(e, cols),
                _ => None,
            }),
            _ => None,
        },
        Expr::Substring { expr: inner, .. } | Expr::Trim { expr: inner, .. } => {
            expr_collation(inner, cols)
        }
        Expr::Case {
            conditions,
            else_result,
            ..
        } => conditions
            .iter()
            .find_map(|c| expr_collation(&c.result, cols))
            .or_else(|| else_result.as_deref().and_then(|e| expr_collation(e, cols))),
        _ => None,
    }
}

/// Resolves the SELECT items that are plain column references to their
/// source position once per query, rather than by name for every row.
/// References that name no column (outer ones) or several stay
/// expressions, so they fail or resolve as before.
pub(super) fn bind_items(items: &mut [(Item<'_>, String)], cols: &[ColMeta]) {
    for (item, _) in items.iter_mut() {
        if let Item::Expr(e) = item
            && let Some(i) = bound_column(e, cols)
        {
            *item = Item::Source(i);
        }
    }
}

/// Resolves ORDER BY keys that are plain column references: to the output
/// column showing that source column when there is one (no copy needed),
/// else to the source column.
pub(super) fn bind_sort_keys(
    keys: &mut [(SortKey<'_>, bool)],
    items: &[(Item<'_>, String)],
    cols: &[ColMeta],
) {
    for (key, _) in keys.iter_mut() {
        let SortKey::Expr(e) = key else { continue };
        let Some(i) = bound_column(e, cols) else {
            continue;
        };
        *key = match items
            .iter()
            .position(|(item, _)| matches!(item, Item::Source(s) if *s == i))
        {
            Some(k) => SortKey::Output(k),
            None => SortKey::Source(i),
        };
    }
}

/// Whether rows in `order` (source columns, ascending) already satisfy
/// ORDER BY `keys`: the keys are all ascending and name, in turn, the
/// first columns of that order.
pub(super) fn keys_follow(
    keys: &[(SortKey<'_>, bool)],
    items: &[(Item<'_>, String)],
    order: &[usize],
) -> bool {
    keys.len() <= order.len()
        && keys.iter().zip(order).all(|((key, asc), col)| {
            let source = match key {
                SortKey::Output(k) => match items.get(*k) {
                    Some((Item::Source(i), _)) => Some(*i),
                    _ => None,
                },
                SortKey::Source(i) => Some(*i),
                SortKey::Expr(_) => None,
            };
            *asc && source == Some(*col)
        })
}

/// The values of the ORDER BY keys that are not output columns.
pub(super) fn extra_sort_values(
    keys: &[(SortKey<'_>, bool)],
    cols: &[ColMeta],
    scope: &RowScope<'_>,
    row: &[Value],
) -> SqlResult<Vec<Typed>> {
    keys.iter()
        .filter_map(|(k, _)| match k {
            SortKey::Output(_) => None,
            SortKey::Source(i) => Some(Ok(match cols.get(*i) {
                Some(c) => c.typed(row.get(*i).cloned().unwrap_or(Value::Null)),
                None => Typed::null(DataType::Int),
            })),
            SortKey::Expr(e) => Some(expr::eval(e, scope)),
        })
        .collect()
}

/// One evaluated output row.
pub(super) struct OutRow {
    pub(super) values: Vec<Value>,
    /// The types of the expression items, in item order.
    expr_types: Vec<DataType>,
    /// The values of the ORDER BY keys that are not output columns, in
    /// key order.
    sort: Vec<Typed>,
}

/// Where each output column's type comes from: fixed (a source column's)
/// or the row's own (an expression's, which may differ row to row).
pub(super) struct Layout {
    fixed: Vec<Option<DataType>>,
    /// Each output column's collation, when it has one of its own.
    collations: Vec<Option<Collation>>,
    /// For each output column, its position among the expression items.
    slot: Vec<usize>,
}

impl Layout {
    pub(super) fn for_items(items: &[(Item<'_>, String)], cols: &[ColMeta]) -> Self {
        let mut layout = Self::new(items.iter().map(|(item, _)| match item {
            Item::Source(i) => Some(cols.get(*i).map_or(DataType::Int, |c| c.ty)),
            Item::Expr(_) => None,
        }));
        layout.collations = items
            .iter()
            .map(|(item, _)| match item {
                Item::Source(i) => cols.get(*i).and_then(|c| c.collation),
                Item::Expr(e) => expr_collation(e, cols),
            })
            .collect();
        layout
    }

    /// Every column's type fixed (rows of a relation).
    pub(super) fn fixed(cols: &[ColMeta]) -> Self {
        let mut layout = Self::new(cols.iter().map(|c| Some(c.ty)));
        layout.collations = cols.iter().map(|c| c.collation).collect();
        layout
    }

    /// Output column `k`'s own collation, if it has one.
    pub(super) fn collation(&self, k: usize) -> Option<Collation> {
        self.collations.get(k).copied().flatten()
    }

    fn new(fixed: impl Iterator<Item = Option<DataType>>) -> Self {
        let fixed: Vec<Option<DataType>> = fixed.collect();
        let mut next = 0;
        let slot = fixed
            .iter()
            .map(|f| {
                let s = next;
                next += usize::from(f.is_none());
                s
            })
            .collect();
        Self {
            fixed,
            collations: Vec::new(),
            slot,
        }
    }

    /// The type of output column `k` in `row`.
    fn ty(&self, row: &OutRow, k: usize) -> DataType {
        match self.fixed.get(k) {
            Some(Some(ty)) => *ty,
            _ => self
                .slot
                .get(k)
                .and_then(|s| row.expr_types.get(*s))
                .copied()
                .unwrap_or(DataType::Int),
        }
    }

    /// A row from evaluated values.
    pub(super) fn row(&self, typed: Vec<Typed>, sort: Vec<Typed>) -> OutRow {
        let mut expr_types = Vec::new();
        let values = typed
            .into_iter()
            .enumerate()
            .map(|(k, t)| {
                if matches!(self.fixed.get(k), Some(None) | None) {
                    expr_types.push(t.ty);
                }
                t.value
            })
            .collect();
        OutRow {
            values,
            expr_types,
            sort,
        }
    }

    /// The output columns' types as the first row has them.
    pub(super) fn types_of(&self, row: &OutRow) -> Vec<DataType> {
        (0..self.fixed.len()).map(|k| self.ty(row, k)).collect()
    }

    /// The result rows, each value converted to its column's type where
    /// the row's own type differs (as an expression's may).
    pub(super) fn result_rows(
        &self,
        out: Vec<OutRow>,
        types: &[DataType],
    ) -> SqlResult<Vec<Vec<Value>>> {
        let varying: Vec<usize> = (0..types.len())
            .filter(|k| !matches!(self.fixed.get(*k), Some(Some(_))))
            .collect();
        let mut rows = Vec::with_capacity(out.len());
        for mut r in out {
            for &k in &varying {
                let ty = self.ty(&r, k);
                let (Some(slot), Some(want)) = (r.values.get_mut(k), types.get(k)) else {
                    continue;
                };
                if ty != *want && !slot.is_null() {
                    let typed = Typed::new(std::mem::replace(slot, Value::Null), ty);
                    *slot = expr::convert(&typed, *want)?;
                }
            }
            rows.push(r.values);
        }
        Ok(rows)
    }
}

/// How an ungrouped SELECT turns a source row it owns into an output row:
/// expressions are evaluated first, then source columns are moved out of
/// the row (copied only when shown more than once), and the output values
/// go back into the source row's own allocation.
pub(super) struct RowPlan {
    /// Per SELECT item: a source column shown for the last time.
    take: Vec<bool>,
    /// The output values while the source row is being emptied.
    scratch: Vec<Value>,
}

impl RowPlan {
    pub(super) fn new(items: &[(Item<'_>, String)]) -> Self {
        let take = items
            .iter()
            .enumerate()
            .map(|(k, (item, _))| match item {
                Item::Source(i) => !items[k + 1..]
                    .iter()
                    .any(|(later, _)| matches!(later, Item::Source(j) if j == i)),
                Item::Expr(_) => false,
            })
            .collect();
        Self {
            take,
            scratch: Vec::with_capacity(items.len()),
        }
    }

    pub(super) fn eval_owned(
        &mut self,
        ctx: &Ctx<'_>,
        items: &[(Item<'_>, String)],
        keys: &[(SortKey<'_>, bool)],
        cols: &[ColMeta],
        mut row: Vec<Value>,
        outer: Option<&dyn Scope>,
    ) -> SqlResult<OutRow> {
        let values = &mut self.scratch;
        values.clear();
        let mut expr_types = Vec::new();
        let sort = {
            let scope = RowScope::new(ctx, cols, &row, outer);
            for (item, _) in items {
                values.push(match item {
                    Item::Source(_) => Value::Null,
                    Item::Expr(e) => {
                        let t = expr::eval(e, &scope)?;
                        expr_types.push(t.ty);
                        t.value
                    }
                });
            }
            if keys.is_empty() {
                Vec::new()
            } else {
                extra_sort_values(keys, cols, &scope, &row)?
            }
        };
        for (k, (item, _)) in items.iter().enumerate() {
            let Item::Source(i) = item else { continue };
            values[k] = match row.get_mut(*i) {
                Some(slot) if self.take[k] => std::mem::replace(slot, Value::Null),
                Some(slot) => slot.clone(),
                None => Value::Null,
            };
        }
        row.clear();
        row.append(values);
        Ok(OutRow {
            values: row,
            expr_types,
            sort,
        })
    }
}

/// Where a row's value for one ORDER BY key is: one of its output
/// values, or one of the extra sort values; and the direction.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyRef {
    output: bool,
    index: usize,
    asc: bool,
}

pub(super) fn key_refs(keys: &[(SortKey<'_>, bool)]) -> Vec<KeyRef> {
    let mut extra = 0;
    keys.iter()
        .map(|(k, asc)| match k {
            SortKey::Output(i) => KeyRef {
                output: true,
                index: *i,
                asc: *asc,
            },
            SortKey::Source(_) | SortKey::Expr(_) => {
                extra += 1;
                KeyRef {
                    output: false,
                    index: extra - 1,
                    asc: *asc,
                }
            }
        })
        .collect()
}

impl OutRow {
    fn key<'r>(
        &'r self,
        layout: &Layout,
        k: &KeyRef,
    ) -> Option<(&'r Value, DataType, Option<Collation>)> {
        if k.output {
            Some((
                self.values.get(k.index)?,
                layout.ty(self, k.index),
                layout.collation(k.index),
            ))
        } else {
            self.sort
                .get(k.index)
                .map(|t| (&t.value, t.ty, t.collation.map(|l| l.collation)))
        }
    }
}

/// The ORDER BY comparison of two rows, NULLs first.
fn compare_rows(a: &OutRow, b: &OutRow, layout: &Layout, keys: &[KeyRef]) -> SqlResult<Ordering> {
    for k in keys {
        let (Some((x, xt, xc)), Some((y, yt, _))) = (a.key(layout, k), b.key(layout, k)) else {
            continue;
        };
        let ord = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => expr::compare_in(x, xt, y, yt, xc)?.unwrap_or(Ordering::Equal),
        };
        let ord = if k.asc { ord } else { ord.reverse() };
        if ord != Ordering::Equal {
            return Ok(ord);
        }
    }
    Ok(Ordering::Equal)
}

/// Sorts stably by `keys`. Rows that already arrive in order (the change
/// functions return theirs in (start_lsn, seqval, operation) order) are
/// recognised in one pass and left as they are.
pub(super) fn sort_rows(out: &mut [OutRow], layout: &Layout, keys: &[KeyRef]) -> SqlResult<()> {
    if already_sorted(out, layout, keys)? {
        return Ok(());
    }
    let mut err = None;
    out.sort_by(|a, b| match compare_rows(a, b, layout, keys) {
        Ok(o) => o,
        Err(e) => {
            err.get_or_insert(e);
            Ordering::Equal
        }
    });
    err.map_or(Ok(()), Err)
}

/// Whether every row sorts at or after the one before it.
fn already_sorted(out: &[OutRow], layout: &Layout, keys: &[KeyRef]) -> SqlResult<bool> {
    for pair in out.windows(2) {
        if compare_rows(&pair[0], &pair[1], layout, keys)? == Ordering::Greater {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(values: Vec<Value>) -> OutRow {
        OutRow {
            values,
            expr_types: Vec::new(),
            sort: Vec::new(),
        }
    }

    fn firsts(out: &[OutRow]) -> Vec<Value> {
        out.iter().map(|r| r.values[0].clone()).collect()
    }

    #[test]
    fn sorts_rows_out_of_order_and_leaves_ordered_ones() {
        let cols = [ColMeta::new("a", DataType::Int, true)];
        let layout = Layout::fixed(&cols);
        let keys = key_refs(&[(SortKey::Output(0), true)]);
        let mut out: Vec<OutRow> = [3, 1, 2]
            .into_iter()
            .map(|v| row(vec![Value::Int(v)]))
            .collect();
        assert!(!already_sorted(&out, &layout, &keys).unwrap());
        sort_rows(&mut out, &layout, &keys).unwrap();
        assert_eq!(firsts(&out), [1, 2, 3].map(Value::Int));
        assert!(already_sorted(&out, &layout, &keys).unwrap());
        // NULL sorts first; descending reverses.
        let mut out: Vec<OutRow> = [Value::Int(1), Value::Null, Value::Int(2)]
            .into_iter()
            .map(|v| row(vec![v]))
            .collect();
        sort_rows(&mut out, &layout, &key_refs(&[(SortKey::Output(0), false)])).unwrap();
        assert_eq!(
            firsts(&out),
            vec![Value::Int(2), Value::Int(1), Value::Null]
        );
    }

    #[test]
    fn keys_follow_only_an_ascending_prefix_of_the_input_order() {
        let e = Expr::Identifier("x".into());
        let items = [
            (Item::Source(2), "c".to_string()),
            (Item::Source(0), "a".to_string()),
            (Item::Expr(&e), "e".to_string()),
        ];
        let order = [0, 1, 2];
        let follow = |keys: &[(SortKey<'_>, bool)]| keys_follow(keys, &items, &order);
        assert!(follow(&[]));
        assert!(follow(&[(SortKey::Output(1), true)]));
        assert!(follow(&[
            (SortKey::Output(1), true),
            (SortKey::Source(1), true)
        ]));
        assert!(follow(&[
            (SortKey::Source(0), true),
            (SortKey::Source(1), true),
            (SortKey::Output(0), true)
        ]));
        assert!(!follow(&[(SortKey::Output(1), false)]));
        assert!(!follow(&[(SortKey::Source(1), true)]));
        assert!(!follow(&[(SortKey::Output(0), true)]));
        assert!(!follow(&[(SortKey::Output(2), true)]));
        assert!(!follow(&[(SortKey::Expr(&e), true)]));
        assert!(!keys_follow(&[(SortKey::Source(0), true)], &items, &[]));
    }

    #[test]
    fn expression_columns_keep_their_own_types_until_converted() {
        let cols = [ColMeta::new("a", DataType::Int, true)];
        let a = Expr::Identifier("x".into());
        let items = [
            (Item::Source(0), "a".to_string()),
            (Item::Expr(&a), "e".to_string()),
        ];
        let layout = Layout::for_items(&items, &cols);
        let first = layout.row(
            vec![
                Typed::new(Value::Int(1), DataType::Int),
                Typed::new(Value::BigInt(5), DataType::BigInt),
            ],
            Vec::new(),
        );
        let second = layout.row(
            vec![
                Typed::new(Value::Int(2), DataType::Int),
                Typed::new(Value::Int(6), DataType::Int),
            ],
            Vec::new(),
        );
        let types = layout.types_of(&first);
        assert_eq!(types, vec![DataType::Int, DataType::BigInt]);
        let rows = layout.result_rows(vec![first, second], &types).unwrap();
        assert_eq!(rows[1], vec![Value::Int(2), Value::BigInt(6)]);
    }
}
