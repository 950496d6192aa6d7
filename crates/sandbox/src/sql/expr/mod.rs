//! T-SQL expressions: evaluation, types, conversions, built-in functions.
//!
//! Every expression evaluates to a [`Typed`] value whose type does not
//! depend on whether the value is NULL, so the executor learns a result
//! set's column types by evaluating over typed NULLs when there are no rows.
//!
//! Layout: `eval` (the evaluator), `literal` (constants), `type_names`
//! (T-SQL type names), `types` (families, precedence, lengths), `chart`
//! (which conversions exist, result types), `cast` (converting values),
//! `compare` (comparisons and keys), `arith` (operators), `functions`
//! (built-ins by family), `datetime` (date/time parsing, styles, date
//! parts), `like`, `num` (decimal(38) arithmetic), `aggregate`.

use std::cmp::Ordering;

use chrono::{FixedOffset, NaiveDateTime};
use sqlparser::ast::{self, Expr, Function, Ident, Query};

use super::collation::{Collation, Label, default_collation};
use super::error::SqlResult;
use super::types::{DataType, Length, Value};

pub mod aggregate;
mod arith;
mod cast;
mod chart;
mod compare;
pub(crate) mod datetime;
mod eval;
mod functions;
mod like;
mod literal;
mod num;
mod type_names;
mod types;

#[cfg(test)]
mod test_scope;

pub use cast::Mode;
pub use compare::{Key, compare_in, compare_parts, key};
pub use eval::NullScope;

/// A value with the SQL Server type it has in its expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    pub value: Value,
    pub ty: DataType,
    /// The collation of a character value that has one: a column's, or
    /// one given with COLLATE. `None`: the database default, coercible.
    pub collation: Option<Label>,
}

impl Typed {
    /// A value without a collation label.
    pub fn new(value: Value, ty: DataType) -> Self {
        Self {
            value,
            ty,
            collation: None,
        }
    }

    /// A typed NULL.
    pub fn null(ty: DataType) -> Self {
        Self::new(Value::Null, ty)
    }

    /// The value with a column's (implicit) collation, for character types.
    pub fn with_column_collation(mut self, collation: Option<Collation>) -> Self {
        if self.ty.is_string() {
            self.collation = collation.map(|collation| Label {
                collation,
                explicit: false,
            });
        }
        self
    }
}

/// Everything an expression can see besides its literals. The executor
/// implements it for a row, a group, or a session with no FROM clause.
pub trait Scope {
    /// A column reference, one to four parts (`col`, `t.col`, `s.t.col`).
    /// 207 when unknown, 209 when ambiguous.
    fn column(&self, parts: &[Ident]) -> SqlResult<Typed>;

    /// A local variable or parameter (`@name`, given with its `@`); 137 when
    /// not declared.
    fn variable(&self, name: &str) -> SqlResult<Typed>;

    /// A scalar subquery: one column, at most one row (512 otherwise), NULL
    /// of the column's type when empty.
    fn scalar_subquery(&self, query: &Query) -> SqlResult<Typed>;

    /// `EXISTS (query)`.
    fn exists(&self, query: &Query) -> SqlResult<bool>;

    /// The single-column values of `x IN (query)`.
    fn subquery_values(&self, query: &Query) -> SqlResult<Vec<Typed>>;

    /// An aggregate call's value for the current group, computed by the
    /// executor; `None` outside a grouped query.
    fn aggregate(&self, function: &Function) -> Option<SqlResult<Typed>>;

    /// Built-ins that need the catalog or the session: `OBJECT_ID`,
    /// `DB_NAME`, `SCHEMA_NAME`, `SCOPE_IDENTITY`, `@@ROWCOUNT`,
    /// `@@TRANCOUNT`, `@@SPID`, `@@VERSION`, `SERVERPROPERTY`, and later
    /// the `sys.fn_cdc_*` functions. Names arrive upper-cased without
    /// schema (`OBJECT_ID`, `@@ROWCOUNT`, `FN_CDC_GET_MAX_LSN`), with the
    /// arguments evaluated. Built-ins this module implements are never
    /// offered; any other name is, before 195 (unqualified) or 4121
    /// (schema-qualified) is raised. `None` means "not mine".
    fn system_function(&self, name: &str, args: &[Typed]) -> Option<SqlResult<Typed>>;

    /// The server clock in UTC (controllable in the sandbox).
    fn now_utc(&self) -> NaiveDateTime;

    /// The server's time-zone offset, for GETDATE and SYSDATETIMEOFFSET.
    fn server_offset(&self) -> FixedOffset;
}

/// Evaluates an expression against a scope.
pub fn eval(expr: &Expr, scope: &dyn Scope) -> SqlResult<Typed> {
    eval::eval(expr, scope)
}

/// The sandbox type for a T-SQL type name (`int`, `decimal(10,2)`,
/// `nvarchar(max)`, `sysname`...), 2715 for an unknown one. Lengths
/// default to 1 as in declarations.
pub fn data_type(ty: &ast::DataType) -> SqlResult<DataType> {
    type_names::data_type_numbered(ty, 1)
}

