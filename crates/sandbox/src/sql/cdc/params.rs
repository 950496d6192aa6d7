//! Named/positional parameters of the CDC procedures, with the errors
//! SQL Server raises for missing ones.

use crate::sql::error::{SqlError, SqlResult};
use crate::sql::request::Param;
use crate::sql::types::Value;

/// A procedure's parameter list (names in declaration order).
pub struct Args<'p> {
    pub proc_name: &'static str,
    names: &'static [&'static str],
    params: &'p [Param],
}

impl<'p> Args<'p> {
    /// Binds `params` to `names` (each with its `@`); 8145 for a name the
    /// procedure does not have.
    pub fn bind(
        proc_name: &'static str,
        names: &'static [&'static str],
        params: &'p [Param],
    ) -> SqlResult<Self> {
        for p in params.iter().filter(|p| !p.name.is_empty()) {
            let n = bare(&p.name);
            if !names.iter().any(|x| bare(x) == n) {
                return Err(SqlError::new(
                    8145,
                    format!("@{n} is not a parameter for procedure {proc_name}."),
                ));
            }
        }
        Ok(Self {
            proc_name,
            names,
            params,
        })
    }

    /// The value given for `name` (by name, else by position); None when
    /// not supplied at all, Some(Null) when NULL was passed.
    pub fn get(&self, name: &str) -> Option<&'p Value> {
        let n = bare(name);
        if let Some(p) = self
            .params
            .iter()
            .find(|p| !p.name.is_empty() && bare(&p.name) == n)
        {
            return Some(&p.value);
        }
        let pos = self.names.iter().position(|x| bare(x) == n)?;
        self.params
            .get(pos)
            .filter(|p| p.name.is_empty())
            .map(|p| &p.value)
    }

    /// A string parameter; None when absent or NULL.
    pub fn text(&self, name: &str) -> Option<String> {
        match self.get(name) {
            Some(Value::String(s)) => Some(s.trim().to_string()),
            _ => None,
        }
    }

    /// An integer parameter; None when absent or NULL.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::TinyInt(v) => Some(i64::from(*v)),
            Value::SmallInt(v) => Some(i64::from(*v)),
            Value::Int(v) => Some(i64::from(*v)),
            Value::BigInt(v) => Some(*v),
            Value::Bit(b) => Some(i64::from(*b)),
            Value::Decimal(d) => i64::try_from(d.value / 10i128.pow(u32::from(d.scale))).ok(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// 201 when a parameter without default was not supplied.
    pub fn required(&self, name: &str) -> SqlResult<&'p Value> {
        self.get(name).ok_or_else(|| {
            SqlError::new(
                201,
                format!(
                    "Procedure or function '{}' expects parameter '{name}', which was not supplied.",
                    self.proc_name
                ),
            )
            .with_state(4)
        })
    }
}

fn bare(n: &str) -> String {
    n.trim_start_matches('@').to_ascii_lowercase()
}
