//! Copying a snapshot's open key ranges: each range in key order, one chunk
//! at a time, the ranges at once on up to `spec.source.readers` sessions.
//! Chunks are committed one by one as their reads finish, each under the
//! snapshot's next chunk `txn` with every range's progress, then applied
//! to silver. Snapshot rows all carry the snapshot's LSN and ranges hold
//! distinct keys, so the order chunks of different ranges commit in
//! changes nothing in bronze or silver.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deltalake::arrow::datatypes::SchemaRef;

use super::change_source::ChangeSource;
use super::context::Run;
use super::error::EngineError;
use super::observer::SnapshotProgress;
use super::readers::{Checked, PartRead, Readers};
use super::sink::{BronzeCommit, Sink};
use super::snapshot_ranges::SnapshotRanges;
use crate::domain::{BatchId, CopyShare};
use crate::failpoint;
use crate::lake::bronze::BronzeOutcome;
use crate::lake::checkpoint::PlannedSnapshot;
use crate::lake::records::ChunkRecord;
use crate::lake::txn::Txn;
use crate::source::CaptureInfo;
use crate::source::parts::{self, ChunkPart, PartQuery};
use crate::source::types::ValueLimit;

/// What copying one snapshot's chunks needs to know.
pub struct SnapshotCopy<'a> {
    /// The snapshot.
    pub plan: &'a PlannedSnapshot,
    /// The number of the first chunk this run commits.
    pub first_chunk: u64,
    /// The table's rows as the catalog estimates them (for progress).
    pub estimated: Option<u64>,
    /// The columns read, and the key the table is paged by (none: the
    /// whole table is one chunk).
    pub paged: CaptureInfo,
    /// Where the key columns are among the columns read.
    pub key_positions: Vec<usize>,
    /// The bronze schema the rows take.
    pub schema: SchemaRef,
    /// Rows per chunk.
    pub chunk_rows: u64,
}

/// What the chunks copied in this run read (for the facts row).
#[derive(Debug, Clone, Copy, Default)]
pub struct Copied {
    /// Time the chunk reads waited for SQL Server, summed (task-seconds).
    pub read_time: Duration,
    /// Bytes they received.
    pub read_bytes: u64,
}

/// Copies the open ranges of the snapshot `copy` describes.
pub async fn copy_ranges<S: ChangeSource>(
    run: &Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    ranges: &mut SnapshotRanges,
    copy: &SnapshotCopy<'_>,
) -> Result<Copied, EngineError> {
    let open = ranges.open();
    if open.is_empty() {
        return Ok(Copied::default());
    }
    let sessions = session
        .sessions(run.config.source.readers.min(open.len()))
        .await?;
    let mut readers = Readers::new(sessions);
    let progress = Progress {
        estimated: copy.estimated,
        resumed_rows: ranges.rows(),
        clock: Instant::now(),
        reading: Arc::new(AtomicU64::new(ranges.rows())),
    };
    let copied = copy_chunks(run, sink, ranges, copy, open, &progress, &mut readers).await;
    if copied.is_err() {
        readers.wind_down().await;
    }
    copied
}

