//! The checkpoint log: `offsets/<batch_id>` (the plan, written before the
//! source is read) and `commits/<batch_id>` (written after the facts row).
//!
//! Plans are written create-only, so of two processes on one checkpoint only
//! one can plan a given batch; the other gets [`CheckpointError::AlreadyPlanned`]
//! and must stop without writing anything.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    self, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::records::LsnRange;
use super::storage::{StorageError, StorageLocation, StorageOptions};
use crate::domain::facts::EventDetail;
use crate::domain::{BatchId, BatchIdError, CaptureInstance, FactEvent, Lsn};

const OFFSETS: &str = "offsets";
const COMMITS: &str = "commits";
const SNAPSHOTS: &str = "snapshots";
const IDENTITY: &str = "identity";
const POINTER: &str = "latest";

/// Entries of `offsets/` and `commits/` kept behind the newest: enough for
/// anyone reading the log by hand, while a step's cost stays the same
/// however old the stream is.
pub const KEEP_BATCHES: u64 = 100;

/// Old entries are deleted once every this many batches.
const PRUNE_EVERY: u64 = 100;

/// Where the log stood when it was last written. A step reads it and walks
/// forward while newer entries exist (a crash can leave it one behind), so
/// it never lists folders that grow with the stream's age.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Pointer {
    #[serde(default)]
    planned: Option<BatchId>,
    #[serde(default)]
    committed: Option<BatchId>,
    #[serde(default)]
    snapshot: Option<u64>,
}

/// What an identity's `adopted` list holds for a target whose commits
/// recorded no checkpoint.
pub const ADOPTED_WITHOUT_IDENTITY: &str = "(no identity)";

/// Who a checkpoint is. Written once when the checkpoint is first used,
/// and recorded in every commit the stream makes, so a target can tell its
/// own commits from those of another (replaced, emptied or restored)
/// checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointIdentity {
    /// A random id.
    pub id: String,
    /// When the checkpoint got it (UTC).
    pub created_at: DateTime<Utc>,
    /// What the stream was: these may not change while the checkpoint is
    /// used.
    pub stream: StreamIdentity,
    /// Checkpoints whose commits in the target this one took over
    /// (`adoptTarget`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopted: Vec<String>,
    /// Given to a checkpoint that held batches before checkpoints had an
    /// identity: the target's commits without one are its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legacy: bool,
}

impl CheckpointIdentity {
    /// A new identity for `stream`.
    pub fn new(stream: StreamIdentity, legacy: bool) -> Self {
        CheckpointIdentity {
            id: uuid::Uuid::new_v4().to_string(),
            created_at: Utc::now(),
            stream,
            adopted: Vec::new(),
            legacy,
        }
    }

    /// Whether a commit recorded as written by `origin` (`None`: by a
    /// version that recorded no checkpoint) is this checkpoint's.
    pub fn owns(&self, origin: Option<&str>) -> bool {
        match origin {
            Some(id) => id == self.id || self.adopted.iter().any(|a| a == id),
            // Written before checkpoints had identities: by this checkpoint
            // when it is that old, or by one this one adopted.
            None => self.legacy || self.adopted.iter().any(|a| a == ADOPTED_WITHOUT_IDENTITY),
        }
    }
}

/// The fields that make a stream the stream it is: its writer id, where it
/// writes, and what it reads. Changing one under the same checkpoint would
/// record one table's positions for another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamIdentity {
    /// `spec.appId`.
    pub app_id: String,
    /// `spec.target.name`.
    pub target_name: String,
    /// `spec.target.location`.
    pub target_location: String,
    /// `spec.facts.location`.
    pub facts_location: String,
    /// `spec.source.host`.
    pub source_host: String,
    /// `spec.source.database`.
    pub source_database: String,
    /// `spec.source.table`.
    pub source_table: String,
}

impl StreamIdentity {
    /// The manifest field of each part, with the recorded and the given
    /// value, where they differ.
    pub fn changes(&self, now: &StreamIdentity) -> Vec<(&'static str, String, String)> {
        [
            ("appId", &self.app_id, &now.app_id),
            ("target.name", &self.target_name, &now.target_name),
            (
                "target.location",
                &self.target_location,
                &now.target_location,
            ),
            ("facts.location", &self.facts_location, &now.facts_location),
            ("source.host", &self.source_host, &now.source_host),
            (
                "source.database",
                &self.source_database,
                &now.source_database,
            ),
            ("source.table", &self.source_table, &now.source_table),
        ]
        .into_iter()
        .filter(|(_, was, is)| was != is)
        .map(|(field, was, is)| (field, was.clone(), is.clone()))
        .collect()
    }
}

