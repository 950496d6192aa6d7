//! Freshness of a target's finalization verdict, and why it is stale.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::seconds_between;
use super::stream::LatestBatch;
use crate::domain::Granularity;

/// A target's row of the finalization control table.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The target table.
    pub table_name: String,
    /// The period `finalized_until` is floored to.
    pub granularity: Granularity,
    /// Everything committed before this instant is in the target; `None`
    /// before the first verdict.
    pub finalized_until: Option<DateTime<Utc>>,
    /// When the row last changed.
    pub updated_at: DateTime<Utc>,
    /// The chunked snapshot holding the verdict, while one is open.
    pub open_snapshot_lsn: Option<String>,
    /// Set by silver tables only, whose verdict follows their own applies.
    pub applied_lsn: Option<String>,
}

/// How late a verdict may be. A verdict is stale once its age passes one
/// period plus `trigger` plus `margin`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FreshnessLimits {
    /// The stream's trigger or schedule interval.
    pub trigger: Duration,
    /// Slack on top, for idle entries and slow batches.
    pub margin: Duration,
    /// No micro-batch row for longer than this means the stream stopped
    /// (the same limit as [`super::Thresholds::silence`]).
    pub silence: Duration,
}

impl Default for FreshnessLimits {
    fn default() -> Self {
        FreshnessLimits {
            trigger: Duration::from_secs(60),
            margin: Duration::from_secs(15 * 60),
            silence: Duration::from_secs(15 * 60),
        }
    }
}

impl FreshnessLimits {
    /// The age beyond which a verdict of `granularity` is stale.
    pub fn max_age(&self, granularity: Granularity) -> Duration {
        granularity.period() + self.trigger + self.margin
    }
}

/// Why a verdict is stale, checked in this order (the first that applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StaleReason {
    /// An open snapshot holds the verdict; expected, possibly for days.
    Held,
    /// A silver table: its verdict follows its own applies, not our facts.
    Silver,
    /// No micro-batch row of the target in the facts table.
    NoFacts,
    /// The target's stream wrote no micro-batch row lately.
    Stopped,
    /// Batches read far past the verdict, yet it did not move: the
    /// finalization step fails or no longer runs.
    NotAdvanced,
    /// The stream runs and its verdict advances, yet it lags the source.
    Behind,
}

impl StaleReason {
    /// The reason as the control-table query spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StaleReason::Held => "held",
            StaleReason::Silver => "silver",
            StaleReason::NoFacts => "no facts",
            StaleReason::Stopped => "stopped",
            StaleReason::NotAdvanced => "not advanced",
            StaleReason::Behind => "behind",
        }
    }

    /// A stable name in the style of a Kubernetes condition reason.
    pub fn name(self) -> &'static str {
        match self {
            StaleReason::Held => "SnapshotHoldsVerdict",
            StaleReason::Silver => "SilverVerdict",
            StaleReason::NoFacts => "NoFacts",
            StaleReason::Stopped => "StreamStopped",
            StaleReason::NotAdvanced => "VerdictNotAdvanced",
            StaleReason::Behind => "StreamBehind",
        }
    }

    /// What the reason means and what to do about it.
    pub fn message(self) -> &'static str {
        match self {
            StaleReason::Held => {
                "a chunked snapshot is open and holds the verdict: expected until it completes; leave the table out of the alert meanwhile"
            }
            StaleReason::Silver => {
                "a silver table whose verdict did not move: look for failing silver MERGEs in its stream's log (docs/runbooks.md, SilverFinalized), or whether the stream stopped"
            }
            StaleReason::NoFacts => {
                "the facts table has no micro-batch of this target: check that the stream runs and writes to this facts table"
            }
            StaleReason::Stopped => {
                "the stream stopped writing facts: restart it, or check CDC capture if every stream of the database stopped"
            }
            StaleReason::NotAdvanced => {
                "batches read past the verdict but it did not move: check the stream's log for failing finalization updates"
            }
            StaleReason::Behind => {
                "the stream runs but trails the source: look at its ingestion lag and batch durations"
            }
        }
    }
}

impl fmt::Display for StaleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The freshness of one target's verdict at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalizationHealth {
    /// The target table.
    pub table_name: String,
    /// Seconds since `finalized_until`; `None` before the first verdict.
    pub age_seconds: Option<f64>,
    /// Seconds since the verdict last changed.
    pub seconds_since_update: f64,
    /// Seconds since the target's newest micro-batch row, if any.
    pub seconds_since_batch: Option<f64>,
    /// Why the verdict is stale; `None` while it is fresh.
    pub stale: Option<StaleReason>,
}

impl FinalizationHealth {
    /// Whether the verdict should alert: it is stale for any reason but an
    /// open snapshot holding it, which is expected (possibly for days).
    pub fn fires(&self) -> bool {
        self.stale.is_some_and(|reason| reason != StaleReason::Held)
    }
}

