//! The engine's errors: what stopped a stream, and whether retrying can help.

use chrono::{DateTime, Utc};

use super::plan::{PlanError, ResumeError};
use super::silver_keys::SilverKeyNotUnique;
use crate::domain::{BatchId, BatchIdError, CaptureInstance, Lsn};
use crate::lake::bronze::BronzeError;
use crate::lake::checkpoint::CheckpointError;
use crate::lake::claims::ClaimError;
use crate::lake::facts::FactsError;
use crate::lake::finalization::FinalizationError;
use crate::lake::lease::LeaseError;
use crate::lake::silver::SilverError;
use crate::lake::table_properties::UnsafeTableProperty;
use crate::retry::classify::{chain_transient, delta_transient, store_transient};
use crate::source::SourceError;
use crate::spec::CredentialError;

/// Changes the stream had not read are in no change table any more:
/// purged by CDC cleanup, or gone with a capture instance that was
/// disabled (docs/adr/0003-capture-instance-switch-and-data-loss.md).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct DataLossError {
    /// The capture instance read (the new one, after a disabled one).
    pub capture_instance: CaptureInstance,
    /// The first LSN the stream needed.
    pub from_lsn: Lsn,
    /// The lowest LSN still available.
    pub to_lsn: Lsn,
    /// Commit time of the stream's position (UTC), if known.
    pub from_ts: Option<DateTime<Utc>>,
    /// Commit time of the lowest available LSN (UTC), if known.
    pub to_ts: Option<DateTime<Utc>>,
    /// The instance read before, when it was disabled rather than cleaned
    /// up: its unread changes went with it, and changes made before
    /// `capture_instance` started were never captured.
    pub disabled: Option<CaptureInstance>,
}

impl std::fmt::Display for DataLossError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |t: Option<DateTime<Utc>>| {
            t.map_or_else(
                || "unknown".to_string(),
                |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            )
        };
        let DataLossError {
            capture_instance,
            from_lsn,
            to_lsn,
            ..
        } = self;
        let (from, to) = (show(self.from_ts), show(self.to_ts));
        match &self.disabled {
            None => write!(
                f,
                "DataLossError: CDC cleanup purged changes of {capture_instance} before the stream \
                 read them: LSNs {from_lsn} to {to_lsn} (committed {from}..{to}) are gone. Nothing \
                 was written. Re-snapshot the table into a new target/checkpoint, or raise the CDC \
                 retention (sys.sp_cdc_change_job @retention) so it does not happen again."
            ),
            Some(old) if old == capture_instance => write!(
                f,
                "DataLossError: capture instance {old} was disabled before the stream read the \
                 batch it had planned on it: LSNs {from_lsn} to {to_lsn} are in no change table \
                 any more. Nothing was written. A planned batch is read as planned or not at all, \
                 so re-snapshot the table into a new target/checkpoint."
            ),
            Some(old) => write!(
                f,
                "DataLossError: capture instance {old} was disabled and {capture_instance} captures \
                 from LSN {to_lsn} on: changes from LSN {from_lsn} up to then (committed \
                 {from}..{to}) are in no change table, whether {old} still held unread ones or the \
                 table changed while no instance captured it. Nothing was written. If neither \
                 happened, set spec.onDataLoss: skip and restart (the gap is recorded); otherwise \
                 set onDataLoss: resnapshot, or re-snapshot into a new target/checkpoint."
            ),
        }
    }
}

impl DataLossError {
    /// Builds the error.
    pub fn new(
        capture_instance: CaptureInstance,
        from_lsn: Lsn,
        to_lsn: Lsn,
        from_ts: Option<DateTime<Utc>>,
        to_ts: Option<DateTime<Utc>>,
    ) -> Self {
        DataLossError {
            capture_instance,
            from_lsn,
            to_lsn,
            from_ts,
            to_ts,
            disabled: None,
        }
    }

    /// The same loss, caused by `old` being disabled.
    pub fn disabled(mut self, old: CaptureInstance) -> Self {
        self.disabled = Some(old);
        self
    }
}

