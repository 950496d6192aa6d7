//! System functions that need neither the catalog nor the session:
//! NEWID and ISNUMERIC. Those that do (OBJECT_ID, @@ROWCOUNT...) are the
//! engine's, through `Scope::system_function`.
//!
//! <https://learn.microsoft.com/sql/t-sql/functions/system-functions-transact-sql>

use sqlparser::ast::Expr;

use super::{arity, one};
use crate::sql::error::SqlResult;
use crate::sql::expr::num;
use crate::sql::expr::types::{Family, family};
use crate::sql::expr::{Scope, Typed};
use crate::sql::types::{DataType, Value};

/// Evaluates this family's built-in `name`; `None` when it is not one.
pub(super) fn call(name: &str, args: &[&Expr], scope: &dyn Scope) -> Option<SqlResult<Typed>> {
    let r = match name {
        "NEWID" => arity(name, args, 0, 0).map(|()| {
            Typed::new(
                Value::Guid(uuid::Uuid::new_v4()),
                DataType::UniqueIdentifier,
            )
        }),
        "ISNUMERIC" => one(name, args, scope, |v| {
            let ok = match &v.value {
                Value::Null => false,
                Value::String(s) => {
                    let t: String = s
                        .trim()
                        .chars()
                        .filter(|c| *c != ',' && *c != '$')
                        .collect();
                    !t.is_empty()
                        && (num::Parsed::read(&t).is_some()
                            || (t.parse::<f64>().is_ok_and(f64::is_finite)
                                && t.bytes()
                                    .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))))
                }
                _ => matches!(family(&v.ty), Family::Exact | Family::Approx),
            };
            Ok(Typed::new(Value::Int(i32::from(ok)), DataType::Int))
        }),
        _ => return None,
    };
    Some(r)
}
