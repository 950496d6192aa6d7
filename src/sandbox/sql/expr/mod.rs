//! T-SQL expressions: evaluation, types, conversions, built-in functions.
//!
//! Every expression evaluates to a [`Typed`] value whose type does not
//! depend on whether the value is NULL, so the executor learns a result
//! set's column types by evaluating over typed NULLs when there are no rows.

use std::cmp::Ordering;

use chrono::{FixedOffset, NaiveDateTime};
use sqlparser::ast::{self, Expr, Function, Ident, Query};

use super::error::SqlResult;
use super::types::{DataType, Value};

/// A value with the SQL Server type it has in its expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    pub value: Value,
    pub ty: DataType,
}

impl Typed {
    pub fn new(value: Value, ty: DataType) -> Self {
        Self { value, ty }
    }

    pub fn null(ty: DataType) -> Self {
        Self { value: Value::Null, ty }
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
    /// schema (`OBJECT_ID`, `@@ROWCOUNT`). `None` means "not mine".
    fn system_function(&self, name: &str, args: &[Typed]) -> Option<SqlResult<Typed>>;

    /// The server clock in UTC (controllable in the sandbox).
    fn now_utc(&self) -> NaiveDateTime;

    /// The server's time-zone offset, for GETDATE and SYSDATETIMEOFFSET.
    fn server_offset(&self) -> FixedOffset;
}

/// Evaluates an expression against a scope.
pub fn eval(_expr: &Expr, _scope: &dyn Scope) -> SqlResult<Typed> {
    todo!("expressions")
}

/// The sandbox type for a T-SQL type name (`int`, `decimal(10,2)`,
/// `nvarchar(max)`, `sysname`...), 2715 for an unknown one.
pub fn data_type(_ty: &ast::DataType) -> SqlResult<DataType> {
    todo!("data types")
}

/// Explicit conversion, as CAST and CONVERT without a style do.
pub fn convert(_value: &Typed, _to: DataType) -> SqlResult<Value> {
    todo!("convert")
}

/// Implicit conversion on assignment (INSERT, UPDATE, SET, parameters),
/// with SQL Server's truncation (2628) and overflow (8115) errors naming
/// `target` (a column or variable).
pub fn assign(_value: &Typed, _to: DataType, _target: &str) -> SqlResult<Value> {
    todo!("assign")
}

/// Compares two values the way ORDER BY, comparisons and keys do (strings
/// case-insensitively, trailing spaces ignored: the default collation).
/// `None` when either is NULL.
pub fn compare(_a: &Typed, _b: &Typed) -> SqlResult<Option<Ordering>> {
    todo!("compare")
}

/// True when the predicate value is TRUE (not FALSE, not UNKNOWN).
pub fn is_true(value: &Value) -> bool {
    matches!(value, Value::Bit(true))
}

pub mod aggregate {
    //! Aggregate functions, accumulated row by row by the executor.
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AggregateKind {
        CountStar,
        Count,
        Min,
        Max,
        Sum,
        Avg,
    }

    /// The aggregate a function call is, with DISTINCT and its argument;
    /// `None` for non-aggregates.
    pub fn classify(_function: &Function) -> Option<(AggregateKind, bool, Option<&Expr>)> {
        todo!("classify")
    }

    /// Running state of one aggregate over one group.
    #[derive(Debug, Clone)]
    pub struct Accumulator;

    impl Accumulator {
        /// `input` is the argument's type (ignored for COUNT(*)).
        pub fn new(_kind: AggregateKind, _distinct: bool, _input: DataType) -> Self {
            todo!("accumulator")
        }

        pub fn update(&mut self, _value: &Typed) -> SqlResult<()> {
            todo!("update")
        }

        /// The aggregate's result, typed as SQL Server types it (COUNT int,
        /// SUM(int) int, SUM(decimal(p,s)) decimal(38,s), AVG(int) int...).
        pub fn finish(&self) -> SqlResult<Typed> {
            todo!("finish")
        }
    }
}
