//! A CdcSource's status as a pure function of its streams' statuses, its
//! worker's pods and the last reconcile: bounded aggregates only (counts,
//! `ready/total`, the worst lag and headroom, the earliest finalized
//! instant), never an entry per table, and five conditions: Ready (the
//! worker runs, reads SQL Server and every table is Ready), WorkerRunning
//! (judged as a stream's worker is), SourceConnected and CaptureHealthy
//! (from what the worker reports of the source, `source_conditions.rs`)
//! and TablesDegraded (True while a table is stopped by an error of its
//! own); a message names at most [`MAX_NAMED`] tables plus a count. Each
//! table's own health stays in its CdcStream's status.

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::children::BuildError;
use super::conditions::{READY, RECONCILE_ERROR, judged, to_condition};
use super::failure::STORE_UNAVAILABLE;
use super::source_conditions::{operator_part, source_capture_healthy, source_connected};
use super::status::failure_note;
use super::worker_condition::{Runner, WorkloadFault, worker_running};
use crate::spec::{
    CdcSource, CdcSourceStatus, CdcStream, Phase, SOURCE_KIND, TableCounts, WorkerState,
};

/// The most table names a condition message lists.
pub const MAX_NAMED: usize = 10;
/// True while some of the source's tables are stopped by their own error
/// (True is bad); the others keep streaming.
pub const TABLES_DEGRADED: &str = "TablesDegraded";

/// What the operator saw of a source besides the source itself.
#[derive(Debug, Clone, Copy)]
pub struct SourceObserved<'a> {
    /// The CdcStreams naming the source.
    pub streams: &'a [&'a CdcStream],
    /// The source worker's pods.
    pub pods: &'a [Pod],
    /// Why no worker can be built.
    pub failure: Option<&'a BuildError>,
    /// Why the last reconcile failed, if it did.
    pub reconcile_error: Option<&'a str>,
    /// Why the worker's pods cannot be created, when its Deployment says.
    pub workload_fault: Option<&'a WorkloadFault>,
    /// The time conditions are judged at.
    pub now: DateTime<Utc>,
}

/// The status of `source`, as the operator writes it.
pub fn source_status(source: &CdcSource, observed: &SourceObserved<'_>) -> CdcSourceStatus {
    let streams = observed.streams;
    let tables = counts(streams);
    let phase = if observed.failure.is_some() {
        Phase::Failed
    } else if source.spec.suspend {
        Phase::Suspended
    } else {
        Phase::Streaming
    };
    let worker = worker_running(
        observed.pods,
        None,
        phase,
        observed.failure,
        observed.workload_fault,
        Runner::Own,
    );
    let connected = source_connected(source, &worker);
    let capture = source_capture_healthy(source, observed.now);
    let ready = ready(source, observed, &tables, &worker, &connected);
    let degraded = degraded(streams);
    let old = source
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let generation = source.metadata.generation;
    let progress = || {
        streams
            .iter()
            .filter_map(|s| s.status.as_ref()?.progress.as_ref())
    };
    CdcSourceStatus {
        observed_generation: generation,
        tables: Some(tables),
        tables_ready: Some(format!("{}/{}", tables.ready, tables.total)),
        // Whole seconds and tenths of hours: a moving number is rewritten
        // only when it moves that much.
        max_ingestion_lag_seconds: progress()
            .filter_map(|p| p.ingestion_lag_seconds)
            .reduce(f64::max)
            .map(f64::ceil),
        min_headroom_hours: progress()
            .filter_map(|p| p.retention_headroom_hours)
            .reduce(f64::min)
            .map(|hours| (hours * 10.0).floor() / 10.0),
        finalized_until: finalized_until(streams),
        connection: None,
        capture: None,
        // The worker's (`source_discovery`): left out of this apply.
        discovery: None,
        conditions: [ready, worker, connected, capture, degraded]
            .into_iter()
            .map(|j| to_condition(j, old, generation, observed.now))
            .collect(),
    }
}

/// The source's tables by state.
fn counts(streams: &[&CdcStream]) -> TableCounts {
    let mut counts = TableCounts {
        total: u32::try_from(streams.len()).unwrap_or(u32::MAX),
        ..TableCounts::default()
    };
    for stream in streams {
        let phase = stream.status.as_ref().and_then(|s| s.phase);
        counts.ready += u32::from(is_ready(stream));
        counts.snapshotting += u32::from(phase == Some(Phase::Snapshotting));
        counts.failed += u32::from(is_failed(stream));
        counts.suspended += u32::from(phase == Some(Phase::Suspended));
    }
    counts
}

/// Stopped by an error of its own: failed, or waiting for its own object
/// store past `storeOutageAfter` (a source's outage is the source's, and
/// `SourceConnected` says it once).
fn is_failed(stream: &CdcStream) -> bool {
    stream.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Failed)
            || s.worker.as_ref().is_some_and(|w| {
                w.state == WorkerState::Failed
                    || (w.state == WorkerState::Waiting && w.reason == STORE_UNAVAILABLE)
            })
    })
}

