//! mssql-cdc: SQL Server Change Data Capture into Delta Lake.
//!
//! The crate is one library behind one binary, in one-way layers: each
//! module imports only from the layers below it. `docs/architecture.md`
//! draws the layers and says what each module owns; a test
//! (`layering::tests`) fails on an import that points upward.

pub mod domain;
pub mod engine;
pub mod failpoint;
pub mod health;
pub mod lake;
pub mod metrics;
pub mod operator;
pub mod query;
pub mod retry;
pub mod source;
pub mod spec;

#[cfg(test)]
mod layering;