/// A snapshot's fixed facts, written before its first chunk is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedSnapshot {
    /// Which snapshot of the stream (0 = the bootstrap).
    pub snapshot: u64,
    /// The LSN changes are streamed after once the snapshot is done.
    pub lsn: Lsn,
    /// The capture instance it belongs to.
    pub capture_instance: CaptureInstance,
    /// Commit time of `lsn` (UTC).
    #[serde(default)]
    pub commit_ts: Option<DateTime<Utc>>,
    /// When the snapshot started (UTC).
    pub started_at: DateTime<Utc>,
    /// On a re-snapshot: commit time of the last change read before the
    /// purged ones (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_from_ts: Option<DateTime<Utc>>,
    /// On a re-snapshot: commit time of the oldest change CDC still kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_to_ts: Option<DateTime<Utc>>,
    /// With `spec.source.readers` above 1: the keys that split the table
    /// into ranges read at once, ascending, one JSON value per key column
    /// (see `source::snapshot::key_to_json`). Range 0 holds the keys up to
    /// the first bound, range `i` those after bound `i - 1` up to bound
    /// `i`, the last those after the last bound. Empty: one range, as in
    /// plans written before ranges existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_bounds: Vec<Vec<serde_json::Value>>,
    /// On a re-snapshot that moved to a newer capture instance (the old
    /// one disabled, or its changes purged): the move, which the snapshot's
    /// facts row records in its `detail`, since no batch reads across it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switched: Option<crate::domain::facts::detail::SwitchDetail>,
    /// The capture instance's columns (name and source `column_id`) when
    /// the snapshot was planned: what a later move away from that
    /// instance compares against when no batch was planned after the
    /// snapshot (a rename is told by its unchanged `column_id`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<PlannedColumn>,
}

/// The marker that a snapshot is complete (its facts row is written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedSnapshot {
    /// Which snapshot.
    pub snapshot: u64,
    /// Rows it copied.
    pub rows: u64,
    /// When it finished (UTC).
    pub completed_at: DateTime<Utc>,
    /// The stream's newest bronze commit when it finished (see
    /// [`BronzeMark`]); `None` in markers of versions that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bronze_mark: Option<BronzeMark>,
}

/// The newest bronze commit a checkpoint knows its stream made: which
/// `txn` it carried and the table version it made. Every marker carries
/// the newest one forward, so a run can tell a target that lost commits
/// (restored from an older copy, rolled back, deleted) from one that holds
/// them, and find that commit without searching the table's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BronzeMark {
    /// The commit's `txn` application id (a batch's or a snapshot's chunks').
    pub txn_app_id: String,
    /// The commit's `txn` version (a batch id or a chunk number).
    pub txn_version: i64,
    /// The bronze table version the commit made.
    pub table_version: i64,
}

/// The range one micro-batch reads, fixed before reading so a replay reads
/// exactly the same changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedBatch {
    /// The batch.
    pub batch_id: BatchId,
    /// First LSN to read (inclusive).
    pub start_lsn: Lsn,
    /// Last LSN to read (inclusive).
    pub end_lsn: Lsn,
    /// The capture instance read.
    pub capture_instance: CaptureInstance,
    /// Commit time of `end_lsn` (UTC), kept because cleanup later deletes
    /// the mapping it came from.
    #[serde(default)]
    pub end_commit_ts: Option<DateTime<Utc>>,
    /// When the plan was made (UTC).
    pub planned_at: DateTime<Utc>,
    /// The source events the batch reads past, decided with the plan so a
    /// replay records exactly the same ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<PlannedEvent>,
    /// With `spec.source.readers` above 1: the parts read at once, in LSN
    /// order, each ending at a commit LSN, together covering `start_lsn`
    /// to `end_lsn` without gap or overlap. Empty: the range is read
    /// whole, as in plans written before parts existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<LsnRange>,
    /// The captured columns of `capture_instance` with their source
    /// `column_id`s. A later run needs them when that instance was
    /// disabled meanwhile (its `cdc.captured_columns` rows went with it):
    /// the new instance's columns are matched by `column_id`, so a column
    /// renamed in between is recognised. Empty in plans written before
    /// they were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<PlannedColumn>,
}

