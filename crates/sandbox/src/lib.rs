//! A SQL Server stand-in for development and tests.
//!
//! SQL Server cannot run on our machines, so the project carries a TDS 7.4
//! server (`tds`) in front of an in-memory T-SQL engine with Change Data
//! Capture (`sql`). Standard clients connect to it as they would to SQL
//! Server; `mssql-cdc` runs it for its `demo`, `bench` and `sandbox`
//! commands and its integration tests. This crate depends on nothing of the
//! product. What it supports and how it differs from SQL Server:
//! `docs/sandbox.md`.

pub mod backend;
pub mod demo;
mod launch;
pub mod sql;
pub mod tds;

pub use demo::DemoOptions;
pub use launch::{Sandbox, SandboxError, SandboxOptions, TlsSource};
pub use sql::engine::SqlVersion;