/// Judges a verdict against the target's newest micro-batch row (if any).
/// A verdict is stale when there is none yet or when it is older than
/// [`FreshnessLimits::max_age`]; the reason is the first that applies, in
/// [`StaleReason`] order.
pub fn assess_finalization(
    verdict: &Verdict,
    batch: Option<&LatestBatch>,
    now: DateTime<Utc>,
    limits: &FreshnessLimits,
) -> FinalizationHealth {
    let max_age = limits.max_age(verdict.granularity);
    let age_seconds = verdict.finalized_until.map(|t| seconds_between(t, now));
    let seconds_since_batch = batch.map(|b| seconds_between(b.written_at, now));
    let is_stale = age_seconds.is_none_or(|age| age > max_age.as_secs_f64());
    let reason = || {
        if verdict.open_snapshot_lsn.is_some() {
            return StaleReason::Held;
        }
        if verdict.applied_lsn.is_some() {
            return StaleReason::Silver;
        }
        let Some(batch) = batch else {
            return StaleReason::NoFacts;
        };
        if seconds_since_batch.is_some_and(|s| s > limits.silence.as_secs_f64()) {
            return StaleReason::Stopped;
        }
        // Without a verdict or a batch end there is nothing to compare:
        // the stream is counted as behind, not as failing to advance.
        let read_past = match (batch.end_commit_ts, verdict.finalized_until) {
            (Some(end), Some(until)) => seconds_between(until, end) > max_age.as_secs_f64(),
            _ => false,
        };
        if read_past {
            StaleReason::NotAdvanced
        } else {
            StaleReason::Behind
        }
    };
    FinalizationHealth {
        table_name: verdict.table_name.clone(),
        age_seconds,
        seconds_since_update: seconds_between(verdict.updated_at, now),
        seconds_since_batch,
        stale: is_stale.then(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0)
            .single()
            .unwrap()
            + chrono::Duration::minutes(minutes)
    }

    fn verdict(until: Option<i64>) -> Verdict {
        Verdict {
            table_name: "bronze.orders".into(),
            granularity: Granularity::Hour,
            finalized_until: until.map(at),
            updated_at: at(0),
            open_snapshot_lsn: None,
            applied_lsn: None,
        }
    }

    fn batch(written: i64, end: i64) -> LatestBatch {
        LatestBatch {
            target: "bronze.orders".into(),
            written_at: at(written),
            end_commit_ts: Some(at(end)),
            retention_headroom_hours: Some(72.0),
            ingestion_lag_seconds: Some(0.0),
            capture_lag_seconds: Some(0.0),
        }
    }

    #[test]
    fn stale_reasons_follow_their_order() {
        use StaleReason::*;
        let held = Verdict {
            open_snapshot_lsn: Some("0x00000010000000200001".into()),
            applied_lsn: Some("0x00000010000000200002".into()),
            ..verdict(Some(-200))
        };
        let silver = Verdict {
            applied_lsn: Some("0x00000010000000200002".into()),
            ..verdict(Some(-200))
        };
        // now = at(0); an hour verdict is stale beyond 76 minutes.
        let cases: [(&str, Verdict, Option<LatestBatch>, Option<StaleReason>); 10] = [
            (
                "fresh: 70 minutes old",
                verdict(Some(-70)),
                Some(batch(0, 0)),
                None,
            ),
            (
                "exactly at the limit",
                verdict(Some(-76)),
                Some(batch(0, 0)),
                None,
            ),
            ("held by a snapshot", held, Some(batch(0, 0)), Some(Held)),
            ("silver table", silver, None, Some(Silver)),
            (
                "no facts of the target",
                verdict(Some(-200)),
                None,
                Some(NoFacts),
            ),
            (
                "stream silent 20 minutes",
                verdict(Some(-200)),
                Some(batch(-20, -21)),
                Some(Stopped),
            ),
            (
                "batches read 2 hours past the verdict",
                verdict(Some(-200)),
                Some(batch(0, -80)),
                Some(NotAdvanced),
            ),
            (
                "batches only slightly past the verdict",
                verdict(Some(-200)),
                Some(batch(0, -150)),
                Some(Behind),
            ),
            (
                "no verdict yet, stream running",
                verdict(None),
                Some(batch(0, 0)),
                Some(Behind),
            ),
            (
                "no verdict yet, no facts",
                verdict(None),
                None,
                Some(NoFacts),
            ),
        ];
        for (name, v, b, expected) in cases {
            let health = assess_finalization(&v, b.as_ref(), at(0), &FreshnessLimits::default());
            assert_eq!(health.stale, expected, "{name}");
        }
    }

    #[test]
    fn every_stale_reason_fires_but_a_held_verdict() {
        let health = |stale| FinalizationHealth {
            table_name: "bronze.orders".into(),
            age_seconds: Some(1.0),
            seconds_since_update: 1.0,
            seconds_since_batch: None,
            stale,
        };
        use StaleReason::*;
        let cases = [
            (None, false),
            (Some(Held), false),
            (Some(Silver), true),
            (Some(NoFacts), true),
            (Some(Stopped), true),
            (Some(NotAdvanced), true),
            (Some(Behind), true),
        ];
        for (stale, fires) in cases {
            assert_eq!(health(stale).fires(), fires, "{stale:?}");
        }
    }

    #[test]
    fn ages_are_measured_from_now() {
        let mut v = verdict(Some(-90));
        v.updated_at = at(-5);
        let health =
            assess_finalization(&v, Some(&batch(-1, -2)), at(0), &FreshnessLimits::default());
        assert_eq!(health.age_seconds, Some(5400.0));
        assert_eq!(health.seconds_since_update, 300.0);
        assert_eq!(health.seconds_since_batch, Some(60.0));
        let none = assess_finalization(&verdict(None), None, at(0), &FreshnessLimits::default());
        assert_eq!(none.age_seconds, None);
    }

    #[test]
    fn the_limit_grows_with_the_granularity() {
        let limits = FreshnessLimits::default();
        let cases = [
            (Granularity::Minute, 17 * 60),
            (Granularity::Hour, 76 * 60),
            (Granularity::Day, 24 * 3600 + 16 * 60),
        ];
        for (granularity, seconds) in cases {
            assert_eq!(limits.max_age(granularity), Duration::from_secs(seconds));
            assert_eq!(granularity.as_str().parse::<Granularity>(), Ok(granularity));
        }
        assert!("week".parse::<Granularity>().is_err());
    }
}
