//! Functions that choose between their arguments: ISNULL, COALESCE,
//! NULLIF and IIF. The result has the type all branches meet at, whichever
//! branch is taken, so a NULL does not change a result set's types.
//!
//! ISNULL: <https://learn.microsoft.com/sql/t-sql/functions/isnull-transact-sql>
//! COALESCE: <https://learn.microsoft.com/sql/t-sql/language-elements/coalesce-transact-sql>

use sqlparser::ast::Expr;

use super::{arity, ev};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::cast::{self, Mode};
use crate::sql::expr::eval::{branch_type, eval, truth_of};
use crate::sql::expr::{Scope, Typed, compare};
use crate::sql::types::DataType;

/// Evaluates this family's built-in `name`; `None` when it is not one.
pub(super) fn call(name: &str, args: &[&Expr], scope: &dyn Scope) -> Option<SqlResult<Typed>> {
    let r = match name {
        "ISNULL" => isnull(args, scope),
        "COALESCE" => coalesce(args, scope),
        "NULLIF" => nullif(args, scope),
        "IIF" => iif(args, scope),
        _ => return None,
    };
    Some(r)
}

fn isnull(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("isnull", args, 2, 2)?;
    let a = ev(args, 0, scope)?;
    if !a.value.is_null() {
        return Ok(a);
    }
    let b = ev(args, 1, scope)?;
    Ok(Typed::new(
        cast::convert(&b, a.ty, None, Mode::Implicit)?,
        a.ty,
    ))
}

fn coalesce(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    if args.len() < 2 {
        return Err(
            SqlError::new(189, "The coalesce function requires 2 to 254 arguments.")
                .aborting_batch(),
        );
    }
    for (i, e) in args.iter().enumerate() {
        let v = eval(e, scope)?;
        if !v.value.is_null() || i + 1 == args.len() {
            let others: Vec<&Expr> = args
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, e)| *e)
                .collect();
            let ty = branch_type(Some((&v, args[i])), &others, scope)?;
            return Ok(Typed::new(cast::convert(&v, ty, None, Mode::Implicit)?, ty));
        }
    }
    Ok(Typed::null(DataType::Int))
}

fn nullif(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("nullif", args, 2, 2)?;
    let (a, b) = (ev(args, 0, scope)?, ev(args, 1, scope)?);
    if compare::compare(&a, &b)? == Some(std::cmp::Ordering::Equal) {
        Ok(Typed::null(a.ty))
    } else {
        Ok(a)
    }
}

fn iif(args: &[&Expr], scope: &dyn Scope) -> SqlResult<Typed> {
    arity("iif", args, 3, 3)?;
    let c = truth_of(&ev(args, 0, scope)?, "IIF")?;
    let (pick, other) = if c == Some(true) { (1, 2) } else { (2, 1) };
    let v = ev(args, pick, scope)?;
    let ty = branch_type(Some((&v, args[pick])), &[args[other]], scope)?;
    Ok(Typed::new(cast::convert(&v, ty, None, Mode::Implicit)?, ty))
}
