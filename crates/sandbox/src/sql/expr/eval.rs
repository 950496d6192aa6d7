//! The expression evaluator: names, operators, predicates with
//! three-valued logic, CASE, subqueries, CAST/CONVERT. Literals are
//! `literal`'s, built-in functions `functions`'.

use std::cmp::Ordering;

use sqlparser::ast::{
    self, BinaryOperator, CastKind, Expr, Ident, UnaryOperator, Value as AstValue,
};

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Value};
use super::arith::{self, Op};
use super::cast::{self, Mode};
use super::chart::{self, union};
use super::literal::literal;
use super::num;
use super::type_names;
use super::{Scope, Typed, compare, functions, like};
use crate::sql::collation::{self, Label};

/// A bit predicate result: TRUE, FALSE or UNKNOWN (NULL).
pub fn truth(b: Option<bool>) -> Typed {
    Typed::new(b.map(Value::Bit).unwrap_or(Value::Null), DataType::Bit)
}

/// The truth value of a predicate operand; 4145 for non-boolean values.
pub fn truth_of(v: &Typed, near: &str) -> SqlResult<Option<bool>> {
    match &v.value {
        Value::Null => Ok(None),
        Value::Bit(b) => Ok(Some(*b)),
        _ => Err(SqlError::new(
            4145,
            format!("An expression of non-boolean type specified in a context where a condition is expected, near '{near}'."),
        )
        .aborting_batch()),
    }
}

fn unsupported(expr: &Expr) -> SqlError {
    let text = expr.to_string();
    let short: String = text.chars().take(60).collect();
    SqlError::unsupported(&short)
}

