//! Health verdicts computed from facts, as pure functions (no I/O).
//!
//! `stream` turns a target's newest micro-batch row into the five stream
//! alerts; `finalization` turns a control-table row and the same batch into
//! the freshness of the target's verdict and why it is stale. The
//! `capture` judges capture itself from what a monitoring login reads;
//! `source` judges a CdcSource's tables together (the minimum position
//! over them). The
//! `health` command and the operator's status conditions both call these,
//! so a stream is judged the same way wherever it is looked at.

mod capture;
mod finalization;
mod source;
mod stream;

pub use capture::{CaptureFacts, CaptureProblem, assess_capture};
pub use finalization::{
    FinalizationHealth, FreshnessLimits, StaleReason, Verdict, assess_finalization,
};
pub use source::{SourceCompleteness, SourceTable, SourceVerdict, assess_source};
pub use stream::{Alert, LatestBatch, StreamHealth, Thresholds, assess_stream};

/// Seconds from `from` to `to` (negative when `to` is earlier), with
/// microsecond precision.
fn seconds_between(from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>) -> f64 {
    (to - from).num_microseconds().map_or_else(
        || (to - from).num_seconds() as f64,
        |micros| micros as f64 / 1e6,
    )
}
