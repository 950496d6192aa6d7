//! Query evaluation: SELECT (projection, WHERE, GROUP BY/HAVING,
//! DISTINCT, ORDER BY, TOP), set operations and VALUES, producing a
//! [`Relation`]. Semantics follow
//! <https://learn.microsoft.com/en-us/sql/t-sql/queries/select-transact-sql>.

use std::collections::HashMap;

use sqlparser::ast::{
    Distinct, Expr, GroupByExpr, OrderBy, OrderByExpr, OrderByKind, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, SetOperator, SetQuantifier, TopQuantity,
    Value as AstValue,
};

use super::context::Ctx;
use super::from::FromBuilder;
use super::needed::NeededColumns;
use super::output_rows::{
    Item, Layout, OutRow, RowPlan, SortKey, bind_items, bind_sort_keys, extra_sort_values,
    key_refs, keys_follow, sort_rows,
};
use super::relation::{ColMeta, Relation};
use super::scope::{RowScope, contains_aggregate};
use crate::sql::catalog::same_name;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::{self, Scope, Typed, is_true};
use crate::sql::storage::KeyPart;
use crate::sql::types::{DataType, Value};

/// Runs a query; `outer` is the enclosing row for correlated subqueries.
pub fn run_query(ctx: &Ctx<'_>, q: &Query, outer: Option<&dyn Scope>) -> SqlResult<Relation> {
    if q.with.is_some() {
        return Err(SqlError::unsupported("WITH (common table expressions)"));
    }
    if q.limit_clause.is_some() || q.fetch.is_some() {
        return Err(SqlError::unsupported("OFFSET/FETCH"));
    }
    match q.body.as_ref() {
        SetExpr::Select(sel) => run_select(ctx, sel, q.order_by.as_ref(), outer),
        body => {
            let mut rel = run_set_expr(ctx, body, outer)?;
            if let Some(ob) = &q.order_by {
                sort_output(ctx, &mut rel, ob, outer)?;
            }
            Ok(rel)
        }
    }
}

fn run_set_expr(ctx: &Ctx<'_>, body: &SetExpr, outer: Option<&dyn Scope>) -> SqlResult<Relation> {
    match body {
        SetExpr::Select(sel) => run_select(ctx, sel, None, outer),
        SetExpr::Query(q) => run_query(ctx, q, outer),
        SetExpr::Values(values) => {
            let mut rel = Relation::default();
            for (n, row) in values.rows.iter().enumerate() {
                let scope = RowScope::new(ctx, &[], &[], outer);
                let typed = row
                    .iter()
                    .map(|e| expr::eval(e, &scope))
                    .collect::<SqlResult<Vec<_>>>()?;
                if n == 0 {
                    rel.cols = typed.iter().map(|t| ColMeta::new("", t.ty, true)).collect();
                } else if typed.len() != rel.cols.len() {
                    return Err(SqlError::new(
                        10709,
                        "The number of columns for each row in a table value constructor must be the same.",
                    )
                    .aborting_batch());
                }
                rel.rows.push(typed.into_iter().map(|t| t.value).collect());
            }
            Ok(rel)
        }
        SetExpr::SetOperation {
            op,
            set_quantifier,
            left,
            right,
        } => {
            let mut l = run_set_expr(ctx, left, outer)?;
            let r = run_set_expr(ctx, right, outer)?;
            if l.cols.len() != r.cols.len() {
                return Err(SqlError::new(
                    205,
                    "All queries combined using a UNION, INTERSECT or EXCEPT operator must have an equal number of expressions in their target lists.",
                )
                .aborting_batch());
            }
            for (lc, rc) in l.cols.iter_mut().zip(&r.cols) {
                lc.nullable |= rc.nullable;
                lc.qualifier = None;
                lc.collation = lc.collation.or(rc.collation);
            }
            let all = matches!(set_quantifier, SetQuantifier::All);
            match op {
                SetOperator::Union => {
                    l.rows.extend(r.rows);
                    if !all {
                        dedupe(&mut l.rows);
                    }
                }
                SetOperator::Except | SetOperator::Intersect => {
                    let keys: std::collections::HashSet<Vec<KeyPart>> =
                        r.rows.iter().map(|row| row_key(row)).collect();
                    let keep_present = matches!(op, SetOperator::Intersect);
                    l.rows
                        .retain(|row| keys.contains(&row_key(row)) == keep_present);
                    dedupe(&mut l.rows);
                }
                other => return Err(SqlError::unsupported(&other.to_string())),
            }
            Ok(l)
        }
        other => Err(SqlError::unsupported(&other.to_string())),
    }
}

