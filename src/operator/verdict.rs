//! What in a CdcStream's status must reach the API server at once, and
//! what may wait. The *verdict* is the phase and each condition's type,
//! status and reason; everything else the status shows (progress, lags,
//! snapshot counts, ages in messages) is a moving number. The worker
//! writes a report at once when it changes the verdict, and otherwise at
//! most every status interval; the controller wakes for a spec, label or
//! annotation change or a new verdict ([`trigger_hash`]), never for moving
//! numbers alone, and on its own timer when time alone will change the
//! verdict ([`next_change`]). All of it is pure: the same `conditions`
//! the status gets, evaluated on what is known.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use crate::spec::{CdcStream, Phase};

use super::children::BuildError;
use super::conditions::{Observed, Runner, conditions};
use super::status::phase;

/// How often a worker writes moving numbers by default (`mssql-cdc worker
/// --status-interval`, the operator's `--worker-status-interval`).
pub const DEFAULT_STATUS_INTERVAL: Duration = Duration::from_secs(30);

/// How much older than the worker's own view a status may be when the
/// worker writes moving numbers every `interval`: one interval for the
/// wait, one more for a slow or retried write. The operator widens every
/// age limit on a reported time by it, so a healthy worker never looks
/// stale (docs/monitoring.md).
pub fn report_allowance(interval: Duration) -> Duration {
    interval.saturating_mul(2)
}

/// The phase and each condition's type, status and reason, in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Verdict {
    /// The stream's phase.
    pub phase: Phase,
    /// `(type, status, reason)` of every condition.
    pub conditions: Vec<(String, String, String)>,
}

/// The verdict on `stream` as `observed` sees it.
pub fn verdict(
    stream: &CdcStream,
    build: Result<(), &BuildError>,
    observed: &Observed<'_>,
) -> Verdict {
    let phase = phase(stream, build);
    let conditions = conditions(stream, phase, observed)
        .into_iter()
        .map(|c| (c.type_, c.status, c.reason))
        .collect();
    Verdict { phase, conditions }
}

/// The verdict on what `stream` says by itself (its spec and status, no
/// pods, a buildable worker) at `now`: what the worker and the
/// controller's watch compare.
pub fn reported_verdict(stream: &CdcStream, now: DateTime<Utc>, allowance: Duration) -> Verdict {
    let runner = if stream.spec.source_ref.is_some() {
        Runner::Source
    } else {
        Runner::Own
    };
    let observed = Observed {
        pods: &[],
        failure: None,
        reconcile_error: None,
        workload_fault: None,
        runner,
        now,
        allowance,
    };
    verdict(stream, Ok(()), &observed)
}

/// The hash the controller's watch of CdcStreams compares: the spec's
/// generation, the labels and annotations, and the verdict at `now`. A
/// status write that changes none of them (the worker's moving numbers,
/// the operator's own conditions) starts no reconcile.
pub fn trigger_hash(stream: &CdcStream, now: DateTime<Utc>, allowance: Duration) -> u64 {
    let mut hasher = DefaultHasher::new();
    stream.metadata.generation.hash(&mut hasher);
    stream.labels().hash(&mut hasher);
    stream.annotations().hash(&mut hasher);
    stream
        .metadata
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    reported_verdict(stream, now, allowance).hash(&mut hasher);
    hasher.finish()
}