pub fn eval(expr: &Expr, scope: &dyn Scope) -> SqlResult<Typed> {
    match expr {
        Expr::Identifier(id) => identifier(id, scope),
        Expr::CompoundIdentifier(parts) => scope.column(parts),
        Expr::Value(v) => literal(&v.value, scope),
        Expr::Nested(e) => eval(e, scope),
        Expr::Collate { expr, collation } => collate(eval(expr, scope)?, collation),
        Expr::UnaryOp { op, expr: inner } => {
            let v = eval(inner, scope)?;
            match op {
                UnaryOperator::Minus => arith::negate(&v),
                UnaryOperator::Plus => Ok(v),
                UnaryOperator::Not => Ok(truth(truth_of(&v, "NOT")?.map(|b| !b))),
                UnaryOperator::BitwiseNot => arith::bit_not(&v),
                _ => Err(unsupported(expr)),
            }
        }
        Expr::BinaryOp { left, op, right } => binary(left, op, right, scope, expr),
        // SQL Server 2022: NULLs are equal to each other, never unknown.
        Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
            let (a, b) = (eval(a, scope)?, eval(b, scope)?);
            let same = match (a.value.is_null(), b.value.is_null()) {
                (true, true) => true,
                (false, false) => compare::compare(&a, &b)? == Some(Ordering::Equal),
                _ => false,
            };
            Ok(truth(Some(
                same == matches!(expr, Expr::IsNotDistinctFrom(..)),
            )))
        }
        Expr::IsNull(e) => Ok(truth(Some(eval(e, scope)?.value.is_null()))),
        Expr::IsNotNull(e) => Ok(truth(Some(!eval(e, scope)?.value.is_null()))),
        Expr::InList {
            expr: x,
            list,
            negated,
        } => {
            let x = eval(x, scope)?;
            let mut values = Vec::with_capacity(list.len());
            for item in list {
                values.push(eval(item, scope)?);
            }
            Ok(truth(in_values(&x, &values)?.map(|b| b != *negated)))
        }
        Expr::InSubquery {
            expr: x,
            subquery,
            negated,
        } => {
            let x = eval(x, scope)?;
            let values = scope.subquery_values(subquery)?;
            Ok(truth(in_values(&x, &values)?.map(|b| b != *negated)))
        }
        Expr::Between {
            expr: x,
            negated,
            low,
            high,
        } => {
            let x = eval(x, scope)?;
            let lo = compare::compare(&x, &eval(low, scope)?)?.map(|o| o != Ordering::Less);
            let hi = compare::compare(&x, &eval(high, scope)?)?.map(|o| o != Ordering::Greater);
            Ok(truth(and(lo, hi).map(|b| b != *negated)))
        }
        Expr::Like {
            negated,
            any,
            expr: x,
            pattern,
            escape_char,
        } => {
            if *any {
                return Err(unsupported(expr));
            }
            like_expr(
                x,
                pattern,
                escape_char.as_ref().map(|v| &v.value),
                *negated,
                scope,
            )
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => case(
            operand.as_deref(),
            conditions,
            else_result.as_deref(),
            scope,
        ),
        Expr::Exists { subquery, negated } => Ok(truth(Some(scope.exists(subquery)? != *negated))),
        Expr::Subquery(q) => scope.scalar_subquery(q),
        Expr::Cast {
            kind,
            expr: inner,
            data_type,
            format: None,
            ..
        } => {
            let target = type_names::cast_target(data_type)?;
            let v = eval(inner, scope)?;
            let is_try = matches!(kind, CastKind::TryCast | CastKind::SafeCast);
            cast_value(&v, target, None, is_try)
        }
        Expr::Convert {
            is_try,
            expr: inner,
            data_type: Some(data_type),
            styles,
            ..
        } => {
            let target = type_names::cast_target(data_type)?;
            let v = eval(inner, scope)?;
            let style = match styles.first() {
                None => None,
                Some(s) => {
                    let s = eval(s, scope)?;
                    match cast::convert(&s, DataType::Int, None, Mode::Implicit)? {
                        Value::Int(i) => Some(i),
                        _ => None,
                    }
                }
            };
            cast_value(&v, target, style, *is_try)
        }
        Expr::Function(f) => functions::call(f, scope),
        Expr::Substring {
            expr: s,
            substring_from,
            substring_for,
            ..
        } => {
            let s = eval(s, scope)?;
            let from = substring_from
                .as_deref()
                .map(|e| eval(e, scope))
                .transpose()?;
            let len = substring_for
                .as_deref()
                .map(|e| eval(e, scope))
                .transpose()?;
            functions::string::substring(&s, from.as_ref(), len.as_ref())
        }
        Expr::Trim {
            expr: s,
            trim_where,
            trim_what,
            trim_characters,
        } => {
            let s = eval(s, scope)?;
            let chars = match (trim_what, trim_characters) {
                (Some(w), _) => Some(eval(w, scope)?),
                (None, Some(list)) if list.len() == 1 => Some(eval(&list[0], scope)?),
                _ => None,
            };
            functions::string::trim(&s, chars.as_ref(), trim_where.as_ref())
        }
        Expr::Ceil { expr: x, .. } => functions::math::ceiling_floor(&eval(x, scope)?, true),
        Expr::Floor { expr: x, .. } => functions::math::ceiling_floor(&eval(x, scope)?, false),
        Expr::Position { expr: needle, r#in } => {
            let (n, h) = (eval(needle, scope)?, eval(r#in, scope)?);
            functions::string::charindex(&n, &h, None)
        }
        _ => Err(unsupported(expr)),
    }
}

/// `x COLLATE name`: 447 unless `x` is a character string, 448 for an
/// unknown collation.
fn collate(mut v: Typed, name: &ast::ObjectName) -> SqlResult<Typed> {
    let text = match name.0.last().and_then(|p| p.as_ident()) {
        Some(id) => id.value.clone(),
        None => name.to_string(),
    };
    if !v.ty.is_string() {
        return Err(collation::not_collatable(&v.ty));
    }
    v.collation = Some(Label {
        collation: collation::lookup(&text)?,
        explicit: true,
    });
    Ok(v)
}

/// CAST/CONVERT, keeping the input's collation when the target is a
/// character type: a Unicode value becoming `char`/`varchar` keeps what
/// the code page of its collation (the database's when it has none) holds.
fn cast_value(v: &Typed, target: DataType, style: Option<i32>, is_try: bool) -> SqlResult<Typed> {
    let mut out = convert_value(v, target, style, is_try)?;
    if target.is_string() && v.ty.is_string() {
        out.collation = v.collation;
    }
    Ok(out)
}

fn convert_value(
    v: &Typed,
    target: DataType,
    style: Option<i32>,
    is_try: bool,
) -> SqlResult<Typed> {
    if is_try {
        // TRY_ still fails on conversions that cannot exist at all.
        if !v.value.is_null() {
            chart::check_explicit(&v.ty, &target)?;
        }
        return Ok(match cast::convert(v, target, style, Mode::Explicit) {
            Ok(value) => Typed::new(value, target),
            Err(_) => Typed::null(target),
        });
    }
    Ok(Typed::new(
        cast::convert(v, target, style, Mode::Explicit)?,
        target,
    ))
}

fn identifier(id: &Ident, scope: &dyn Scope) -> SqlResult<Typed> {
    if id.quote_style.is_none() {
        if id.value.starts_with("@@") {
            let name = id.value.to_ascii_uppercase();
            return scope
                .system_function(&name, &[])
                .unwrap_or_else(|| Err(SqlError::undeclared_variable(&id.value)));
        }
        if id.value.starts_with('@') {
            return scope.variable(&id.value);
        }
    }
    scope.column(std::slice::from_ref(id))
}

/// Three-valued AND.
pub fn and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Three-valued OR.
pub fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn in_values(x: &Typed, values: &[Typed]) -> SqlResult<Option<bool>> {
    let mut unknown = false;
    for v in values {
        match compare::compare(x, v)? {
            Some(Ordering::Equal) => return Ok(Some(true)),
            None => unknown = true,
            Some(_) => {}
        }
    }
    Ok(if unknown { None } else { Some(false) })
}

fn binary(
    left: &Expr,
    op: &BinaryOperator,
    right: &Expr,
    scope: &dyn Scope,
    whole: &Expr,
) -> SqlResult<Typed> {
    let arith_op = match op {
        BinaryOperator::Plus => Some(Op::Add),
        BinaryOperator::Minus => Some(Op::Sub),
        BinaryOperator::Multiply => Some(Op::Mul),
        BinaryOperator::Divide => Some(Op::Div),
        BinaryOperator::Modulo => Some(Op::Mod),
        BinaryOperator::BitwiseAnd => Some(Op::BitAnd),
        BinaryOperator::BitwiseOr => Some(Op::BitOr),
        BinaryOperator::BitwiseXor => Some(Op::BitXor),
        _ => None,
    };
    if let Some(op) = arith_op {
        let (l, r) = (eval(left, scope)?, eval(right, scope)?);
        let (lt, rt) = (l.ty, r.ty);
        let (l, r) = (
            constant_shape(left, l, &rt)?,
            constant_shape(right, r, &lt)?,
        );
        return arith::binary(op, &l, &r);
    }
    match op {
        BinaryOperator::And => {
            let l = truth_of(&eval(left, scope)?, "AND")?;
            if l == Some(false) {
                return Ok(truth(Some(false)));
            }
            let r = truth_of(&eval(right, scope)?, "AND")?;
            Ok(truth(and(l, r)))
        }
        BinaryOperator::Or => {
            let l = truth_of(&eval(left, scope)?, "OR")?;
            if l == Some(true) {
                return Ok(truth(Some(true)));
            }
            let r = truth_of(&eval(right, scope)?, "OR")?;
            Ok(truth(or(l, r)))
        }
        BinaryOperator::Eq
        | BinaryOperator::NotEq
        | BinaryOperator::Lt
        | BinaryOperator::LtEq
        | BinaryOperator::Gt
        | BinaryOperator::GtEq => {
            let (l, r) = (eval(left, scope)?, eval(right, scope)?);
            let o = compare::compare(&l, &r)?;
            Ok(truth(o.map(|o| match op {
                BinaryOperator::Eq => o == Ordering::Equal,
                BinaryOperator::NotEq => o != Ordering::Equal,
                BinaryOperator::Lt => o == Ordering::Less,
                BinaryOperator::LtEq => o != Ordering::Greater,
                BinaryOperator::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            })))
        }
        _ => Err(unsupported(whole)),
    }
}

fn is_integer_constant(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => {
            matches!(&v.value, AstValue::Number(t, _) if t.bytes().all(|b| b.is_ascii_digit()))
        }
        Expr::Nested(inner) => is_integer_constant(inner),
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => is_integer_constant(expr),
        _ => false,
    }
}

/// An integer constant meeting a decimal in arithmetic is a numeric just
/// wide enough for its digits (1 is numeric(1,0)), not numeric(10,0), in
/// a query that is not auto-parameterized.
/// <https://learn.microsoft.com/sql/t-sql/data-types/int-bigint-smallint-and-tinyint-transact-sql>
fn constant_shape(e: &Expr, v: Typed, other: &DataType) -> SqlResult<Typed> {
    if v.ty != DataType::Int
        || !matches!(other, DataType::Decimal { .. })
        || !is_integer_constant(e)
    {
        return Ok(v);
    }
    let digits = match &v.value {
        Value::Int(i) => num::digits(i128::from(*i)),
        _ => return Ok(v),
    };
    let ty = DataType::Decimal {
        precision: digits,
        scale: 0,
    };
    Ok(Typed::new(cast::convert(&v, ty, None, Mode::Implicit)?, ty))
}

fn like_expr(
    x: &Expr,
    pattern: &Expr,
    escape: Option<&AstValue>,
    negated: bool,
    scope: &dyn Scope,
) -> SqlResult<Typed> {
    let (x, p) = (eval(x, scope)?, eval(pattern, scope)?);
    let escape = match escape {
        None => None,
        Some(AstValue::SingleQuotedString(s) | AstValue::NationalStringLiteral(s)) => {
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => {
                    return Err(SqlError::new(
                        506,
                        format!(
                            "The invalid escape character \"{s}\" was specified in a LIKE predicate."
                        ),
                    ));
                }
            }
        }
        Some(other) => return Err(SqlError::unsupported(&other.to_string())),
    };
    let (Some(text), Some(pat)) = (cast::text(&x, None, false)?, cast::text(&p, None, false)?)
    else {
        return Ok(truth(None));
    };
    // Trailing blanks of the matched value are ignored (LIKE docs).
    let case_sensitive = Label::pick(x.collation, p.collation)
        .is_some_and(|c| c.rule != collation::Rule::CaseInsensitive);
    let matched = like::like_in(text.trim_end_matches(' '), &pat, escape, case_sensitive)
        || like::like_in(&text, &pat, escape, case_sensitive);
    Ok(truth(Some(matched != negated)))
}

