//! Reads on several source sessions at once (`spec.source.readers`): each
//! part of a batch, or each chunk of a snapshot's key range, runs on a task
//! of its own with a session of the pool and writes files of its own. A
//! part seals its files (they are then complete in storage, referenced by
//! no table version) and, on the same session, asks one more question that
//! fails if its result was cut off; the caller commits what the parts
//! staged. With one reader this is the plain sequential read. The sessions
//! are the source's (`ChangeSource::Reader`); what they run is said in the
//! stream's terms (`source::parts`).

use std::time::Duration;

use tokio::task::JoinSet;

use super::change_source::PartSession;
use super::error::EngineError;
use crate::domain::Lsn;
use crate::failpoint;
use crate::lake::bronze::{StagedFiles, Stager};
use crate::source::parts::{self, ChunkPart, PartOutput, PartQuery};
use crate::source::reader::ReadStats;
use crate::source::session_stats::NetworkWait;

/// One part to read. What the session is asked after the read follows
/// from the query: a range of changes asks the capture instance's
/// low-water mark (whether cleanup passed the read), a snapshot chunk
/// whether its key range has rows left after it. A session killed
/// mid-result may end the result as if it were complete; the server closes
/// its connection, so that question then fails and the part with it.
pub struct PartRead {
    /// The query and how its rows become record batches.
    pub read: parts::PartRead,
    /// Whether the session may read its wait counter (`network_wait_ms`).
    pub waits: bool,
}

/// The answer to the question a part asks after its read.
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
pub struct Readers<K, R> {
    idle: Vec<R>,
    running: JoinSet<(R, K, Result<PartDone, EngineError>)>,
}

impl<K: Send + 'static, R: PartSession> Readers<K, R> {
    /// A pool of `sessions` (at least one).
    pub fn new(sessions: Vec<R>) -> Self {
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
        let mut session = self.idle.pop().ok_or(EngineError::NoIdleReader)?;
        self.running.spawn(async move {
            let done = read_part(&mut session, stager, read).await;
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
async fn read_part<R: PartSession>(
    session: &mut R,
    stager: Stager,
    read: PartRead,
) -> Result<PartDone, EngineError> {
    let PartRead { read, waits } = read;
    let query = read.query.clone();
    let round_trip = session.round_trip().await?;
    let wait_before = wait_counter(session, waits).await?;
    let PartOutput { staged, stats } = session.read(read, stager).await;
    let stats = stats.map_err(EngineError::ReadTask)?;
    // A read error wins over the writer's, which only says the stream broke.
    let stats = stats?;
    let mut staged = staged?;
    let network_wait_ms = match (wait_before, wait_counter(session, waits).await?) {
        // Counters only grow within a session; never report less than 0.
        (Some(before), Some(after)) => Some((after - before).max(0)),
        _ => None,
    };
    let checked = match &query {
        PartQuery::Changes(part) => Checked::MinLsn(session.min_lsn(&part.info.instance).await?),
        PartQuery::Chunk(chunk) => Checked::RangeEnded(range_ended(session, chunk, &stats).await?),
    };
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
async fn range_ended<R: PartSession>(
    session: &mut R,
    chunk: &ChunkPart,
    stats: &ReadStats,
) -> Result<bool, EngineError> {
    if chunk.paged.key_columns.is_empty() {
        return Ok(true);
    }
    if stats.rows >= chunk.chunk_rows {
        return Ok(false);
    }
    Ok(!session
        .has_rows_after(chunk, stats.last_key.as_ref())
        .await?)
}

async fn wait_counter<R: PartSession>(
    session: &mut R,
    waits: bool,
) -> Result<Option<i64>, EngineError> {
    if !waits {
        return Ok(None);
    }
    Ok(match session.network_wait().await? {
        NetworkWait::Millis(ms) => Some(ms),
        NetworkWait::Denied(_) => None,
    })
}
