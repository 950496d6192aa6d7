//! Before a run writes anything, the checkpoint and the target must belong
//! together. A checkpoint has an identity (`lake::checkpoint`), recorded in
//! every commit; a target holding this appId's commits from another
//! checkpoint (a replaced, emptied or restored one) would make the run skip
//! real changes as "already committed" and rebuild facts from old commits.
//! Such a run refuses, naming the two ways out: a new appId (a fresh stream
//! with a bootstrap), or adopting the target (`adoptTarget`), which seeds a
//! new checkpoint at the position the target's newest commit recorded.
//!
//! The other way round, a target that lost commits its checkpoint made
//! (restored from an older copy, rolled back with `RESTORE`, deleted) is
//! refused too: the checkpoint's markers carry its newest bronze commit
//! ([`BronzeMark`]), and the target must still hold it.
//!
//! Nothing here depends on how many versions the target has: commits the
//! checkpoint knows are looked for where it recorded them, and the only
//! ones searched for are the target's newest.

use chrono::Utc;

use super::error::EngineError;
use crate::domain::BatchId;
use crate::lake::bronze::BronzeTable;
use crate::lake::checkpoint::{
    ADOPTED_WITHOUT_IDENTITY, BronzeMark, Checkpoint, CheckpointIdentity, PlannedBatch,
    StreamIdentity,
};
use crate::lake::records::{BatchRecord, ChunkRecord, CommitOrigin};
use crate::lake::txn::Txn;
use crate::spec::StreamConfig;

/// What the target holds of a stream's appId.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetMarks {
    /// The newest micro-batch, and the checkpoint its commit records
    /// (`None`: a commit of a version that recorded none).
    pub batch: Option<(BatchId, Option<String>)>,
    /// The bootstrap snapshot's newest chunk's checkpoint, when there is one.
    pub bootstrap: Option<Option<String>>,
}

/// Whether a run may go on with the target as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Everything the target holds of the appId is this checkpoint's.
    Ours,
    /// Commits of another checkpoint (`None`: of a checkpoint without an
    /// identity, so from before this one existed).
    Foreign {
        /// The checkpoint the commits record.
        origin: Option<String>,
    },
    /// The target holds batches this checkpoint never planned: it was
    /// restored from an older copy, or another checkpoint with this
    /// identity went on.
    Behind {
        /// The newest batch in the target.
        target: BatchId,
        /// The newest batch the checkpoint planned.
        checkpoint: Option<BatchId>,
    },
}

/// Judges the target against the checkpoint `identity`, whose newest plan
/// is `planned`.
pub fn claim(
    identity: &CheckpointIdentity,
    target: &TargetMarks,
    planned: Option<BatchId>,
) -> Claim {
    if let Some((batch, origin)) = &target.batch {
        if !identity.owns(origin.as_deref()) {
            return Claim::Foreign {
                origin: origin.clone(),
            };
        }
        if planned < Some(*batch) {
            return Claim::Behind {
                target: *batch,
                checkpoint: planned,
            };
        }
    }
    match &target.bootstrap {
        Some(origin) if !identity.owns(origin.as_deref()) => Claim::Foreign {
            origin: origin.clone(),
        },
        _ => Claim::Ours,
    }
}

/// The identity a manifest gives its stream.
pub fn stream_identity(config: &StreamConfig) -> StreamIdentity {
    StreamIdentity {
        app_id: config.app_id.clone(),
        target_name: config.target.name.clone(),
        target_location: config.target.location.to_string(),
        facts_location: config.facts.location.to_string(),
        source_host: config.source.host.clone(),
        source_database: config.source.database.clone(),
        source_table: config.source.table.to_string(),
    }
}

/// What a run may write with, once the checkpoint and target agree.
#[derive(Debug)]
pub struct Established {
    /// The checkpoint's identity.
    pub identity: CheckpointIdentity,
    /// The newest bronze commit the checkpoint recorded, which the target
    /// was found to hold.
    pub bronze_mark: Option<BronzeMark>,
}

