//! The FROM clause: table scans (with the WHERE pushed into single-table
//! scans so only matching rows are copied), catalog views, derived tables
//! and joins: hash joins for a single equality between key-like columns
//! of the two sides (as the capture job's change queries need), nested
//! loops otherwise.
//!
//! For UPDATE and DELETE the target table's scan also carries a hidden
//! column locating each row, so changes can be applied after evaluation.

use sqlparser::ast::{
    BinaryOperator, Expr, Join, JoinConstraint, JoinOperator, TableFactor, TableWithJoins,
};

use super::context::{Ctx, blocked};
use super::join_index::JoinIndex;
use super::needed::NeededColumns;
use super::relation::{ColMeta, Relation};
use super::resolve::{Resolved, check_table_permission, database_for, names_table, resolve};
use super::scope::{RowScope, check_names, find_column};
use crate::sql::catalog::QualifiedName;
use crate::sql::catalog::Table;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::{self, Scope, is_true};
use crate::sql::storage::RowKey;
use crate::sql::types::{DataType, Value};
use crate::sql::views::{RowsWanted, TableFnRows};

/// The table an UPDATE/DELETE changes, found while building FROM.
#[derive(Debug, Default)]
pub struct DmlTarget {
    /// Alias or table name that designates the target.
    pub name: String,
    /// Set once found: database, object id, first column, and the hidden
    /// locator column's position.
    pub found: Option<(i32, i32, usize, usize)>,
    /// Row keys, indexed by the locator column's value.
    pub keys: Vec<RowKey>,
}

/// Builds the relation of a FROM clause.
pub struct FromBuilder<'c> {
    pub ctx: &'c Ctx<'c>,
    pub outer: Option<&'c dyn Scope>,
    pub target: Option<DmlTarget>,
    /// Columns the query can read; the others need not be copied.
    pub needed: NeededColumns,
    /// Room to leave in each row of the next relation built, for the
    /// columns joins will append to it.
    spare: usize,
}

impl<'c> FromBuilder<'c> {
    pub fn new(ctx: &'c Ctx<'c>, outer: Option<&'c dyn Scope>) -> Self {
        Self {
            ctx,
            outer,
            target: None,
            needed: NeededColumns::all(),
            spare: 0,
        }
    }

    /// The joined relation; WHERE applied (pushed into the scan when there
    /// is a single table).
    pub fn build(&mut self, from: &[TableWithJoins], filter: Option<&Expr>) -> SqlResult<Relation> {
        let mut rel = match from {
            [] => Relation::unit(),
            [single] if single.joins.is_empty() => {
                return self.factor(&single.relation, filter, 0);
            }
            _ => {
                let mut acc: Option<Relation> = None;
                for twj in from {
                    let offset = acc.as_ref().map(|r| r.cols.len()).unwrap_or(0);
                    let right = self.table_with_joins(twj, offset)?;
                    acc = Some(match acc {
                        None => right,
                        Some(left) => self.join(left, right, &JoinKind::Cross, None)?,
                    });
                }
                acc.unwrap_or_else(Relation::unit)
            }
        };
        if let Some(f) = filter {
            self.filter(&mut rel, f)?;
        }
        Ok(rel)
    }

