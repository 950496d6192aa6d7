//! Shared set-up for the integration tests.

pub mod cdc;
pub mod proxy;
pub mod server;
pub mod stream;

pub use server::{TestServer, query, run, scalar, server_error};