/// True for the bare `NULL` literal, which has no type of its own where
/// branches meet: `COALESCE(NULL, 'a')` is varchar, not int.
pub fn is_null_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Value(v) => matches!(v.value, ast::Value::Null),
        Expr::Nested(inner) => is_null_literal(inner),
        _ => false,
    }
}

/// The result type of branches, found by evaluating the branches not
/// taken over typed NULLs ([`NullScope`]); a branch that fails there
/// (say `1/0`) does not contribute, nor does a bare NULL literal.
/// `chosen` is the branch taken, with its expression.
pub fn branch_type(
    chosen: Option<(&Typed, &Expr)>,
    others: &[&Expr],
    scope: &dyn Scope,
) -> SqlResult<DataType> {
    let nulls = NullScope(scope);
    let mut acc: Option<DataType> = chosen
        .filter(|(_, e)| !is_null_literal(e))
        .map(|(t, _)| t.ty);
    for e in others.iter().filter(|e| !is_null_literal(e)) {
        if let Ok(t) = eval(e, &nulls) {
            acc = Some(match acc {
                None => t.ty,
                Some(a) => union(a, t.ty)?,
            });
        }
    }
    Ok(acc.unwrap_or(DataType::Int))
}

fn case(
    operand: Option<&Expr>,
    conditions: &[ast::CaseWhen],
    else_result: Option<&Expr>,
    scope: &dyn Scope,
) -> SqlResult<Typed> {
    let op = operand.map(|o| eval(o, scope)).transpose()?;
    let mut chosen: Option<usize> = None;
    for (i, w) in conditions.iter().enumerate() {
        let c = eval(&w.condition, scope)?;
        let hit = match &op {
            Some(o) => compare::compare(o, &c)? == Some(Ordering::Equal),
            None => truth_of(&c, "THEN")? == Some(true),
        };
        if hit {
            chosen = Some(i);
            break;
        }
    }
    let result_expr = match chosen {
        Some(i) => Some(&conditions[i].result),
        None => else_result,
    };
    let result = result_expr.map(|e| eval(e, scope)).transpose()?;
    let mut others: Vec<&Expr> = conditions
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != chosen)
        .map(|(_, w)| &w.result)
        .collect();
    if chosen.is_some()
        && let Some(e) = else_result
    {
        others.push(e);
    }
    let ty = branch_type(result.as_ref().zip(result_expr), &others, scope)?;
    match result {
        None => Ok(Typed::null(ty)),
        Some(r) => Ok(Typed::new(cast::convert(&r, ty, None, Mode::Implicit)?, ty)),
    }
}