/// A captured column by name and by the source table's `column_id`, which
/// `sp_rename` keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedColumn {
    /// Its name in the instance.
    pub name: String,
    /// `cdc.captured_columns.column_id`.
    pub column_id: i32,
}

impl PlannedBatch {
    /// The ranges to read: the recorded parts, or the whole range.
    pub fn read_ranges(&self) -> Vec<LsnRange> {
        if self.parts.is_empty() {
            vec![LsnRange {
                start: self.start_lsn,
                end: self.end_lsn,
            }]
        } else {
            self.parts.clone()
        }
    }
}

/// A source event a batch records as an event row of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedEvent {
    /// What happened (`schema_change`, `capture_instance_switched`,
    /// `data_skipped`; never a snapshot event).
    pub event: FactEvent,
    /// The event's LSN.
    pub lsn: Lsn,
    /// Its commit time (UTC), if known.
    #[serde(default)]
    pub commit_ts: Option<DateTime<Utc>>,
    /// The capture instance it concerns.
    pub capture_instance: CaptureInstance,
    /// What happened.
    pub detail: EventDetail,
    /// Start of the commit-time range lost (`data_skipped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_from_ts: Option<DateTime<Utc>>,
    /// End of that range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_to_ts: Option<DateTime<Utc>>,
}

/// The marker that a batch is fully done (bronze and facts written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedBatch {
    /// The batch.
    pub batch_id: BatchId,
    /// The bronze table version that holds it; `None` when it had no rows or
    /// an earlier run had already committed it.
    pub bronze_version: Option<i64>,
    /// When the marker was written (UTC).
    pub committed_at: DateTime<Utc>,
    /// The stream's newest bronze commit up to this batch (this batch's
    /// own, or an earlier one carried forward); `None` in markers of
    /// versions that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bronze_mark: Option<BronzeMark>,
}

/// Where a checkpoint stands: what the engine resumes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckpointState {
    /// The newest plan, if any.
    pub latest_planned: Option<PlannedBatch>,
    /// The newest batch with a commit marker, if any.
    pub latest_committed: Option<BatchId>,
}

impl CheckpointState {
    /// A plan without its commit marker: the previous run stopped mid-batch
    /// and this plan must be replayed as it is.
    pub fn pending(&self) -> Option<&PlannedBatch> {
        self.latest_planned
            .as_ref()
            .filter(|plan| self.latest_committed < Some(plan.batch_id))
    }

    /// The id of the next batch to plan.
    pub fn next_batch_id(&self) -> Result<BatchId, BatchIdError> {
        match &self.latest_planned {
            Some(plan) => plan.batch_id.next(),
            None => Ok(BatchId::FIRST),
        }
    }
}

/// Why the checkpoint could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Another process planned this batch first: two writers share the checkpoint.
    #[error(
        "checkpoint {location}: batch {batch_id} is already planned by another process; \
         only one stream may use a checkpoint (stop the other one)"
    )]
    AlreadyPlanned {
        /// The checkpoint.
        location: String,
        /// The batch both tried to plan.
        batch_id: BatchId,
    },
    /// Another process planned this snapshot first.
    #[error(
        "checkpoint {location}: snapshot {snapshot} is already planned by another process; \
         only one stream may use a checkpoint (stop the other one)"
    )]
    SnapshotAlreadyPlanned {
        /// The checkpoint.
        location: String,
        /// The snapshot both tried to plan.
        snapshot: u64,
    },
    /// A file exists but is not a valid plan or marker.
    #[error("checkpoint {location}: {file} is not valid: {source}")]
    Corrupt {
        /// The checkpoint.
        location: String,
        /// The file, relative to the checkpoint.
        file: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The store failed.
    #[error("checkpoint {location}: {source}")]
    Store {
        /// The checkpoint.
        location: String,
        /// object_store's error.
        source: object_store::Error,
    },
    /// The store accepts a second create-only write of one object.
    #[error(
        "checkpoint {location}: the store accepted a second create-only write of one object, so \
         it cannot fence two writers or tell a replay from a new batch; use a store that honours \
         conditional writes (for S3: set storageOptions aws_conditional_put: etag, on a service \
         that implements If-None-Match)"
    )]
    CreateOnlyIgnored {
        /// The checkpoint.
        location: String,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Open(#[from] StorageError),
}

/// The checkpoint directory of one stream.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    store: Arc<dyn ObjectStore>,
    location: String,
    /// The pointer as this process last read or wrote it.
    pointer: Arc<std::sync::Mutex<Option<Pointer>>>,
}