fn row_key(row: &[Value]) -> Vec<KeyPart> {
    row.iter().map(KeyPart::from_value).collect()
}

fn dedupe(rows: &mut Vec<Vec<Value>>) {
    let mut seen = std::collections::HashSet::new();
    rows.retain(|r| seen.insert(row_key(r)));
}

/// Expands the SELECT list: `*`, `t.*`, expressions with their names.
fn expand<'q>(sel: &'q Select, cols: &[ColMeta]) -> SqlResult<Vec<(Item<'q>, String)>> {
    let mut out = Vec::new();
    for item in &sel.projection {
        match item {
            SelectItem::Wildcard(_) => {
                if cols.iter().all(|c| c.hidden) {
                    return Err(
                        SqlError::new(263, "Must specify table to select from.").aborting_batch()
                    );
                }
                out.extend(
                    cols.iter()
                        .enumerate()
                        .filter(|(_, c)| !c.hidden)
                        .map(|(i, c)| (Item::Source(i), c.name.clone())),
                );
            }
            SelectItem::QualifiedWildcard(kind, _) => {
                let SelectItemQualifiedWildcardKind::ObjectName(name) = kind else {
                    return Err(SqlError::unsupported(&item.to_string()));
                };
                let qual = name.0.last().map(|p| p.to_string()).unwrap_or_default();
                let qual = qual.trim_matches(|c| c == '[' || c == ']' || c == '"');
                let before = out.len();
                out.extend(
                    cols.iter()
                        .enumerate()
                        .filter(|(_, c)| {
                            !c.hidden && c.qualifier.as_deref().is_some_and(|q| same_name(q, qual))
                        })
                        .map(|(i, c)| (Item::Source(i), c.name.clone())),
                );
                if out.len() == before {
                    return Err(SqlError::new(
                        4104,
                        format!("The multi-part identifier \"{name}\" could not be bound."),
                    )
                    .aborting_batch());
                }
            }
            SelectItem::UnnamedExpr(e) => {
                let name = match e {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(parts) => {
                        parts.last().map(|p| p.value.clone()).unwrap_or_default()
                    }
                    _ => String::new(),
                };
                out.push((Item::Expr(e), name));
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                out.push((Item::Expr(expr), alias.value.clone()))
            }
            other => return Err(SqlError::unsupported(&other.to_string())),
        }
    }
    Ok(out)
}

/// Nullability of a plain column reference, else true.
fn item_nullable(item: &Item<'_>, cols: &[ColMeta]) -> bool {
    let parts = match item {
        Item::Source(i) => return cols.get(*i).is_none_or(|c| c.nullable),
        Item::Expr(Expr::Identifier(i)) => vec![i.clone()],
        Item::Expr(Expr::CompoundIdentifier(p)) => p.clone(),
        Item::Expr(Expr::Value(v)) => return matches!(v.value, AstValue::Null),
        Item::Expr(_) => return true,
    };
    match super::scope::find_column(cols, &parts) {
        Ok(Some(i)) => cols[i].nullable,
        _ => true,
    }
}

fn order_exprs(ob: Option<&OrderBy>) -> SqlResult<&[OrderByExpr]> {
    match ob.map(|o| &o.kind) {
        None => Ok(&[]),
        Some(OrderByKind::Expressions(e)) => Ok(e),
        Some(OrderByKind::All(_)) => Err(SqlError::unsupported("ORDER BY ALL")),
    }
}

