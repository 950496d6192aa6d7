//! How far a running snapshot copy is, measured against the table's row
//! estimate. The estimate comes from SQL Server's statistics, which lag
//! behind inserts, so a copy can pass it while still running; every place
//! that shows a copy's progress (the console, the CdcStream's status) says
//! it the same way, and none claims 100 % before the copy is done.

/// A running copy's rows against the table's estimated row count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CopyShare {
    /// Under the estimate: `percent` of `estimate`, at most 99 while the
    /// copy runs (rounding never shows a running copy as done).
    Of { percent: f64, estimate: u64 },
    /// At or past the estimate: the end is no longer known.
    PastEstimate { estimate: u64 },
    /// The catalog gave no estimate.
    Unknown,
}

/// The highest percentage a running copy shows.
const RUNNING_PERCENT_CAP: f64 = 99.0;

impl CopyShare {
    /// The share of a copy that has `rows` rows so far.
    pub fn of(rows: u64, estimate: Option<u64>) -> CopyShare {
        match estimate {
            None => CopyShare::Unknown,
            Some(estimate) if rows >= estimate => CopyShare::PastEstimate { estimate },
            Some(estimate) => CopyShare::Of {
                percent: (rows as f64 / estimate as f64 * 100.0).min(RUNNING_PERCENT_CAP),
                estimate,
            },
        }
    }

    /// The percentage shown, while the copy is under its estimate.
    pub fn percent(self) -> Option<f64> {
        match self {
            CopyShare::Of { percent, .. } => Some(percent),
            CopyShare::PastEstimate { .. } | CopyShare::Unknown => None,
        }
    }

    /// The rows still to copy, while the estimate says how many.
    pub fn rows_left(rows: u64, estimate: Option<u64>) -> Option<u64> {
        match CopyShare::of(rows, estimate) {
            CopyShare::Of { estimate, .. } => Some(estimate - rows),
            CopyShare::PastEstimate { .. } | CopyShare::Unknown => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CopyShare;

    #[test]
    fn a_running_copy_is_never_shown_done() {
        let cases = [
            (
                0,
                Some(200),
                CopyShare::Of {
                    percent: 0.0,
                    estimate: 200,
                },
            ),
            (
                50,
                Some(200),
                CopyShare::Of {
                    percent: 25.0,
                    estimate: 200,
                },
            ),
            (
                4998,
                Some(5000),
                CopyShare::Of {
                    percent: 99.0,
                    estimate: 5000,
                },
            ),
            (5000, Some(5000), CopyShare::PastEstimate { estimate: 5000 }),
            (4, Some(3), CopyShare::PastEstimate { estimate: 3 }),
            (0, Some(0), CopyShare::PastEstimate { estimate: 0 }),
            (7, None, CopyShare::Unknown),
        ];
        for (rows, estimate, expected) in cases {
            assert_eq!(
                CopyShare::of(rows, estimate),
                expected,
                "{rows} rows of {estimate:?}"
            );
        }
    }

    #[test]
    fn rows_are_left_only_under_the_estimate() {
        assert_eq!(CopyShare::rows_left(150, Some(200)), Some(50));
        assert_eq!(CopyShare::rows_left(200, Some(200)), None);
        assert_eq!(CopyShare::rows_left(250, Some(200)), None);
        assert_eq!(CopyShare::rows_left(250, None), None);
    }
}
