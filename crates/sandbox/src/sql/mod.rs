//! The sandbox's T-SQL engine: in-memory databases behind sessions.
//!
//! Statements are parsed with `sqlparser` (MsSqlDialect) and executed
//! generically: DDL changes the catalog, DML changes rows under
//! transactions, queries are evaluated over tables and catalog views.

pub mod catalog;
pub mod cdc;
pub mod clock;
pub mod collation;
pub mod connections;
pub mod engine;
pub mod error;
pub mod executor;
pub mod expr;
pub mod faults;
pub mod parse;
pub mod procedures;
pub mod request;
pub mod script;
pub mod security;
pub mod session;
pub mod storage;
pub mod transaction;
pub mod types;
pub mod views;

#[cfg(test)]
mod test_support;

pub use error::{Abort, SqlError, SqlResult};
pub use request::{
    CancelToken, Column, KillSignal, LoginRequest, Output, Param, Request, TransactionEvent,
};
pub use types::{DataType, Decimal, Length, Value};

pub use clock::{Clock, SystemClock};
pub use engine::{Engine, EngineConfig};
pub use session::Session;
pub use transaction::{ChangeOp, LogChange, LogRecord};

#[cfg(test)]
mod collation_tests;