fn ordinal(e: &Expr, width: usize) -> SqlResult<Option<usize>> {
    if let Expr::Value(v) = e
        && let AstValue::Number(n, _) = &v.value
    {
        let k: usize = n.parse().unwrap_or(0);
        if k == 0 || k > width {
            return Err(SqlError::new(
                    108,
                    format!("The ORDER BY position number {n} is out of range of the number of items in the select list."),
                )
                .aborting_batch());
        }
        return Ok(Some(k - 1));
    }
    Ok(None)
}

fn sort_keys<'q>(
    order: &'q [OrderByExpr],
    names: &[String],
) -> SqlResult<Vec<(SortKey<'q>, bool)>> {
    order
        .iter()
        .map(|o| {
            let asc = o.options.asc.unwrap_or(true);
            if let Some(k) = ordinal(&o.expr, names.len())? {
                return Ok((SortKey::Output(k), asc));
            }
            if let Expr::Identifier(id) = &o.expr
                && let Some(k) = names.iter().position(|n| same_name(n, &id.value))
            {
                return Ok((SortKey::Output(k), asc));
            }
            Ok((SortKey::Expr(&o.expr), asc))
        })
        .collect()
}

fn run_select(
    ctx: &Ctx<'_>,
    sel: &Select,
    order_by: Option<&OrderBy>,
    outer: Option<&dyn Scope>,
) -> SqlResult<Relation> {
    if sel.into.is_some() {
        return Err(SqlError::unsupported("SELECT INTO"));
    }
    let group_exprs: &[Expr] = match &sel.group_by {
        GroupByExpr::Expressions(e, _) => e,
        GroupByExpr::All(_) => return Err(SqlError::unsupported("GROUP BY ALL")),
    };
    let mut builder = FromBuilder::new(ctx, outer);
    builder.needed = NeededColumns::for_select(sel, order_by);
    let src = builder.build(&sel.from, sel.selection.as_ref())?;
    let mut items = expand(sel, &src.cols)?;
    let names: Vec<String> = items.iter().map(|(_, n)| n.clone()).collect();
    let order = order_exprs(order_by)?;
    let mut keys = sort_keys(order, &names)?;
    let grouped = !group_exprs.is_empty()
        || sel.having.is_some()
        || items
            .iter()
            .any(|(i, _)| matches!(i, Item::Expr(e) if contains_aggregate(e)))
        || keys
            .iter()
            .any(|(k, _)| matches!(k, SortKey::Expr(e) if contains_aggregate(e)));
    bind_items(&mut items, &src.cols);
    bind_sort_keys(&mut keys, &items, &src.cols);
    let mut plan = RowPlan::new(&items);
    let layout = Layout::for_items(&items, &src.cols);
    // Ungrouped rows keep the FROM clause's order, so an ORDER BY that
    // order already satisfies needs no sort.
    // Stored rows are in the default collation's order, so a key with a
    // collation of its own is sorted.
    let presorted = !grouped
        && keys_follow(&keys, &items, &src.ordered_by)
        && src
            .ordered_by
            .iter()
            .all(|i| src.cols.get(*i).is_none_or(|c| c.collation.is_none()));

    let eval_row = |scope: &RowScope<'_>, row: &[Value]| -> SqlResult<(Vec<Typed>, Vec<Typed>)> {
        let values = items
            .iter()
            .map(|(item, _)| match item {
                Item::Source(i) => {
                    Ok(src.cols[*i].typed(row.get(*i).cloned().unwrap_or(Value::Null)))
                }
                Item::Expr(e) => expr::eval(e, scope),
            })
            .collect::<SqlResult<Vec<_>>>()?;
        let sort = extra_sort_values(&keys, &src.cols, scope, row)?;
        Ok((values, sort))
    };

    let null_row = vec![Value::Null; src.cols.len()];
    let mut out: Vec<OutRow> = Vec::new();
    let mut probe_types: Option<Vec<DataType>> = None;
    if grouped {
        let groups = group_rows(ctx, &src, group_exprs, outer)?;
        let empty: Vec<usize> = Vec::new();
        for members in &groups {
            let rep = members
                .first()
                .and_then(|i| src.rows.get(*i))
                .unwrap_or(&null_row);
            let scope = RowScope {
                ctx,
                cols: &src.cols,
                row: rep,
                outer,
                group: Some((&src.rows, members)),
            };
            if let Some(h) = &sel.having
                && !is_true(&expr::eval(h, &scope)?.value)
            {
                continue;
            }
            let (values, sort) = eval_row(&scope, rep)?;
            out.push(layout.row(values, sort));
        }
        if out.is_empty() {
            let scope = RowScope {
                ctx,
                cols: &src.cols,
                row: &null_row,
                outer,
                group: Some((&src.rows, &empty)),
            };
            probe_types = probe(eval_row(&scope, &null_row))?;
        }
    } else if src.rows.is_empty() {
        let scope = RowScope::new(ctx, &src.cols, &null_row, outer);
        probe_types = probe(eval_row(&scope, &null_row))?;
    } else {
        out.reserve(src.rows.len());
        let Relation {
            cols: src_cols,
            rows: src_rows,
            ..
        } = src;
        for (n, row) in src_rows.into_iter().enumerate() {
            if n % 1024 == 0 {
                ctx.cancel.check()?;
            }
            out.push(plan.eval_owned(ctx, &items, &keys, &src_cols, row, outer)?);
        }
        let shape = Shape {
            items: &items,
            keys: &keys,
            src_cols: &src_cols,
            layout: &layout,
            presorted,
        };
        return finish_select(ctx, sel, &shape, out, None, outer);
    }
    let shape = Shape {
        items: &items,
        keys: &keys,
        src_cols: &src.cols,
        layout: &layout,
        presorted,
    };
    finish_select(ctx, sel, &shape, out, probe_types, outer)
}