impl Checkpoint {
    /// Opens the checkpoint at `location` (created on first write).
    pub fn open(
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<Self, CheckpointError> {
        Ok(Checkpoint {
            store: location.object_store(options)?,
            location: location.to_string(),
            pointer: Arc::default(),
        })
    }

    /// The checkpoint's identity, once it has one.
    pub async fn identity(&self) -> Result<Option<CheckpointIdentity>, CheckpointError> {
        self.read(&Path::from(IDENTITY)).await
    }

    /// Writes `identity` unless the checkpoint has one; returns the one it
    /// has.
    pub async fn create_identity(
        &self,
        identity: &CheckpointIdentity,
    ) -> Result<CheckpointIdentity, CheckpointError> {
        let path = Path::from(IDENTITY);
        if self.put_new(&path, identity).await? {
            return Ok(identity.clone());
        }
        self.read(&path)
            .await?
            .ok_or_else(|| CheckpointError::Corrupt {
                location: self.location.clone(),
                file: IDENTITY.to_string(),
                source: serde::de::Error::custom("written by another process, then gone"),
            })
    }

    /// Whether the checkpoint holds no plan and no snapshot: a new one, or
    /// one whose files were removed.
    pub async fn is_empty(&self) -> Result<bool, CheckpointError> {
        Ok(self.newest::<BatchId>(OFFSETS).await?.is_none()
            && self.newest::<u64>(SNAPSHOTS).await?.is_none())
    }

    /// Checks that the store refuses a second create-only write of one
    /// object, which every fence of the checkpoint rests on. Some
    /// S3-compatible stores accept `If-None-Match` and overwrite anyway.
    pub async fn probe_create_only(&self) -> Result<(), CheckpointError> {
        let path = Path::from(format!("probes/{}", uuid::Uuid::new_v4()));
        let first = self.put_new(&path, &"first probe").await?;
        let second = self.put_new(&path, &"second probe").await;
        if let Err(error) = self.store.delete(&path).await {
            tracing::debug!(%error, "could not delete the checkpoint probe object");
        }
        match (first, second?) {
            (true, false) => Ok(()),
            _ => Err(CheckpointError::CreateOnlyIgnored {
                location: self.location.clone(),
            }),
        }
    }

    /// Plans a batch: writes `offsets/<batch_id>` only if nobody has.
    pub async fn plan(&self, plan: &PlannedBatch) -> Result<(), CheckpointError> {
        let path = file(OFFSETS, plan.batch_id);
        match self.put_new(&path, plan).await? {
            true => {
                self.advance(|p| p.planned = p.planned.max(Some(plan.batch_id)))
                    .await
            }
            false => Err(CheckpointError::AlreadyPlanned {
                location: self.location.clone(),
                batch_id: plan.batch_id,
            }),
        }
    }

    /// Marks a batch done. Idempotent: a marker already there (a replay that
    /// got this far before) is kept and `false` returned.
    pub async fn commit(&self, commit: &CommittedBatch) -> Result<bool, CheckpointError> {
        let made = self
            .put_new(&file(COMMITS, commit.batch_id), commit)
            .await?;
        self.advance(|p| p.committed = p.committed.max(Some(commit.batch_id)))
            .await?;
        if made && commit.batch_id.get().is_multiple_of(PRUNE_EVERY) {
            let newest = commit.batch_id.get();
            let below = newest.saturating_sub(KEEP_BATCHES);
            self.delete_batches(below.saturating_sub(PRUNE_EVERY)..below)
                .await;
        }
        Ok(made)
    }

    /// Reads the plan of one batch.
    pub async fn planned(
        &self,
        batch_id: BatchId,
    ) -> Result<Option<PlannedBatch>, CheckpointError> {
        self.read(&file(OFFSETS, batch_id)).await
    }

    /// Reads the commit marker of one batch.
    pub async fn committed(
        &self,
        batch_id: BatchId,
    ) -> Result<Option<CommittedBatch>, CheckpointError> {
        self.read(&file(COMMITS, batch_id)).await
    }

    /// Plans a snapshot: writes `snapshots/<n>` only if nobody has.
    pub async fn plan_snapshot(&self, plan: &PlannedSnapshot) -> Result<(), CheckpointError> {
        let path = Path::from(format!("{SNAPSHOTS}/{}", plan.snapshot));
        match self.put_new(&path, plan).await? {
            true => {
                self.advance(|p| p.snapshot = p.snapshot.max(Some(plan.snapshot)))
                    .await
            }
            false => Err(CheckpointError::SnapshotAlreadyPlanned {
                location: self.location.clone(),
                snapshot: plan.snapshot,
            }),
        }
    }

    /// The plan of snapshot `n`.
    pub async fn planned_snapshot(
        &self,
        n: u64,
    ) -> Result<Option<PlannedSnapshot>, CheckpointError> {
        self.read(&Path::from(format!("{SNAPSHOTS}/{n}"))).await
    }

    /// Marks snapshot `n` complete (idempotent).
    pub async fn complete_snapshot(
        &self,
        done: &CompletedSnapshot,
    ) -> Result<bool, CheckpointError> {
        self.put_new(
            &Path::from(format!("{SNAPSHOTS}/{}.done", done.snapshot)),
            done,
        )
        .await
    }

    /// The completion marker of snapshot `n`.
    pub async fn completed_snapshot(
        &self,
        n: u64,
    ) -> Result<Option<CompletedSnapshot>, CheckpointError> {
        self.read(&Path::from(format!("{SNAPSHOTS}/{n}.done")))
            .await
    }

    /// The number of the newest planned snapshot, if any.
    pub async fn latest_snapshot(&self) -> Result<Option<u64>, CheckpointError> {
        Ok(self.current().await?.snapshot)
    }

    /// The newest plan and the newest commit marker.
    pub async fn state(&self) -> Result<CheckpointState, CheckpointError> {
        let pointer = self.current().await?;
        let latest_planned = match pointer.planned {
            Some(id) => self.planned(id).await?,
            None => None,
        };
        Ok(CheckpointState {
            latest_planned,
            latest_committed: pointer.committed,
        })
    }

    /// Where the log stands: the pointer (or, the first time on a
    /// checkpoint without one, a listing), walked forward over entries
    /// written after it.
    async fn current(&self) -> Result<Pointer, CheckpointError> {
        let read = self.read::<Pointer>(&Path::from(POINTER)).await?;
        // A pointer whose plan is gone was written long ago by a stalled
        // process and its entries since pruned: list instead.
        let usable = match read.and_then(|p| p.planned) {
            Some(id) => self.exists(&file(OFFSETS, id)).await?,
            None => read.is_some(),
        };
        let start = match read {
            Some(pointer) if usable => pointer,
            _ => Pointer {
                planned: self.newest(OFFSETS).await?,
                committed: self.newest(COMMITS).await?,
                snapshot: self.newest(SNAPSHOTS).await?,
            },
        };
        let mut now = start;
        while let Some(next) = following(now.planned)
            && self.exists(&file(OFFSETS, next)).await?
        {
            now.planned = Some(next);
        }
        while let Some(next) = following(now.committed)
            && self.exists(&file(COMMITS, next)).await?
        {
            now.committed = Some(next);
        }
        while let Some(next) = now.snapshot.map_or(Some(0), |n| n.checked_add(1))
            && self
                .exists(&Path::from(format!("{SNAPSHOTS}/{next}")))
                .await?
        {
            now.snapshot = Some(next);
        }
        *self.cache() = Some(now);
        if now != start || read.is_none() || !usable {
            self.write_pointer(&now).await?;
        }
        Ok(now)
    }

    /// Moves the pointer after a write.
    async fn advance(&self, change: impl FnOnce(&mut Pointer)) -> Result<(), CheckpointError> {
        let cached = *self.cache();
        let mut pointer = match cached {
            Some(pointer) => pointer,
            None => self.current().await?,
        };
        change(&mut pointer);
        *self.cache() = Some(pointer);
        self.write_pointer(&pointer).await
    }

    async fn write_pointer(&self, pointer: &Pointer) -> Result<(), CheckpointError> {
        let path = Path::from(POINTER);
        let body = serde_json::to_vec(pointer).map_err(|source| self.corrupt(&path, source))?;
        self.store
            .put(&path, PutPayload::from(body))
            .await
            .map(|_| ())
            .map_err(|source| self.store_error(source))
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Option<Pointer>> {
        self.pointer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn exists(&self, path: &Path) -> Result<bool, CheckpointError> {
        match self.store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(source) => Err(self.store_error(source)),
        }
    }

    /// Deletes the plans and markers of the batches in `ids` (missing ones
    /// are fine). Failures are logged: pruning is housekeeping, the stream
    /// goes on.
    async fn delete_batches(&self, ids: std::ops::Range<u64>) {
        let paths: Vec<Path> = ids
            .flat_map(|id| {
                [OFFSETS, COMMITS]
                    .into_iter()
                    .map(move |folder| Path::from(format!("{folder}/{id}")))
            })
            .collect();
        let deleted = self
            .store
            .delete_stream(futures::stream::iter(paths.into_iter().map(Ok)).boxed())
            .filter_map(|result| async move {
                match result {
                    Err(object_store::Error::NotFound { .. }) | Ok(_) => None,
                    Err(error) => Some(error),
                }
            })
            .collect::<Vec<_>>()
            .await;
        if let Some(error) = deleted.first() {
            tracing::warn!(checkpoint = %self.location, %error, "could not delete old checkpoint entries");
        }
    }

    /// Deletes every plan and marker older than the newest `keep` batches,
    /// however many there are (a checkpoint from before pruning existed);
    /// returns how many objects went.
    pub async fn prune(&self, keep: u64) -> Result<u64, CheckpointError> {
        let Some(newest) = self.current().await?.committed else {
            return Ok(0);
        };
        let below = newest.get().saturating_add(1).saturating_sub(keep);
        let mut old = Vec::new();
        for folder in [OFFSETS, COMMITS] {
            let entries: Vec<_> = self
                .store
                .list(Some(&Path::from(folder)))
                .try_collect()
                .await
                .map_err(|source| self.store_error(source))?;
            old.extend(entries.into_iter().filter(|meta| {
                meta.location
                    .filename()
                    .and_then(|name| name.parse::<u64>().ok())
                    .is_some_and(|id| id < below)
            }));
        }
        let count = u64::try_from(old.len()).unwrap_or(u64::MAX);
        let locations =
            futures::stream::iter(old.into_iter().map(|meta| Ok(meta.location))).boxed();
        let results: Vec<_> = self.store.delete_stream(locations).collect().await;
        for result in results {
            match result {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => return Err(self.store_error(source)),
            }
        }
        Ok(count)
    }

    /// The greatest number among the file names in `folder` (files whose
    /// name is not a number, such as `0.done`, are not counted).
    async fn newest<T: std::str::FromStr + Ord>(
        &self,
        folder: &str,
    ) -> Result<Option<T>, CheckpointError> {
        let prefix = Path::from(folder);
        let entries: Vec<_> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|source| self.store_error(source))?;
        Ok(entries
            .iter()
            .filter_map(|meta| meta.location.filename()?.parse::<T>().ok())
            .max())
    }

    /// Writes `value` at `path` only if nothing is there: `true` when this
    /// write made the object. A create refused although the object holds
    /// exactly our bytes was our own write whose answer got lost (the
    /// client retried a put that had succeeded), so it counts as made.
    async fn put_new<T: Serialize>(&self, path: &Path, value: &T) -> Result<bool, CheckpointError> {
        let body = serde_json::to_vec_pretty(value).map_err(|source| self.corrupt(path, source))?;
        let options = PutOptions::from(PutMode::Create);
        match self
            .store
            .put_opts(path, PutPayload::from(body.clone()), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => {
                let found = self
                    .store
                    .get(path)
                    .await
                    .map_err(|e| self.store_error(e))?;
                let bytes = found.bytes().await.map_err(|e| self.store_error(e))?;
                Ok(bytes.as_ref() == body.as_slice())
            }
            Err(source) => Err(self.store_error(source)),
        }
    }

    async fn read<T: for<'de> Deserialize<'de>>(
        &self,
        path: &Path,
    ) -> Result<Option<T>, CheckpointError> {
        let bytes = match self.store.get(path).await {
            Ok(found) => found.bytes().await.map_err(|e| self.store_error(e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(source) => return Err(self.store_error(source)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| self.corrupt(path, source))
    }

    fn store_error(&self, source: object_store::Error) -> CheckpointError {
        CheckpointError::Store {
            location: self.location.clone(),
            source,
        }
    }

    fn corrupt(&self, path: &Path, source: serde_json::Error) -> CheckpointError {
        CheckpointError::Corrupt {
            location: self.location.clone(),
            file: path.to_string(),
            source,
        }
    }
}

/// The batch after `id` (the first when there is none yet).
fn following(id: Option<BatchId>) -> Option<BatchId> {
    match id {
        Some(id) => id.next().ok(),
        None => Some(BatchId::FIRST),
    }
}

fn file(folder: &str, batch_id: BatchId) -> Path {
    Path::from(format!("{folder}/{batch_id}"))
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;

#[cfg(all(test, feature = "failpoints"))]
mod probe_tests {
    use std::sync::Arc;

    use deltalake::logstore::object_store::memory::InMemory;

    use super::*;
    use crate::lake::faults::{Call, Fault, FaultPlan, FaultyStore, Rule, install, remove};

    fn checkpoint(prefix: &str) -> Checkpoint {
        let inner =
            deltalake::logstore::object_store::prefix::PrefixStore::new(InMemory::new(), prefix);
        Checkpoint {
            store: Arc::new(FaultyStore::new(
                Arc::new(inner),
                format!("memory:///{prefix}/"),
            )),
            location: format!("memory:///{prefix}/"),
            pointer: Arc::default(),
        }
    }

    #[tokio::test]
    async fn a_plan_whose_create_succeeded_behind_an_error_is_ours() {
        let plan = FaultPlan::new(&url::Url::parse("memory:///ambiguous/").unwrap());
        plan.add(Rule {
            path: "offsets/".into(),
            calls: vec![Call::Put],
            fault: Fault::RetriedAfterSuccess,
            odds: 1.0,
            limit: Some(1),
            after: 0,
        });
        install(plan.clone());
        let checkpoint = checkpoint("ambiguous");
        let planned = PlannedBatch {
            batch_id: crate::domain::BatchId::FIRST,
            start_lsn: crate::domain::Lsn::ZERO,
            end_lsn: crate::domain::Lsn::MAX,
            capture_instance: crate::domain::CaptureInstance::new("dbo_orders").unwrap(),
            end_commit_ts: None,
            planned_at: Utc::now(),
            events: Vec::new(),
            parts: Vec::new(),
            columns: Vec::new(),
        };
        let outcome = checkpoint.plan(&planned).await;
        remove(&plan);
        assert_eq!(plan.injected(), 1);
        outcome.expect("our own plan is not another process's");
        // Another plan of the batch is still refused.
        let mut other = planned.clone();
        other.planned_at += chrono::Duration::seconds(1);
        assert!(matches!(
            checkpoint.plan(&other).await,
            Err(CheckpointError::AlreadyPlanned { .. })
        ));
    }

    #[tokio::test]
    async fn a_store_that_honours_create_only_passes_the_probe() {
        checkpoint("honest").probe_create_only().await.unwrap();
    }

    #[tokio::test]
    async fn a_store_that_ignores_create_only_is_refused() {
        let plan = FaultPlan::new(&url::Url::parse("memory:///liar/").unwrap());
        plan.add(Rule {
            path: String::new(),
            calls: vec![Call::Put],
            fault: Fault::IgnoreConditions,
            odds: 1.0,
            limit: None,
            after: 0,
        });
        install(plan.clone());
        let refused = checkpoint("liar").probe_create_only().await;
        remove(&plan);
        assert!(
            matches!(refused, Err(CheckpointError::CreateOnlyIgnored { .. })),
            "{refused:?}"
        );
    }
}
