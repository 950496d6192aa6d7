//! An in-memory `ChangeSource` for the engine's unit tests: a table with an
//! integer key and a name, its CDC commits and change rows, and a reader
//! pool whose parts read from the same state. Tests change the state
//! between steps (`FakeDb`) as SQL Server's would change between batches.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use deltalake::arrow::array::{
    ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray, new_null_array,
};
use deltalake::arrow::datatypes::{DataType, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use serde_json::json;

use super::change_source::{ChangeSource, PartSession};
use super::error::EngineError;
use super::warnings::Warnings;
use crate::domain::change::{BATCH_ID, COMMIT_TS, LSN, OPERATION, Operation, SEQVAL};
use crate::domain::{CaptureInstance, Lsn};
use crate::lake::bronze::Stager;
use crate::source::SourceError;
use crate::source::cdc::{CaptureInfo, Commit, DdlEvent, InstanceEntry};
use crate::source::lsn_parts::CommitChanges;
use crate::source::parts::{ChunkPart, PartOutput, PartQuery, PartRead};
use crate::source::reader::ReadStats;
use crate::source::session_stats::NetworkWait;
use crate::source::snapshot::{KeyValues, key_from_json, key_to_json};
use crate::source::time_zone::{CommitClock, RepeatedHour};
use crate::source::types::SqlColumn;
use crate::source::unique_keys::UniqueKey;

/// The LSN numbered `n`.
pub fn lsn(n: u64) -> Lsn {
    let mut bytes = [0u8; 10];
    bytes[2..].copy_from_slice(&n.to_be_bytes());
    Lsn::from_bytes(bytes)
}

/// The commit time of LSN `n` (one second apart).
pub fn time_of(n: u64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + i64::try_from(n).unwrap_or(0), 0)
        .single()
        .unwrap_or_default()
}

/// One change row of the change table.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Its commit.
    pub lsn: u64,
    /// Its order in the commit.
    pub seq: u64,
    /// insert, update_after, delete...
    pub operation: Operation,
    /// The key.
    pub id: i32,
    /// The other column.
    pub name: String,
}

/// What the fake database holds.
#[derive(Debug, Default)]
pub struct DbState {
    /// The table's rows now (what a snapshot reads), by key.
    pub rows: BTreeMap<i32, String>,
    /// Every committed change, oldest first.
    pub changes: Vec<Change>,
    /// The database's newest LSN (moves with commits, and without: idle
    /// entries of the capture job).
    pub max_lsn: u64,
    /// The low-water mark (cleanup).
    pub min_lsn: u64,
    /// Every mapped commit (`cdc.lsn_time_mapping`: this table's and others').
    pub mapped: Vec<u64>,
    /// Capture instances created after the first (`dbo_t`, from LSN 1),
    /// oldest first: `(info, start_lsn)`. Each captures the commits from
    /// its start on, as SQL Server's second instance of a table does.
    pub newer_instances: Vec<(CaptureInfo, u64)>,
    /// `dbo_t` was disabled (`sys.sp_cdc_disable_table`): no longer listed,
    /// its change table gone.
    pub first_disabled: bool,
    /// The manifest pins the instance read (`spec.source.captureInstance`).
    pub pinned: bool,
    /// Questions the run's source was asked (its `ChangeSource` calls
    /// that would reach SQL Server).
    pub questions: u64,
}

impl DbState {
    /// The table's capture instances with their start, oldest first.
    fn instances(&self) -> Vec<(CaptureInfo, u64)> {
        let mut all = Vec::new();
        if !self.first_disabled {
            all.push((table_info(), 1));
        }
        all.extend(self.newer_instances.iter().cloned());
        all
    }

    /// Where `instance`'s change table starts: its start, or cleanup's mark
    /// once cleanup passed it; None for an instance the table lacks.
    fn instance_min(&self, instance: &CaptureInstance) -> Option<u64> {
        self.instances()
            .into_iter()
            .find(|(info, _)| &info.instance == instance)
            .map(|(_, start)| start.max(self.min_lsn))
    }
}

