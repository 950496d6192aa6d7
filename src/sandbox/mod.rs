//! A SQL Server stand-in for development and tests.
//!
//! SQL Server cannot run on our machines, so the project carries a TDS 7.4
//! server (`tds`) in front of an in-memory T-SQL engine (`sql`). Standard
//! clients connect to it as they would to SQL Server. This module imports
//! nothing from the rest of the crate.

pub mod backend;
pub mod demo;
mod launch;
pub mod sql;
pub mod tds;

pub use demo::DemoOptions;
pub use launch::{Sandbox, SandboxError, SandboxOptions, TlsSource};
pub use sql::engine::SqlVersion;
