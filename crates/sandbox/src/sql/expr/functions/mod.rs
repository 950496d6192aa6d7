//! Built-in scalar functions, one file per family; names the sandbox
//! does not know are offered to the engine (`Scope::system_function`)
//! before failing with 195. This file dispatches a call and holds the
//! argument helpers the families share.

use sqlparser::ast::{Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments};

use super::cast::{self, Mode};
use super::eval::eval;
use super::{Scope, Typed, aggregate};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::types::{DataType, Value};

mod conditional;
mod date;
pub(super) mod math;
pub(super) mod string;
mod system;

#[cfg(test)]
mod tests;

fn args_of(f: &Function) -> SqlResult<Vec<&Expr>> {
    match &f.args {
        FunctionArguments::None => Ok(Vec::new()),
        FunctionArguments::Subquery(_) => Err(SqlError::unsupported(&f.to_string())),
        FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                _ => Err(SqlError::syntax(&a.to_string())),
            })
            .collect(),
    }
}

fn arity(name: &str, args: &[&Expr], min: usize, max: usize) -> SqlResult<()> {
    if args.len() < min || args.len() > max {
        let msg = if min == max {
            format!("The {name} function requires {min} argument(s).")
        } else {
            format!("The {name} function requires {min} to {max} arguments.")
        };
        return Err(SqlError::new(174, msg).with_state(1).aborting_batch());
    }
    Ok(())
}

/// Calls a function: aggregates go to the scope, built-ins are evaluated
/// here, anything else is offered to `Scope::system_function`.
pub fn call(f: &Function, scope: &dyn Scope) -> SqlResult<Typed> {
    if f.over.is_some() {
        return Err(SqlError::unsupported("OVER"));
    }
    if aggregate::classify(f).is_some() {
        return scope.aggregate(f).unwrap_or_else(|| {
            Err(SqlError::new(
                147,
                "An aggregate may not appear in the WHERE clause unless it is in a subquery contained in a HAVING clause or a select list, and the column being aggregated is an outer reference.",
            ))
        });
    }
    let parts: Vec<String> = f
        .name
        .0
        .iter()
        .map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_default())
        .collect();
    let last = parts.last().cloned().unwrap_or_default();
    let upper = last.to_uppercase();
    let args = args_of(f)?;
    if parts.len() == 1
        && let Some(r) = builtin(&upper, &args, scope)
    {
        return r;
    }
    let mut values = Vec::with_capacity(args.len());
    for a in &args {
        values.push(eval(a, scope)?);
    }
    match scope.system_function(&upper, &values) {
        Some(r) => r,
        None if parts.len() == 1 => Err(SqlError::new(195, format!("'{last}' is not a recognized built-in function name.")).with_state(10).aborting_batch()),
        None => Err(SqlError::new(
            4121,
            format!(
                "Cannot find either column \"{}\" or the user-defined function or aggregate \"{}\", or the name is ambiguous.",
                parts[0],
                parts.join(".")
            ),
        )
        .aborting_batch()),
    }
}

/// Evaluates a built-in; `None` when `name` is not one.
fn builtin(name: &str, args: &[&Expr], scope: &dyn Scope) -> Option<SqlResult<Typed>> {
    conditional::call(name, args, scope)
        .or_else(|| date::call(name, args, scope))
        .or_else(|| string::call(name, args, scope))
        .or_else(|| math::call(name, args, scope))
        .or_else(|| system::call(name, args, scope))
}

fn one(
    name: &str,
    args: &[&Expr],
    scope: &dyn Scope,
    f: impl FnOnce(Typed) -> SqlResult<Typed>,
) -> SqlResult<Typed> {
    arity(name, args, 1, 1)?;
    f(ev(args, 0, scope)?)
}

fn ev(args: &[&Expr], i: usize, scope: &dyn Scope) -> SqlResult<Typed> {
    eval(args[i], scope)
}

fn int_arg(v: &Typed) -> SqlResult<Option<i64>> {
    match cast::convert(v, DataType::BigInt, None, Mode::Implicit)? {
        Value::BigInt(i) => Ok(Some(i)),
        _ => Ok(None),
    }
}

fn text_of(v: &Typed) -> SqlResult<Option<String>> {
    cast::text(v, None, false)
}

fn string_result(s: Option<String>, ty: DataType) -> Typed {
    Typed::new(s.map(Value::String).unwrap_or(Value::Null), ty)
}

fn int_result(v: Option<i64>, ty: DataType) -> Typed {
    let value = match (v, ty) {
        (None, _) => Value::Null,
        (Some(i), DataType::BigInt) => Value::BigInt(i),
        (Some(i), _) => Value::Int(i32::try_from(i).unwrap_or(i32::MAX)),
    };
    Typed::new(value, ty)
}
