//! The CdcSource controller shell: for each CdcSource of a scope it
//! applies the one worker `source_children` builds (after the same cluster
//! checks as a stream's: its Secrets labelled, its child's name its own),
//! removes the other kind, or the worker when the policy refuses it, and
//! applies the status `source_status` computes from its streams and its
//! worker's pods when it changed. It is woken by a source's spec and by
//! a change of what its worker reports of SQL Server (not by its own
//! status writes, nor the worker's moving numbers: `wake_hash`), by its
//! worker and pods, and by
//! a stream of it that is added, removed, or changes phase, readiness or
//! worker state; the moving numbers (lag, headroom) are refreshed on the
//! resync, so a table's every batch costs the source nothing.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Patch;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use crate::spec::{CdcSource, CdcStream, Membership, source_membership};

use super::admission::{Child, Owner, admit_owner_in_cluster, explain_fault};
use super::children::SOURCE_LABEL;
use super::controller::{
    Context, Owned, ReconcileError, api_error, apply_params, apply_workload, scoped_api,
    worker_pods,
};
use super::secret_refs::source_secret_refs;
use super::source_children::{desired_source_workload, source_child_name};
use super::source_conditions::wake_hash;
use super::source_status::{SourceObserved, shows, source_status, source_status_patch};

/// How long a failed source reconcile waits before the next.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// What the reconciles of one scope's sources share.
pub struct SourceScope {
    context: Arc<Context>,
    pods: Store<Pod>,
    streams: Store<CdcStream>,
}

