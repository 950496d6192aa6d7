//! When to try again, decided once for the whole crate: which failures of
//! the libraries we call pass by themselves ([`classify`], by error type,
//! never by message), and how long to wait before the next attempt
//! ([`backoff`], capped, doubling and jittered). The engine, the lake's
//! lease and finalization table, and the operator all use these two.

pub mod backoff;
pub mod classify;

pub use backoff::{Backoff, FailureCounts, Jitter, Policy};
