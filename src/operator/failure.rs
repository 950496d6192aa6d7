//! Why a worker stopped, in the words of its status: a stable reason (the
//! error's kind, CamelCase as Kubernetes reasons are) and one line that
//! says what to do. Messages name logins, tables and fields, never a
//! password or a storage key: they travel into the CdcStream's status and
//! the pod's termination message.

use crate::engine::EngineError;
use crate::lake::claims::ClaimError;
use crate::source::{
    COLUMN_PERMISSION_DENIED, OBJECT_PERMISSION_DENIED, SourceError, SourceOutage,
};
use crate::spec::StreamConfig;

/// The longest message a status or termination message carries.
const MAX_MESSAGE: usize = 1024;

/// A worker's failure, ready for `status.worker`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The kind of error.
    pub reason: &'static str,
    /// What happened and what to do, on one line.
    pub message: String,
}

impl Failure {
    /// A failure with `message` made one bounded line.
    pub fn new(reason: &'static str, message: impl AsRef<str>) -> Self {
        Failure {
            reason,
            message: one_line(message.as_ref()),
        }
    }
}

/// Permission errors on what a statement reads: SELECT denied on an object
/// or a column, no permission for the action, a server permission denied.
/// A refused login and a database the login cannot open are the source's
/// outages ([`SourceError::outage`]), one list for a stream and a source.
const DENIED: [u32; 4] = [OBJECT_PERMISSION_DENIED, COLUMN_PERMISSION_DENIED, 297, 300];

/// The failure `error` stopped the engine of `config` with.
pub fn engine_failure(error: &EngineError, config: &StreamConfig) -> Failure {
    let source = &config.source;
    let said = error.to_string();
    match error {
        EngineError::Credentials(_) => Failure::new(
            "PasswordUnavailable",
            format!(
                "{said}; check spec.source.credentials.passwordFrom and that the Secret exists"
            ),
        ),
        EngineError::Source(e) => source_failure(e, config),
        EngineError::DataLoss(_) => Failure::new("DataLoss", said),
        EngineError::Lease(_) => Failure::new(
            "CheckpointInUse",
            format!(
                "{said}; make sure one stream only runs on checkpoint {}",
                config.checkpoint
            ),
        ),
        EngineError::IdentityChanged { .. } | EngineError::ForeignTarget { .. } => {
            Failure::new("IdentityMismatch", said)
        }
        EngineError::TargetBehind { .. } => Failure::new("TargetBehindCheckpoint", said),
        EngineError::SilverKeyNotUnique(_) => Failure::new("SilverKeyNotUnique", said),
        EngineError::SchemaChangeRefused(_) => Failure::new("SchemaChangeRefused", said),
        EngineError::InstanceDisabled { .. } | EngineError::PinnedInstanceDisabled { .. } => {
            Failure::new("CaptureInstanceDisabled", said)
        }
        EngineError::SourceDown(_) => Failure::new(SOURCE_UNAVAILABLE, said),
        EngineError::UnsafeStorage { .. } => Failure::new("UnsafeStorage", said),
        EngineError::NotWritable(_) => Failure::new(VOLUME_NOT_WRITABLE, said),
        EngineError::Panicked(_) => Failure::new("TablePanicked", said),
        EngineError::Claim(claim)
            if matches!(
                **claim,
                ClaimError::Claimed { .. } | ClaimError::Unreadable { .. }
            ) =>
        {
            Failure::new("NameClaimed", said)
        }
        _ if error.unsafe_table_property().is_some() => Failure::new("UnsafeTableProperty", said),
        EngineError::Bronze(_)
        | EngineError::Facts(_)
        | EngineError::Finalization(_)
        | EngineError::Silver(_)
        | EngineError::Checkpoint(_)
        | EngineError::Claim(_) => Failure::new(
            "LakeError",
            format!(
                "{said}; check that the worker may write {} and its storageOptions",
                config.target.location
            ),
        ),
        EngineError::Resume { .. }
        | EngineError::BatchIdExhausted { .. }
        | EngineError::BronzeTxnNotBatch { .. }
        | EngineError::CannotAdopt { .. }
        | EngineError::SnapshotRangesMismatch { .. }
        | EngineError::SnapshotProgressUnreadable { .. }
        | EngineError::SnapshotForeign { .. }
        | EngineError::SilverKeyMissing { .. }
        | EngineError::PartsUnread { .. }
        | EngineError::NoFactsRow { .. }
        | EngineError::NoIdleReader
        | EngineError::ReadTask(_)
        | EngineError::BronzeCommitMissing { .. } => Failure::new("Inconsistent", said),
    }
    .with_login_named(&source.username)
}