/// How long after `observed.now` time alone changes the verdict, if it
/// does within `horizon` (to the second, rounded up). Every age-based
/// verdict turns one way only as time passes (a batch ages into
/// FactsStopped, headroom into RetentionHeadroomLow, a verdict row into
/// stale), so the first change is found by bisection.
pub fn next_change(
    stream: &CdcStream,
    build: Result<(), &BuildError>,
    observed: &Observed<'_>,
    horizon: Duration,
) -> Option<Duration> {
    let at = |offset: u64| {
        let when = observed.now + chrono::Duration::seconds(offset as i64);
        verdict(
            stream,
            build,
            &Observed {
                now: when,
                ..*observed
            },
        )
    };
    let now = at(0);
    let mut high = horizon.as_secs().max(1);
    if at(high) == now {
        return None;
    }
    let mut low = 0;
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if at(middle) == now {
            low = middle;
        } else {
            high = middle;
        }
    }
    Some(Duration::from_secs(high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::conditions::LIVE;
    use crate::operator::test_fixtures::stream;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
    }

    /// A streaming stream whose last batch was written `seconds` before
    /// [`now`], with `rows` rows and a silence limit of 5 minutes.
    fn streaming(seconds: i64, rows: u64) -> CdcStream {
        let written = (now() - chrono::Duration::seconds(seconds)).to_rfc3339();
        stream(serde_json::json!({
            "spec": {"alerts": {"silence": "5m"}},
            "status": {"progress": {
                "batchId": 7, "rows": rows, "writtenAt": written, "endCommitTs": written,
                "retentionHeadroomHours": 72.0, "ingestionLagSeconds": 1.0,
                "captureLagSeconds": 1.0
            }}
        }))
    }

    fn live(verdict: &Verdict) -> (&str, &str) {
        verdict
            .conditions
            .iter()
            .find(|(t, _, _)| t == LIVE)
            .map(|(_, s, r)| (s.as_str(), r.as_str()))
            .unwrap_or_default()
    }

    #[test]
    fn moving_numbers_leave_the_verdict_and_the_trigger_alone() {
        let zero = Duration::ZERO;
        let one = streaming(10, 3);
        let later = streaming(2, 500);
        assert_eq!(
            reported_verdict(&one, now(), zero),
            reported_verdict(&later, now(), zero)
        );
        assert_eq!(
            trigger_hash(&one, now(), zero),
            trigger_hash(&later, now(), zero)
        );
        let stale = streaming(6 * 60, 3);
        assert_eq!(
            live(&reported_verdict(&stale, now(), zero)).1,
            "FactsStopped"
        );
        assert_ne!(
            trigger_hash(&one, now(), zero),
            trigger_hash(&stale, now(), zero)
        );
        let mut edited = one.clone();
        edited.metadata.generation = Some(2);
        assert_ne!(
            trigger_hash(&one, now(), zero),
            trigger_hash(&edited, now(), zero)
        );
    }

    #[test]
    fn the_allowance_keeps_a_status_one_write_behind_live() {
        // Written 5 min 20 s ago: past the 5-minute silence, within it
        // plus the allowance of a 30-second status interval.
        let behind = streaming(320, 3);
        let allowance = report_allowance(DEFAULT_STATUS_INTERVAL);
        assert_eq!(
            live(&reported_verdict(&behind, now(), Duration::ZERO)).0,
            "False"
        );
        assert_eq!(live(&reported_verdict(&behind, now(), allowance)).0, "True");
    }

    #[test]
    fn time_alone_changes_the_verdict_when_the_silence_runs_out() {
        let observed = |now| Observed {
            pods: &[],
            failure: None,
            reconcile_error: None,
            workload_fault: None,
            runner: Runner::Own,
            now,
            allowance: Duration::from_secs(60),
        };
        // Silence 5 min + allowance 1 min, last batch 4 min ago: 2 min left.
        let quiet = streaming(240, 3);
        let hour = Duration::from_secs(3600);
        let next = next_change(&quiet, Ok(()), &observed(now()), hour);
        assert_eq!(next, Some(Duration::from_secs(121)));
        assert_eq!(
            next_change(&quiet, Ok(()), &observed(now()), Duration::from_secs(60)),
            None
        );
        // Already stale: nothing further changes with time.
        let stopped = streaming(60 * 60, 3);
        let later = next_change(&stopped, Ok(()), &observed(now()), Duration::from_secs(600));
        assert_eq!(later, None);
    }
}
