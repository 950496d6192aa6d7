//! Reading a planned batch's changes: the plan's parts (or its whole range)
//! from where the read starts, each on a session of the reader pool into
//! files of its own, then one set of staged files and one set of read
//! measures for the batch's single bronze commit and facts row.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deltalake::arrow::record_batch::RecordBatch;

use super::change_source::ChangeSource;
use super::context::Run;
use super::error::EngineError;
use super::readers::{Checked, PartDone, PartMeasures, PartRead, Readers};
use super::sink::Sink;
use super::source_changes::read_schema;
use crate::domain::Lsn;
use crate::failpoint;
use crate::lake::bronze::StagedFiles;
use crate::lake::checkpoint::PlannedBatch;
use crate::lake::records::LsnRange;
use crate::source::SourceError;
use crate::source::parts::{self, ChangesPart, PartQuery};
use crate::source::reader::ReadStats;
use crate::source::time_zone::RepeatedHour;
use crate::source::types::ValueLimit;

/// What reading a batch's changes gave.
pub struct ChangesRead {
    /// The rows, staged for the commit.
    pub staged: StagedFiles,
    /// What the parts read, summed (read time in task-seconds).
    pub stats: ReadStats,
    /// The slowest part session's round trip before its read; this
    /// session's when nothing was read.
    pub round_trip: Duration,
    /// What the server waited on the part sessions, summed; `None` without
    /// permission.
    pub network_wait_ms: Option<i64>,
    /// The capture instance's highest low-water mark the parts saw after
    /// their reads; `None` when nothing was read.
    pub min_lsn: Option<Lsn>,
}

impl ChangesRead {
    /// A read of nothing: no staged file, no measures but `round_trip`.
    pub async fn nothing(sink: &mut Sink, round_trip: Duration) -> Result<Self, EngineError> {
        let nothing = futures::stream::empty::<Result<RecordBatch, SourceError>>();
        Ok(ChangesRead {
            staged: sink.bronze.stage(nothing).await?,
            stats: ReadStats::default(),
            round_trip,
            network_wait_ms: None,
            min_lsn: None,
        })
    }
}

/// The plan's ranges from `from` on: the parts (or the whole range) that
/// end at or after it, the first cut to start there.
pub fn ranges_from(plan: &PlannedBatch, from: Lsn) -> Vec<LsnRange> {
    plan.read_ranges()
        .into_iter()
        .filter(|range| range.end >= from)
        .map(|range| LsnRange {
            start: range.start.max(from),
            end: range.end,
        })
        .collect()
}

/// Reads the plan's changes from `from`: its parts at once on up to
/// `spec.source.readers` sessions. `waits`: whether the sessions may read
/// their wait counters. A part that fails fails the read, once the others
/// have ended.
pub async fn read_changes<S: ChangeSource>(
    run: &Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    plan: &PlannedBatch,
    from: Lsn,
    waits: bool,
) -> Result<ChangesRead, EngineError> {
    let ranges = ranges_from(plan, from);
    if ranges.is_empty() {
        let round_trip = session.round_trip().await?;
        return ChangesRead::nothing(sink, round_trip).await;
    }
    let repeated = session
        .repeated_hour(plan.end_lsn, plan.end_commit_ts)
        .await?;
    let sessions = session
        .sessions(run.config.source.readers.min(ranges.len()))
        .await?;
    let mut readers = Readers::new(sessions);
    let read = read_parts(
        run,
        session,
        sink,
        plan,
        ranges,
        (waits, repeated),
        &mut readers,
    )
    .await;
    if read.is_err() {
        readers.wind_down().await;
    }
    read
}

