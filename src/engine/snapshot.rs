//! The bootstrap snapshot: the table's current rows, copied in key order one
//! chunk per bronze commit, resumable after a crash without duplicates.
//!
//! Each chunk commits with `txn("<appId>/snapshot/<n>", chunk)` and records
//! the last key it copied in the commit's metadata; a restarted run reads
//! that back and continues after it. Tables whose key cannot be resumed from
//! (no key, or key types other than integers, strings and GUIDs) are copied
//! in one commit.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tiberius::ColumnData;

use super::EngineError;
use super::observer::SnapshotProgress;
use super::stream::{Position, RunOptions, StreamRun};
use crate::failpoint;
use crate::lake::checkpoint::{CheckpointState, CompletedSnapshot, PlannedSnapshot};
use crate::lake::facts::{FactEvent, FactRow, FactSequence, FactsKey};
use crate::source::reader::{ReadRequest, RowShape};
use crate::source::snapshot::{chunk_query, estimated_rows, key_from_json, key_to_json};
use crate::source::types::ValueKind;
use crate::source::{BatchId, Lsn, cdc};
use crate::spec::SnapshotMode;

/// commitInfo key of a snapshot chunk's progress.
pub const COMMIT_INFO_SNAPSHOT: &str = "mssql_cdc.snapshot";

/// The bootstrap is snapshot number 0.
const BOOTSTRAP: u64 = 0;

impl StreamRun {
    /// Where streaming goes on from: after the newest planned batch, or
    /// after the newest snapshot when that is later. Takes (or resumes) the
    /// snapshot that is due first: the bootstrap of a new stream, or a
    /// re-snapshot a crash interrupted.
    pub(super) async fn position(
        &mut self,
        state: &CheckpointState,
        options: &RunOptions,
    ) -> Result<Position, EngineError> {
        let batch = state.latest_planned.as_ref().map(|plan| Position {
            lsn: plan.end_lsn,
            commit_ts: plan.end_commit_ts,
            instance: Some(plan.capture_instance.clone()),
        });
        let latest = self.checkpoint.latest_snapshot().await?;
        let snapshot = match latest {
            Some(n) => self.checkpoint.planned_snapshot(n).await?,
            None => None,
        };
        match (snapshot, batch) {
            (Some(plan), Some(batch)) if batch.lsn >= plan.lsn => Ok(batch),
            (Some(plan), _) => self.snapshot(plan, options).await,
            (None, Some(batch)) => Ok(batch),
            (None, None) => match self.config.snapshot_mode {
                SnapshotMode::Initial => {
                    let plan = self.plan_snapshot(BOOTSTRAP, None, None).await?;
                    self.snapshot(plan, options).await
                }
                SnapshotMode::Never => {
                    let instance = self.info()?.instance.clone();
                    let min = cdc::min_lsn(self.client()?, &instance).await?;
                    Ok(Position {
                        lsn: min.checked_prev().unwrap_or(Lsn::ZERO),
                        commit_ts: None,
                        instance: Some(instance),
                    })
                }
            },
        }
    }

    /// `spec.onDataLoss: resnapshot`: plans and takes a new snapshot, whose
    /// facts row records the commit times whose changes were purged.
    pub(super) async fn resnapshot(
        &mut self,
        lost_from_ts: Option<DateTime<Utc>>,
        lost_to_ts: Option<DateTime<Utc>>,
        options: &RunOptions,
    ) -> Result<Position, EngineError> {
        let n = self
            .checkpoint
            .latest_snapshot()
            .await?
            .map_or(BOOTSTRAP + 1, |n| n + 1);
        let plan = self.plan_snapshot(n, lost_from_ts, lost_to_ts).await?;
        self.snapshot(plan, options).await
    }

    /// Fixes snapshot `n`'s LSN (the source's max LSN now) before it reads.
    async fn plan_snapshot(
        &mut self,
        n: u64,
        lost_from_ts: Option<DateTime<Utc>>,
        lost_to_ts: Option<DateTime<Utc>>,
    ) -> Result<PlannedSnapshot, EngineError> {
        let instance = self.info()?.instance.clone();
        let max = cdc::max_lsn(self.client()?).await?;
        let min = cdc::min_lsn(self.client()?, &instance).await?;
        // A capture instance newer than the last change starts after
        // it: nothing before its start was ever captured.
        let lsn = max.max(min.checked_prev().unwrap_or(Lsn::ZERO));
        let commit_ts = self.lsn_time(lsn).await?;
        let plan = PlannedSnapshot {
            snapshot: n,
            lsn,
            capture_instance: instance,
            commit_ts,
            started_at: Utc::now(),
            lost_from_ts,
            lost_to_ts,
        };
        self.checkpoint.plan_snapshot(&plan).await?;
        Ok(plan)
    }