/// Gives the checkpoint its identity (or checks the one it has against the
/// manifest), then checks the target: refused unless everything there is
/// this checkpoint's, or `adopt` takes it over into a new checkpoint, and
/// unless it still holds every commit the checkpoint made (`known`, from
/// [`refuse_missing_target`]).
pub async fn establish(
    config: &StreamConfig,
    adopt: bool,
    checkpoint: &Checkpoint,
    bronze: &mut BronzeTable,
    known: Option<BronzeMark>,
) -> Result<Established, EngineError> {
    let manifest = stream_identity(config);
    let empty = checkpoint.is_empty().await?;
    let (mut identity, new) = match checkpoint.identity().await? {
        Some(existing) => {
            let changed = existing.stream.changes(&manifest).into_iter().next();
            if let Some((field, recorded, given)) = changed {
                return Err(EngineError::IdentityChanged {
                    checkpoint: config.checkpoint.to_string(),
                    field,
                    recorded,
                    given,
                });
            }
            (existing, false)
        }
        None => (CheckpointIdentity::new(manifest, !empty), true),
    };
    let state = checkpoint.state().await?;
    let target = target_marks(bronze, &config.app_id, &identity, known.as_ref()).await?;
    let planned = state.latest_planned.map(|p| p.batch_id);
    // An adoption interrupted between writing the identity and seeding the
    // checkpoint is finished, not refused.
    let adopted_before = !identity.adopted.is_empty() && empty;
    let seed_it = match claim(&identity, &target, planned) {
        Claim::Ours => adopted_before && target != TargetMarks::default(),
        Claim::Behind {
            checkpoint: None, ..
        } if adopted_before => true,
        Claim::Foreign { origin } if adopt && new && empty => {
            identity
                .adopted
                .push(origin.unwrap_or_else(|| ADOPTED_WITHOUT_IDENTITY.to_string()));
            tracing::warn!(
                app_id = %config.app_id,
                target = %config.target.location,
                "adopting the target: streaming on after the position its newest commit recorded"
            );
            true
        }
        refused => return Err(refusal(config, &identity, refused, adopt)),
    };
    if let Some(mark) = &known {
        target_holds(bronze, mark, config, &identity).await?;
    }
    if new {
        identity = checkpoint.create_identity(&identity).await?;
    }
    if seed_it {
        seed(checkpoint, bronze, &config.app_id, &target).await?;
    }
    Ok(Established {
        identity,
        bronze_mark: known,
    })
}

/// The newest bronze commit the checkpoint recorded, read once at start
/// for [`establish`]. Refuses to start when there is one and no table is at
/// the target any more (deleted): before anything, even an empty table, is
/// created there.
pub async fn refuse_missing_target(
    config: &StreamConfig,
    checkpoint: &Checkpoint,
    exists: impl std::future::Future<Output = Result<bool, EngineError>>,
) -> Result<Option<BronzeMark>, EngineError> {
    let state = checkpoint.state().await?;
    let Some(mark) = known_mark(checkpoint, &config.app_id, state.latest_committed).await? else {
        return Ok(None);
    };
    if exists.await? {
        return Ok(Some(mark));
    }
    let id = checkpoint
        .identity()
        .await?
        .map_or_else(|| "(without an identity)".to_string(), |i| i.id);
    Err(EngineError::TargetBehind {
        target: config.target.location.to_string(),
        checkpoint: id,
        known: describe(&mark),
        found: "does not exist".to_string(),
    })
}

fn describe(mark: &BronzeMark) -> String {
    format!(
        "{} {} at table version {}",
        mark.txn_app_id, mark.txn_version, mark.table_version
    )
}