/// Why a stream stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The password could not be read.
    #[error(transparent)]
    Credentials(#[from] CredentialError),
    /// SQL Server failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The bronze table failed.
    #[error(transparent)]
    Bronze(#[from] BronzeError),
    /// The facts table failed.
    #[error(transparent)]
    Facts(#[from] FactsError),
    /// The finalization control table failed.
    #[error(transparent)]
    Finalization(#[from] FinalizationError),
    /// The silver table failed.
    #[error(transparent)]
    Silver(#[from] SilverError),
    /// The checkpoint failed, or another process planned first.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Another process holds the checkpoint, or may hold it now.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// Another table already goes by the target's (or silver's) name in a
    /// shared table.
    #[error(transparent)]
    Claim(Box<ClaimError>),
    /// Changes were purged before they were read.
    #[error(transparent)]
    DataLoss(#[from] DataLossError),
    /// A setting would let two writers both commit the same batch.
    #[error(
        "{setting} is set ({found_in}): it makes Delta commit to S3 by copy-then-delete, which two \
         writers can both pass, so a batch could be written twice. Unset it, and give S3 conditional \
         writes instead (storageOptions aws_conditional_put: etag)"
    )]
    UnsafeStorage {
        /// The setting.
        setting: &'static str,
        /// Where it was found.
        found_in: &'static str,
    },
    /// The table's pipeline panicked (a table of a source: the others go
    /// on, and this one retries on its own backoff).
    #[error(transparent)]
    Panicked(Box<super::table_panic::TablePanic>),
    /// A local location (a volume's directory) is not writable by this
    /// process: found before anything is read or written.
    #[error(transparent)]
    NotWritable(Box<crate::lake::local_access::NotWritable>),
    /// The manifest changed a field that names the stream's identity.
    #[error(
        "spec.{field} is {given:?} but checkpoint {checkpoint} was created for {recorded:?}; \
         the checkpoint's positions belong to that stream. To move a stream, start it anew with \
         a new appId (a fresh stream with a bootstrap), or give it a new checkpoint with \
         spec.adoptTarget (see docs/user-guide.md, \"Moving or rebuilding a stream\")"
    )]
    IdentityChanged {
        /// The checkpoint.
        checkpoint: String,
        /// The field, as the manifest names it below `spec.`.
        field: &'static str,
        /// What the checkpoint recorded.
        recorded: String,
        /// What the manifest says now.
        given: String,
    },
    /// The target holds this appId's commits that the checkpoint did not make.
    #[error(
        "target {target} holds commits of appId {app_id} written by {origin}, not by this \
         checkpoint; going on would skip real changes as already committed. Nothing was \
         written. Either give the stream a new appId (a fresh stream into the same table, with a \
         bootstrap), or{adopt} let this stream adopt the target with --adopt-target / \
         spec.adoptTarget: true on a new, empty checkpoint, which continues after the position the \
         target's newest commit recorded (see docs/user-guide.md, \"Moving or rebuilding a stream\")",
        adopt = if *adopt_refused { " (adopt works only on a new, empty checkpoint)" } else { "" }
    )]
    ForeignTarget {
        /// The stream's appId.
        app_id: String,
        /// The bronze table.
        target: String,
        /// Who wrote the commits, in words.
        origin: String,
        /// Whether adopt was asked for (and could not be done).
        adopt_refused: bool,
    },
    /// The target lacks commits the checkpoint made: restored from an
    /// older copy, rolled back or deleted. Going on would leave the batches
    /// in between missing while the facts table says they were written.
    #[error(
        "target {target} is missing commits checkpoint {checkpoint} made: the checkpoint's \
         newest bronze commit is {known}, but the table {found}. It was restored from an older \
         copy, rolled back or deleted, and the batches in between are gone from it. Nothing was \
         written. To recover, either re-snapshot into it (a new spec.appId: a fresh stream with a \
         bootstrap), or move this checkpoint aside and adopt the target with a new, empty \
         checkpoint and spec.adoptTarget: true, which re-reads every change after the target's \
         newest commit from CDC while its retention holds them (see docs/runbooks.md, \
         \"TargetBehindCheckpoint\")"
    )]
    TargetBehind {
        /// The bronze table.
        target: String,
        /// The checkpoint's identity.
        checkpoint: String,
        /// The commit the checkpoint recorded, in words.
        known: String,
        /// What the table holds instead, in words.
        found: String,
    },
    /// A captured column's type changed in a way the target cannot follow.
    #[error(transparent)]
    SchemaChangeRefused(Box<SchemaChangeRefused>),
    /// The capture instance read was disabled and the table has no other
    /// yet: a DBA renaming a captured column is between
    /// `sys.sp_cdc_disable_table` and `sys.sp_cdc_enable_table`. Retried,
    /// so the stream moves on once the new instance exists.
    #[error(
        "capture instance {capture_instance} was disabled and its table has no other capture \
         instance; waiting for one (sys.sp_cdc_enable_table). The stream then moves to it, and \
         spec.onDataLoss decides about the changes in between"
    )]
    InstanceDisabled {
        /// The instance read.
        capture_instance: CaptureInstance,
    },
    /// The capture instance `spec.source.captureInstance` pins is no
    /// longer enabled. Retried: enabled again under the same name, it is
    /// read on; a pinned stream never moves to another instance alone.
    #[error(
        "capture instance {capture_instance}, which spec.source.captureInstance pins, is no \
         longer enabled on its table (sys.sp_cdc_disable_table); waiting for it to be enabled \
         again under that name. {}",
        match others.as_slice() {
            [] => "The table has no other capture instance".to_string(),
            names => format!(
                "To read the table's {} instead, set spec.source.captureInstance to it, or \
                 remove the field to follow the newest instance; spec.onDataLoss decides about \
                 the changes in between",
                names.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
        }
    )]
    PinnedInstanceDisabled {
        /// The pinned instance.
        capture_instance: CaptureInstance,
        /// The table's capture instances now.
        others: Vec<CaptureInstance>,
    },
    /// A source run once (availableNow) found the source down on its one
    /// look, so this table was not run: one failed look, not one failed
    /// connection per table.
    #[error(
        "the source is down, so this table was not run (the next scheduled run tries again): {}",
        .0.message()
    )]
    SourceDown(super::source_health::SourceDown),
    /// Silver's key does not identify one row of the source table.
    #[error(transparent)]
    SilverKeyNotUnique(Box<SilverKeyNotUnique>),
    /// Bronze committed a batch or chunk whose commit cannot be found in
    /// its log, so silver cannot apply it; going on would skip it in silver.
    #[error(
        "target {target} holds {commit} (txn {txn_app_id} version {txn_version}) but its commit \
         cannot be read from its Delta log (it expired or was removed), so the stream cannot \
         check whose it is or apply it to silver; nothing more was written. Restore the log entry \
         from a backup, or rebuild: a new spec.appId (a fresh stream with a bootstrap) into new \
         tables"
    )]
    BronzeCommitMissing {
        /// The bronze table.
        target: String,
        /// The batch or snapshot chunk, in words.
        commit: String,
        /// The commit's `txn` app id.
        txn_app_id: String,
        /// The commit's `txn` version.
        txn_version: i64,
    },
    /// Bronze's commit of the batch being replayed is not one this
    /// checkpoint made for this range.
    #[error("{target}: {source}")]
    Resume {
        /// The bronze table.
        target: String,
        /// What does not match.
        source: ResumeError,
    },
    /// The checkpoint's next batch id does not fit a Delta `txn` version.
    #[error("checkpoint {checkpoint}: {source}")]
    BatchIdExhausted {
        /// The checkpoint.
        checkpoint: String,
        /// Why the id is out of range.
        source: BatchIdError,
    },
    /// Bronze's `txn` version for the appId is not a batch id.
    #[error("bronze txn of {app_id}: {source}")]
    BronzeTxnNotBatch {
        /// The stream's appId.
        app_id: String,
        /// Why the version is not a batch id.
        source: BatchIdError,
    },
    /// An adopted target lacks what seeding the checkpoint needs.
    #[error(
        "cannot adopt the target: {missing}; stream it into a new target with a new appId instead"
    )]
    CannotAdopt {
        /// What the target lacks, in words.
        missing: &'static str,
    },
    /// The checkpoint's planned snapshot and bronze's committed chunks
    /// describe different key ranges.
    #[error(
        "bronze table {target}: snapshot {snapshot}: {why}; move the checkpoint and target aside \
         to re-snapshot"
    )]
    SnapshotRangesMismatch {
        /// The bronze table.
        target: String,
        /// The snapshot's number.
        snapshot: u64,
        /// What does not match, in words.
        why: String,
    },
    /// A snapshot chunk is committed but its progress record is not.
    #[error(
        "bronze table {target}: snapshot chunk {chunk} is committed but its progress record \
         cannot be read; move the checkpoint and target aside to re-snapshot"
    )]
    SnapshotProgressUnreadable {
        /// The bronze table.
        target: String,
        /// The chunk's `txn` version.
        chunk: i64,
    },
    /// The snapshot's committed chunks were written by another checkpoint,
    /// or for another LSN: resuming after them would mix two snapshots.
    #[error(
        "bronze table {target}: snapshot {snapshot}'s chunks were written by checkpoint \
         {written_by} for LSN {written_for}, not by this one for LSN {planned}; nothing was \
         written. See docs/user-guide.md, \"Moving or rebuilding a stream\""
    )]
    SnapshotForeign {
        /// The bronze table.
        target: String,
        /// The snapshot's number.
        snapshot: u64,
        /// The checkpoint the chunks name, in words.
        written_by: String,
        /// The LSN the chunks were planned for, in words.
        written_for: String,
        /// The LSN this checkpoint planned.
        planned: Lsn,
    },
    /// Silver has no key: none in the manifest, and no index columns.
    #[error(
        "spec.silver: capture instance {instance} has no index columns (the table has no primary \
         key and CDC was enabled without @index_name); name the key in spec.silver.keys"
    )]
    SilverKeyMissing {
        /// The capture instance.
        instance: CaptureInstance,
    },
    /// A batch's parts did not all come back from the readers.
    #[error(
        "batch {batch_id}: {read} of its {parts} parts were read{none}",
        none = if *read == 0 { " (it was read in no part)" } else { "" }
    )]
    PartsUnread {
        /// The batch.
        batch_id: BatchId,
        /// How many parts came back.
        read: usize,
        /// How many parts the batch has.
        parts: usize,
    },
    /// A batch was written without its own facts row.
    #[error("batch {batch_id} has no facts row")]
    NoFactsRow {
        /// The batch.
        batch_id: BatchId,
    },
    /// A part was started with no reader session free (a bug).
    #[error("a part was started with every reader busy")]
    NoIdleReader,
    /// A read task panicked or was cancelled.
    #[error("a read task failed: {0}")]
    ReadTask(#[source] tokio::task::JoinError),
}

