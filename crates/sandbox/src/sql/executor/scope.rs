//! The executor's side of `expr::Scope`: a row (or a group of rows) of a
//! relation, with the outer query's scope behind it so correlated
//! subqueries see outer columns.

use chrono::{FixedOffset, NaiveDateTime};
use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Query,
};

use super::context::Ctx;
use super::relation::ColMeta;
use crate::sql::catalog::same_name;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::aggregate::{Accumulator, classify};
use crate::sql::expr::{self, Scope, Typed};
use crate::sql::types::Value;

/// Which column `parts` names among `cols`; 209 when ambiguous.
pub fn find_column(cols: &[ColMeta], parts: &[Ident]) -> SqlResult<Option<usize>> {
    let Some((last, qual)) = parts.split_last() else {
        return Ok(None);
    };
    let mut found = None;
    for (i, c) in cols.iter().enumerate() {
        if c.hidden || !same_name(&c.name, &last.value) {
            continue;
        }
        let ok = match qual {
            [] => true,
            [t] => c
                .qualifier
                .as_deref()
                .is_some_and(|q| same_name(q, &t.value)),
            [.., s, t] => {
                c.qualifier
                    .as_deref()
                    .is_some_and(|q| same_name(q, &t.value))
                    && c.schema.as_deref().is_none_or(|cs| same_name(cs, &s.value))
            }
        };
        if ok {
            if found.is_some() {
                return Err(
                    SqlError::new(209, format!("Ambiguous column name '{}'.", last.value))
                        .aborting_batch(),
                );
            }
            found = Some(i);
        }
    }
    Ok(found)
}

/// 207 for a simple name, 4104 for a multi-part one.
pub fn unknown_column(parts: &[Ident]) -> SqlError {
    if parts.len() == 1 {
        SqlError::invalid_column(&parts[0].value)
    } else {
        let text: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
        SqlError::new(
            4104,
            format!(
                "The multi-part identifier \"{}\" could not be bound.",
                text.join(".")
            ),
        )
        .aborting_batch()
    }
}

/// One row of a relation as an expression scope.
pub struct RowScope<'s> {
    pub ctx: &'s Ctx<'s>,
    pub cols: &'s [ColMeta],
    pub row: &'s [Value],
    pub outer: Option<&'s dyn Scope>,
    /// In a grouped query: the source rows and this group's members.
    pub group: Option<(&'s [Vec<Value>], &'s [usize])>,
}

/// Evaluates `expr` once over a row of NULLs and keeps only binding errors
/// (unknown columns, functions, variables): SQL Server resolves names
/// before reading rows, so they fail even on an empty table.
pub fn check_names(
    ctx: &Ctx<'_>,
    cols: &[ColMeta],
    outer: Option<&dyn Scope>,
    expr: &Expr,
) -> SqlResult<()> {
    let nulls = vec![Value::Null; cols.len()];
    let scope = RowScope::new(ctx, cols, &nulls, outer);
    match expr::eval(expr, &scope) {
        Err(e) if e.is_binding() => Err(e),
        _ => Ok(()),
    }
}

impl<'s> RowScope<'s> {
    pub fn new(
        ctx: &'s Ctx<'s>,
        cols: &'s [ColMeta],
        row: &'s [Value],
        outer: Option<&'s dyn Scope>,
    ) -> Self {
        Self {
            ctx,
            cols,
            row,
            outer,
            group: None,
        }
    }

    fn compute_aggregate(
        &self,
        function: &Function,
        rows: &[Vec<Value>],
        members: &[usize],
    ) -> SqlResult<Typed> {
        let Some((kind, distinct, arg)) = classify(function) else {
            return Err(SqlError::unsupported(&function.name.to_string()));
        };
        let input_ty = match arg {
            Some(arg) => {
                let probe: Vec<Value>;
                let row: &[Value] = match members.first().and_then(|i| rows.get(*i)) {
                    Some(r) => r,
                    None => {
                        probe = vec![Value::Null; self.cols.len()];
                        &probe
                    }
                };
                let scope = RowScope {
                    ctx: self.ctx,
                    cols: self.cols,
                    row,
                    outer: self.outer,
                    group: None,
                };
                expr::eval(arg, &scope)?.ty
            }
            None => crate::sql::types::DataType::Int,
        };
        let mut acc = Accumulator::new(kind, distinct, input_ty);
        for i in members {
            self.ctx.cancel.check()?;
            let Some(row) = rows.get(*i) else { continue };
            match arg {
                Some(arg) => {
                    let scope = RowScope {
                        ctx: self.ctx,
                        cols: self.cols,
                        row,
                        outer: self.outer,
                        group: None,
                    };
                    let v = expr::eval(arg, &scope)?;
                    acc.update(&v)?;
                }
                None => acc.update(&Typed::new(Value::Int(1), input_ty))?,
            }
        }
        acc.finish()
    }
}

