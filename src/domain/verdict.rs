//! A finalization verdict: up to which instant a target is complete. The
//! engine computes it after each batch, the control table stores it (see
//! `lake::finalization`), and the operator and CLI report it.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use super::{Granularity, Lsn};

/// The verdict `end_commit_ts` supports: the start of the period it falls
/// in. Every change committed up to `end_commit_ts` is in the target, so
/// every change committed before that period start is too; the period
/// itself may still receive changes, so it is not final.
pub fn finalized_until(granularity: Granularity, end_commit_ts: DateTime<Utc>) -> DateTime<Utc> {
    let period = match granularity {
        Granularity::Minute => TimeDelta::minutes(1),
        Granularity::Hour => TimeDelta::hours(1),
        Granularity::Day => TimeDelta::days(1),
    };
    // Rounding to a period that divides a day cannot overflow for any
    // commit time SQL Server can produce; keep the instant itself if it did.
    end_commit_ts
        .duration_trunc(period)
        .unwrap_or(end_commit_ts)
}

/// What one stream writes into its target's row.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictUpdate {
    /// The target table.
    pub table_name: String,
    /// The stream's appId.
    pub app_id: String,
    /// The verdict's period.
    pub granularity: Granularity,
    /// The new verdict (already rounded down), or `None` to keep the row's
    /// (a held verdict). A verdict older than the row's is ignored.
    pub finalized_until: Option<DateTime<Utc>>,
    /// When this update was made.
    pub updated_at: DateTime<Utc>,
    /// The snapshot in progress, which holds the verdict.
    pub open_snapshot_lsn: Option<Lsn>,
    /// A silver table's: the end LSN of the newest batch it applied (`None`
    /// for bronze targets, and to keep a silver row's).
    pub applied_lsn: Option<Lsn>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(text: &str) -> DateTime<Utc> {
        let naive = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap();
        Utc.from_utc_datetime(&naive)
    }

    #[test]
    fn a_verdict_is_the_start_of_the_period_the_end_commit_falls_in() {
        let cases = [
            (
                Granularity::Minute,
                "2026-11-29 10:17:42.5",
                "2026-11-29 10:17:00.0",
            ),
            (
                Granularity::Hour,
                "2026-11-29 10:17:42.5",
                "2026-11-29 10:00:00.0",
            ),
            (
                Granularity::Day,
                "2026-11-29 10:17:42.5",
                "2026-11-29 00:00:00.0",
            ),
            // On a boundary the period just starting holds nothing yet, but it
            // is not final either: the verdict stays at its start.
            (
                Granularity::Hour,
                "2026-11-29 11:00:00.0",
                "2026-11-29 11:00:00.0",
            ),
            (
                Granularity::Hour,
                "2026-11-29 10:59:59.997",
                "2026-11-29 10:00:00.0",
            ),
        ];
        for (granularity, end_commit, expected) in cases {
            assert_eq!(
                finalized_until(granularity, utc(end_commit)),
                utc(expected),
                "{granularity:?} of {end_commit}"
            );
        }
    }
}
