//! Reads on several source sessions at once (`spec.source.readers`): each
//! part of a batch, or each chunk of a snapshot's key range, runs on a task
//! of its own with a session of the pool and writes files of its own. A
//! part seals its files (they are then complete in storage, referenced by
//! no table version) and, on the same session, asks one more question that
//! fails if its result was cut off; the caller commits what the parts
//! staged. With one reader this is the plain sequential read.

use std::sync::Arc;
use std::time::Duration;

use tiberius::ColumnData;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use super::error::EngineError;
use crate::domain::{CaptureInstance, Lsn, TableName};
use crate::failpoint;
use crate::lake::bronze::{StagedFiles, Stager};
use crate::source::reader::{ReadRequest, ReadStats, spawn_read};
use crate::source::session_stats::{self, NetworkWait};
use crate::source::snapshot::{KeyWindow, has_rows_within};
use crate::source::{CaptureInfo, SqlClient, cdc};

/// A session of the pool.
pub type Session = Arc<Mutex<SqlClient>>;

/// One part to read.
pub struct PartRead {
    /// The query and how its rows become record batches.
    pub request: ReadRequest,
    /// What the session is asked after the read.
    pub check: Check,
    /// Whether the session may read its wait counter (`network_wait_ms`).
    pub waits: bool,
}

/// The question a part asks on its own session after the read. A session
/// killed mid-result may end the result as if it were complete; the server
/// closes its connection, so this query then fails and the part with it.
pub enum Check {
    /// Changes: the capture instance's low-water mark, which tells whether
    /// cleanup passed the read.
    MinLsn(CaptureInstance),
    /// A snapshot chunk: whether its key range has rows left after it.
    RangeEnd(RangeEnd),
}

/// What a snapshot chunk needs to tell whether it ended its key range.
pub struct RangeEnd {
    /// The table.
    pub table: TableName,
    /// Its columns and the key the snapshot pages by (none: one chunk).
    pub info: CaptureInfo,
    /// The key the chunk read after.
    pub after: Option<Vec<ColumnData<'static>>>,
    /// The range's upper bound.
    pub upto: Option<Vec<ColumnData<'static>>>,
    /// Rows the chunk asked for: a full chunk leaves the range open.
    pub chunk_rows: u64,
}

/// The answer to a part's [`Check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// The instance's low-water mark after the read.
    MinLsn(Lsn),
    /// Whether the chunk ended its key range.
    RangeEnded(bool),
}

/// A part read to its end.
pub struct PartDone {
    /// Its files, sealed.
    pub staged: StagedFiles,
    /// What it measured.
    pub measures: PartMeasures,
}

/// What one part measured.
#[derive(Debug, Clone, PartialEq)]
pub struct PartMeasures {
    /// What it read.
    pub stats: ReadStats,
    /// A round trip on its session before the read.
    pub round_trip: Duration,
    /// What the server waited on its session during the read; `None`
    /// without permission.
    pub network_wait_ms: Option<i64>,
    /// The answer to its check.
    pub checked: Checked,
}

/// The running parts and the sessions free for more, at most one part per
/// session. Dropping it aborts the running parts.
pub struct Readers<K> {
    idle: Vec<Session>,
    running: JoinSet<(Session, K, Result<PartDone, EngineError>)>,
}

impl<K: Send + 'static> Readers<K> {
    /// A pool of `sessions` (at least one).
    pub fn new(sessions: Vec<Session>) -> Self {
        Readers {
            idle: sessions,
            running: JoinSet::new(),
        }
    }

    /// Whether a session is free for another part.
    pub fn has_idle(&self) -> bool {
        !self.idle.is_empty()
    }

    /// Starts `read` (known to the caller as `key`) on a free session,
    /// staging with `stager`.
    pub fn start(&mut self, key: K, stager: Stager, read: PartRead) -> Result<(), EngineError> {
        let session = self.idle.pop().ok_or(EngineError::NoIdleReader)?;
        self.running.spawn(async move {
            let done = read_part(session.clone(), stager, read).await;
            (session, key, done)
        });
        Ok(())
    }

    /// The next part to finish (its session is free again), or `None` when
    /// none is running.
    pub async fn next(&mut self) -> Option<Result<(K, PartDone), EngineError>> {
        let joined = self.running.join_next().await?;
        Some(match joined {
            Ok((session, key, Ok(done))) => {
                self.idle.push(session);
                Ok((key, done))
            }
            Ok((_, _, Err(error))) => Err(error),
            Err(error) => Err(EngineError::ReadTask(error)),
        })
    }

    /// After a part failed: lets the others run to their end, so no session
    /// is left in the middle of a result, and drops what they read.
    pub async fn wind_down(&mut self) {
        while self.running.join_next().await.is_some() {}
    }
}

/// Reads one part on `session`: a round trip and the wait counter before,
/// the rows into files of its own, the wait counter and the check after.
async fn read_part(
    session: Session,
    stager: Stager,
    read: PartRead,
) -> Result<PartDone, EngineError> {
    let PartRead {
        request,
        check,
        waits,
    } = read;
    let mut client = session.lock_owned().await;
    let round_trip = session_stats::round_trip(&mut client).await?;
    let wait_before = wait_counter(&mut client, waits).await?;
    let (batches, task) = spawn_read(client, request);
    let staged = stager.stage(batches).await;
    let (mut client, stats) = task.await.map_err(EngineError::ReadTask)?;
    // A read error wins over the writer's, which only says the stream broke.
    let stats = stats?;
    let mut staged = staged?;
    let network_wait_ms = match (wait_before, wait_counter(&mut client, waits).await?) {
        // Counters only grow within a session; never report less than 0.
        (Some(before), Some(after)) => Some((after - before).max(0)),
        _ => None,
    };
    let checked = match check {
        Check::MinLsn(instance) => Checked::MinLsn(cdc::min_lsn(&mut client, &instance).await?),
        Check::RangeEnd(end) => Checked::RangeEnded(range_ended(&mut client, &end, &stats).await?),
    };
    drop(client);
    staged.seal().await?;
    failpoint::hit("after_part_staged");
    Ok(PartDone {
        staged,
        measures: PartMeasures {
            stats,
            round_trip,
            network_wait_ms,
            checked,
        },
    })
}

/// Whether a snapshot chunk ended its key range: a table without a key is
/// one chunk; a short chunk ends the range only once the table confirms
/// it has nothing past the chunk's last key within the range (rows
/// inserted meanwhile, or a result cut off, are read by another chunk).
async fn range_ended(
    client: &mut SqlClient,
    end: &RangeEnd,
    stats: &ReadStats,
) -> Result<bool, EngineError> {
    if end.info.key_columns.is_empty() {
        return Ok(true);
    }
    if stats.rows >= end.chunk_rows {
        return Ok(false);
    }
    let window = KeyWindow {
        after: stats.last_key.as_deref().or(end.after.as_deref()),
        upto: end.upto.as_deref(),
    };
    Ok(!has_rows_within(client, &end.table, &end.info, window).await?)
}

async fn wait_counter(client: &mut SqlClient, waits: bool) -> Result<Option<i64>, EngineError> {
    if !waits {
        return Ok(None);
    }
    Ok(match session_stats::network_wait(client).await? {
        NetworkWait::Millis(ms) => Some(ms),
        NetworkWait::Denied(_) => None,
    })
}