/// The fake database, shared by a source, its readers and the test.
#[derive(Debug, Clone, Default)]
pub struct FakeDb(pub Arc<Mutex<DbState>>);

impl FakeDb {
    /// A database whose table holds `rows` (ids 1..=rows), captured from LSN 1.
    pub fn with_rows(rows: i32) -> Self {
        let db = FakeDb::default();
        {
            let mut state = db.state();
            state.rows = (1..=rows).map(|id| (id, format!("row {id}"))).collect();
            state.max_lsn = 10;
            state.min_lsn = 1;
        }
        db
    }

    /// Locks the state.
    pub fn state(&self) -> std::sync::MutexGuard<'_, DbState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Commits one transaction inserting or updating `ids` (none: a commit
    /// of another table, which CDC maps too); returns its LSN.
    pub fn commit(&self, ids: &[i32]) -> u64 {
        let mut state = self.state();
        let at = state.max_lsn + 1;
        state.mapped.push(at);
        for (seq, id) in ids.iter().enumerate() {
            let operation = if state.rows.contains_key(id) {
                Operation::UpdateAfter
            } else {
                Operation::Insert
            };
            let name = format!("row {id} at {at}");
            state.rows.insert(*id, name.clone());
            state.changes.push(Change {
                lsn: at,
                seq: seq as u64,
                operation,
                id: *id,
                name,
            });
        }
        state.max_lsn = at;
        at
    }

    /// Creates capture instance `name` of the table, which captures the
    /// columns of `dbo_t` and a nullable `note int` from the next commit on
    /// (`sys.sp_cdc_enable_table` with a second `@capture_instance`).
    pub fn add_instance(&self, name: &str, change_table_id: i32) {
        let mut state = self.state();
        let mut info = table_info();
        info.instance = CaptureInstance::new(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        info.change_table_id = change_table_id;
        info.columns.push(SqlColumn {
            name: "note".to_string(),
            type_name: "int".to_string(),
            max_length: 4,
            precision: 10,
            scale: 0,
            nullable: true,
            column_id: None,
            collation: None,
        });
        let start = state.max_lsn + 1;
        state.newer_instances.push((info, start));
    }

    /// Disables `dbo_t`, the table's first capture instance.
    pub fn disable_first(&self) {
        self.state().first_disabled = true;
    }

    fn commits_in(&self, from: Lsn, to: Lsn) -> Vec<u64> {
        let state = self.state();
        state
            .mapped
            .iter()
            .copied()
            .filter(|&n| lsn(n) >= from && lsn(n) <= to)
            .collect()
    }
}

/// The captured table: `dbo.t (id int primary key, name nvarchar(50))`.
pub fn table_info() -> CaptureInfo {
    let column = |name: &str, type_name: &str, max_length: i16, nullable: bool| SqlColumn {
        name: name.to_string(),
        type_name: type_name.to_string(),
        max_length,
        precision: 0,
        scale: 0,
        nullable,
        column_id: None,
        collation: None,
    };
    CaptureInfo {
        instance: CaptureInstance::new("dbo_t").unwrap_or_else(|_| unreachable!()),
        change_table_id: 7,
        columns: vec![
            column("id", "int", 4, false),
            column("name", "nvarchar", 100, true),
        ],
        key_columns: vec!["id".to_string()],
    }
}

/// The run's connected source.
pub struct FakeSource {
    db: FakeDb,
    info: CaptureInfo,
}

impl FakeSource {
    /// Connects to `db`.
    pub fn new(db: &FakeDb) -> Self {
        FakeSource {
            db: db.clone(),
            info: table_info(),
        }
    }
}

impl FakeSource {
    fn asked(&self) {
        self.db.state().questions += 1;
    }
}

#[async_trait]
impl ChangeSource for FakeSource {
    type Reader = FakeReader;

