//! The operator's own Prometheus series, served on its `--listen` address:
//! how reconciles go (outcome, error kind, duration), how many streams are in
//! each phase, and whether this replica leads.

use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::metrics::Exposition;
use crate::spec::CdcStream;

/// The phase label of a stream the operator has not given a phase yet.
pub const NO_PHASE: &str = "Unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    namespace: String,
    name: String,
    r#type: String,
    status: String,
}

/// Every series of the operator process.
pub struct OperatorMetrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<KindLabels, Counter>,
    duration: Histogram,
    streams: Family<PhaseLabels, Gauge>,
    conditions: Family<ConditionLabels, Gauge>,
    leader: Gauge,
    /// The controllers' caches of CdcStreams (one per watched namespace),
    /// once they run.
    caches: Mutex<Vec<Store<CdcStream>>>,
}

impl Default for OperatorMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl OperatorMetrics {
    /// Empty series under the `mssql_cdc_operator` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("mssql_cdc_operator");
        let reconciles = Family::default();
        registry.register(
            "reconciles",
            "Reconciles of CdcStreams, by result (success or error)",
            reconciles.clone(),
        );
        let errors = Family::default();
        registry.register(
            "reconcile_errors",
            "Failed reconciles, by kind of error",
            errors.clone(),
        );
        // 1 ms to about 33 s.
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "reconcile_duration_seconds",
            "Wall-clock duration of one reconcile",
            duration.clone(),
        );
        let streams = Family::default();
        registry.register(
            "streams",
            "CdcStreams in the controller's cache, by status.phase (Unknown before the first reconcile)",
            streams.clone(),
        );
        let conditions = Family::default();
        registry.register(
            "stream_condition",
            "1 for each condition of each CdcStream in the controller's cache, with its status (True, False or Unknown)",
            conditions.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease (or runs without leader election)",
            leader.clone(),
        );
        OperatorMetrics {
            registry,
            reconciles,
            errors,
            duration,
            streams,
            conditions,
            leader,
            caches: Mutex::new(Vec::new()),
        }
    }

    /// Counts one reconcile that took `took`; `error` is the kind of its
    /// error when it failed.
    pub fn reconciled(&self, took: Duration, error: Option<&'static str>) {
        self.duration.observe(took.as_secs_f64());
        let result = if error.is_some() { "error" } else { "success" };
        self.reconciles
            .get_or_create(&ResultLabels { result })
            .inc();
        if let Some(kind) = error {
            self.errors.get_or_create(&KindLabels { kind }).inc();
        }
    }

    /// Whether this replica now leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts streams by phase from the controllers' caches at each scrape.
    pub fn count_phases_of(&self, caches: Vec<Store<CdcStream>>) {
        *self.caches.lock().unwrap_or_else(|p| p.into_inner()) = caches;
    }

    fn refresh_phases(&self) {
        let caches = self.caches.lock().unwrap_or_else(|p| p.into_inner());
        if caches.is_empty() {
            return;
        }
        let streams: Vec<_> = caches.iter().flat_map(Store::state).collect();
        self.streams.clear();
        for (phase, count) in count_by_phase(streams.iter().map(|s| s.as_ref())) {
            self.streams
                .get_or_create(&PhaseLabels { phase })
                .set(count);
        }
        self.conditions.clear();
        for labels in streams.iter().flat_map(|s| condition_labels(s)) {
            self.conditions.get_or_create(&labels).set(1);
        }
    }
}

impl Exposition for OperatorMetrics {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        self.refresh_phases();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }

    /// The operator's probe only says the process serves; a lost Lease or a
    /// failing reconcile shows in the metrics and the logs.
    fn failures(&self) -> Vec<String> {
        Vec::new()
    }
}

/// One label set per condition of `stream`.
fn condition_labels(stream: &CdcStream) -> Vec<ConditionLabels> {
    let namespace = stream.metadata.namespace.clone().unwrap_or_default();
    let name = stream.metadata.name.clone().unwrap_or_default();
    stream
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .map(|c| ConditionLabels {
            namespace: namespace.clone(),
            name: name.clone(),
            r#type: c.type_.clone(),
            status: c.status.clone(),
        })
        .collect()
}

/// How many `streams` are in each phase (as `status.phase` spells it).
fn count_by_phase<'a>(streams: impl Iterator<Item = &'a CdcStream>) -> Vec<(String, i64)> {
    let mut counts: Vec<(String, i64)> = Vec::new();
    for stream in streams {
        let phase = stream
            .status
            .as_ref()
            .and_then(|status| status.phase)
            .map_or_else(|| NO_PHASE.to_string(), |phase| format!("{phase:?}"));
        match counts.iter_mut().find(|(name, _)| *name == phase) {
            Some((_, count)) => *count += 1,
            None => counts.push((phase, 1)),
        }
    }
    counts.sort();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::test_fixtures::stream;

    fn in_phase(phase: Option<&str>) -> CdcStream {
        match phase {
            Some(phase) => stream(serde_json::json!({"status": {"phase": phase}})),
            None => stream(serde_json::json!({})),
        }
    }

    #[test]
    fn streams_are_counted_by_phase_and_unreconciled_ones_as_unknown() {
        let streams = [
            in_phase(Some("Streaming")),
            in_phase(None),
            in_phase(Some("Streaming")),
            in_phase(Some("Failed")),
        ];
        assert_eq!(
            count_by_phase(streams.iter()),
            [
                ("Failed".to_string(), 1),
                ("Streaming".to_string(), 2),
                ("Unknown".to_string(), 1),
            ]
        );
    }

    #[test]
    fn each_condition_is_a_series_with_its_status() {
        let stream = stream(serde_json::json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "LoginFailed", "message": "m",
             "lastTransitionTime": "2026-11-29T10:00:00Z"}
        ]}}));
        assert_eq!(
            condition_labels(&stream),
            [ConditionLabels {
                namespace: "shop".into(),
                name: "orders".into(),
                r#type: "Ready".into(),
                status: "False".into(),
            }]
        );
    }

    #[test]
    fn reconciles_count_by_result_and_errors_by_kind() {
        let metrics = OperatorMetrics::new();
        metrics.reconciled(Duration::from_millis(3), None);
        metrics.reconciled(Duration::from_millis(3), None);
        metrics.reconciled(Duration::from_millis(40), Some("api_rejected"));
        metrics.set_leader(true);
        let text = Exposition::encode(&metrics).unwrap();
        for line in [
            r#"mssql_cdc_operator_reconciles_total{result="success"} 2"#,
            r#"mssql_cdc_operator_reconciles_total{result="error"} 1"#,
            r#"mssql_cdc_operator_reconcile_errors_total{kind="api_rejected"} 1"#,
            "mssql_cdc_operator_reconcile_duration_seconds_count 3",
            r#"mssql_cdc_operator_reconcile_duration_seconds_bucket{le="0.004"} 2"#,
            "mssql_cdc_operator_leader 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
