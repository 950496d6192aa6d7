//! Where each key range of a snapshot stands. A snapshot is read in the
//! ranges its plan's key bounds make (one range without bounds), each in
//! key order, one chunk at a time; every chunk's commit records every
//! range's progress, so a restarted run resumes each range after its own
//! last committed key (docs/adr/0005-parallel-reads.md).

use serde_json::Value;

use crate::lake::checkpoint::PlannedSnapshot;
use crate::lake::records::{ChunkProgress, RangeProgress};
use crate::source::reader::ReadStats;
use crate::source::snapshot::{KeyValues, key_from_json, key_to_json};

/// Key values, one per key column.
type Key = KeyValues;

/// One key range.
#[derive(Debug, Clone)]
struct KeyRange {
    /// Its last key (none: up to the end of the table).
    upto: Option<Key>,
    /// Where its next chunk starts: after its last committed key, else
    /// after its lower bound (none: from the start of the table).
    after: Option<Key>,
    /// What its committed chunks did.
    progress: RangeProgress,
}

/// Every key range of one snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotRanges {
    ranges: Vec<KeyRange>,
}

impl SnapshotRanges {
    /// The ranges of `plan` (one when it has no key bounds or the table is
    /// read without a key) as the newest committed chunk left them
    /// (`resumed`; none before the first). `Err` names what cannot be read.
    pub fn new(
        plan: &PlannedSnapshot,
        keyed: bool,
        resumed: Option<&ChunkProgress>,
    ) -> Result<Self, String> {
        let bounds: Vec<Key> = if keyed {
            plan.key_bounds
                .iter()
                .map(|bound| parse(bound).ok_or("a key bound of its plan cannot be read"))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let mut ranges: Vec<KeyRange> = (0..=bounds.len())
            .map(|i| {
                let lower = i.checked_sub(1).and_then(|b| bounds.get(b)).cloned();
                KeyRange {
                    upto: bounds.get(i).cloned(),
                    after: lower,
                    progress: RangeProgress::default(),
                }
            })
            .collect();
        let Some(resumed) = resumed else {
            return Ok(SnapshotRanges { ranges });
        };
        let recorded: Vec<RangeProgress> = if ranges.len() == 1 {
            vec![RangeProgress {
                rows: resumed.rows,
                finished: resumed.finished,
                last_key: resumed.last_key.clone(),
            }]
        } else {
            resumed.ranges.clone()
        };
        if recorded.len() != ranges.len() {
            return Err(format!(
                "the newest chunk records {} key ranges, the plan has {}",
                recorded.len(),
                ranges.len()
            ));
        }
        for (range, progress) in ranges.iter_mut().zip(recorded) {
            if let Some(key) = &progress.last_key {
                range.after =
                    Some(parse(key).ok_or("the last key of a committed chunk cannot be read")?);
            }
            range.progress = progress;
        }
        Ok(SnapshotRanges { ranges })
    }

    /// The ranges still to read, in key order.
    pub fn open(&self) -> Vec<usize> {
        (0..self.ranges.len())
            .filter(|&i| !self.ranges[i].progress.finished)
            .collect()
    }

    /// Whether every range is read.
    pub fn finished(&self) -> bool {
        self.ranges.iter().all(|r| r.progress.finished)
    }

    /// Rows the committed chunks of every range copied.
    pub fn rows(&self) -> u64 {
        self.ranges.iter().map(|r| r.progress.rows).sum()
    }

    /// Where range `i`'s next chunk reads, as owned keys: after, up to.
    pub fn next_chunk(&self, i: usize) -> (Option<Key>, Option<Key>) {
        self.ranges
            .get(i)
            .map_or((None, None), |r| (r.after.clone(), r.upto.clone()))
    }

    /// Range `i` read a chunk (`stats`), which `ended` it or not.
    pub fn advance(&mut self, i: usize, stats: &ReadStats, ended: bool) {
        let Some(range) = self.ranges.get_mut(i) else {
            return;
        };
        range.progress.rows += stats.rows;
        range.progress.finished = ended;
        if let Some(key) = &stats.last_key {
            range.after = Some(key.clone());
            range.progress.last_key = Some(to_json(key));
        }
    }

    /// The record of chunk `chunk`, range `i`'s, whose last key is
    /// `last_key`: with one range as earlier versions wrote it, else with
    /// every range's progress.
    pub fn progress(
        &self,
        plan: &PlannedSnapshot,
        chunk: u64,
        i: usize,
        last_key: Option<&Key>,
        checkpoint: String,
    ) -> ChunkProgress {
        let split = self.ranges.len() > 1;
        ChunkProgress {
            snapshot: plan.snapshot,
            chunk,
            rows: self.rows(),
            finished: self.finished(),
            last_key: last_key.map(to_json),
            checkpoint: Some(checkpoint),
            plan: Some(plan.clone()),
            range: split.then_some(i),
            ranges: if split {
                self.ranges.iter().map(|r| r.progress.clone()).collect()
            } else {
                Vec::new()
            },
        }
    }
}

fn parse(key: &[Value]) -> Option<Key> {
    key.iter().map(key_from_json).collect()
}

fn to_json(key: &Key) -> Vec<Value> {
    key.iter()
        .map(|v| key_to_json(v).unwrap_or(Value::Null))
        .collect()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::domain::{CaptureInstance, Lsn};

    fn plan(bounds: &[i64]) -> PlannedSnapshot {
        PlannedSnapshot {
            snapshot: 0,
            lsn: Lsn::ZERO,
            capture_instance: CaptureInstance::new("dbo_t").unwrap(),
            commit_ts: None,
            started_at: Utc::now(),
            lost_from_ts: None,
            lost_to_ts: None,
            key_bounds: bounds.iter().map(|b| vec![json!({"int": b})]).collect(),
            switched: None,
            columns: Vec::new(),
        }
    }

    fn stats(rows: u64, last: Option<i64>) -> ReadStats {
        ReadStats {
            rows,
            last_key: last.map(key),
            ..ReadStats::default()
        }
    }

    /// A one-column integer key, made as a chunk's read makes it.
    fn key(v: i64) -> Key {
        vec![key_from_json(&json!({"int": v})).unwrap()]
    }

    fn int(key: &Option<Key>) -> Option<i64> {
        match key.as_deref() {
            Some([one]) => key_to_json(one)?["int"].as_i64(),
            _ => None,
        }
    }

    #[test]
    fn bounds_make_ranges_that_each_resume_after_their_own_last_key() {
        let plan = plan(&[10, 20]);
        let mut ranges = SnapshotRanges::new(&plan, true, None).unwrap();
        assert_eq!(ranges.open(), vec![0, 1, 2]);
        let windows: Vec<(Option<i64>, Option<i64>)> = (0..3)
            .map(|i| {
                let (after, upto) = ranges.next_chunk(i);
                (int(&after), int(&upto))
            })
            .collect();
        assert_eq!(
            windows,
            vec![(None, Some(10)), (Some(10), Some(20)), (Some(20), None)]
        );

        ranges.advance(1, &stats(5, Some(15)), false);
        ranges.advance(0, &stats(7, Some(10)), true);
        let record = ranges.progress(&plan, 3, 0, None, "cp".into());
        assert_eq!(
            (record.rows, record.finished, record.range),
            (12, false, Some(0))
        );

        // A restarted run reads the record back: range 0 is done, range 1
        // goes on after 15, range 2 has not started.
        let resumed = SnapshotRanges::new(&plan, true, Some(&record)).unwrap();
        assert_eq!(resumed.open(), vec![1, 2]);
        assert_eq!(int(&resumed.next_chunk(1).0), Some(15));
        assert_eq!(int(&resumed.next_chunk(2).0), Some(20));
        assert_eq!(resumed.rows(), 12);
    }

    #[test]
    fn one_range_is_recorded_as_earlier_versions_did() {
        let plan = plan(&[]);
        let mut ranges = SnapshotRanges::new(&plan, true, None).unwrap();
        ranges.advance(0, &stats(10, Some(10)), false);
        let last = Some(key(10));
        let record = ranges.progress(&plan, 0, 0, last.as_ref(), "cp".into());
        assert_eq!(record.range, None);
        assert_eq!(record.ranges, Vec::new());
        assert_eq!(record.last_key, Some(vec![json!({"int": 10})]));
        let resumed = SnapshotRanges::new(&plan, true, Some(&record)).unwrap();
        assert_eq!(int(&resumed.next_chunk(0).0), Some(10));
    }

    #[test]
    fn a_table_read_without_a_key_is_one_range_whatever_the_plan_says() {
        let ranges = SnapshotRanges::new(&plan(&[10]), false, None).unwrap();
        assert_eq!(ranges.open(), vec![0]);
    }

    #[test]
    fn a_record_that_does_not_match_the_plan_is_refused() {
        let mut ranged = SnapshotRanges::new(&plan(&[10]), true, None).unwrap();
        ranged.advance(0, &stats(1, Some(1)), false);
        let record = ranged.progress(&plan(&[10]), 0, 0, None, "cp".into());
        assert!(SnapshotRanges::new(&plan(&[10, 20]), true, Some(&record)).is_err());
    }
}