/// The newest bronze commit the checkpoint's markers record: the newest
/// batch marker's or the newest completed snapshot's, whichever made the
/// later table version. Markers written before marks were recorded give
/// their own batch's bronze version, when they made one.
async fn known_mark(
    checkpoint: &Checkpoint,
    app_id: &str,
    latest_committed: Option<BatchId>,
) -> Result<Option<BronzeMark>, EngineError> {
    let batch = match latest_committed {
        Some(id) => checkpoint.committed(id).await?.and_then(|marker| {
            marker.bronze_mark.or_else(|| {
                marker.bronze_version.map(|table_version| BronzeMark {
                    txn_app_id: app_id.to_string(),
                    txn_version: marker.batch_id.txn_version(),
                    table_version,
                })
            })
        }),
        None => None,
    };
    let snapshot = match checkpoint.latest_snapshot().await? {
        Some(n) => checkpoint
            .completed_snapshot(n)
            .await?
            .and_then(|done| done.bronze_mark),
        None => None,
    };
    Ok([batch, snapshot]
        .into_iter()
        .flatten()
        .max_by_key(|mark| mark.table_version))
}

/// Refuses a target that lacks the commit `mark` names: one whose `txn`
/// for that sequence is older, that has fewer versions, whose version is
/// another commit, or that was restored to a version before it since.
async fn target_holds(
    bronze: &mut BronzeTable,
    mark: &BronzeMark,
    config: &StreamConfig,
    identity: &CheckpointIdentity,
) -> Result<(), EngineError> {
    let txn = Txn {
        app_id: mark.txn_app_id.clone(),
        version: mark.txn_version,
    };
    let behind = |found: String| EngineError::TargetBehind {
        target: config.target.location.to_string(),
        checkpoint: identity.id.clone(),
        known: describe(mark),
        found,
    };
    let committed = bronze.committed_version(&txn.app_id).await?;
    if !txn.is_done(committed) {
        return Err(behind(match committed {
            Some(v) => format!("holds {} only up to {v}", txn.app_id),
            None => format!("holds no commit of {}", txn.app_id),
        }));
    }
    let latest = bronze.version();
    if latest < Some(mark.table_version) {
        return Err(behind(format!(
            "ends at version {}",
            latest.map_or_else(|| "none".to_string(), |v| v.to_string())
        )));
    }
    let at = u64::try_from(mark.table_version).unwrap_or_default();
    // A version whose log entry Delta has expired cannot be compared.
    if let Some(commit) = bronze.read_commit(at).await?
        && !commit.carries(&txn)
    {
        return Err(behind(format!(
            "holds another commit at version {} (the table was replaced)",
            mark.table_version
        )));
    }
    let since = bronze.commits_after(mark.table_version).await?;
    if let Some(restore) = since.iter().find(|c| c.restores_before(mark.table_version)) {
        return Err(behind(format!(
            "was restored to version {} by its version {}",
            restore
                .restored_version
                .map_or_else(|| "(not recorded)".to_string(), |v| v.to_string()),
            restore.version
        )));
    }
    Ok(())
}

fn refusal(
    config: &StreamConfig,
    identity: &CheckpointIdentity,
    claim: Claim,
    adopt: bool,
) -> EngineError {
    let origin = match &claim {
        Claim::Foreign { origin: Some(id) } => format!("checkpoint {id}"),
        Claim::Foreign { origin: None } => {
            "a checkpoint from before this one (it recorded no identity)".to_string()
        }
        Claim::Behind { target, checkpoint } => format!(
            "checkpoint {} itself, further than it knows (the target holds batch {target}, the checkpoint's newest plan is {}): it was restored from an older copy",
            identity.id,
            checkpoint.map_or_else(|| "none".to_string(), |b| b.to_string())
        ),
        Claim::Ours => String::new(),
    };
    EngineError::ForeignTarget {
        app_id: config.app_id.clone(),
        target: config.target.location.to_string(),
        origin,
        adopt_refused: adopt,
    }
}