async fn read_parts<S: ChangeSource>(
    run: &Run<'_>,
    session: &S,
    sink: &Sink,
    plan: &PlannedBatch,
    ranges: Vec<LsnRange>,
    (waits, repeated): (bool, Option<RepeatedHour>),
    readers: &mut Readers<usize, S::Reader>,
) -> Result<ChangesRead, EngineError> {
    let count = ranges.len();
    let progress = Arc::new(AtomicU64::new(0));
    let mut pending = ranges.into_iter().enumerate();
    let mut done: Vec<Option<PartDone>> = (0..count).map(|_| None).collect();
    run.observer().batch_started(plan.batch_id);
    loop {
        while readers.has_idle() {
            let Some((index, range)) = pending.next() else {
                break;
            };
            let read = PartRead {
                read: changes_read(
                    run,
                    session,
                    sink,
                    plan,
                    (range, repeated),
                    progress.clone(),
                )?,
                waits,
            };
            readers.start(index, sink.bronze.stager()?, read)?;
        }
        match readers.next().await {
            Some(result) => {
                let (index, part) = result?;
                if let Some(slot) = done.get_mut(index) {
                    *slot = Some(part);
                }
            }
            None => break,
        }
    }
    let parts: Vec<PartDone> = done.into_iter().flatten().collect();
    if parts.len() != count {
        return Err(EngineError::PartsUnread {
            batch_id: plan.batch_id,
            read: parts.len(),
            parts: count,
        });
    }
    merge(parts).ok_or(EngineError::PartsUnread {
        batch_id: plan.batch_id,
        read: 0,
        parts: count,
    })
}

/// One batch's read from its parts.
fn merge(parts: Vec<PartDone>) -> Option<ChangesRead> {
    let measures: Vec<PartMeasures> = parts.iter().map(|p| p.measures.clone()).collect();
    let staged = StagedFiles::join(parts.into_iter().map(|p| p.staged).collect())?;
    let batch = BatchRead::of(&measures);
    Some(ChangesRead {
        staged,
        stats: batch.stats,
        round_trip: batch.round_trip,
        network_wait_ms: batch.network_wait_ms,
        min_lsn: batch.min_lsn,
    })
}

/// The read measures of a batch from its parts' (`PartMeasures`).
#[derive(Debug, Clone, Default, PartialEq)]
struct BatchRead {
    /// Rows, bytes and read time summed (task-seconds); ranges widened.
    stats: ReadStats,
    /// The slowest part's round trip.
    round_trip: Duration,
    /// The parts' waits summed; `None` when no part could read its own.
    network_wait_ms: Option<i64>,
    /// The highest low-water mark a part saw after its read.
    min_lsn: Option<Lsn>,
}

impl BatchRead {
    fn of(parts: &[PartMeasures]) -> Self {
        let mut batch = BatchRead::default();
        for part in parts {
            batch.stats.absorb(&part.stats);
            batch.round_trip = batch.round_trip.max(part.round_trip);
            if let Some(ms) = part.network_wait_ms {
                batch.network_wait_ms = Some(batch.network_wait_ms.unwrap_or(0) + ms);
            }
            if let Checked::MinLsn(min) = part.checked {
                batch.min_lsn = Some(batch.min_lsn.map_or(min, |m| m.max(min)));
            }
        }
        batch
    }
}

