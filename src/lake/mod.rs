//! The Delta side of a stream.
//!
//! `storage` parses locations and builds object stores; `checkpoint` is the
//! offsets/commits log that plans and fences batches; `bronze` writes one
//! batch as one Delta commit carrying a `txn` action; `facts` is the shared
//! table with one row per batch and event; `finalization` the control table
//! saying up to which instant each target is complete. Exactly-once rests
//! on the `txn` idea described in `docs/adr/0002-exactly-once.md`.

pub mod bronze;
pub mod checkpoint;
mod delta;
pub mod facts;
pub mod finalization;
pub mod lease;
pub mod maintenance;
pub mod storage;
#[cfg(test)]
mod test_support;

pub use storage::{StorageError, StorageKind, StorageLocation, StorageOptions, register_handlers};