/// What a SELECT's rows are made of.
struct Shape<'s, 'q> {
    items: &'s [(Item<'q>, String)],
    keys: &'s [(SortKey<'q>, bool)],
    src_cols: &'s [ColMeta],
    layout: &'s Layout,
    /// The rows arrive in ORDER BY order.
    presorted: bool,
}

/// DISTINCT, ORDER BY, TOP and the output columns' types, over the
/// evaluated rows.
fn finish_select(
    ctx: &Ctx<'_>,
    sel: &Select,
    shape: &Shape<'_, '_>,
    mut out: Vec<OutRow>,
    probe_types: Option<Vec<DataType>>,
    outer: Option<&dyn Scope>,
) -> SqlResult<Relation> {
    let Shape {
        items,
        keys,
        src_cols,
        layout,
        presorted,
    } = *shape;
    let types: Vec<DataType> = match out.first() {
        Some(r) => layout.types_of(r),
        None => probe_types.unwrap_or_else(|| vec![DataType::Int; items.len()]),
    };
    let cols: Vec<ColMeta> = items
        .iter()
        .zip(&types)
        .enumerate()
        .map(|(k, ((item, name), ty))| {
            ColMeta::new(name.clone(), *ty, item_nullable(item, src_cols))
                .collated(layout.collation(k))
        })
        .collect();

    if matches!(sel.distinct, Some(Distinct::Distinct)) {
        let mut seen = std::collections::HashSet::new();
        out.retain(|r| {
            seen.insert(
                r.values
                    .iter()
                    .enumerate()
                    .map(|(k, v)| KeyPart::from_collated(v, layout.collation(k)))
                    .collect::<Vec<_>>(),
            )
        });
    } else if matches!(sel.distinct, Some(Distinct::On(_))) {
        return Err(SqlError::unsupported("DISTINCT ON"));
    }
    if !keys.is_empty() && !presorted {
        sort_rows(&mut out, layout, &key_refs(keys))?;
    }
    if let Some(top) = &sel.top {
        let n = top_count(ctx, top, outer, out.len())?;
        out.truncate(n);
    }
    let rows = layout.result_rows(out, &types)?;
    Ok(Relation {
        cols,
        rows,
        ordered_by: Vec::new(),
    })
}