/// The read of one range of a batch's changes. Its rows count towards the
/// batch's progress, shared by its parts.
fn changes_read<S: ChangeSource>(
    run: &Run<'_>,
    session: &S,
    sink: &Sink,
    plan: &PlannedBatch,
    (range, repeated): (LsnRange, Option<RepeatedHour>),
    progress: Arc<AtomicU64>,
) -> Result<parts::PartRead, EngineError> {
    let info = session.info();
    let observer = run.options.observer.clone();
    let batch_id = plan.batch_id;
    let mut seen = 0u64;
    Ok(parts::PartRead {
        query: PartQuery::Changes(ChangesPart {
            info: info.clone(),
            range,
            clock: session.commit_clock(),
            repeated,
        }),
        schema: read_schema(info, &sink.bronze.arrow_schema()?)?,
        batch_id: plan.batch_id.txn_version(),
        value_limit: ValueLimit::new(run.config.max_value_bytes),
        on_batch: Some(Box::new(move |rows| {
            failpoint::hit("mid_read");
            let total = progress.fetch_add(rows - seen, Ordering::Relaxed) + rows - seen;
            seen = rows;
            observer.batch_reading(batch_id, total);
        })),
    })
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn lsn(n: u8) -> Lsn {
        Lsn::from_low_byte(n)
    }

    fn part(
        rows: u64,
        bytes: u64,
        secs: u64,
        rtt_ms: u64,
        wait: Option<i64>,
        min: u8,
    ) -> PartMeasures {
        let ts = |s: i64| Utc.timestamp_opt(1_790_000_000 + s, 0).single();
        PartMeasures {
            stats: ReadStats {
                rows,
                bytes,
                read_time: Duration::from_secs(secs),
                min_lsn: Some(lsn(min + 1)),
                max_lsn: Some(lsn(min + 2)),
                min_commit_ts: ts(i64::from(min)),
                max_commit_ts: ts(i64::from(min) + 1),
                last_key: None,
            },
            round_trip: Duration::from_millis(rtt_ms),
            network_wait_ms: wait,
            checked: Checked::MinLsn(lsn(min)),
        }
    }

    #[test]
    fn a_batch_sums_its_parts_reads_and_takes_the_slowest_round_trip() {
        let batch = BatchRead::of(&[
            part(10, 1_000, 2, 3, Some(5), 10),
            part(20, 3_000, 3, 9, Some(7), 30),
            part(5, 500, 1, 4, None, 20),
        ]);
        assert_eq!(batch.stats.rows, 35, "rows sum");
        assert_eq!(batch.stats.bytes, 4_500, "bytes sum (read_mb)");
        assert_eq!(
            batch.stats.read_time,
            Duration::from_secs(6),
            "task-seconds sum"
        );
        assert_eq!(
            batch.round_trip,
            Duration::from_millis(9),
            "the slowest reader's"
        );
        assert_eq!(batch.network_wait_ms, Some(12), "waits sum");
        assert_eq!(batch.min_lsn, Some(lsn(30)), "the newest low-water mark");
        assert_eq!(
            (batch.stats.min_lsn, batch.stats.max_lsn),
            (Some(lsn(11)), Some(lsn(32)))
        );
        assert_eq!(
            batch.stats.max_commit_ts,
            Utc.timestamp_opt(1_790_000_031, 0).single()
        );
    }

    #[test]
    fn waits_stay_unknown_when_no_reader_may_read_them() {
        let batch = BatchRead::of(&[part(1, 1, 1, 1, None, 1), part(1, 1, 1, 1, None, 2)]);
        assert_eq!(batch.network_wait_ms, None);
    }

    #[test]
    fn a_replay_from_past_a_cut_reads_the_parts_from_there() {
        let plan = PlannedBatch {
            batch_id: crate::domain::BatchId::FIRST,
            start_lsn: lsn(1),
            end_lsn: lsn(90),
            capture_instance: crate::domain::CaptureInstance::new("dbo_t").unwrap(),
            end_commit_ts: None,
            planned_at: Utc::now(),
            events: Vec::new(),
            parts: vec![
                LsnRange {
                    start: lsn(1),
                    end: lsn(30),
                },
                LsnRange {
                    start: lsn(31),
                    end: lsn(60),
                },
                LsnRange {
                    start: lsn(61),
                    end: lsn(90),
                },
            ],
            columns: Vec::new(),
        };
        let ends = |from: u8| -> Vec<(Lsn, Lsn)> {
            ranges_from(&plan, lsn(from))
                .iter()
                .map(|r| (r.start, r.end))
                .collect()
        };
        assert_eq!(ends(1).len(), 3);
        assert_eq!(ends(40), vec![(lsn(40), lsn(60)), (lsn(61), lsn(90))]);
        assert_eq!(ends(91), vec![]);
        let whole = PlannedBatch {
            parts: Vec::new(),
            ..plan.clone()
        };
        assert_eq!(
            ranges_from(&whole, lsn(5))
                .iter()
                .map(|r| (r.start, r.end))
                .collect::<Vec<_>>(),
            vec![(lsn(5), lsn(90))]
        );
    }
}
