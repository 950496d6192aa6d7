//! `spec.onDataLoss`: what the stream does when CDC cleanup purged changes
//! it had not read. Decided when a batch is planned (is the next LSN still
//! kept?) and around each read (did cleanup move past the batch's start
//! while it read?), always against the capture instance read. Pure: the
//! engine reads the low-water marks and acts on the verdict.

use chrono::{DateTime, Utc};

use super::error::DataLossError;
use crate::domain::facts::EventDetail;
use crate::domain::facts::detail::SkipDetail;
use crate::domain::{CaptureInstance, FactEvent, Lsn};
use crate::lake::checkpoint::{PlannedBatch, PlannedEvent};
use crate::spec::OnDataLoss;

/// What the policy makes of a batch's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purged {
    /// Every change from the start on is still kept (or there is nothing
    /// to read yet).
    No,
    /// `skip`: read from `resume`, the first LSN still kept.
    Skip {
        /// The first LSN still kept.
        resume: Lsn,
    },
    /// `resnapshot`: take a new snapshot.
    Resnapshot,
    /// `fail`: stop with a [`DataLossError`].
    Fail,
}

/// The verdict on a batch that must read `[start, upper]` of an instance
/// that keeps changes from `min` on.
pub fn decide(policy: OnDataLoss, start: Lsn, upper: Lsn, min: Lsn) -> Purged {
    if start > upper || start >= min {
        return Purged::No;
    }
    match policy {
        OnDataLoss::Fail => Purged::Fail,
        OnDataLoss::Resnapshot => Purged::Resnapshot,
        OnDataLoss::Skip => Purged::Skip { resume: min },
    }
}

/// A `data_skipped` event: the LSNs `[from, resume)` were purged unread;
/// reading goes on at `resume`. `certain` is false when cleanup ran while
/// a batch read, so changes may be missing rather than must be.
pub fn skipped_event(
    capture_instance: CaptureInstance,
    from: Lsn,
    resume: Lsn,
    lost_from_ts: Option<DateTime<Utc>>,
    lost_to_ts: Option<DateTime<Utc>>,
    certain: bool,
) -> PlannedEvent {
    PlannedEvent {
        event: FactEvent::DataSkipped,
        lsn: resume,
        commit_ts: lost_to_ts,
        capture_instance,
        detail: EventDetail::Skipped(SkipDetail {
            skipped_from_lsn: from,
            skipped_to_lsn: resume.checked_prev().unwrap_or(from),
            resumed_at_lsn: resume,
            certain,
        }),
        lost_from_ts,
        lost_to_ts,
    }
}

/// What the commit times around a purge were, for the error and the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PurgeTimes {
    /// Commit time of the last change before the purged ones.
    pub from_ts: Option<DateTime<Utc>>,
    /// Commit time of the oldest change still kept.
    pub to_ts: Option<DateTime<Utc>>,
}

/// Applies the policy to changes of a planned batch purged before it
/// finished reading them (`min` is the new low-water mark): `fail` and
/// `resnapshot` stop with the error (nothing of the batch is written; a
/// re-snapshot cannot stand in for part of a planned batch), `skip` records
/// that changes may be missing, with `certain: false`.
pub fn purged_while_reading(
    policy: OnDataLoss,
    plan: &PlannedBatch,
    min: Lsn,
    times: PurgeTimes,
    events: &mut Vec<PlannedEvent>,
) -> Result<(), DataLossError> {
    if policy != OnDataLoss::Skip {
        return Err(DataLossError::new(
            plan.capture_instance.clone(),
            plan.start_lsn,
            min,
            times.from_ts,
            times.to_ts,
        ));
    }
    let planned = events.iter_mut().find_map(|e| match &mut e.detail {
        EventDetail::Skipped(detail) => Some(detail),
        _ => None,
    });
    match planned {
        Some(detail) => detail.certain = false,
        None => events.push(skipped_event(
            plan.capture_instance.clone(),
            plan.start_lsn,
            min,
            times.from_ts,
            times.to_ts,
            false,
        )),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn lsn(n: u8) -> Lsn {
        Lsn::from_low_byte(n)
    }

    #[test]
    fn each_policy_decides_on_a_purged_start() {
        use OnDataLoss::*;
        // (name, policy, start, upper, min, verdict)
        let cases = [
            (
                "kept: start at the low-water mark",
                Fail,
                5,
                9,
                5,
                Purged::No,
            ),
            ("kept: start past it", Skip, 7, 9, 5, Purged::No),
            ("nothing to read yet", Fail, 10, 9, 12, Purged::No),
            ("purged, fail", Fail, 3, 9, 5, Purged::Fail),
            (
                "purged, resnapshot",
                Resnapshot,
                3,
                9,
                5,
                Purged::Resnapshot,
            ),
            (
                "purged, skip",
                Skip,
                3,
                9,
                5,
                Purged::Skip { resume: lsn(5) },
            ),
            (
                "purged past upper, skip",
                Skip,
                3,
                4,
                5,
                Purged::Skip { resume: lsn(5) },
            ),
            (
                "start equals upper, purged",
                Resnapshot,
                4,
                4,
                6,
                Purged::Resnapshot,
            ),
        ];
        for (name, policy, start, upper, min, expected) in cases {
            assert_eq!(
                decide(policy, lsn(start), lsn(upper), lsn(min)),
                expected,
                "{name}"
            );
        }
    }

    fn plan(events: Vec<PlannedEvent>) -> PlannedBatch {
        PlannedBatch {
            batch_id: crate::domain::BatchId::new(4).unwrap(),
            start_lsn: lsn(3),
            end_lsn: lsn(9),
            capture_instance: CaptureInstance::new("dbo_orders").unwrap(),
            end_commit_ts: None,
            planned_at: Utc.timestamp_opt(1_790_000_000, 0).single().unwrap(),
            events,
            parts: Vec::new(),
            columns: Vec::new(),
        }
    }

    fn skip_detail(events: &[PlannedEvent]) -> Vec<SkipDetail> {
        events
            .iter()
            .filter_map(|e| match &e.detail {
                EventDetail::Skipped(d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn cleanup_during_a_read_fails_unless_the_policy_skips() {
        let times = PurgeTimes {
            from_ts: None,
            to_ts: None,
        };
        for policy in [OnDataLoss::Fail, OnDataLoss::Resnapshot] {
            let mut events = Vec::new();
            let error = purged_while_reading(policy, &plan(vec![]), lsn(6), times, &mut events)
                .unwrap_err();
            assert_eq!((error.from_lsn, error.to_lsn), (lsn(3), lsn(6)));
            assert!(events.is_empty());
        }

        let mut events = Vec::new();
        purged_while_reading(OnDataLoss::Skip, &plan(vec![]), lsn(6), times, &mut events).unwrap();
        let added = skip_detail(&events);
        assert_eq!(added.len(), 1);
        assert_eq!(
            (
                added[0].skipped_from_lsn,
                added[0].skipped_to_lsn,
                added[0].certain
            ),
            (lsn(3), lsn(5), false)
        );

        // A skip the plan already records becomes uncertain, not a second one.
        let planned = skipped_event(
            CaptureInstance::new("dbo_orders").unwrap(),
            lsn(1),
            lsn(3),
            None,
            None,
            true,
        );
        let mut events = vec![planned];
        purged_while_reading(OnDataLoss::Skip, &plan(vec![]), lsn(6), times, &mut events).unwrap();
        let details = skip_detail(&events);
        assert_eq!(details.len(), 1);
        assert!(!details[0].certain);
        assert_eq!(details[0].resumed_at_lsn, lsn(3));
    }
}
