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
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::storage::{StorageError, StorageLocation, StorageOptions};
use crate::domain::facts::EventDetail;
use crate::domain::{BatchId, BatchIdError, CaptureInstance, FactEvent, Lsn};

const OFFSETS: &str = "offsets";
const COMMITS: &str = "commits";
const SNAPSHOTS: &str = "snapshots";
const IDENTITY: &str = "identity";

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
        Ok(self.latest(OFFSETS).await?.is_none() && self.latest_snapshot().await?.is_none())
    }

    /// Checks that the store refuses a second create-only write of one
    /// object, which every fence of the checkpoint rests on. Some
    /// S3-compatible stores accept `If-None-Match` and overwrite anyway.
    pub async fn probe_create_only(&self) -> Result<(), CheckpointError> {
        let path = Path::from(format!("probes/{}", uuid::Uuid::new_v4()));
        let first = self.put_new(&path, &"probe").await?;
        let second = self.put_new(&path, &"probe").await;
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
            true => Ok(()),
            false => Err(CheckpointError::AlreadyPlanned {
                location: self.location.clone(),
                batch_id: plan.batch_id,
            }),
        }
    }

    /// Marks a batch done. Idempotent: a marker already there (a replay that
    /// got this far before) is kept and `false` returned.
    pub async fn commit(&self, commit: &CommittedBatch) -> Result<bool, CheckpointError> {
        self.put_new(&file(COMMITS, commit.batch_id), commit).await
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
            true => Ok(()),
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
        self.newest(SNAPSHOTS).await
    }

    /// The newest plan and the newest commit marker.
    pub async fn state(&self) -> Result<CheckpointState, CheckpointError> {
        let latest_planned = match self.latest(OFFSETS).await? {
            Some(id) => self.planned(id).await?,
            None => None,
        };
        Ok(CheckpointState {
            latest_planned,
            latest_committed: self.latest(COMMITS).await?,
        })
    }

    async fn latest(&self, folder: &str) -> Result<Option<BatchId>, CheckpointError> {
        self.newest(folder).await
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

    async fn put_new<T: Serialize>(&self, path: &Path, value: &T) -> Result<bool, CheckpointError> {
        let body = serde_json::to_vec_pretty(value).map_err(|source| self.corrupt(path, source))?;
        let options = PutOptions::from(PutMode::Create);
        match self
            .store
            .put_opts(path, PutPayload::from(body), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
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
        }
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