/// A captured column's type changed in a way that would cut, wrap or
/// drop values already in the target (SQL Server retypes the change
/// table's column, so every change row now arrives in the new type).
#[derive(Debug, thiserror::Error)]
#[error(
    "column {column} of {table} is now {source_type} in the change table, but {target} \
     holds it as {target_type}: {reason}. Nothing of the new type was written. Stream the \
     table into a new target (a new CdcStream with a new appId, target and silver \
     locations: its snapshot creates them with the new types), then retire this one; see \
     docs/runbooks.md, \"SchemaChangeRefused\""
)]
pub struct SchemaChangeRefused {
    /// The source table.
    pub table: String,
    /// The column.
    pub column: String,
    /// Its type in the change table now, as SQL Server names it.
    pub source_type: String,
    /// The bronze or silver table holding the column.
    pub target: String,
    /// The column's Delta type there.
    pub target_type: String,
    /// Why the change cannot be followed.
    pub reason: &'static str,
}

impl From<ClaimError> for EngineError {
    fn from(error: ClaimError) -> Self {
        EngineError::Claim(Box::new(error))
    }
}

impl From<PlanError> for EngineError {
    fn from(error: PlanError) -> Self {
        match error {
            PlanError::DataLoss(loss) => EngineError::DataLoss(loss),
            PlanError::LsnOverflow(lsn) => EngineError::Source(SourceError::LsnOverflow(lsn)),
        }
    }
}