/// Reads which checkpoint made the target's newest commits of `app_id`.
/// The bootstrap's chunks are only looked at when the target holds no
/// batch: a newest batch of this checkpoint's (or of one it adopted) says
/// whose the target is, and the bootstrap may lie thousands of versions
/// back. A commit the checkpoint recorded (`known`) is read where it is.
async fn target_marks(
    bronze: &mut BronzeTable,
    app_id: &str,
    identity: &CheckpointIdentity,
    known: Option<&BronzeMark>,
) -> Result<TargetMarks, EngineError> {
    let mut marks = TargetMarks::default();
    let hint = |txn: &Txn| {
        known
            .filter(|m| m.txn_app_id == txn.app_id && m.txn_version == txn.version)
            .map(|m| m.table_version)
    };
    if let Some(version) = bronze.committed_version(app_id).await? {
        let batch = BatchId::from_txn_version(version).map_err(|source| {
            EngineError::BronzeTxnNotBatch {
                app_id: app_id.to_string(),
                source,
            }
        })?;
        let txn = Txn::bronze_batch(app_id, batch);
        let origin = match bronze.record_at::<CommitOrigin>(&txn, hint(&txn)).await? {
            Some((origin, _)) => origin.checkpoint().map(str::to_string),
            // The checkpoint recorded this very commit: it is its own even
            // when Delta has expired the log entry that says so.
            None if hint(&txn).is_some() => Some(identity.id.clone()),
            // Bronze's state holds the batch but its commit is not in the
            // log: whose it is cannot be told, and a replay could not give
            // it to silver. Stop and say which, rather than call it foreign.
            None => {
                return Err(EngineError::BronzeCommitMissing {
                    target: bronze.location().to_string(),
                    commit: txn.describe(),
                    txn_app_id: txn.app_id,
                    txn_version: txn.version,
                });
            }
        };
        marks.batch = Some((batch, origin));
    }
    if marks
        .batch
        .as_ref()
        .is_some_and(|(_, origin)| identity.owns(origin.as_deref()))
    {
        return Ok(marks);
    }
    let bootstrap = Txn::snapshot_chunks(app_id, 0);
    if let Some(chunk) = bronze.committed_version(&bootstrap).await? {
        let chunk = u64::try_from(chunk).unwrap_or_default();
        let txn = Txn::snapshot_chunk(app_id, 0, chunk);
        let origin = bronze.record_at::<CommitOrigin>(&txn, hint(&txn)).await?;
        marks.bootstrap = Some(origin.and_then(|(o, _)| o.checkpoint().map(str::to_string)));
    }
    Ok(marks)
}

