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

/// Batches a long-history test runs (per run): 120 in CI, where a debug
/// build takes about 0.8 s a batch; `MSSQL_CDC_TEST_LONG_RUN=500` runs
/// the full length (docs/testing.md).
#[cfg(feature = "failpoints")]
pub fn long_run_batches() -> i32 {
    std::env::var("MSSQL_CDC_TEST_LONG_RUN")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120)
}