    /// Runs (or resumes) a planned snapshot; returns the position changes
    /// are streamed after.
    async fn snapshot(
        &mut self,
        plan: PlannedSnapshot,
        options: &RunOptions,
    ) -> Result<Position, EngineError> {
        let n = plan.snapshot;
        self.use_instance(&plan.capture_instance).await?;
        let position = Position {
            lsn: plan.lsn,
            commit_ts: plan.commit_ts,
            instance: Some(plan.capture_instance.clone()),
        };
        if self.checkpoint.completed_snapshot(n).await?.is_some() {
            return Ok(position);
        }
        self.hold_verdict(plan.lsn, options.observer.as_ref())
            .await?;
        let txn_app_id = format!("{}/snapshot/{n}", self.config.app_id);
        let resumed = self.snapshot_progress(&txn_app_id).await?;
        let info = self.info()?.clone();
        let resumable = !info.key_columns.is_empty()
            && info.key_columns.iter().all(|key| {
                info.columns
                    .iter()
                    .find(|c| c.name.eq_ignore_ascii_case(key))
                    .and_then(|c| c.kind().ok())
                    .is_some_and(|kind| {
                        matches!(
                            kind,
                            ValueKind::Int16
                                | ValueKind::Int32
                                | ValueKind::Int64
                                | ValueKind::Text
                                | ValueKind::Guid
                        )
                    })
            });
        let key_positions: Vec<usize> = if resumable {
            info.key_columns
                .iter()
                .filter_map(|key| {
                    info.columns
                        .iter()
                        .position(|c| c.name.eq_ignore_ascii_case(key))
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut paged = info.clone();
        if !resumable || key_positions.len() != info.key_columns.len() {
            paged.key_columns.clear();
        }
        let chunk_rows = self.config.snapshot_chunk_rows.get();
        let table = self.config.source.table.clone();
        let estimated = estimated_rows(self.client()?, &table).await;
        let commit_ts = plan.commit_ts;
        let schema = self.read_schema()?;

        let (mut chunk, mut after, mut rows, mut finished) = match &resumed {
            Some(progress) => (
                progress.chunk + 1,
                progress.last_key.clone(),
                progress.rows,
                progress.finished,
            ),
            None => (0, None, 0, false),
        };
        if resumed.is_some() {
            tracing::info!(
                rows,
                chunk,
                "resuming the snapshot after its last committed chunk"
            );
        }
        let resumed_rows = rows;
        let clock = Instant::now();
        let mut read_time = Duration::ZERO;
        let mut read_bytes = 0u64;
        while !finished {
            let sql = chunk_query(
                &self.config.source.table,
                &paged,
                chunk_rows,
                after.as_deref(),
            );
            let request = ReadRequest {
                sql,
                params: after.clone().unwrap_or_default(),
                columns: info.columns.clone(),
                schema: schema.clone(),
                shape: RowShape::Snapshot {
                    lsn: plan.lsn,
                    commit_ts,
                    key_positions: key_positions.clone(),
                },
                batch_id: BatchId::SNAPSHOT.txn_version(),
                on_batch: None,
            };
            let (staged, stats) = self.read_into_bronze(request).await?;
            read_time += stats.read_time;
            read_bytes += stats.bytes;
            rows += stats.rows;
            finished = paged.key_columns.is_empty() || stats.rows < chunk_rows;
            let last_key = stats.last_key.clone();
            let progress = json!({
                "snapshot": n,
                "chunk": chunk,
                "rows": rows,
                "finished": finished,
                "last_key": last_key.as_ref().map(|k| k.iter().map(key_to_json).collect::<Vec<_>>()),
            });
            self.tables()?
                .bronze
                .commit(
                    staged,
                    &txn_app_id,
                    i64::try_from(chunk).unwrap_or(i64::MAX),
                    vec![(COMMIT_INFO_SNAPSHOT.to_string(), progress)],
                )
                .await?;
            failpoint::hit("mid_snapshot");
            let elapsed = clock.elapsed().as_secs_f64().max(1e-3);
            let rate = (rows - resumed_rows) as f64 / elapsed;
            let eta = estimated
                .filter(|_| rate > 0.0)
                .map(|total| Duration::from_secs_f64(total.saturating_sub(rows) as f64 / rate));
            options.observer.snapshot_progress(&SnapshotProgress {
                rows,
                estimated_rows: estimated,
                rows_per_second: rate,
                eta,
            });
            tracing::debug!(
                rows,
                estimated_rows = estimated,
                rows_per_second = rate.round(),
                "snapshot progress"
            );
            after = last_key;
            chunk += 1;
        }

        let mut row = FactRow::new(
            self.config.target.name.clone(),
            self.config.app_id.clone(),
            None,
            Some(if n == BOOTSTRAP {
                FactEvent::Bootstrap
            } else {
                FactEvent::Resnapshot
            }),
            Utc::now(),
        );
        row.rows = Some(rows);
        row.capture_instance = Some(plan.capture_instance.clone());
        row.min_lsn = Some(plan.lsn);
        row.max_lsn = Some(plan.lsn);
        row.end_lsn = Some(plan.lsn);
        row.min_commit_ts = commit_ts;
        row.max_commit_ts = commit_ts;
        row.end_commit_ts = commit_ts;
        row.started_at = Some(plan.started_at);
        row.duration_ms = Some((Utc::now() - plan.started_at).num_milliseconds());
        row.read_seconds = Some(read_time.as_secs_f64());
        row.read_mb = Some(read_bytes as f64 / 1_000_000.0);
        row.lost_from_ts = plan.lost_from_ts;
        row.lost_to_ts = plan.lost_to_ts;
        let key = FactsKey {
            target: self.config.target.name.clone(),
            app_id: self.config.app_id.clone(),
            sequence: FactSequence::Snapshot(n),
        };
        self.tables()?
            .facts
            .append(&key, std::slice::from_ref(&row))
            .await?;
        failpoint::hit("after_snapshot_facts");
        self.checkpoint
            .complete_snapshot(&CompletedSnapshot {
                snapshot: n,
                rows,
                completed_at: Utc::now(),
            })
            .await?;
        tracing::info!(rows, lsn = %plan.lsn, "snapshot complete");
        self.advance_verdict(commit_ts, options.observer.as_ref())
            .await?;
        self.summary.snapshot_rows += rows;
        options.observer.snapshot_done(&row);
        Ok(position)
    }

    /// Where a snapshot's committed chunks got to, from bronze.
    async fn snapshot_progress(
        &mut self,
        txn_app_id: &str,
    ) -> Result<Option<ChunkProgress>, EngineError> {
        let bronze = &mut self.tables()?.bronze;
        let Some(chunk) = bronze.committed_version(txn_app_id).await? else {
            return Ok(None);
        };
        let metadata = bronze.commit_metadata(txn_app_id, chunk).await?;
        let progress = metadata
            .as_ref()
            .and_then(|m| m.get(COMMIT_INFO_SNAPSHOT))
            .and_then(|p| ChunkProgress::from_json(p, chunk));
        progress.map(Some).ok_or_else(|| {
            EngineError::Inconsistent(format!(
                "bronze table {}: snapshot chunk {chunk} is committed but its progress record \
                 cannot be read; move the checkpoint and target aside to re-snapshot",
                self.config.target.location
            ))
        })
    }
}

/// A committed chunk's record of how far the snapshot got.
struct ChunkProgress {
    chunk: u64,
    rows: u64,
    finished: bool,
    last_key: Option<Vec<ColumnData<'static>>>,
}

impl ChunkProgress {
    fn from_json(value: &Value, chunk: i64) -> Option<Self> {
        let last_key = match value.get("last_key") {
            Some(Value::Array(keys)) => {
                Some(keys.iter().map(key_from_json).collect::<Option<Vec<_>>>()?)
            }
            _ => None,
        };
        Some(ChunkProgress {
            chunk: u64::try_from(chunk).ok()?,
            rows: value.get("rows")?.as_u64()?,
            finished: value.get("finished")?.as_bool()?,
            last_key,
        })
    }
}
