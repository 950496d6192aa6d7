//! The one worker a CdcSource needs, as pure data: the same Deployment or
//! CronJob, pod and hardening as a stream's worker (`children`, `pod`),
//! running `mssql-cdc worker --source NS/NAME` with the source's
//! `spec.worker`. The pod's spec hash is the source's alone: its streams
//! are not part of the template, so adding or removing a table does not
//! restart the worker. And a stream of a source as the operator judges it:
//! resolved against its source, as the source's worker runs it.

use std::collections::BTreeMap;

use crate::spec::{CdcSource, CdcStream, Membership, resolve_source_stream, source_membership};

use super::children::{
    BuildError, ChildMeta, SOURCE_LABEL, WorkerDefaults, Workload, admit, workload,
};
use super::pod::{PodInputs, Runs, worker_pod};
use super::spec_hash::source_spec_hash;

/// The name of a source's worker Deployment or CronJob: its own name with
/// a suffix, so that a CdcStream of the same name keeps its own.
pub fn source_child_name(source: &str) -> String {
    format!("{source}-source")
}

/// Labels that select a source's worker pods.
pub fn source_selector_labels(source: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".into(), "mssql-cdc-worker".into()),
        (SOURCE_LABEL.into(), source.into()),
    ])
}

/// The worker for `source`: one pod for all its tables.
pub fn desired_source_workload(
    source: &CdcSource,
    defaults: &WorkerDefaults,
) -> Result<Workload, BuildError> {
    let meta = ChildMeta::of(source, Some(source_child_name), source_selector_labels)?;
    let spec = &source.spec;
    admit(spec.worker.as_ref(), defaults)?;
    let source_ref = format!("{}/{}", meta.namespace, meta.name);
    let inputs = PodInputs {
        credentials: Some(&spec.connection.credentials),
        monitoring: spec.connection.monitoring.as_ref(),
        worker: spec.worker.as_ref(),
        runs: Runs::Source(&source_ref),
        spec_hash: source_spec_hash(spec),
    };
    let template = worker_pod(&inputs, &meta.labels, defaults)?;
    workload(&spec.trigger, spec.suspend, &meta, template)
}

/// `stream` as its source's worker runs it: its spec resolved against
/// `source` (connection, trigger, defaults), its metadata and status its
/// own; so its conditions are judged, and its worker's spec hash
/// compared, on what actually runs.
pub fn resolved_stream(source: &CdcSource, stream: &CdcStream) -> Result<CdcStream, BuildError> {
    let source_name = source.metadata.name.as_deref().unwrap_or_default();
    let stream_name = stream.metadata.name.as_deref().unwrap_or_default();
    if let Membership::Refused(error) = source_membership(source, stream) {
        return Err((*error).into());
    }
    let spec = resolve_source_stream(source_name, &source.spec, stream_name, &stream.spec)?;
    let mut resolved = stream.clone();
    resolved.spec = spec;
    Ok(resolved)
}

#[cfg(test)]
#[path = "source_children_tests.rs"]
mod tests;
