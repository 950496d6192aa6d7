//! The Delta side of a stream.
//!
//! `storage` parses locations and builds object stores; `checkpoint` is the
//! offsets/commits log that plans and fences batches; `txn` builds every
//! Delta `txn` a stream writes and states when a commit is already done;
//! `bronze` writes one batch as one guarded commit, carrying a `records`
//! entry; `facts` is the shared table with one row per batch and event;
//! `claims` keeps two tables from sharing one name in a shared table;
//! `finalization` the control table saying up to which instant each target
//! is complete; `schema` gives our columns their Delta and Arrow types.
//! Exactly-once rests on the `txn` idea of docs/adr/0002-exactly-once.md.

pub mod bronze;
pub mod checkpoint;
pub mod claims;
mod delta;
pub mod facts;
#[cfg(feature = "failpoints")]
pub mod faults;
pub mod finalization;
pub mod lease;
pub mod maintenance;
pub mod records;
mod s3;
pub mod schema;
pub mod silver;
pub mod storage;
#[cfg(test)]
pub(crate) mod test_support;
pub mod txn;

pub use storage::{StorageError, StorageKind, StorageLocation, StorageOptions, register_handlers};