impl Scope for RowScope<'_> {
    fn column(&self, parts: &[Ident]) -> SqlResult<Typed> {
        match find_column(self.cols, parts)? {
            Some(i) => {
                let c = &self.cols[i];
                Ok(c.typed(self.row.get(i).cloned().unwrap_or(Value::Null)))
            }
            None => match self.outer {
                Some(o) => o.column(parts),
                None => Err(unknown_column(parts)),
            },
        }
    }

    fn variable(&self, name: &str) -> SqlResult<Typed> {
        self.ctx.variable(name)
    }

    fn scalar_subquery(&self, query: &Query) -> SqlResult<Typed> {
        let rel = super::query::run_query(self.ctx, query, Some(self))?;
        let col = rel.cols.first().ok_or_else(|| SqlError::syntax(")"))?;
        match rel.rows.len() {
            0 => Ok(col.typed(Value::Null)),
            1 => Ok(col.typed(rel.rows[0].first().cloned().unwrap_or(Value::Null))),
            _ => Err(SqlError::new(
                512,
                "Subquery returned more than 1 value. This is not permitted when the subquery follows =, !=, <, <= , >, >= or when the subquery is used as an expression.",
            )),
        }
    }

    fn exists(&self, query: &Query) -> SqlResult<bool> {
        Ok(!super::query::run_query(self.ctx, query, Some(self))?
            .rows
            .is_empty())
    }

    fn subquery_values(&self, query: &Query) -> SqlResult<Vec<Typed>> {
        let rel = super::query::run_query(self.ctx, query, Some(self))?;
        let col = rel.cols.first().ok_or_else(|| SqlError::syntax(")"))?;
        Ok(rel
            .rows
            .iter()
            .map(|r| col.typed(r.first().cloned().unwrap_or(Value::Null)))
            .collect())
    }

    fn aggregate(&self, function: &Function) -> Option<SqlResult<Typed>> {
        let (rows, members) = self.group?;
        Some(self.compute_aggregate(function, rows, members))
    }

    fn system_function(&self, name: &str, args: &[Typed]) -> Option<SqlResult<Typed>> {
        self.ctx.system_function(name, args)
    }

    fn now_utc(&self) -> NaiveDateTime {
        self.ctx.now_utc()
    }

    fn server_offset(&self) -> FixedOffset {
        self.ctx.shared.clock.offset()
    }
}

/// Whether an expression contains an aggregate call outside subqueries.
pub fn contains_aggregate(e: &Expr) -> bool {
    match e {
        Expr::Function(f) => classify(f).is_some() || function_args(f).any(contains_aggregate),
        Expr::BinaryOp { left, right, .. } => contains_aggregate(left) || contains_aggregate(right),
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsFalse(expr)
        | Expr::InSubquery { expr, .. } => contains_aggregate(expr),
        Expr::Between {
            expr, low, high, ..
        } => contains_aggregate(expr) || contains_aggregate(low) || contains_aggregate(high),
        Expr::InList { expr, list, .. } => {
            contains_aggregate(expr) || list.iter().any(contains_aggregate)
        }
        Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
            contains_aggregate(expr) || contains_aggregate(pattern)
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(contains_aggregate)
                || conditions
                    .iter()
                    .any(|c| contains_aggregate(&c.condition) || contains_aggregate(&c.result))
                || else_result.as_deref().is_some_and(contains_aggregate)
        }
        _ => false,
    }
}

fn function_args(f: &Function) -> impl Iterator<Item = &Expr> {
    let args: Vec<&Expr> = match &f.args {
        FunctionArguments::List(list) => list
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
                | FunctionArg::Named {
                    arg: FunctionArgExpr::Expr(e),
                    ..
                }
                | FunctionArg::ExprNamed {
                    arg: FunctionArgExpr::Expr(e),
                    ..
                } => Some(e),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    args.into_iter()
}
