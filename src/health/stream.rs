//! The five stream alerts, judged on a target's newest micro-batch row.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::seconds_between;

/// What the newest micro-batch row (event NULL) of one target says; the
/// input of [`assess_stream`] and of the finalization reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct LatestBatch {
    /// The target table the stream writes.
    pub target: String,
    /// When the row was written: the stream's liveness clock.
    pub written_at: DateTime<Utc>,
    /// Source commit time the target was complete up to after the batch.
    pub end_commit_ts: Option<DateTime<Utc>>,
    /// Hours before CDC cleanup reaches the stream's position, when measured.
    pub retention_headroom_hours: Option<f64>,
    /// Seconds the stream trailed capture, when measured.
    pub ingestion_lag_seconds: Option<f64>,
    /// Seconds capture trailed the wall clock, when measured.
    pub capture_lag_seconds: Option<f64>,
}

/// Alert limits. The defaults suit a continuously running stream; a job run
/// on a schedule needs `silence` of at least its schedule interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// No micro-batch row for longer than this: the stream (or capture) stopped.
    pub silence: Duration,
    /// Alert when headroom minus the time since the last row falls below this.
    pub min_headroom: Duration,
    /// Alert when the stream trails capture by more than this.
    pub max_ingestion_lag: Duration,
    /// Alert when capture trails the database by more than this.
    pub max_capture_lag: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            silence: Duration::from_secs(15 * 60),
            min_headroom: Duration::from_secs(24 * 3600),
            max_ingestion_lag: Duration::from_secs(3600),
            max_capture_lag: Duration::from_secs(10 * 60),
        }
    }
}

/// One stream alert. Each has a stable name (for conditions, JSON and
/// scripts) and a message that says what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Alert {
    /// No micro-batch row for longer than the silence limit.
    FactsStopped,
    /// Headroom, less the time since the last row, is below the limit.
    RetentionHeadroomLow,
    /// The row has no retention headroom: the metric alerts are blind.
    MetricsMissing,
    /// The stream trails capture by more than the limit.
    IngestionLagHigh,
    /// Capture trails the database by more than the limit.
    CaptureLagHigh,
}

impl Alert {
    /// Every alert, in the order reports list them.
    pub const ALL: [Alert; 5] = [
        Alert::FactsStopped,
        Alert::RetentionHeadroomLow,
        Alert::MetricsMissing,
        Alert::IngestionLagHigh,
        Alert::CaptureLagHigh,
    ];

    /// The stable name, in the style of a Kubernetes condition reason.
    pub fn name(self) -> &'static str {
        match self {
            Alert::FactsStopped => "FactsStopped",
            Alert::RetentionHeadroomLow => "RetentionHeadroomLow",
            Alert::MetricsMissing => "MetricsMissing",
            Alert::IngestionLagHigh => "IngestionLagHigh",
            Alert::CaptureLagHigh => "CaptureLagHigh",
        }
    }

    /// What the alert means and what to do about it, in one sentence.
    pub fn message(self) -> &'static str {
        match self {
            Alert::FactsStopped => {
                "no micro-batch facts lately: check that the stream's process runs, then whether CDC capture on the source database is running"
            }
            Alert::RetentionHeadroomLow => {
                "CDC cleanup is less than the limit behind the stream's position: restart or speed up the stream, or lengthen the capture job's retention, before changes are purged unread"
            }
            Alert::MetricsMissing => {
                "the newest batch has no retention or lag metrics, so those alerts cannot fire: check the stream's warnings and that its login can read the CDC metadata"
            }
            Alert::IngestionLagHigh => {
                "the stream trails what CDC capture has processed: look for slow batches (read time, network wait) or a sparse trigger"
            }
            Alert::CaptureLagHigh => {
                "CDC capture trails the database: a DBA should check the capture job, the log scan sessions and sys.dm_cdc_errors"
            }
        }
    }
}

/// The verdict on one stream at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamHealth {
    /// The target table.
    pub target: String,
    /// Hours from the newest row to `now`.
    pub hours_since_last: f64,
    /// The newest row's retention headroom, in hours.
    pub headroom_hours: Option<f64>,
    /// The newest row's ingestion lag, in seconds.
    pub ingestion_lag_seconds: Option<f64>,
    /// The newest row's capture lag, in seconds.
    pub capture_lag_seconds: Option<f64>,
    /// The alerts that fire, in [`Alert::ALL`] order.
    pub alerts: Vec<Alert>,
}

impl StreamHealth {
    /// Whether any alert fires on the stream.
    pub fn fires(&self) -> bool {
        !self.alerts.is_empty()
    }
}