/// Seeds an empty checkpoint at the target's newest position: its newest
/// batch is planned again exactly as recorded (the run then finishes it as
/// a replay: facts, verdict, marker), or, before any batch, its bootstrap
/// snapshot (which the run resumes after its last chunk).
async fn seed(
    checkpoint: &Checkpoint,
    bronze: &mut BronzeTable,
    app_id: &str,
    target: &TargetMarks,
) -> Result<(), EngineError> {
    let missing = |missing: &'static str| EngineError::CannotAdopt { missing };
    if let Some((batch, _)) = &target.batch {
        let txn = Txn::bronze_batch(app_id, *batch);
        let record: BatchRecord = bronze
            .record(&txn)
            .await?
            .ok_or_else(|| missing("its newest batch's commit is gone from its log"))?;
        let facts = &record.facts;
        let (Some(end_lsn), Some(capture_instance)) =
            (facts.end_lsn, facts.capture_instance.clone())
        else {
            return Err(missing("its newest batch's facts row has no end position"));
        };
        let start_lsn = record
            .range
            .map(|r| r.start)
            .or(facts.min_lsn)
            .unwrap_or(end_lsn);
        checkpoint
            .plan(&PlannedBatch {
                batch_id: *batch,
                start_lsn,
                end_lsn,
                capture_instance,
                end_commit_ts: facts.end_commit_ts,
                planned_at: Utc::now(),
                events: Vec::new(),
                parts: Vec::new(),
                columns: Vec::new(),
            })
            .await?;
        return Ok(());
    }
    if target.bootstrap.is_some() {
        let chunks = Txn::snapshot_chunks(app_id, 0);
        let chunk = bronze.committed_version(&chunks).await?.unwrap_or_default();
        let txn = Txn::snapshot_chunk(app_id, 0, u64::try_from(chunk).unwrap_or_default());
        let record: ChunkRecord = bronze
            .record(&txn)
            .await?
            .ok_or_else(|| missing("its snapshot's newest chunk is gone from its log"))?;
        let plan = record.progress.plan.ok_or_else(|| {
            missing("its snapshot was written by a version that did not record its plan")
        })?;
        checkpoint.plan_snapshot(&plan).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(legacy: bool, adopted: &[&str]) -> CheckpointIdentity {
        let mut identity = CheckpointIdentity::new(
            StreamIdentity {
                app_id: "orders-v1".into(),
                target_name: "bronze.orders".into(),
                target_location: "file:///lake/orders/".into(),
                facts_location: "file:///lake/facts/".into(),
                source_host: "db".into(),
                source_database: "shop".into(),
                source_table: "dbo.orders".into(),
            },
            legacy,
        );
        identity.id = "ours".into();
        identity.adopted = adopted.iter().map(|a| a.to_string()).collect();
        identity
    }

    fn batch(n: u64) -> BatchId {
        BatchId::new(n).unwrap()
    }

    fn target(
        batch_origin: Option<(u64, Option<&str>)>,
        bootstrap: Option<Option<&str>>,
    ) -> TargetMarks {
        TargetMarks {
            batch: batch_origin.map(|(n, o)| (batch(n), o.map(str::to_string))),
            bootstrap: bootstrap.map(|o| o.map(str::to_string)),
        }
    }

    #[test]
    fn a_target_is_claimed_only_by_the_checkpoint_that_wrote_it() {
        let foreign = |origin: Option<&str>| Claim::Foreign {
            origin: origin.map(str::to_string),
        };
        // (case, identity, target, checkpoint's newest plan, verdict)
        let cases = [
            (
                "new stream, new table",
                identity(false, &[]),
                target(None, None),
                None,
                Claim::Ours,
            ),
            (
                "our batches",
                identity(false, &[]),
                target(Some((7, Some("ours"))), Some(Some("ours"))),
                Some(7),
                Claim::Ours,
            ),
            (
                "our batch planned, not yet committed",
                identity(false, &[]),
                target(Some((7, Some("ours"))), None),
                Some(8),
                Claim::Ours,
            ),
            (
                "a replaced checkpoint's batches",
                identity(false, &[]),
                target(Some((7, Some("old"))), None),
                None,
                foreign(Some("old")),
            ),
            (
                "a replaced checkpoint's bootstrap only",
                identity(false, &[]),
                target(None, Some(Some("old"))),
                None,
                foreign(Some("old")),
            ),
            (
                "commits from before identities, new checkpoint",
                identity(false, &[]),
                target(Some((3, None)), None),
                None,
                foreign(None),
            ),
            (
                "commits from before identities, the same old checkpoint",
                identity(true, &[]),
                target(Some((3, None)), Some(None)),
                Some(3),
                Claim::Ours,
            ),
            (
                "an adopted checkpoint's commits",
                identity(false, &["old"]),
                target(Some((7, Some("old"))), Some(Some("old"))),
                Some(7),
                Claim::Ours,
            ),
            (
                "a restored checkpoint",
                identity(false, &[]),
                target(Some((15, Some("ours"))), None),
                Some(10),
                Claim::Behind {
                    target: batch(15),
                    checkpoint: Some(batch(10)),
                },
            ),
        ];
        for (case, identity, target, planned, expected) in cases {
            assert_eq!(
                claim(&identity, &target, planned.map(batch)),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn identity_fields_that_changed_are_named() {
        let recorded = identity(false, &[]).stream;
        let mut moved = recorded.clone();
        moved.target_name = "bronze.orders_v2".into();
        moved.source_table = "dbo.orders2".into();
        let changes = recorded.changes(&moved);
        let fields: Vec<&str> = changes.iter().map(|c| c.0).collect();
        assert_eq!(fields, ["target.name", "source.table"]);
        assert_eq!(changes[0].1, "bronze.orders");
        assert!(recorded.changes(&recorded).is_empty());
    }
}
