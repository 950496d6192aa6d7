//! Capture's health from the SQL Server side, as the monitoring guide
//! judges it: the capture job stopped, errors in the recent log scans, or
//! scans that fall behind. Pure: the inputs are what a monitoring login
//! read and when.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::seconds_between;

/// What was read of capture.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CaptureFacts {
    /// Whether the capture job runs; `None` when it cannot be told.
    pub job_running: Option<bool>,
    /// When the newest scan without errors ended.
    pub last_scan_at: Option<DateTime<Utc>>,
    /// Its latency in seconds.
    pub scan_latency_seconds: Option<i64>,
    /// When the newest capture error was logged.
    pub last_error_at: Option<DateTime<Utc>>,
    /// The live capture lag (now less the commit time of the max LSN).
    pub live_capture_lag_seconds: Option<f64>,
}

/// Why capture is not healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureProblem {
    /// The capture job does not run.
    JobStopped,
    /// A log scan failed and none has succeeded since.
    Errors,
    /// Scans fall behind: their latency, or no scan while changes wait.
    Stalled,
}

impl CaptureProblem {
    /// The condition reason.
    pub fn name(self) -> &'static str {
        match self {
            CaptureProblem::JobStopped => "CaptureJobStopped",
            CaptureProblem::Errors => "CaptureErrors",
            CaptureProblem::Stalled => "CaptureStalled",
        }
    }

    /// What it means and what to do.
    pub fn message(self) -> &'static str {
        match self {
            CaptureProblem::JobStopped => {
                "the database's CDC capture job is not running: a DBA should start it (sys.sp_cdc_start_job) and check SQL Server Agent"
            }
            CaptureProblem::Errors => {
                "a CDC log scan failed and none has succeeded since: a DBA should read sys.dm_cdc_errors and the SQL Server error log"
            }
            CaptureProblem::Stalled => {
                "CDC log scans fall behind the log: a DBA should check the capture job's settings (maxtrans, pollinginterval) and the log's growth"
            }
        }
    }
}

/// The first problem capture has at `now`, if any, with `limit` the
/// latency (and scan age) above which capture counts as stalled.
pub fn assess_capture(
    facts: &CaptureFacts,
    now: DateTime<Utc>,
    limit: Duration,
) -> Option<CaptureProblem> {
    if facts.job_running == Some(false) {
        return Some(CaptureProblem::JobStopped);
    }
    let unrecovered = match (facts.last_error_at, facts.last_scan_at) {
        (Some(error), Some(scan)) => error >= scan,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if unrecovered {
        return Some(CaptureProblem::Errors);
    }
    let limit = limit.as_secs_f64();
    let slow = facts
        .scan_latency_seconds
        .is_some_and(|latency| latency as f64 > limit);
    // No scan for a while is only a stall when changes wait for one: a
    // quiet database has nothing to scan.
    let waiting = facts
        .live_capture_lag_seconds
        .is_some_and(|lag| lag > limit);
    let old_scan = facts
        .last_scan_at
        .is_none_or(|at| seconds_between(at, now) > limit);
    (slow || (waiting && old_scan)).then_some(CaptureProblem::Stalled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap() + chrono::Duration::minutes(minutes)
    }

    #[test]
    fn each_problem_on_its_own_evidence() {
        let healthy = CaptureFacts {
            job_running: Some(true),
            last_scan_at: Some(at(-1)),
            scan_latency_seconds: Some(3),
            last_error_at: None,
            live_capture_lag_seconds: Some(4.0),
        };
        let limit = Duration::from_secs(600);
        let cases = [
            ("healthy", healthy.clone(), None),
            (
                "job stopped",
                CaptureFacts {
                    job_running: Some(false),
                    ..healthy.clone()
                },
                Some(CaptureProblem::JobStopped),
            ),
            (
                "an error after the last good scan",
                CaptureFacts {
                    last_error_at: Some(at(0)),
                    ..healthy.clone()
                },
                Some(CaptureProblem::Errors),
            ),
            (
                "an old error, scans succeeded since",
                CaptureFacts {
                    last_error_at: Some(at(-30)),
                    ..healthy.clone()
                },
                None,
            ),
            (
                "slow scans",
                CaptureFacts {
                    scan_latency_seconds: Some(900),
                    ..healthy.clone()
                },
                Some(CaptureProblem::Stalled),
            ),
            (
                "a quiet database: no scan for an hour, nothing waits",
                CaptureFacts {
                    last_scan_at: Some(at(-60)),
                    ..healthy.clone()
                },
                None,
            ),
            (
                "no scan for an hour while changes wait",
                CaptureFacts {
                    last_scan_at: Some(at(-60)),
                    live_capture_lag_seconds: Some(3600.0),
                    ..healthy.clone()
                },
                Some(CaptureProblem::Stalled),
            ),
        ];
        for (name, facts, expected) in cases {
            assert_eq!(assess_capture(&facts, at(0), limit), expected, "{name}");
        }
    }
}
