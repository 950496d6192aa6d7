//! Shared set-up for the integration tests.

pub mod cdc;
pub mod chart;
pub mod cluster;
pub mod control;
pub mod duckdb;
pub mod e2e;
pub mod examples;
pub mod http;
pub mod kube;
pub mod objectstores;
pub mod operator;
pub mod proxy;
pub mod server;
pub mod stream;
pub mod sts;
pub mod tools;

pub use server::{TestServer, query, run, scalar, server_error};