    fn info(&self) -> &CaptureInfo {
        &self.info
    }

    fn read_instance(&mut self, info: CaptureInfo) {
        self.info = info;
    }

    async fn discover(&mut self, instance: &CaptureInstance) -> Result<CaptureInfo, EngineError> {
        self.asked();
        self.db
            .state()
            .instances()
            .into_iter()
            .map(|(info, _)| info)
            .find(|info| &info.instance == instance)
            .ok_or_else(|| {
                EngineError::Source(SourceError::Missing(format!("capture instance {instance}")))
            })
    }

    fn commit_clock(&self) -> CommitClock {
        CommitClock::Fixed(0)
    }

    async fn repeated_hour(
        &mut self,
        _until: Lsn,
        _around: Option<DateTime<Utc>>,
    ) -> Result<Option<RepeatedHour>, EngineError> {
        Ok(None)
    }

    async fn refresh_clock(&mut self, _warnings: &mut Warnings) -> Result<(), EngineError> {
        self.asked();
        Ok(())
    }

    async fn lsn_time(&mut self, at: Lsn) -> Result<Option<DateTime<Utc>>, EngineError> {
        self.asked();
        let max = self.db.state().max_lsn;
        Ok((1..=max).rev().find(|&n| lsn(n) <= at).map(time_of))
    }

    async fn time_from(&mut self, at: Lsn) -> Result<Option<DateTime<Utc>>, EngineError> {
        self.asked();
        let max = self.db.state().max_lsn;
        Ok((1..=max).find(|&n| lsn(n) >= at).map(time_of))
    }

    async fn max_lsn(&mut self) -> Result<Lsn, EngineError> {
        self.asked();
        Ok(lsn(self.db.state().max_lsn))
    }

    async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, EngineError> {
        self.asked();
        // `sys.fn_cdc_get_min_lsn` of an instance the table lacks is 0x00.
        let min = self.db.state().instance_min(instance);
        min.map(lsn).ok_or_else(|| {
            EngineError::Source(SourceError::NoLsn(format!("capture instance {instance}")))
        })
    }

    fn retention_minutes(&self) -> Option<i64> {
        Some(4320)
    }

    fn pinned(&self) -> bool {
        self.db.state().pinned
    }

    async fn capture_instances(&mut self) -> Result<Vec<InstanceEntry>, EngineError> {
        self.asked();
        // Newest first, as `cdc.change_tables` is read.
        Ok(self
            .db
            .state()
            .instances()
            .into_iter()
            .rev()
            .map(|(info, start)| InstanceEntry {
                name: info.instance,
                change_table_id: info.change_table_id,
                start_lsn: Some(lsn(start)),
            })
            .collect())
    }

    async fn commits(
        &mut self,
        from: Lsn,
        upper: Lsn,
        max: u64,
    ) -> Result<Vec<Commit>, EngineError> {
        self.asked();
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        Ok(self
            .db
            .commits_in(from, upper)
            .into_iter()
            .take(max)
            .map(|n| Commit {
                lsn: lsn(n),
                commit_ts: Some(time_of(n)),
            })
            .collect())
    }

    async fn ddl_events(
        &mut self,
        _change_table_id: i32,
        _from: Lsn,
        _upper: Lsn,
    ) -> Result<Vec<DdlEvent>, EngineError> {
        self.asked();
        Ok(Vec::new())
    }

    async fn enabled_again(&mut self) -> Result<bool, EngineError> {
        self.asked();
        Ok(false)
    }

    fn take_replaced(&mut self) -> Option<CaptureInfo> {
        None
    }

    async fn warn_left_out_columns(
        &mut self,
        _info: &CaptureInfo,
        _warnings: &mut Warnings,
    ) -> Result<(), EngineError> {
        self.asked();
        Ok(())
    }

