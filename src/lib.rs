//! mssql-cdc: SQL Server Change Data Capture into Delta Lake.
//!
//! The crate is one library behind one binary. Each top-level module has one
//! job; see `docs/` and `../shared/design/architecture.md` for the map.

pub mod engine;
pub mod failpoint;
pub mod health;
pub mod lake;
pub mod metrics;
pub mod operator;
pub mod query;
pub mod source;
pub mod spec;