/// Judges one stream. A missing metric never fires its own alert (only
/// [`Alert::MetricsMissing`], for the headroom), the way a comparison with
/// NULL is never true in SQL.
pub fn assess_stream(batch: &LatestBatch, now: DateTime<Utc>, limits: &Thresholds) -> StreamHealth {
    let since_last = seconds_between(batch.written_at, now);
    let hours_since_last = since_last / 3600.0;
    let headroom = batch.retention_headroom_hours;
    let fires = |alert: Alert| match alert {
        Alert::FactsStopped => since_last > limits.silence.as_secs_f64(),
        Alert::RetentionHeadroomLow => headroom
            .is_some_and(|h| h - hours_since_last < limits.min_headroom.as_secs_f64() / 3600.0),
        Alert::MetricsMissing => headroom.is_none(),
        Alert::IngestionLagHigh => batch
            .ingestion_lag_seconds
            .is_some_and(|lag| lag > limits.max_ingestion_lag.as_secs_f64()),
        Alert::CaptureLagHigh => batch
            .capture_lag_seconds
            .is_some_and(|lag| lag > limits.max_capture_lag.as_secs_f64()),
    };
    StreamHealth {
        target: batch.target.clone(),
        hours_since_last,
        headroom_hours: headroom,
        ingestion_lag_seconds: batch.ingestion_lag_seconds,
        capture_lag_seconds: batch.capture_lag_seconds,
        alerts: Alert::ALL.into_iter().filter(|a| fires(*a)).collect(),
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

    fn batch(headroom: Option<f64>, ingestion: Option<f64>, capture: Option<f64>) -> LatestBatch {
        LatestBatch {
            target: "bronze.orders".into(),
            written_at: at(0),
            end_commit_ts: Some(at(-1)),
            retention_headroom_hours: headroom,
            ingestion_lag_seconds: ingestion,
            capture_lag_seconds: capture,
        }
    }

    #[test]
    fn each_alert_fires_on_its_own_condition() {
        use Alert::*;
        let healthy = batch(Some(72.0), Some(2.0), Some(5.0));
        let cases: [(&str, LatestBatch, i64, Vec<Alert>); 10] = [
            ("healthy, just written", healthy.clone(), 1, vec![]),
            ("silent for exactly 15 minutes", healthy.clone(), 15, vec![]),
            (
                "silent for 16 minutes",
                healthy.clone(),
                16,
                vec![FactsStopped],
            ),
            (
                "stopped long enough to eat the headroom",
                healthy.clone(),
                49 * 60,
                vec![FactsStopped, RetentionHeadroomLow],
            ),
            (
                "headroom below a day",
                batch(Some(23.5), Some(0.0), Some(0.0)),
                0,
                vec![RetentionHeadroomLow],
            ),
            (
                "no metrics",
                batch(None, None, None),
                0,
                vec![MetricsMissing],
            ),
            (
                "ingestion an hour behind",
                batch(Some(72.0), Some(3600.5), Some(1.0)),
                0,
                vec![IngestionLagHigh],
            ),
            (
                "ingestion lag at the limit",
                batch(Some(72.0), Some(3600.0), Some(1.0)),
                0,
                vec![],
            ),
            (
                "capture behind",
                batch(Some(72.0), Some(1.0), Some(601.0)),
                0,
                vec![CaptureLagHigh],
            ),
            (
                "headroom missing, lags high",
                batch(None, Some(7200.0), Some(900.0)),
                0,
                vec![MetricsMissing, IngestionLagHigh, CaptureLagHigh],
            ),
        ];
        for (name, facts, minutes_later, expected) in cases {
            let health = assess_stream(&facts, at(minutes_later), &Thresholds::default());
            assert_eq!(health.alerts, expected, "{name}");
        }
    }

    #[test]
    fn reports_the_measures_alongside_the_alerts() {
        let health = assess_stream(
            &batch(Some(70.0), Some(3.0), None),
            at(90),
            &Thresholds::default(),
        );
        assert_eq!(health.hours_since_last, 1.5);
        assert_eq!(health.headroom_hours, Some(70.0));
        assert_eq!(health.ingestion_lag_seconds, Some(3.0));
        assert_eq!(health.capture_lag_seconds, None);
    }

    #[test]
    fn thresholds_can_be_tightened() {
        let limits = Thresholds {
            silence: Duration::from_secs(60),
            min_headroom: Duration::from_secs(71 * 3600),
            max_ingestion_lag: Duration::from_secs(1),
            max_capture_lag: Duration::from_secs(1),
        };
        let health = assess_stream(&batch(Some(72.0), Some(2.0), Some(2.0)), at(2), &limits);
        assert_eq!(
            health.alerts,
            vec![
                Alert::FactsStopped,
                Alert::IngestionLagHigh,
                Alert::CaptureLagHigh
            ]
        );
    }

    #[test]
    fn names_are_unique_and_messages_say_what_to_do() {
        let names: std::collections::BTreeSet<&str> = Alert::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(names.len(), Alert::ALL.len());
        for alert in Alert::ALL {
            assert!(alert.message().contains(':'), "{}", alert.name());
        }
    }
}