/// [`data_type`] naming the column/parameter/variable number in 2715.
pub fn data_type_numbered(ty: &ast::DataType, ordinal: usize) -> SqlResult<DataType> {
    type_names::data_type_numbered(ty, ordinal)
}

/// A CAST/CONVERT target type: string and binary types without a length
/// are 30 long there (not 1).
pub fn cast_type(ty: &ast::DataType) -> SqlResult<DataType> {
    type_names::cast_target(ty)
}

/// Explicit conversion, as CAST and CONVERT without a style do.
pub fn convert(value: &Typed, to: DataType) -> SqlResult<Value> {
    cast::convert(value, to, None, Mode::Explicit)
}

/// CONVERT with a style (date styles 0-14, 20-25, 100-114, 120, 121,
/// 126, 127; float 0-3; money 0-2; binary/string 1 and 2).
pub fn convert_with_style(value: &Typed, to: DataType, style: Option<i32>) -> SqlResult<Value> {
    cast::convert(value, to, style, Mode::Explicit)
}

/// Implicit conversion on assignment (INSERT, UPDATE, SET, parameters),
/// with SQL Server's truncation (2628) and overflow (8115) errors naming
/// `target`. Pass `schema.table.column` (or `db.schema.table.column`)
/// for a column: the part after the last dot is the column, the rest the
/// table, as 2628 names them. A target starting with `@` is a variable
/// and truncates silently, as SQL Server does; a bare column name still
/// gets 2628, with a message naming only the column. 257/206 for
/// conversions that need CONVERT or do not exist.
pub fn assign(value: &Typed, to: DataType, target: &str) -> SqlResult<Value> {
    assign_collated(value, to, None, target)
}

/// [`assign`] into a column or variable of collation `collation` (`None`:
/// the database default): a `char`/`varchar` keeps only what its code page
/// holds, other characters become `?`; other types are unaffected.
pub fn assign_collated(
    value: &Typed,
    to: DataType,
    collation: Option<Collation>,
    target: &str,
) -> SqlResult<Value> {
    let v = cast::convert(value, to, None, Mode::Assign(target))?;
    let v = in_code_page(v, to, collation);
    // varchar(n) holds n bytes: in a multi-byte code page (UTF-8, 932)
    // fewer characters may fit (2628; a variable truncates silently).
    if let (Value::String(s), DataType::VarChar(Length::Fixed(n))) = (&v, to) {
        let c = collation.unwrap_or_else(default_collation);
        let n = usize::from(n);
        if s.len() > n && crate::sql::collation::encode(c.encoding(), s).len() > n {
            let mut kept = String::new();
            let mut bytes = 0;
            for ch in s.chars() {
                bytes +=
                    crate::sql::collation::encode(c.encoding(), ch.encode_utf8(&mut [0; 4])).len();
                if bytes > n {
                    break;
                }
                kept.push(ch);
            }
            if !target.starts_with('@') {
                return Err(cast::truncation(target, &kept));
            }
            return Ok(Value::String(kept));
        }
    }
    Ok(v)
}

/// A value of type `ty` as a `char`/`varchar` of `collation` (`None`: the
/// database default) holds it; values of other types unchanged.
pub fn in_code_page(value: Value, ty: DataType, collation: Option<Collation>) -> Value {
    match value {
        Value::String(s) if matches!(ty, DataType::Char(_) | DataType::VarChar(_)) => {
            let c = collation.unwrap_or_else(default_collation);
            match c.to_code_page(&s) {
                std::borrow::Cow::Borrowed(_) => Value::String(s),
                std::borrow::Cow::Owned(kept) => Value::String(kept),
            }
        }
        other => other,
    }
}

/// Compares two values the way ORDER BY, comparisons and keys do (strings
/// case-insensitively, trailing spaces ignored: the default collation).
/// `None` when either is NULL. Mixed types meet at the type of higher
/// precedence, so `'abc' = 1` fails with 245 as in SQL Server.
pub fn compare(a: &Typed, b: &Typed) -> SqlResult<Option<Ordering>> {
    compare::compare(a, b)
}

/// The common type of two branch/column types (CASE, COALESCE, UNION,
/// VALUES rows): precedence plus decimal and length widening; 206 when
/// there is none.
pub fn common_type(a: DataType, b: DataType) -> SqlResult<DataType> {
    chart::union(a, b)
}

/// Position in SQL Server's type precedence list (lower wins).
pub fn precedence(ty: &DataType) -> u8 {
    types::precedence(ty)
}

/// A value as text, as CAST to varchar writes it (binary as its bytes
/// read as code page 1252; None for NULL).
pub fn to_text(value: &Typed) -> SqlResult<Option<String>> {
    cast::text(value, None, false)
}

/// True when the predicate value is TRUE (not FALSE, not UNKNOWN).
pub fn is_true(value: &Value) -> bool {
    matches!(value, Value::Bit(true))
}
