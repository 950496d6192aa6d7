//! The metric series and the observer that updates them.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::domain::FactRow;
use crate::engine::{EngineError, Observer, SnapshotProgress, SourceCheck};

/// Identifies a stream's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    target: String,
    app_id: String,
}

/// A stream's errors, by kind and whether the engine retries them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    target: String,
    app_id: String,
    kind: String,
    transient: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every series of every stream in this process.
pub struct Metrics {
    registry: Registry,
    batches: Family<StreamLabels, Counter>,
    rows: Family<StreamLabels, Counter>,
    snapshot_rows: Family<StreamLabels, Counter>,
    read_bytes: Family<StreamLabels, Counter>,
    last_batch: Family<StreamLabels, FloatGauge>,
    batch_duration: Family<StreamLabels, FloatGauge>,
    headroom: Family<StreamLabels, FloatGauge>,
    ingestion_lag: Family<StreamLabels, FloatGauge>,
    capture_lag: Family<StreamLabels, FloatGauge>,
    live_capture_lag: Family<StreamLabels, FloatGauge>,
    snapshot_copied: Family<StreamLabels, Gauge>,
    snapshot_estimated: Family<StreamLabels, Gauge>,
    up: Family<StreamLabels, Gauge>,
    errors: Family<ErrorLabels, Counter>,
    failed: Mutex<Vec<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// An empty set of series, registered under the `mssql_cdc` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("mssql_cdc");
        let mut float = |name: &str, help: &str| {
            let family = Family::<StreamLabels, FloatGauge>::default();
            registry.register(name, help, family.clone());
            family
        };
        let last_batch = float(
            "last_batch_timestamp_seconds",
            "Unix time the last micro-batch's facts row was written",
        );
        let batch_duration = float(
            "last_batch_duration_seconds",
            "Wall-clock duration of the last micro-batch",
        );
        let headroom = float(
            "retention_headroom_seconds",
            "Seconds until CDC cleanup can reach the stream's position, at the last batch or trigger (the facts column retention_headroom_hours, in seconds)",
        );
        let ingestion_lag = float(
            "ingestion_lag_seconds",
            "Seconds the stream's position trailed CDC capture, at the last batch",
        );
        let capture_lag = float(
            "capture_lag_seconds",
            "Seconds CDC capture trailed the wall clock, at the last batch",
        );
        let live_capture_lag = float(
            "live_capture_lag_seconds",
            "Seconds since the commit of the source's max LSN, read on every trigger (idle ones included): grows while capture is stopped",
        );
        let mut counter = |name: &str, help: &str| {
            let family = Family::<StreamLabels, Counter>::default();
            registry.register(name, help, family.clone());
            family
        };
        let batches = counter("batches", "Micro-batches completed");
        let rows = counter("rows", "Change rows written to the target");
        let snapshot_rows = counter("snapshot_rows", "Rows copied by snapshots");
        let read_bytes = counter(
            "read_bytes",
            "Bytes received from SQL Server by micro-batches",
        );
        let mut int_gauge = |name: &str, help: &str| {
            let family = Family::<StreamLabels, Gauge>::default();
            registry.register(name, help, family.clone());
            family
        };
        let snapshot_copied = int_gauge(
            "snapshot_progress_rows",
            "Rows the running (or last) snapshot has copied",
        );
        let snapshot_estimated = int_gauge(
            "snapshot_estimated_rows",
            "The snapshotted table's row count as the catalog estimates it",
        );
        let up = Family::<StreamLabels, Gauge>::default();
        registry.register(
            "up",
            "1 while the stream's engine runs, 0 once it failed",
            up.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "errors",
            "Errors by kind; transient ones are retried",
            errors.clone(),
        );
        Metrics {
            registry,
            batches,
            rows,
            snapshot_rows,
            read_bytes,
            last_batch,
            batch_duration,
            headroom,
            ingestion_lag,
            capture_lag,
            live_capture_lag,
            snapshot_copied,
            snapshot_estimated,
            up,
            errors,
            failed: Mutex::new(Vec::new()),
        }
    }

    /// The observer that reports one stream's events into these series.
    pub fn observer(self: &Arc<Self>, target: &str, app_id: &str) -> StreamObserver {
        let labels = StreamLabels {
            target: target.to_string(),
            app_id: app_id.to_string(),
        };
        self.up.get_or_create(&labels).set(1);
        StreamObserver {
            metrics: Arc::clone(self),
            labels,
        }
    }

    /// The OpenMetrics text exposition of every series.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }

    /// The streams that stopped on an error (`target/app_id`); empty while
    /// all are healthy.
    pub fn failed_streams(&self) -> Vec<String> {
        self.failed
            .lock()
            .map(|failed| failed.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }
}

/// Reports one stream's engine events into [`Metrics`].
pub struct StreamObserver {
    metrics: Arc<Metrics>,
    labels: StreamLabels,
}

impl StreamObserver {
    fn set_or_clear(&self, family: &Family<StreamLabels, FloatGauge>, value: Option<f64>) {
        match value {
            Some(value) => {
                family.get_or_create(&self.labels).set(value);
            }
            // Unknown now: a stale value would mislead more than none.
            None => {
                family.remove(&self.labels);
            }
        }
    }

