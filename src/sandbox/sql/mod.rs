//! The sandbox's T-SQL engine: in-memory databases behind sessions.
//!
//! Statements are parsed with `sqlparser` (MsSqlDialect) and executed
//! generically: DDL changes the catalog, DML changes rows under
//! transactions, queries are evaluated over tables and catalog views.

pub mod error;
pub mod expr;
pub mod request;
pub mod types;

pub use error::{Abort, SqlError, SqlResult};
pub use request::{CancelToken, Column, LoginRequest, Output, Param, Request, TransactionEvent};
pub use types::{DataType, Decimal, Length, Value};