/// A scope in which every column, variable and aggregate is NULL of its
/// type: used to learn an expression's type without its values.
pub struct NullScope<'a>(pub &'a dyn Scope);

impl Scope for NullScope<'_> {
    fn column(&self, parts: &[Ident]) -> SqlResult<Typed> {
        self.0.column(parts).map(|t| Typed::null(t.ty))
    }
    fn variable(&self, name: &str) -> SqlResult<Typed> {
        self.0.variable(name).map(|t| Typed::null(t.ty))
    }
    fn scalar_subquery(&self, query: &ast::Query) -> SqlResult<Typed> {
        self.0.scalar_subquery(query).map(|t| Typed::null(t.ty))
    }
    fn exists(&self, query: &ast::Query) -> SqlResult<bool> {
        self.0.exists(query)
    }
    fn subquery_values(&self, _query: &ast::Query) -> SqlResult<Vec<Typed>> {
        Ok(Vec::new())
    }
    fn aggregate(&self, function: &ast::Function) -> Option<SqlResult<Typed>> {
        self.0
            .aggregate(function)
            .map(|r| r.map(|t| Typed::null(t.ty)))
    }
    fn system_function(&self, name: &str, args: &[Typed]) -> Option<SqlResult<Typed>> {
        self.0
            .system_function(name, args)
            .map(|r| r.map(|t| Typed::null(t.ty)))
    }
    fn now_utc(&self) -> chrono::NaiveDateTime {
        self.0.now_utc()
    }
    fn server_offset(&self) -> chrono::FixedOffset {
        self.0.server_offset()
    }
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;