    async fn may_read_waits(&mut self, _warnings: &mut Warnings) -> Result<bool, EngineError> {
        self.asked();
        Ok(false)
    }

    async fn round_trip(&mut self) -> Result<Duration, EngineError> {
        self.asked();
        Ok(Duration::from_millis(1))
    }

    async fn sessions(&mut self, n: usize) -> Result<Vec<FakeReader>, EngineError> {
        self.asked();
        Ok((0..n.max(1))
            .map(|_| FakeReader {
                db: self.db.clone(),
            })
            .collect())
    }

    async fn change_counts(
        &mut self,
        from: Lsn,
        to: Lsn,
    ) -> Result<Vec<CommitChanges>, EngineError> {
        self.asked();
        let state = self.db.state();
        let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
        for change in &state.changes {
            if lsn(change.lsn) >= from && lsn(change.lsn) <= to {
                *counts.entry(change.lsn).or_default() += 1;
            }
        }
        Ok(counts
            .into_iter()
            .map(|(n, changes)| CommitChanges {
                lsn: lsn(n),
                changes,
            })
            .collect())
    }

    async fn key_bounds(
        &mut self,
        _paged: &CaptureInfo,
        ranges: usize,
    ) -> Result<Vec<Vec<serde_json::Value>>, EngineError> {
        self.asked();
        let keys: Vec<i32> = self.db.state().rows.keys().copied().collect();
        if ranges < 2 || keys.len() < ranges {
            return Ok(Vec::new());
        }
        let step = keys.len() / ranges;
        Ok((1..ranges)
            .filter_map(|i| keys.get(i * step - 1))
            .map(|k| vec![json!({"int": k})])
            .collect())
    }

    async fn estimated_rows(&mut self) -> Option<u64> {
        self.asked();
        Some(self.db.state().rows.len() as u64)
    }

    async fn unique_keys(&self) -> Result<Vec<UniqueKey>, EngineError> {
        self.asked();
        Ok(Vec::new())
    }
}

/// A session of the fake's reader pool.
pub struct FakeReader {
    db: FakeDb,
}

/// The integer a one-column key holds.
fn key_int(key: Option<&KeyValues>) -> Option<i32> {
    let one = key?.first()?;
    i32::try_from(key_to_json(one)?["int"].as_i64()?).ok()
}

/// One row as a read gives it.
struct Row {
    lsn: Lsn,
    seq: u64,
    operation: Operation,
    commit_ts: DateTime<Utc>,
    id: i32,
    name: String,
}

fn batch_of(schema: &SchemaRef, rows: &[Row], batch_id: i64) -> RecordBatch {
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|field| -> ArrayRef {
            let name = field.name().as_str();
            match (name, field.data_type()) {
                (LSN, _) => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.lsn.to_string()),
                )),
                (SEQVAL, _) => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| format!("{:020}", r.seq)),
                )),
                (OPERATION, _) => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.operation.as_str()),
                )),
                (COMMIT_TS, DataType::Timestamp(_, tz)) => Arc::new(
                    TimestampMicrosecondArray::from_iter_values(
                        rows.iter().map(|r| r.commit_ts.timestamp_micros()),
                    )
                    .with_timezone_opt(tz.clone()),
                ),
                (BATCH_ID, _) => Arc::new(Int64Array::from(vec![batch_id; rows.len()])),
                ("id", DataType::Int32) => {
                    Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.id)))
                }
                ("id", DataType::Int64) => Arc::new(Int64Array::from_iter_values(
                    rows.iter().map(|r| i64::from(r.id)),
                )),
                ("name", DataType::Utf8) => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.name.clone()),
                )),
                (_, data_type) => new_null_array(data_type, rows.len()),
            }
        })
        .collect();
    RecordBatch::try_new(schema.clone(), columns).unwrap_or_else(|e| panic!("fake batch: {e}"))
}

#[async_trait]
impl PartSession for FakeReader {
    async fn round_trip(&mut self) -> Result<Duration, SourceError> {
        Ok(Duration::from_millis(1))
    }