impl EngineError {
    /// Whether the same work may succeed if retried after a pause: by the
    /// failing library's error type ([`crate::retry::classify`]), never by
    /// message. The stream's own refusals (identity, data loss, key,
    /// inconsistency) are never transient.
    pub fn is_transient(&self) -> bool {
        match self {
            EngineError::Source(e) => e.is_transient(),
            // The source stream that fed bronze failed: SQL Server's error,
            // else whatever typed cause it carries.
            EngineError::Bronze(BronzeError::Source(e)) => match e.downcast_ref::<SourceError>() {
                Some(source) => source.is_transient(),
                None => chain_transient(e.as_ref()).unwrap_or(false),
            },
            EngineError::Bronze(BronzeError::Delta { source, .. })
            | EngineError::Silver(SilverError::Delta { source, .. }) => delta_transient(source),
            // Shared by the writes of a group commit, hence `Arc`.
            EngineError::Facts(FactsError::Delta { source, .. })
            | EngineError::Finalization(FinalizationError::Delta { source, .. }) => {
                delta_transient(source)
            }
            EngineError::Checkpoint(CheckpointError::Store { source, .. }) => {
                store_transient(source)
            }
            EngineError::Lease(e) => e.is_transient(),
            EngineError::Claim(e) => e.is_transient(),
            EngineError::InstanceDisabled { .. } | EngineError::PinnedInstanceDisabled { .. } => {
                true
            }
            _ => false,
        }
    }