/// The reason of a table of a CdcSource (its `status.worker`, its Live
/// condition) while SQL Server cannot be read at all: the source's, not
/// the table's; the message leads with the source's own reason.
pub const SOURCE_UNAVAILABLE: &str = "SourceUnavailable";
/// The reason of a table whose object store has failed every attempt for
/// longer than `spec.alerts.storeOutageAfter` (the worker retries on).
pub const STORE_UNAVAILABLE: &str = "StoreUnavailable";

/// The reason of a worker that may not write a local lake or checkpoint
/// path (the operator adds which volume of the pod it is on, and the fix).
pub const VOLUME_NOT_WRITABLE: &str = "VolumeNotWritable";

/// The reason of a worker whose ServiceAccount may not read its own
/// CdcStream (the operator adds which Role to bind, in which namespace).
pub const WORKER_FORBIDDEN: &str = "WorkerForbidden";

/// The failure of a worker that could not read its CdcStream `namespace/
/// name` at start, before it has anything to report into the status (it
/// says why in its termination message only).
pub fn stream_read_failure(error: &kube::Error, namespace: &str, name: &str) -> Failure {
    match error {
        kube::Error::Api(status) if status.code == 403 => Failure::new(
            WORKER_FORBIDDEN,
            format!(
                "the worker may not get CdcStream {namespace}/{name}: {}; its ServiceAccount \
                 needs get on cdcstreams and patch on cdcstreams/status in {namespace} \
                 (the chart's worker Role: list {namespace} in worker.namespaces)",
                status.message
            ),
        ),
        kube::Error::Api(status) if status.code == 404 => Failure::new(
            "StreamNotFound",
            format!(
                "CdcStream {namespace}/{name} does not exist (deleted while its worker started?)"
            ),
        ),
        other => Failure::new(
            "ApiUnavailable",
            format!(
                "cannot read CdcStream {namespace}/{name} from the API server: {other}; check \
                 the pod's network path to the API server"
            ),
        ),
    }
}

fn source_failure(error: &SourceError, config: &StreamConfig) -> Failure {
    let source = &config.source;
    let said = error.to_string();
    let outage = error.outage();
    match error {
        _ if outage == Some(SourceOutage::LoginFailed) => Failure::new(
            "LoginFailed",
            format!(
                "SQL Server refused login {} to {}:{}: check spec.source.credentials.username and \
                 the password in its Secret",
                source.username, source.host, source.port
            ),
        ),
        _ if outage == Some(SourceOutage::DatabaseUnavailable) => Failure::new(
            SourceOutage::DatabaseUnavailable.reason(),
            format!(
                "{said}; {} (database {} as login {})",
                SourceOutage::DatabaseUnavailable.remedy(),
                source.database,
                source.username
            ),
        ),
        _ if error.server_code().is_some_and(|c| DENIED.contains(&c)) => Failure::new(
            "PermissionDenied",
            format!(
                "{said}; grant login {} what docs/user-guide.md lists for a reader",
                source.username
            ),
        ),
        SourceError::NotCaptured(_) => Failure::new(
            "CaptureInstanceNotFound",
            format!(
                "{said}; enable CDC on {} (sys.sp_cdc_enable_table) or fix spec.source.captureInstance",
                source.table
            ),
        ),
        SourceError::UnknownColumn { .. } => Failure::new("ColumnNotCaptured", said),
        SourceError::DoesNotFit { .. } => Failure::new(
            "SchemaChangeRefused",
            format!(
                "{said}; nothing of it was written: stream the table into a new target (a new \
                 CdcStream with a new appId and target), or resnapshot into a new table"
            ),
        ),
        SourceError::ValueTooLarge { column, .. } => Failure::new(
            "ValueTooLarge",
            format!(
                "{said}; leave {column} out with spec.source.columns, or raise spec.maxValueBytes \
                 (at most 1 GiB; the worker's memory grows with it): the table stops at this \
                 change until then, and nothing after it is written"
            ),
        ),
        SourceError::UnsupportedType { .. } => Failure::new(
            "UnsupportedType",
            format!("{said}; leave the column out with spec.source.columns"),
        ),
        SourceError::Connect { .. } | SourceError::ConnectTimeout { .. } => Failure::new(
            "SourceUnreachable",
            format!("{said}; check spec.source.host and port, and the network path"),
        ),
        _ => Failure::new("SourceError", said),
    }
}