async fn copy_chunks<R: super::change_source::PartSession>(
    run: &Run<'_>,
    sink: &mut Sink,
    ranges: &mut SnapshotRanges,
    copy: &SnapshotCopy<'_>,
    open: Vec<usize>,
    progress: &Progress,
    readers: &mut Readers<usize, R>,
) -> Result<Copied, EngineError> {
    let app_id = &run.config.app_id;
    let plan = copy.plan;
    let mut queue: VecDeque<usize> = open.into();
    let mut copied = Copied::default();
    let mut chunk = copy.first_chunk;
    loop {
        while readers.has_idle() {
            let Some(range) = queue.pop_front() else {
                break;
            };
            let read = chunk_read(run, copy, ranges, range, progress);
            readers.start(range, sink.bronze.stager()?, read)?;
        }
        let Some(result) = readers.next().await else {
            break;
        };
        let (range, part) = result?;
        let stats = &part.measures.stats;
        copied.read_time += stats.read_time;
        copied.read_bytes += stats.bytes;
        let ended = part.measures.checked == Checked::RangeEnded(true);
        ranges.advance(range, stats, ended);
        let progress_record = ranges.progress(
            plan,
            chunk,
            range,
            stats.last_key.as_ref(),
            sink.identity.id.clone(),
        );
        let record = ChunkRecord {
            progress: progress_record,
        };
        let txn = Txn::snapshot_chunk(app_id, plan.snapshot, chunk);
        let made = match sink.commit_to_bronze(&txn, part.staged, &record).await? {
            BronzeOutcome::Empty => BronzeCommit::None,
            BronzeOutcome::Committed { .. } | BronzeOutcome::AlreadyCommitted => BronzeCommit::Made,
        };
        sink.apply_to_silver(&txn, &Txn::silver_chunk(app_id, plan.snapshot, chunk), made)
            .await?;
        failpoint::hit("mid_snapshot");
        if ended && !ranges.finished() {
            failpoint::hit("after_snapshot_range_done");
        }
        progress.report(run, ranges.rows(), chunk + 1, plan);
        chunk += 1;
        if !ended {
            queue.push_back(range);
        }
    }
    Ok(copied)
}

/// The read of range `range`'s next chunk.
fn chunk_read(
    run: &Run<'_>,
    shape: &SnapshotCopy<'_>,
    ranges: &SnapshotRanges,
    range: usize,
    progress: &Progress,
) -> PartRead {
    let (after, upto) = ranges.next_chunk(range);
    PartRead {
        read: parts::PartRead {
            query: PartQuery::Chunk(ChunkPart {
                table: run.config.source.table.clone(),
                paged: shape.paged.clone(),
                after,
                upto,
                chunk_rows: shape.chunk_rows,
                lsn: shape.plan.lsn,
                commit_ts: shape.plan.commit_ts,
                key_positions: shape.key_positions.clone(),
            }),
            schema: shape.schema.clone(),
            batch_id: BatchId::SNAPSHOT.txn_version(),
            value_limit: ValueLimit::new(run.config.max_value_bytes),
            on_batch: Some(progress.reading_observer(run)),
        },
        waits: false,
    }
}

/// How the snapshot's progress is reported: after each chunk, and while
/// chunks read.
struct Progress {
    estimated: Option<u64>,
    resumed_rows: u64,
    clock: Instant,
    /// Rows committed before this run plus every row the chunks of this
    /// run have read so far, over all ranges: never goes down while
    /// several ranges read at once.
    reading: Arc<AtomicU64>,
}

impl Progress {
    /// Tells the observer the snapshot's rows as one chunk's read goes on.
    fn reading_observer(&self, run: &Run<'_>) -> Box<dyn FnMut(u64) + Send> {
        let observer = run.options.observer.clone();
        let reading = Arc::clone(&self.reading);
        let mut seen = 0u64;
        Box::new(move |rows| {
            let total = reading.fetch_add(rows - seen, Ordering::Relaxed) + rows - seen;
            seen = rows;
            observer.snapshot_reading(total);
        })
    }

    fn report(&self, run: &Run<'_>, rows: u64, chunks: u64, plan: &PlannedSnapshot) {
        let elapsed = self.clock.elapsed().as_secs_f64().max(1e-3);
        let rate = rows.saturating_sub(self.resumed_rows) as f64 / elapsed;
        // A copy past the estimate (table statistics lag) has no known end.
        let eta = CopyShare::rows_left(rows, self.estimated)
            .filter(|_| rate > 0.0)
            .map(|left| Duration::from_secs_f64(left as f64 / rate));
        run.observer().snapshot_progress(&SnapshotProgress {
            rows,
            estimated_rows: self.estimated,
            rows_per_second: rate,
            eta,
            chunks,
            started_at: plan.started_at,
        });
        tracing::debug!(
            rows,
            estimated_rows = self.estimated,
            rows_per_second = rate.round(),
            "snapshot progress"
        );
    }
}