    async fn network_wait(&mut self) -> Result<NetworkWait, SourceError> {
        Ok(NetworkWait::Millis(0))
    }

    async fn read(&mut self, read: PartRead, stager: Stager) -> PartOutput {
        let PartRead {
            query,
            schema,
            batch_id,
            mut on_batch,
            ..
        } = read;
        let (rows, last_key) = {
            let state = self.db.state();
            match &query {
                PartQuery::Changes(part) => {
                    // An instance's change table holds the commits from its start.
                    let captured_from = state.instance_min(&part.info.instance).unwrap_or(u64::MAX);
                    let rows: Vec<Row> = state
                        .changes
                        .iter()
                        .filter(|c| c.lsn >= captured_from)
                        .filter(|c| lsn(c.lsn) >= part.range.start && lsn(c.lsn) <= part.range.end)
                        .map(|c| Row {
                            lsn: lsn(c.lsn),
                            seq: c.seq,
                            operation: c.operation,
                            commit_ts: time_of(c.lsn),
                            id: c.id,
                            name: c.name.clone(),
                        })
                        .collect();
                    (rows, None)
                }
                PartQuery::Chunk(chunk) => {
                    let after = key_int(chunk.after.as_ref());
                    let upto = key_int(chunk.upto.as_ref());
                    let limit = if chunk.paged.key_columns.is_empty() {
                        usize::MAX
                    } else {
                        usize::try_from(chunk.chunk_rows).unwrap_or(usize::MAX)
                    };
                    let rows: Vec<Row> = state
                        .rows
                        .iter()
                        .filter(|(id, _)| after.is_none_or(|a| **id > a))
                        .filter(|(id, _)| upto.is_none_or(|u| **id <= u))
                        .take(limit)
                        .map(|(id, name)| Row {
                            lsn: chunk.lsn,
                            seq: 0,
                            operation: Operation::Snapshot,
                            commit_ts: chunk.commit_ts.unwrap_or_default(),
                            id: *id,
                            name: name.clone(),
                        })
                        .collect();
                    let last = rows
                        .last()
                        .and_then(|r| key_from_json(&json!({"int": r.id})))
                        .map(|k| vec![k]);
                    (rows, last)
                }
            }
        };
        let stats = ReadStats {
            rows: rows.len() as u64,
            bytes: rows.len() as u64 * 16,
            read_time: Duration::from_millis(1),
            min_lsn: rows.first().map(|r| r.lsn),
            max_lsn: rows.last().map(|r| r.lsn),
            min_commit_ts: rows.first().map(|r| r.commit_ts),
            max_commit_ts: rows.last().map(|r| r.commit_ts),
            last_key,
        };
        let batch = batch_of(&schema, &rows, batch_id);
        if let Some(on_batch) = on_batch.as_mut() {
            on_batch(rows.len() as u64);
        }
        let batches =
            futures::stream::iter((!rows.is_empty()).then_some(Ok::<_, SourceError>(batch)));
        PartOutput {
            staged: stager.stage(batches).await,
            stats: Ok(Ok(stats)),
        }
    }

    async fn min_lsn(&mut self, instance: &CaptureInstance) -> Result<Lsn, SourceError> {
        let min = self.db.state().instance_min(instance);
        min.map(lsn)
            .ok_or_else(|| SourceError::Missing(format!("capture instance {instance}")))
    }

    async fn has_rows_after(
        &mut self,
        chunk: &ChunkPart,
        after: Option<&KeyValues>,
    ) -> Result<bool, SourceError> {
        let after = key_int(after.or(chunk.after.as_ref()));
        let upto = key_int(chunk.upto.as_ref());
        Ok(self
            .db
            .state()
            .rows
            .keys()
            .any(|id| after.is_none_or(|a| *id > a) && upto.is_none_or(|u| *id <= u)))
    }
}