/// A controller of the CdcSources of `namespace` (all when `None`), and
/// the scope its reconciles see.
pub(super) fn scoped_source_controller(
    context: &Arc<Context>,
    namespace: Option<&str>,
) -> (Controller<CdcSource>, SourceScope) {
    let client = context.client();
    let (sources, source_writer) = reflector::store();
    let changed = watcher(
        scoped_api::<CdcSource>(client, namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(source_writer)
    .applied_objects()
    .predicate_filter(wake_hash, Default::default());
    let (streams, stream_writer) = reflector::store();
    let mut seen = HashMap::new();
    let stream_changes = watcher(
        scoped_api::<CdcStream>(client, namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(stream_writer)
    .filter_map(move |event| std::future::ready(rolled_up_change(&mut seen, event)));
    let (pods, pod_writer) = reflector::store();
    let pod_changes = watcher(
        scoped_api::<Pod>(client, namespace),
        watcher::Config::default().labels(SOURCE_LABEL),
    )
    .default_backoff()
    .reflect(pod_writer)
    .touched_objects();
    let owned = watcher::Config::default().labels(SOURCE_LABEL);
    let controller = Controller::for_stream(changed, sources)
        .owns(scoped_api::<Deployment>(client, namespace), owned.clone())
        .owns(scoped_api::<CronJob>(client, namespace), owned)
        .watches_stream(stream_changes, |stream: CdcStream| source_of(&stream))
        .watches_stream(pod_changes, |pod: Pod| {
            let source = pod.labels().get(SOURCE_LABEL)?.clone();
            Some(ObjectRef::new(&source).within(&pod.namespace()?))
        });
    let scope = SourceScope {
        context: Arc::clone(context),
        pods,
        streams,
    };
    (controller, scope)
}

/// The source a stream names.
fn source_of(stream: &CdcStream) -> Option<ObjectRef<CdcSource>> {
    let source = &stream.spec.source_ref.as_ref()?.name;
    Some(ObjectRef::new(source).within(&stream.namespace()?))
}

/// A stream event that changes what its source rolls up: a stream added
/// or deleted, or its source, phase, readiness or worker state changed
/// (its moving numbers wait for the resync).
fn rolled_up_change(
    seen: &mut HashMap<ObjectRef<CdcStream>, u64>,
    event: Result<watcher::Event<CdcStream>, watcher::Error>,
) -> Option<Result<CdcStream, watcher::Error>> {
    match event {
        Ok(watcher::Event::Apply(stream) | watcher::Event::InitApply(stream)) => {
            let key = ObjectRef::from_obj(&stream);
            let hash = rolled_up_hash(&stream);
            (seen.insert(key, hash) != Some(hash)).then_some(Ok(stream))
        }
        Ok(watcher::Event::Delete(stream)) => {
            seen.remove(&ObjectRef::from_obj(&stream));
            Some(Ok(stream))
        }
        Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
        Err(error) => Some(Err(error)),
    }
}

fn rolled_up_hash(stream: &CdcStream) -> u64 {
    let mut hasher = DefaultHasher::new();
    stream
        .spec
        .source_ref
        .as_ref()
        .map(|r| &r.name)
        .hash(&mut hasher);
    if let Some(status) = &stream.status {
        format!(
            "{:?} {:?}",
            status.phase,
            status.worker.as_ref().map(|w| w.state)
        )
        .hash(&mut hasher);
        for c in &status.conditions {
            (&c.type_, &c.status).hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// Runs the source controller of one scope until `shutdown` completes.
pub(super) async fn run_source_scope(
    controller: Controller<CdcSource>,
    scope: Arc<SourceScope>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, scope)
        .for_each(|outcome| async move {
            match outcome {
                Ok((source, _)) => tracing::debug!(source = %source, "reconciled"),
                Err(error) => tracing::debug!("source reconcile: {error}"),
            }
        })
        .await;
}

async fn reconcile(
    source: Arc<CdcSource>,
    scope: Arc<SourceScope>,
) -> Result<Action, ReconcileError> {
    let context = &scope.context;
    let client = context.client();
    let name = source.name_any();
    let namespace = source
        .namespace()
        .ok_or_else(|| ReconcileError::NoNamespace(name.clone()))?;
    let child_name = source_child_name(&name);
    let built = desired_source_workload(&source, context.defaults());
    let (built, applied) = match &built {
        Ok(workload) => {
            let owner = Owner {
                meta: &source.metadata,
                secrets: source_secret_refs(&source),
                child: &child_name,
            };
            let policy = &context.defaults().policy;
            match admit_owner_in_cluster(client, &namespace, &owner, workload, policy).await {
                Err(error) => (built, Err(error)),
                Ok(Err(refused)) => {
                    let refused = Err(refused);
                    let applied = apply(&scope, &source, &refused, Child::Absent).await;
                    (refused, applied)
                }
                Ok(Ok(child)) => {
                    let applied = apply(&scope, &source, &built, child).await;
                    (built, applied)
                }
            }
        }
        Err(_) => {
            let applied = apply(&scope, &source, &built, Child::Absent).await;
            (built, applied)
        }
    };
    let mut applied = applied;
    if let (Ok(workload), Ok(fault)) = (&built, &mut applied)
        && let Some(said) = fault.take()
    {
        *fault = Some(explain_fault(client, &namespace, workload, said).await);
    }
    let pods = worker_pods(&scope.pods, &namespace, SOURCE_LABEL, &name);
    let streams = scope.streams.state();
    // Its tables: the streams that name it and that its spec.members
    // admits (one refused stays out of the counts, with its own status).
    let mine: Vec<&CdcStream> = streams
        .iter()
        .filter(|s| {
            s.namespace().as_deref() == Some(namespace.as_str())
                && matches!(source_membership(&source, s), Membership::Member)
        })
        .map(|s| s.as_ref())
        .collect();
    let reconcile_error = applied.as_ref().err().map(ToString::to_string);
    let observed = SourceObserved {
        streams: &mine,
        pods: &pods,
        failure: built.as_ref().err(),
        reconcile_error: reconcile_error.as_deref(),
        workload_fault: applied.as_ref().ok().and_then(Option::as_ref),
        now: context.now(),
    };
    let status = source_status(&source, &observed);
    let written = if shows(&source, &status) {
        Ok(())
    } else {
        let api: Api<CdcSource> = Api::namespaced(client.clone(), &namespace);
        api.patch_status(
            &name,
            &apply_params(),
            &Patch::Apply(source_status_patch(&name, &status)),
        )
        .await
        .map(|_| ())
        .map_err(|e| api_error("apply status of", "CdcSource", &namespace, &name, e))
    };
    applied?;
    written?;
    Ok(Action::requeue(context.resync()))
}

/// Applies the source's worker (or removes it when `built` refuses it).
async fn apply(
    scope: &SourceScope,
    source: &CdcSource,
    built: &Result<super::children::Workload, super::children::BuildError>,
    child: Child,
) -> Result<Option<super::worker_condition::WorkloadFault>, ReconcileError> {
    let name = source_child_name(&source.name_any());
    let owner = Owned {
        meta: &source.metadata,
        name: &name,
        kind: "CdcSource",
    };
    let namespace = source.namespace().unwrap_or_default();
    apply_workload(scope.context.client(), &owner, &namespace, built, child).await
}

fn error_policy(source: Arc<CdcSource>, error: &ReconcileError, _: Arc<SourceScope>) -> Action {
    tracing::warn!(source = %source.name_any(), kind = error.kind(), "{error}");
    Action::requeue(RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::test_fixtures::source_stream;

    #[test]
    fn a_stream_wakes_its_source_on_a_state_change_not_on_its_numbers() {
        let mut seen = HashMap::new();
        let mut pass = |stream: &CdcStream| {
            rolled_up_change(&mut seen, Ok(watcher::Event::Apply(stream.clone()))).is_some()
        };
        let mut stream = source_stream("orders");
        assert!(pass(&stream), "a new stream");
        assert!(!pass(&stream), "nothing changed");
        stream.status = Some(
            serde_json::from_value(serde_json::json!({"phase": "Streaming",
                "progress": {"ingestionLagSeconds": 1.0}}))
            .unwrap(),
        );
        assert!(pass(&stream), "its phase changed");
        if let Some(progress) = stream.status.as_mut().and_then(|s| s.progress.as_mut()) {
            progress.ingestion_lag_seconds = Some(9.0);
        }
        assert!(!pass(&stream), "only a moving number changed");
        let deleted = rolled_up_change(&mut seen, Ok(watcher::Event::Delete(stream.clone())));
        assert!(
            deleted.is_some(),
            "a deleted stream always wakes its source"
        );
        assert_eq!(source_of(&stream).map(|r| r.name), Some("shop".to_string()));
    }
}