    /// Whether the error is the lake's object store failing (a 5xx, a
    /// timeout, a cut connection) on one of the stream's tables or its
    /// checkpoint: what may last for hours, and what
    /// `StoreOutage` times. A lost commit race is transient but is
    /// another writer's doing, not the store's.
    pub fn is_store_failure(&self) -> bool {
        fn failing(error: &deltalake::DeltaTableError) -> bool {
            use deltalake::DeltaTableError as E;
            use deltalake::kernel::transaction::TransactionError as T;
            match error {
                E::VersionAlreadyExists(_) => false,
                E::Transaction { source } => !matches!(
                    source,
                    T::VersionAlreadyExists(_) | T::CommitConflict(_) | T::MaxCommitAttempts(_)
                ),
                _ => true,
            }
        }
        self.is_transient()
            && match self {
                EngineError::Bronze(BronzeError::Delta { source, .. })
                | EngineError::Silver(SilverError::Delta { source, .. }) => failing(source),
                EngineError::Facts(FactsError::Delta { source, .. })
                | EngineError::Finalization(FinalizationError::Delta { source, .. }) => {
                    failing(source)
                }
                EngineError::Checkpoint(CheckpointError::Store { .. }) => true,
                _ => false,
            }
    }

    /// Whether the error is the whole source's (every table of a
    /// `CdcSource` meets it), not this table's: then the source's worker
    /// backs off once for all of its tables instead of each on its own.
    /// SQL Server's errors only, by type ([`SourceError::outage`]); a
    /// lake's error is always one table's (its own target and checkpoint).
    pub fn outage(&self) -> Option<crate::source::SourceOutage> {
        match self {
            EngineError::Source(e) => e.outage(),
            EngineError::SourceDown(down) => Some(down.outage),
            EngineError::Bronze(BronzeError::Source(e)) => e
                .downcast_ref::<SourceError>()
                .and_then(SourceError::outage),
            _ => None,
        }
    }
}

impl EngineError {
    /// The table property that made one of the stream's tables refuse to
    /// open, whichever table it was.
    pub fn unsafe_table_property(&self) -> Option<&UnsafeTableProperty> {
        match self {
            EngineError::Bronze(BronzeError::UnsafeProperty(refused))
            | EngineError::Facts(FactsError::UnsafeProperty(refused))
            | EngineError::Finalization(FinalizationError::UnsafeProperty(refused))
            | EngineError::Silver(SilverError::UnsafeProperty(refused)) => Some(refused),
            _ => None,
        }
    }

    /// A short, stable name of the error's kind, for metric labels.
    pub fn kind(&self) -> &'static str {
        if self.unsafe_table_property().is_some() {
            return "unsafe_table_property";
        }
        match self {
            EngineError::Credentials(_) => "credentials",
            EngineError::Source(_)
            | EngineError::InstanceDisabled { .. }
            | EngineError::PinnedInstanceDisabled { .. }
            | EngineError::SourceDown(_) => "source",
            EngineError::Bronze(_) => "bronze",
            EngineError::Facts(_) => "facts",
            EngineError::Finalization(_) => "finalization",
            EngineError::Silver(_) => "silver",
            EngineError::Checkpoint(_) => "checkpoint",
            EngineError::Lease(_) => "lease",
            EngineError::Claim(_) => "name_claimed",
            EngineError::DataLoss(_) => "data_loss",
            EngineError::UnsafeStorage { .. } => "unsafe_storage",
            EngineError::NotWritable(_) => "not_writable",
            EngineError::Panicked(_) => "panic",
            EngineError::IdentityChanged { .. } | EngineError::ForeignTarget { .. } => "identity",
            EngineError::TargetBehind { .. } => "target_behind",
            EngineError::SilverKeyNotUnique(_) => "silver_key",
            EngineError::SchemaChangeRefused(_) => "schema_change",
            EngineError::BatchIdExhausted { .. } => "batch_id",
            EngineError::SilverKeyMissing { .. } => "silver_key",
            EngineError::PartsUnread { .. }
            | EngineError::NoFactsRow { .. }
            | EngineError::NoIdleReader
            | EngineError::ReadTask(_) => "internal",
            EngineError::Resume { .. }
            | EngineError::BronzeTxnNotBatch { .. }
            | EngineError::CannotAdopt { .. }
            | EngineError::SnapshotRangesMismatch { .. }
            | EngineError::SnapshotProgressUnreadable { .. }
            | EngineError::SnapshotForeign { .. }
            | EngineError::BronzeCommitMissing { .. } => "inconsistent",
        }
    }
}