/// `a, b, c and 4 more`: at most [`MAX_NAMED`] names of `streams`.
fn named(streams: &[&&CdcStream]) -> String {
    let names: Vec<&str> = streams
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    let mut text = names
        .iter()
        .take(MAX_NAMED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = names.len().saturating_sub(MAX_NAMED);
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

fn degraded(streams: &[&CdcStream]) -> super::conditions::Judged {
    let failed: Vec<&&CdcStream> = streams.iter().filter(|s| is_failed(s)).collect();
    if failed.is_empty() {
        return judged(
            TABLES_DEGRADED,
            "False",
            "NoTableFailed",
            "no table is stopped by an error of its own",
        );
    }
    judged(
        TABLES_DEGRADED,
        "True",
        "TablesFailed",
        format!(
            "{} table(s) stopped by an error of their own, the others go on: {}; each \
             stream's status says why and what to do",
            failed.len(),
            named(&failed)
        ),
    )
}

fn is_ready(stream: &CdcStream) -> bool {
    stream.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == READY && c.status == "True")
    })
}

/// The earliest finalized-until instant of the tables that keep a
/// finalization table, once every one of them reports one (before that,
/// no instant is true of them all).
fn finalized_until(streams: &[&CdcStream]) -> Option<String> {
    let finalizing: Vec<&&CdcStream> = streams
        .iter()
        .filter(|s| s.spec.finalization.is_some())
        .collect();
    let instants: Vec<DateTime<Utc>> = finalizing
        .iter()
        .filter_map(|s| s.status.as_ref()?.finalization.as_ref()?.finalized_until)
        .collect();
    if finalizing.is_empty() || instants.len() < finalizing.len() {
        return None;
    }
    instants
        .into_iter()
        .min()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// Ready: the first thing that keeps the source from being so, in the
/// order an on-call engineer fixes them.
fn ready(
    source: &CdcSource,
    observed: &SourceObserved<'_>,
    tables: &TableCounts,
    worker: &super::conditions::Judged,
    connected: &super::conditions::Judged,
) -> super::conditions::Judged {
    if let Some(error) = observed.failure {
        return judged(READY, "False", error.reason(), failure_note(error));
    }
    if let Some(error) = observed.reconcile_error {
        return judged(
            READY,
            "False",
            RECONCILE_ERROR,
            format!("the operator cannot apply the source's worker: {error}"),
        );
    }
    let name = source.metadata.name.as_deref().unwrap_or_default();
    if source.spec.suspend {
        return judged(
            READY,
            "False",
            "Suspended",
            "spec.suspend is set: no worker runs the source's tables; unset it to resume them",
        );
    }
    if worker.status == "False" {
        return judged(
            READY,
            "False",
            worker.reason.clone(),
            worker.message.clone(),
        );
    }
    // A source SQL Server does not let in: its reason, not 1,000 tables'.
    if connected.status == "False" {
        return judged(
            READY,
            "False",
            connected.reason.clone(),
            connected.message.clone(),
        );
    }
    if tables.total == 0 {
        return judged(
            READY,
            "False",
            "NoTables",
            format!(
                "no CdcStream names this {SOURCE_KIND}: add one per table with spec.sourceRef.name: {name}"
            ),
        );
    }
    if tables.ready < tables.total {
        let waiting: Vec<&&CdcStream> = observed.streams.iter().filter(|s| !is_ready(s)).collect();
        let named = named(&waiting);
        return judged(
            READY,
            "False",
            "TablesNotReady",
            format!(
                "{}/{} tables Ready; not Ready: {named}; each stream's status says why \
                 (kubectl get cdcs -l mssql-cdc.io/source={name})",
                tables.ready, tables.total
            ),
        );
    }
    if worker.status != "True" {
        return judged(
            READY,
            "False",
            worker.reason.clone(),
            worker.message.clone(),
        );
    }
    judged(
        READY,
        "True",
        "Healthy",
        "the worker runs and every table is Ready",
    )
}

/// Whether the status the source has already shows `status`: then
/// applying it again would change nothing and is not sent. What other
/// field managers write (the worker's `connection`, `capture` and
/// `discovery`) is not compared.
pub fn shows(source: &CdcSource, status: &CdcSourceStatus) -> bool {
    source.status.as_ref().map(operator_part) == Some(operator_part(status))
}

/// The server-side apply body of the source's status.
pub fn source_status_patch(name: &str, status: &CdcSourceStatus) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": crate::spec::API_VERSION,
        "kind": SOURCE_KIND,
        "metadata": {"name": name},
        "status": status,
    })
}

/// The conditions of `status` by type, for tests and messages.
pub fn condition<'a>(status: &'a CdcSourceStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
#[path = "source_status_tests.rs"]
mod tests;
