//! Which storage failures are worth retrying. A store that answers 503, a
//! timeout or a cut connection outlives object_store's own retries now and
//! then; the stream must wait and go on, not stop. deltalake reports such
//! failures under several variants (log reads as kernel or generic errors,
//! Parquet uploads as `Parquet(External)`), so the classification looks
//! through the error's causes for the store's own error.

use std::error::Error as StdError;

use deltalake::DeltaTableError;
use deltalake::logstore::object_store;

/// Whether an object store error may pass if the same call is made again.
/// Missing objects, refused preconditions, bad paths, bad configuration and
/// refused credentials are answers, not accidents.
pub fn store_transient(error: &object_store::Error) -> bool {
    use object_store::Error as E;
    match error {
        E::Generic { source, .. } => !refused_by_the_system(source.as_ref()),
        E::JoinError { .. } => true,
        E::NotFound { .. }
        | E::InvalidPath { .. }
        | E::NotSupported { .. }
        | E::AlreadyExists { .. }
        | E::Precondition { .. }
        | E::NotModified { .. }
        | E::NotImplemented { .. }
        | E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::UnknownConfigurationKey { .. } => false,
        // A variant added by a later object_store: assume the store may
        // recover rather than stop a stream for good.
        _ => true,
    }
}

/// Whether a deltalake error may pass if the operation is made again.
pub fn delta_transient(error: &DeltaTableError) -> bool {
    use DeltaTableError as E;
    match error {
        E::ObjectStore { source } => store_transient(source),
        // Lost commit races (another writer's commit, a retried conditional
        // put) are settled by reading the log again.
        E::Io { source } => !io_refused(source),
        E::Transaction { .. } | E::VersionAlreadyExists(_) => true,
        E::NotATable(_)
        | E::InvalidTableLocation(_)
        | E::MissingFeature { .. }
        | E::SchemaMismatch { .. }
        | E::NoSchema
        | E::NotInitialized
        | E::MetadataError(_)
        | E::InvalidVersion(_)
        | E::VersionDowngrade { .. }
        | E::UnsupportedColumnMapping { .. } => false,
        other => caused_by_store(other) || says_store_failed(&other.to_string()),
    }
}

/// Looks through `error`'s causes for a store or I/O error.
fn caused_by_store(error: &(dyn StdError + 'static)) -> bool {
    let mut cause = error.source();
    while let Some(current) = cause {
        if let Some(store) = current.downcast_ref::<object_store::Error>() {
            return store_transient(store);
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return !io_refused(io);
        }
        cause = current.source();
    }
    false
}

/// The delta kernel wraps store errors without exposing them as a cause,
/// and reports a missing object as "File not found"; its message is all
/// that says a store call failed.
fn says_store_failed(message: &str) -> bool {
    message.contains("Error interacting with object store")
        && !message.contains("not found")
        && !message.contains("Read-only file system")
        && !message.contains("Permission denied")
}

/// Whether a local file system error in `error`'s chain is the system's
/// answer (a read-only mount, a directory the user may not write, a full
/// disk), which waiting does not change: the stream stops and says why.
fn refused_by_the_system(error: &(dyn StdError + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(current) = cause {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return io_refused(io);
        }
        cause = current.source();
    }
    false
}

fn io_refused(error: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        error.kind(),
        K::ReadOnlyFilesystem | K::PermissionDenied | K::StorageFull | K::QuotaExceeded
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::parquet::errors::ParquetError;

    fn unavailable() -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 503 Service Unavailable".into(),
        }
    }

    fn not_found() -> object_store::Error {
        object_store::Error::NotFound {
            path: "t/_delta_log/00000000000000000007.json".into(),
            source: "404".into(),
        }
    }

    #[test]
    fn store_errors_are_transient_unless_they_are_answers() {
        assert!(store_transient(&unavailable()));
        assert!(!store_transient(&not_found()));
        let denied = object_store::Error::PermissionDenied {
            path: "t".into(),
            source: "403".into(),
        };
        assert!(!store_transient(&denied));
        let exists = object_store::Error::AlreadyExists {
            path: "offsets/1".into(),
            source: "412".into(),
        };
        assert!(!store_transient(&exists));
    }

    #[test]
    fn a_read_only_or_full_local_disk_is_an_answer() {
        let local = |kind| object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::new(kind, "/lake/orders")),
        };
        assert!(!store_transient(&local(
            std::io::ErrorKind::ReadOnlyFilesystem
        )));
        assert!(!store_transient(&local(std::io::ErrorKind::StorageFull)));
        assert!(!store_transient(&local(
            std::io::ErrorKind::PermissionDenied
        )));
        assert!(store_transient(&local(std::io::ErrorKind::TimedOut)));
        let kernel = DeltaTableError::Generic(
            "Error interacting with object store: Read-only file system (os error 30)".into(),
        );
        assert!(!delta_transient(&kernel));
    }

    #[test]
    fn delta_errors_that_wrap_a_failed_store_call_are_transient() {
        let cases: Vec<(&str, DeltaTableError, bool)> = vec![
            (
                "log read",
                DeltaTableError::ObjectStore {
                    source: unavailable(),
                },
                true,
            ),
            (
                "missing log file",
                DeltaTableError::ObjectStore {
                    source: not_found(),
                },
                false,
            ),
            (
                "Parquet upload (External)",
                DeltaTableError::Parquet {
                    source: ParquetError::External(Box::new(unavailable())),
                },
                true,
            ),
            (
                "generic with a store cause",
                DeltaTableError::GenericError {
                    source: Box::new(unavailable()),
                },
                true,
            ),
            (
                "kernel (deltalake's) with a store cause",
                DeltaTableError::Kernel {
                    source: deltalake::kernel::Error::ObjectStore(unavailable()),
                },
                true,
            ),
            (
                "kernel log read, by message",
                DeltaTableError::Generic(
                    "Error interacting with object store: Generic S3 error: 503".into(),
                ),
                true,
            ),
            (
                "a table that is not there",
                DeltaTableError::NotATable("t".into()),
                false,
            ),
            (
                "a schema that does not fit",
                DeltaTableError::SchemaMismatch {
                    msg: "column x".into(),
                },
                false,
            ),
            (
                "a generic answer",
                DeltaTableError::Generic("bad partition value".into()),
                false,
            ),
        ];
        for (name, error, transient) in cases {
            assert_eq!(delta_transient(&error), transient, "{name}: {error}");
        }
    }
}
