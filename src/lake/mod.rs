//! The Delta side of a stream.
//!
//! `storage` parses locations and builds object stores (`s3` serves S3
//! from object_store alone); `checkpoint` is the offsets/commits log that
//! plans and fences batches, and `lease` the object-store lease that keeps
//! one process on it; `local_access` checks a local location can be
//! written before a stream starts; `txn` builds every Delta `txn` a stream writes and
//! states when a commit is already done; `bronze` writes one batch as one
//! guarded commit, carrying a `records` entry; `silver` keeps the source
//! table's current state, one guarded MERGE per bronze commit; `facts` is
//! the shared table with one row per batch and event; `claims` keeps two
//! tables from sharing one name in a shared table; `finalization` the
//! control table saying up to which instant each target is complete;
//! `schema` gives our columns their Delta and Arrow types; `table_properties`
//! the Delta properties and commit settings every table of ours has, and
//! the ones it refuses; `delta` holds deltalake helpers they share; `maintenance` compacts and vacuums;
//! `transient` tells a passing store error from a lasting one; `requests`
//! counts object-store requests (`bench --requests`); `faults` (the
//! `failpoints` feature) makes chosen store calls fail for the fault
//! tests; `test_support` serves the unit tests.
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
pub mod local_access;
pub mod maintenance;
pub mod records;
pub mod requests;
pub mod retype;
mod s3;
pub mod schema;
pub mod silver;
pub mod storage;
pub mod table_properties;
#[cfg(test)]
pub(crate) mod test_support;
pub mod txn;

pub use storage::{StorageError, StorageKind, StorageLocation, StorageOptions, register_handlers};