    fn filter(&self, rel: &mut Relation, f: &Expr) -> SqlResult<()> {
        check_names(self.ctx, &rel.cols, self.outer, f)?;
        let cols = rel.cols.clone();
        let mut err = None;
        rel.rows.retain(|row| {
            if err.is_some() {
                return false;
            }
            let scope = RowScope::new(self.ctx, &cols, row, self.outer);
            match expr::eval(f, &scope) {
                Ok(v) => is_true(&v.value),
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        });
        err.map_or(Ok(()), Err)
    }

    fn table_with_joins(&mut self, twj: &TableWithJoins, offset: usize) -> SqlResult<Relation> {
        // A query (not a DML target, whose locator needs the columns'
        // positions) builds the joined relations first, so the first
        // relation's rows can be allocated with room for their columns.
        if self.target.is_none()
            && !twj.joins.is_empty()
            && let Ok(kinds) = twj
                .joins
                .iter()
                .map(join_kind)
                .collect::<SqlResult<Vec<_>>>()
        {
            return self.joins_built_right_first(twj, &kinds, offset);
        }
        let mut rel = self.factor(&twj.relation, None, offset)?;
        for join in &twj.joins {
            rel = self.join_one(rel, join, offset)?;
        }
        Ok(rel)
    }

    /// Builds the joined relations, then the first one with room for
    /// their columns in each row, then joins. Errors still come left to
    /// right: when a joined relation fails, the first one is built to
    /// report its own error first.
    fn joins_built_right_first(
        &mut self,
        twj: &TableWithJoins,
        kinds: &[(JoinKind, Option<&Expr>)],
        offset: usize,
    ) -> SqlResult<Relation> {
        let mut rights = Vec::with_capacity(twj.joins.len());
        for join in &twj.joins {
            match self.factor(&join.relation, None, offset) {
                Ok(right) => rights.push(right),
                Err(e) => {
                    self.factor(&twj.relation, None, offset)?;
                    return Err(e);
                }
            }
        }
        self.spare = rights.iter().map(|r| r.cols.len()).sum();
        let mut rel = self.factor(&twj.relation, None, offset)?;
        for (right, (kind, on)) in rights.into_iter().zip(kinds) {
            rel = self.join(rel, right, kind, *on)?;
        }
        Ok(rel)
    }

    fn join_one(&mut self, left: Relation, join: &Join, offset: usize) -> SqlResult<Relation> {
        let (kind, on) = join_kind(join)?;
        let right = self.factor(&join.relation, None, offset + left.cols.len())?;
        self.join(left, right, &kind, on)
    }

    fn join(
        &self,
        left: Relation,
        right: Relation,
        kind: &JoinKind,
        on: Option<&Expr>,
    ) -> SqlResult<Relation> {
        let mut cols = left.cols.clone();
        let right_nullable = matches!(kind, JoinKind::Left | JoinKind::Full);
        let left_nullable = matches!(kind, JoinKind::Right | JoinKind::Full);
        if left_nullable {
            cols.iter_mut().for_each(|c| c.nullable = true);
        }
        cols.extend(right.cols.iter().cloned().map(|mut c| {
            c.nullable |= right_nullable;
            c
        }));
        let mut rows = Vec::with_capacity(left.rows.len());
        let mut right_matched = vec![false; right.rows.len()];
        // Left rows go out in their order, each with its matches: the
        // left side's order holds unless unmatched right rows follow.
        let ordered_by = if left_nullable {
            Vec::new()
        } else {
            left.ordered_by.clone()
        };
        let equi = on.and_then(|e| equi_join_columns(e, &cols, left.cols.len()));
        let right_index = equi.map(|(_, r)| JoinIndex::build(&right.rows, r));
        let all_right: Vec<usize> = if right_index.is_some() {
            Vec::new()
        } else {
            (0..right.rows.len()).collect()
        };
        // A hash join's ON is exactly the key equality, which the index
        // lookup has already decided: no need to evaluate it per pair. Its
        // matches copy only the right-side columns the query reads.
        let on = if right_index.is_some() { None } else { on };
        let right_wanted = self.needed.mask(right.cols.iter().map(|c| c.name.as_str()));
        for l in left.rows {
            self.ctx.cancel.check()?;
            let candidates: &[usize] = match (&right_index, equi) {
                (Some(index), Some((lcol, _))) => l.get(lcol).map_or(&[], |v| index.get(v)),
                _ => &all_right,
            };
            let mut kept: Option<usize> = None;
            let mut matched = false;
            for &ri in candidates {
                let Some(r) = right.rows.get(ri) else {
                    continue;
                };
                match on {
                    Some(e) => {
                        let combined = concat(&l, r);
                        let scope = RowScope::new(self.ctx, &cols, &combined, self.outer);
                        if is_true(&expr::eval(e, &scope)?.value) {
                            matched = true;
                            right_matched[ri] = true;
                            rows.push(combined);
                        }
                    }
                    None => {
                        right_matched[ri] = true;
                        // Each match but the last gets a copy of the left
                        // row; the last one takes it.
                        if let Some(prev) = kept.replace(ri) {
                            rows.push(joined(l.clone(), &right.rows[prev], &right_wanted));
                        }
                    }
                }
            }
            match kept {
                Some(ri) => rows.push(joined(l, &right.rows[ri], &right_wanted)),
                None if right_nullable && !matched => {
                    let mut combined = l;
                    combined.extend(std::iter::repeat_n(Value::Null, right.cols.len()));
                    rows.push(combined);
                }
                None => {}
            }
        }
        if left_nullable {
            for (ri, r) in right.rows.iter().enumerate() {
                if !right_matched[ri] {
                    let mut combined: Vec<Value> =
                        std::iter::repeat_n(Value::Null, left.cols.len()).collect();
                    combined.extend_from_slice(r);
                    rows.push(combined);
                }
            }
        }
        Ok(Relation {
            cols,
            rows,
            ordered_by,
        })
    }

    fn factor(
        &mut self,
        tf: &TableFactor,
        filter: Option<&Expr>,
        offset: usize,
    ) -> SqlResult<Relation> {
        let spare = std::mem::take(&mut self.spare);
        let mut rel = match tf {
            TableFactor::Table {
                name,
                alias,
                args,
                sample,
                ..
            } => {
                let alias_name = alias.as_ref().map(|a| a.name.value.clone());
                let sample = sample
                    .as_ref()
                    .map(super::tablesample::clause)
                    .transpose()?;
                if let Some(args) = args {
                    if sample.is_some() {
                        return Err(super::tablesample::not_a_table());
                    }
                    self.table_function(name, &args.args, alias_name, spare)?
                } else {
                    match resolve(self.ctx, name)? {
                        Resolved::Table { db, table } => {
                            let is_target = self.target.as_ref().is_some_and(|t| {
                                t.found.is_none()
                                    && names_table(&t.name, alias_name.as_deref(), &table.meta.name)
                            });
                            if !is_target {
                                check_table_permission(self.ctx, "SELECT", db, table)?;
                            }
                            let schema = db.schema_name(table.meta.schema_id).map(str::to_string);
                            let qualifier = alias_name.unwrap_or_else(|| table.meta.name.clone());
                            // A sample draws pages before WHERE applies.
                            let pushed = if sample.is_some() { None } else { filter };
                            let rel = self.scan(
                                db.id,
                                table,
                                &qualifier,
                                schema.as_deref(),
                                pushed,
                                is_target,
                                offset,
                                spare,
                            )?;
                            let Some(sample) = sample else {
                                return Ok(rel);
                            };
                            super::tablesample::apply(sample, rel)?
                        }
                        Resolved::View { .. } if sample.is_some() => {
                            return Err(super::tablesample::not_a_table());
                        }
                        Resolved::View { db, view } => {
                            let qualifier = alias_name.unwrap_or_else(|| view.name.to_string());
                            let cols = (view.columns)()
                                .into_iter()
                                .map(|c| {
                                    ColMeta::new(c.name, c.ty, c.nullable)
                                        .qualified(Some(&qualifier), Some(view.schema))
                                })
                                .collect();
                            Relation {
                                cols,
                                rows: (view.rows)(self.ctx, db)?,
                                ordered_by: Vec::new(),
                            }
                        }
                    }
                }
            }
            TableFactor::Derived {
                subquery,
                alias,
                lateral,
                ..
            } => {
                if *lateral {
                    return Err(SqlError::unsupported("LATERAL"));
                }
                let mut rel = super::query::run_query(self.ctx, subquery, self.outer)?;
                rel.ordered_by.clear();
                let Some(alias) = alias else {
                    return Err(SqlError::syntax(")"));
                };
                for (i, c) in rel.cols.iter_mut().enumerate() {
                    c.qualifier = Some(alias.name.value.clone());
                    c.schema = None;
                    if let Some(a) = alias.columns.get(i) {
                        c.name = a.name.value.clone();
                    }
                    if c.name.is_empty() {
                        return Err(SqlError::new(
                            8155,
                            format!(
                                "No column name was specified for column {} of '{}'.",
                                i + 1,
                                alias.name.value
                            ),
                        )
                        .aborting_batch());
                    }
                }
                rel
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => {
                let mut rel = self.table_with_joins(table_with_joins, offset)?;
                if let Some(a) = alias {
                    rel.cols
                        .iter_mut()
                        .for_each(|c| c.qualifier = Some(a.name.value.clone()));
                }
                rel
            }
            other => return Err(SqlError::unsupported(&other.to_string())),
        };
        if let Some(f) = filter {
            self.filter(&mut rel, f)?;
        }
        Ok(rel)
    }

    /// `schema.fn(args)` in FROM, through the engine's table-function
    /// registry; 208 when no function has that name.
    fn table_function(
        &self,
        name: &sqlparser::ast::ObjectName,
        args: &[sqlparser::ast::FunctionArg],
        alias: Option<String>,
        spare: usize,
    ) -> SqlResult<Relation> {
        use sqlparser::ast::{FunctionArg, FunctionArgExpr};
        let q = QualifiedName::from_object_name(name)?;
        let db = database_for(self.ctx, &q)?;
        self.ctx.user_in(db)?;
        let schema = q.schema.clone().unwrap_or_else(|| "dbo".into());
        let scope = RowScope::new(self.ctx, &[], &[], self.outer);
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            let e = match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => e,
                _ => return Err(SqlError::syntax(&a.to_string())),
            };
            values.push(expr::eval(e, &scope)?);
        }
        let TableFnRows {
            columns,
            rows,
            ordered_by,
        } = self
            .ctx
            .shared
            .table_functions
            .call(
                self.ctx,
                db,
                &schema,
                &q.name,
                &values,
                &RowsWanted {
                    column: &|c: &str| self.needed.wants(c),
                    spare,
                },
            )
            .unwrap_or_else(|| Err(SqlError::invalid_object(&q.display())))?;
        let qualifier = alias.unwrap_or_else(|| q.name.clone());
        let cols = columns
            .into_iter()
            .map(|c| {
                let collation = c.collation;
                ColMeta::new(c.name, c.ty, c.nullable)
                    .qualified(Some(&qualifier), Some(&schema))
                    .collated(collation)
            })
            .collect();
        Ok(Relation {
            cols,
            rows,
            ordered_by,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn scan(
        &mut self,
        db: i32,
        table: &Table,
        qualifier: &str,
        schema: Option<&str>,
        filter: Option<&Expr>,
        is_target: bool,
        offset: usize,
        spare: usize,
    ) -> SqlResult<Relation> {
        if table.dirty_by.is_some_and(|s| s != self.ctx.info.spid) {
            return Err(blocked());
        }
        let mut cols: Vec<ColMeta> = table
            .meta
            .columns
            .iter()
            .map(|c| {
                ColMeta::new(c.name.clone(), c.ty, c.nullable)
                    .qualified(Some(qualifier), schema)
                    .collated(c.collation)
            })
            .collect();
        if let Some(f) = filter {
            check_names(self.ctx, &cols, self.outer, f)?;
        }
        let width = cols.len();
        let mut rows = Vec::new();
        let mut keys = Vec::new();
        let wanted = self.needed.mask(cols.iter().map(|c| c.name.as_str()));
        let copy_all = is_target || wanted.iter().all(|w| *w);
        for (n, (key, row)) in table.data.iter().enumerate() {
            if n % 1024 == 0 {
                self.ctx.cancel.check()?;
            }
            if let Some(f) = filter {
                let scope = RowScope::new(self.ctx, &cols, row, self.outer);
                if !is_true(&expr::eval(f, &scope)?.value) {
                    continue;
                }
            }
            let mut r = Vec::with_capacity(width + usize::from(is_target) + spare);
            if copy_all {
                r.extend_from_slice(row);
            } else {
                r.extend(row.iter().zip(&wanted).map(
                    |(v, w)| {
                        if *w { v.clone() } else { Value::Null }
                    },
                ));
            }
            if is_target {
                r.push(Value::BigInt(keys.len() as i64));
                keys.push(key.clone());
            }
            rows.push(r);
        }
        if is_target {
            let mut locator = ColMeta::new("%%locator%%", DataType::BigInt, false);
            locator.hidden = true;
            cols.push(locator);
            if let Some(t) = self.target.as_mut() {
                t.found = Some((db, table.meta.object_id, offset, offset + width));
                t.keys = keys;
            }
        }
        Ok(Relation {
            cols,
            rows,
            ordered_by: Vec::new(),
        })
    }
}

/// A left row extended with a copy of a right row's wanted columns (NULL
/// in the others).
fn joined(mut left: Vec<Value>, right: &[Value], wanted: &[bool]) -> Vec<Value> {
    left.reserve_exact(right.len());
    left.extend(right.iter().enumerate().map(|(i, v)| {
        if wanted.get(i).copied().unwrap_or(true) {
            v.clone()
        } else {
            Value::Null
        }
    }));
    left
}

/// Copies of a left and a right row, joined.
fn concat(left: &[Value], right: &[Value]) -> Vec<Value> {
    let mut row = Vec::with_capacity(left.len() + right.len());
    row.extend_from_slice(left);
    row.extend_from_slice(right);
    row
}

/// A join's kind and ON condition; unsupported forms fail.
fn join_kind(join: &Join) -> SqlResult<(JoinKind, Option<&Expr>)> {
    let (kind, constraint) = match &join.join_operator {
        JoinOperator::Join(c) | JoinOperator::Inner(c) => (JoinKind::Inner, c),
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
        JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (JoinKind::Right, c),
        JoinOperator::FullOuter(c) => (JoinKind::Full, c),
        JoinOperator::CrossJoin(c) => (JoinKind::Cross, c),
        JoinOperator::CrossApply => return Err(SqlError::unsupported("CROSS APPLY")),
        JoinOperator::OuterApply => return Err(SqlError::unsupported("OUTER APPLY")),
        _ => return Err(SqlError::unsupported("JOIN")),
    };
    let on = match constraint {
        JoinConstraint::On(e) => Some(e),
        JoinConstraint::None => None,
        JoinConstraint::Using(_) => return Err(SqlError::unsupported("USING")),
        JoinConstraint::Natural => return Err(SqlError::unsupported("NATURAL JOIN")),
    };
    Ok((kind, on))
}

enum JoinKind {
    Inner,
    Left,
    Right,
    Full,
    Cross,
}

/// The two columns of an ON clause that is a single equality between a
/// left-side and a right-side column whose types compare exactly by
/// `KeyPart` (integers, binary, uniqueidentifier), as (left, right
/// index within its side). Anything else runs as a nested loop.
fn equi_join_columns(on: &Expr, cols: &[ColMeta], left_len: usize) -> Option<(usize, usize)> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = strip_nested(on)
    else {
        return None;
    };
    let a = column_index(left, cols)?;
    let b = column_index(right, cols)?;
    let (l, r) = match (a < left_len, b < left_len) {
        (true, false) => (a, b),
        (false, true) => (b, a),
        _ => return None,
    };
    let same_family = key_family(cols.get(l)?.ty)? == key_family(cols.get(r)?.ty)?;
    same_family.then_some((l, r - left_len))
}

fn strip_nested(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(inner) => strip_nested(inner),
        other => other,
    }
}

fn column_index(e: &Expr, cols: &[ColMeta]) -> Option<usize> {
    let parts = match strip_nested(e) {
        Expr::Identifier(id) => std::slice::from_ref(id),
        Expr::CompoundIdentifier(parts) => parts.as_slice(),
        _ => return None,
    };
    find_column(cols, parts).ok().flatten()
}

/// Types whose SQL equality is exactly `KeyPart` equality.
fn key_family(ty: DataType) -> Option<u8> {
    match ty {
        DataType::Bit
        | DataType::TinyInt
        | DataType::SmallInt
        | DataType::Int
        | DataType::BigInt => Some(0),
        DataType::Binary(_) | DataType::VarBinary(_) => Some(1),
        DataType::UniqueIdentifier => Some(2),
        _ => None,
    }
}