    fn count_error(&self, error: &EngineError, transient: bool) {
        self.metrics
            .errors
            .get_or_create(&ErrorLabels {
                target: self.labels.target.clone(),
                app_id: self.labels.app_id.clone(),
                kind: error.kind().to_string(),
                transient: transient.to_string(),
            })
            .inc();
    }
}

impl Observer for StreamObserver {
    fn snapshot_progress(&self, progress: &SnapshotProgress) {
        let m = &self.metrics;
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        m.snapshot_copied
            .get_or_create(&self.labels)
            .set(count(progress.rows));
        match progress.estimated_rows {
            Some(total) => {
                m.snapshot_estimated
                    .get_or_create(&self.labels)
                    .set(count(total));
            }
            None => {
                m.snapshot_estimated.remove(&self.labels);
            }
        }
    }

    fn snapshot_done(&self, row: &FactRow) {
        let m = &self.metrics;
        let rows = row.rows.unwrap_or(0);
        m.snapshot_rows.get_or_create(&self.labels).inc_by(rows);
        m.snapshot_copied
            .get_or_create(&self.labels)
            .set(i64::try_from(rows).unwrap_or(i64::MAX));
    }

    fn source_checked(&self, check: &SourceCheck) {
        let m = &self.metrics;
        let lag = check
            .max_commit_ts
            .map(|commit| (check.observed_at - commit).num_milliseconds() as f64 / 1000.0);
        self.set_or_clear(&m.live_capture_lag, lag);
        let headroom = check.measures.retention_headroom_hours.map(|h| h * 3600.0);
        self.set_or_clear(&m.headroom, headroom);
    }

    fn batch_done(&self, row: &FactRow) {
        let m = &self.metrics;
        m.batches.get_or_create(&self.labels).inc();
        m.rows
            .get_or_create(&self.labels)
            .inc_by(row.rows.unwrap_or(0));
        let bytes = row.read_mb.map_or(0.0, |mb| (mb * 1_000_000.0).round());
        m.read_bytes
            .get_or_create(&self.labels)
            .inc_by(bytes as u64);
        let written = row.written_at.timestamp_millis() as f64 / 1000.0;
        m.last_batch.get_or_create(&self.labels).set(written);
        let duration = row.duration_ms.map(|ms| ms as f64 / 1000.0);
        self.set_or_clear(&m.batch_duration, duration);
        self.set_or_clear(
            &m.headroom,
            row.retention_headroom_hours.map(|h| h * 3600.0),
        );
        self.set_or_clear(&m.ingestion_lag, row.ingestion_lag_seconds);
        self.set_or_clear(&m.capture_lag, row.capture_lag_seconds);
    }

    fn retrying(&self, error: &EngineError, _attempt: u32, _delay: Duration) {
        self.count_error(error, true);
    }

    fn failed(&self, error: &EngineError) {
        self.count_error(error, false);
        self.metrics.up.get_or_create(&self.labels).set(0);
        let name = format!("{}/{}", self.labels.target, self.labels.app_id);
        match self.metrics.failed.lock() {
            Ok(mut failed) => failed.push(name),
            Err(poisoned) => poisoned.into_inner().push(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    #[test]
    fn a_batch_updates_counters_and_gauges_and_a_failure_shows() {
        let metrics = Arc::new(Metrics::new());
        let observer = metrics.observer("bronze.orders", "orders-v1");
        let mut row = FactRow::new("bronze.orders", "orders-v1", None, None, Utc::now());
        row.rows = Some(7);
        row.read_mb = Some(0.5);
        row.retention_headroom_hours = Some(71.5);
        row.ingestion_lag_seconds = Some(2.0);
        observer.batch_done(&row);
        observer.batch_done(&row);
        let text = metrics.encode().unwrap();
        let labels = r#"{target="bronze.orders",app_id="orders-v1"}"#;
        for line in [
            format!("mssql_cdc_batches_total{labels} 2"),
            format!("mssql_cdc_rows_total{labels} 14"),
            format!("mssql_cdc_read_bytes_total{labels} 1000000"),
            format!("mssql_cdc_retention_headroom_seconds{labels} 257400.0"),
            format!("mssql_cdc_ingestion_lag_seconds{labels} 2.0"),
            format!("mssql_cdc_up{labels} 1"),
        ] {
            assert!(text.contains(&line), "{line} missing from\n{text}");
        }
        assert!(
            !text.contains("mssql_cdc_capture_lag_seconds{"),
            "unknown lag has no sample"
        );
        assert!(metrics.failed_streams().is_empty());

        observer.failed(&EngineError::NoFactsRow {
            batch_id: crate::domain::BatchId::FIRST,
        });
        let text = metrics.encode().unwrap();
        assert!(text.contains(&format!("mssql_cdc_up{labels} 0")), "{text}");
        assert!(
            text.contains(
                r#"mssql_cdc_errors_total{target="bronze.orders",app_id="orders-v1",kind="internal",transient="false"} 1"#
            ),
            "{text}"
        );
        assert_eq!(metrics.failed_streams(), ["bronze.orders/orders-v1"]);
    }
}