/// Partitions source rows by the GROUP BY values, in first-seen order;
/// one group of every row when there is no GROUP BY.
fn group_rows(
    ctx: &Ctx<'_>,
    src: &Relation,
    exprs: &[Expr],
    outer: Option<&dyn Scope>,
) -> SqlResult<Vec<Vec<usize>>> {
    if exprs.is_empty() {
        return Ok(vec![(0..src.rows.len()).collect()]);
    }
    let mut index: HashMap<Vec<KeyPart>, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (n, row) in src.rows.iter().enumerate() {
        let scope = RowScope::new(ctx, &src.cols, row, outer);
        let key = exprs
            .iter()
            .map(|e| {
                expr::eval(e, &scope)
                    .map(|t| KeyPart::from_collated(&t.value, t.collation.map(|l| l.collation)))
            })
            .collect::<SqlResult<Vec<_>>>()?;
        match index.get(&key) {
            Some(g) => groups[*g].push(n),
            None => {
                index.insert(key, groups.len());
                groups.push(vec![n]);
            }
        }
    }
    Ok(groups)
}

/// ORDER BY over a set operation's output columns (by name or ordinal).
fn sort_output(
    ctx: &Ctx<'_>,
    rel: &mut Relation,
    ob: &OrderBy,
    outer: Option<&dyn Scope>,
) -> SqlResult<()> {
    let names: Vec<String> = rel.cols.iter().map(|c| c.name.clone()).collect();
    let keys = sort_keys(order_exprs(Some(ob))?, &names)?;
    let layout = Layout::fixed(&rel.cols);
    let mut out = Vec::with_capacity(rel.rows.len());
    for row in std::mem::take(&mut rel.rows) {
        let values: Vec<Typed> = row
            .into_iter()
            .zip(&rel.cols)
            .map(|(v, c)| c.typed(v))
            .collect();
        let sort = keys
            .iter()
            .filter_map(|(k, _)| match k {
                SortKey::Output(_) => None,
                SortKey::Source(i) => Some(Ok(values[*i].clone())),
                SortKey::Expr(e) => {
                    let plain: Vec<Value> = values.iter().map(|t| t.value.clone()).collect();
                    Some(expr::eval(e, &RowScope::new(ctx, &rel.cols, &plain, outer)))
                }
            })
            .collect::<SqlResult<Vec<_>>>()?;
        out.push(layout.row(values, sort));
    }
    sort_rows(&mut out, &layout, &key_refs(&keys))?;
    rel.rows = out.into_iter().map(|r| r.values).collect();
    Ok(())
}

/// TOP (n) / TOP (n) PERCENT as a row count.
pub fn top_count(
    ctx: &Ctx<'_>,
    top: &sqlparser::ast::Top,
    outer: Option<&dyn Scope>,
    available: usize,
) -> SqlResult<usize> {
    if top.with_ties {
        return Err(SqlError::unsupported("TOP WITH TIES"));
    }
    let n: f64 = match &top.quantity {
        None => return Ok(available),
        Some(TopQuantity::Constant(n)) => *n as f64,
        Some(TopQuantity::Expr(e)) => {
            let t = expr::eval(e, &RowScope::new(ctx, &[], &[], outer))?;
            match expr::convert(&t, DataType::Float)? {
                Value::Float(f) => f,
                _ => 0.0,
            }
        }
    };
    if n < 0.0 {
        return Err(SqlError::new(
            1060,
            "The number of rows in the TOP clause must be an integer.",
        )
        .aborting_batch());
    }
    if top.percent {
        return Ok(((available as f64) * n.min(100.0) / 100.0).ceil() as usize);
    }
    Ok(n as usize)
}

/// The column types of a query that returned no rows, from one evaluation
/// over NULLs. Binding errors still fail the query, as in SQL Server.
fn probe(row: SqlResult<(Vec<Typed>, Vec<Typed>)>) -> SqlResult<Option<Vec<DataType>>> {
    match row {
        Ok((values, _)) => Ok(Some(values.iter().map(|t| t.ty).collect())),
        Err(e) if e.is_binding() => Err(e),
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
