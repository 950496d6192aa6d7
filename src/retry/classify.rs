//! Which failures of the libraries we call pass by themselves, decided
//! here once, by error type: object_store, deltalake (and the Delta
//! kernel under it), tiberius, kube and local I/O. A store that answers
//! 503, a timeout or a cut connection outlives the clients' own retries
//! now and then; the stream must wait and go on, not stop. Libraries wrap
//! each other's errors, so a wrapper with no verdict of its own is judged
//! by the first typed cause in its `source()` chain. Nothing here reads an
//! error's message, but for one rendering deltalake leaves untyped
//! (`stringified_store_failure`).

use std::error::Error as StdError;

use deltalake::DeltaTableError;
use deltalake::logstore::object_store;

/// SQL Server errors that pass by themselves: a deadlock victim or lock
/// timeout, a server or an Always On / Azure SQL database failing over,
/// moving or throttling, a login or database in transition.
pub const TRANSIENT_SQL_ERRORS: &[u32] = &[
    // Deadlock victim; lock request timeout.
    1205, 1222,
    // Always On: the database is not accessible, not yet online on this
    // replica, or in a state that cannot be read (976, 978, 983).
    976, 978, 983,
    // Azure SQL: resource or session limits reached (10928, 10929), the
    // database moving (40143, 40197), busy (40501), service error (40540),
    // not currently available (40613); elastic pool limits (49918-49920).
    10928, 10929, 40143, 40197, 40501, 40540, 40613, 49918, 49919, 49920,
    // Cannot open database (in transition); connection forcibly closed;
    // the session was killed (KILL), its connection closed by the server.
    4060, 233, 596,
];

/// Whether SQL Server error `code` passes by itself.
pub fn sql_code_transient(code: u32) -> bool {
    TRANSIENT_SQL_ERRORS.contains(&code)
}

/// Whether a tiberius error may pass if the query is made again: a cut
/// connection, a redirect not followed, or a server error listed in
/// [`TRANSIENT_SQL_ERRORS`].
pub fn sql_transient(error: &tiberius::error::Error) -> bool {
    use tiberius::error::Error as E;
    match error {
        E::Io { .. } | E::Routing { .. } => true,
        E::Server(token) => sql_code_transient(token.code()),
        _ => false,
    }
}

/// Whether an object store error may pass if the same call is made again.
/// Missing objects, refused preconditions, bad paths, bad configuration and
/// refused credentials are answers, not accidents.
pub fn store_transient(error: &object_store::Error) -> bool {
    use object_store::Error as E;
    match error {
        // A request that failed (a 5xx, a timeout, a cut connection), or a
        // local file system call: judged by its cause when it has a typed
        // one, else worth another try.
        E::Generic { source, .. } => chain_transient(source.as_ref()).unwrap_or(true),
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
        E::KernelError(kernel) => kernel_transient(kernel),
        E::Io { source } => io_transient(source),
        // Lost commit races (another writer's commit, a retried conditional
        // put) are settled by reading the log again.
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
        E::Generic(message) => stringified_store_failure(message),
        other => causes_transient(other).unwrap_or(false),
    }
}

/// The one exception to "by type": deltalake-core 1.1's
/// `logstore::get_latest_version` turns the kernel's typed
/// `Error::ObjectStore` into `DeltaTableError::Generic(e.to_string())`,
/// so nothing typed is left of a store that failed while the log was
/// listed. Only that rendering is recognised (the kernel's own prefix);
/// a missing file, a read-only disk or a refused permission stay answers.
/// Remove once deltalake keeps the kernel error (KernelError) there.
fn stringified_store_failure(message: &str) -> bool {
    message.starts_with("Error interacting with object store")
        && !message.contains("not found")
        && !message.contains("Read-only file system")
        && !message.contains("Permission denied")
}

/// Whether a Delta kernel error may pass: the kernel holds store and I/O
/// errors as plain fields, not as causes, so they are matched here.
pub fn kernel_transient(error: &delta_kernel::Error) -> bool {
    use delta_kernel::Error as E;
    match error {
        E::Backtraced { source, .. } => kernel_transient(source),
        E::ObjectStore(store) => store_transient(store),
        E::IOError(io) => io_transient(io),
        E::FileNotFound(_) => false,
        other => causes_transient(other).unwrap_or(false),
    }
}

/// Whether a Kubernetes API call may pass if made again: the API server
/// busy, failing or unreachable, or a write that lost a race (409), yes;
/// a refused, invalid or missing object, no.
pub fn kube_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            matches!(status.code, 409 | 429) || (500..600).contains(&status.code)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Whether a local or network I/O error may pass: a full disk, a
/// read-only mount, a path the process may not write or a malformed
/// request are the system's answer, which waiting does not change.
pub fn io_transient(error: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    !matches!(
        error.kind(),
        K::ReadOnlyFilesystem
            | K::PermissionDenied
            | K::StorageFull
            | K::QuotaExceeded
            | K::InvalidInput
            | K::InvalidData
            | K::Unsupported
    )
}

/// The verdict of the first error in `error`'s chain (itself included)
/// whose type is known here; `None` when none is.
pub fn chain_transient(error: &(dyn StdError + 'static)) -> Option<bool> {
    let mut cause = Some(error);
    while let Some(current) = cause {
        if let Some(verdict) = typed_verdict(current) {
            return Some(verdict);
        }
        cause = current.source();
    }
    None
}

/// The verdict of the first typed error among `error`'s causes (itself
/// left out: for a wrapper judged by what it wraps).
fn causes_transient(error: &(dyn StdError + 'static)) -> Option<bool> {
    error.source().and_then(chain_transient)
}

fn typed_verdict(error: &(dyn StdError + 'static)) -> Option<bool> {
    if let Some(e) = error.downcast_ref::<object_store::Error>() {
        return Some(store_transient(e));
    }
    if let Some(e) = error.downcast_ref::<DeltaTableError>() {
        return Some(delta_transient(e));
    }
    if let Some(e) = error.downcast_ref::<delta_kernel::Error>() {
        return Some(kernel_transient(e));
    }
    if let Some(e) = error.downcast_ref::<tiberius::error::Error>() {
        return Some(sql_transient(e));
    }
    if let Some(e) = error.downcast_ref::<kube::Error>() {
        return Some(kube_transient(e));
    }
    if let Some(e) = error.downcast_ref::<object_store::client::HttpError>() {
        // Connecting, sending, a timeout or a cut response: yes; a body
        // that does not decode is the same body next time.
        return Some(e.kind() != object_store::client::HttpErrorKind::Decode);
    }
    if let Some(e) = error.downcast_ref::<std::io::Error>() {
        return Some(io_transient(e));
    }
    None
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