impl Failure {
    /// Makes sure a login failure names the login even when SQL Server's
    /// text did not.
    fn with_login_named(self, username: &str) -> Self {
        if self.reason == "LoginFailed" && !self.message.contains(username) {
            return Failure::new(self.reason, format!("login {username}: {}", self.message));
        }
        self
    }
}

/// `text` on one line, at most [`MAX_MESSAGE`] bytes (cut on a character).
pub fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.len() <= MAX_MESSAGE {
        return line;
    }
    let mut end = MAX_MESSAGE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SilverKeyNotUnique;
    use crate::operator::test_fixtures::stream;

    fn config() -> StreamConfig {
        crate::operator::children::worker_config(&stream(serde_json::json!({})))
            .expect("valid fixture")
    }

    #[test]
    fn a_denied_permission_is_never_the_sources_outage() {
        // One list decides a stream's and a source's reason: a number is a
        // permission a statement lacks, or the source's outage, never both.
        for code in DENIED {
            assert_eq!(SourceOutage::of_server_error(code), None, "{code}");
        }
        for code in [18456, 18452, 18470, 18486, 18487, 18488] {
            assert_eq!(
                SourceOutage::of_server_error(code),
                Some(SourceOutage::LoginFailed),
                "{code}"
            );
        }
        assert_eq!(
            SourceOutage::of_server_error(916),
            Some(SourceOutage::DatabaseUnavailable)
        );
    }

    #[test]
    fn each_kind_of_error_has_its_reason_and_says_what_to_do() {
        let config = config();
        let cases = [
            (
                EngineError::Source(SourceError::NotCaptured(
                    "dbo.orders is not captured".into(),
                )),
                "CaptureInstanceNotFound",
                "sys.sp_cdc_enable_table",
            ),
            (
                EngineError::Source(SourceError::UnsupportedType {
                    column: "shape".into(),
                    sql_type: "geometry".into(),
                    reason: "spatial".into(),
                }),
                "UnsupportedType",
                "spec.source.columns",
            ),
            (
                EngineError::Source(SourceError::ConnectTimeout {
                    address: "sql:1433".into(),
                    seconds: 30,
                }),
                "SourceUnreachable",
                "spec.source.host",
            ),
            (
                EngineError::SilverKeyNotUnique(Box::new(SilverKeyNotUnique {
                    app_id: "orders-v1".into(),
                    silver: "silver.orders".into(),
                    keys_from: "spec.silver.keys",
                    keys: "note".into(),
                    table: "dbo.orders".into(),
                    unique: "PK_orders (id) primary key".into(),
                })),
                "SilverKeyNotUnique",
                "spec.silver.keys",
            ),
            (
                EngineError::SchemaChangeRefused(Box::new(crate::engine::SchemaChangeRefused {
                    table: "dbo.orders".into(),
                    column: "v".into(),
                    source_type: "int".into(),
                    target: "bronze.orders".into(),
                    target_type: "long".into(),
                    reason: "the new type is narrower than the stored one",
                })),
                "SchemaChangeRefused",
                "new target",
            ),
            (
                EngineError::InstanceDisabled {
                    capture_instance: crate::domain::CaptureInstance::new("dbo_orders")
                        .expect("a valid name"),
                },
                "CaptureInstanceDisabled",
                "sys.sp_cdc_enable_table",
            ),
        ];
        for (error, reason, todo) in cases {
            let failure = engine_failure(&error, &config);
            assert_eq!(failure.reason, reason);
            assert!(failure.message.contains(todo), "{}", failure.message);
            assert!(!failure.message.contains('\n'));
        }
    }

    #[test]
    fn messages_are_one_bounded_line() {
        let long = "word\n".repeat(1000);
        let line = one_line(&long);
        assert!(!line.contains('\n'));
        assert!(line.len() <= MAX_MESSAGE + '…'.len_utf8());
    }
}
