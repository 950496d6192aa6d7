//! The controller shell: for each CdcStream (of every namespace, or of the
//! watched ones, one controller each) it applies the worker that
//! `children` builds once `admission` found its Secrets labelled and its
//! name free (server-side apply, field manager `mssql-cdc-operator`,
//! forced only onto its own child), removes a worker of the other kind, or
//! any worker it owns when the stream is refused, reads the worker's pods
//! (from a store its watch keeps), records an Event when the phase or
//! readiness changes (and a Warning when a reconcile fails), and applies
//! the phase and the health conditions to the status when they changed, a
//! failed reconcile included. A status write that changes neither the spec,
//! the labels and annotations nor the verdict (the worker's moving numbers,
//! its own conditions) starts no reconcile; a stream is looked at again
//! when time alone changes its verdict, or after the resync. A stream
//! naming a CdcSource gets no worker of its own: `source_controller`, run
//! beside this one in each scope, runs one for all the source's tables.
//! Every decision is made by the pure steps in `children`, `policy`,
//! `pod_policy`, `secret_refs`, `status`, `conditions` and `verdict`.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::spec::{CdcSource, CdcStream};

use super::admission::{Child, ChildKind, admit_in_cluster, child_state, explain_fault};
use super::children::{
    BuildError, SOURCE_LABEL, STREAM_LABEL, WorkerDefaults, Workload, desired_workload,
};
use super::conditions::{
    Observed, RECONCILE_ERROR, Runner, conditions, ready_changed, ready_event,
};
use super::metrics::OperatorMetrics;
use super::rollout::observed_generation;
use super::source_children::resolved_stream;
use super::source_controller::{run_source_scope, scoped_source_controller};
use super::status::{OPERATOR_FIELD_MANAGER, Transition, phase, status_patch, transition};
use super::supervisor::Supervisor;
use super::verdict::{next_change, report_allowance, trigger_hash};
use super::worker_condition::WorkloadFault;

/// How often a stream is looked at again without any change by default: a
/// stopped worker cannot report that it stopped.
pub const RESYNC: Duration = Duration::from_secs(60);

/// The shortest wait before a stream is looked at again for a verdict
/// that time changes.
const SOONEST: Duration = Duration::from_secs(1);

/// Why a reconcile failed; it is retried with a growing delay
/// ([`super::backoff`]).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API server refused a write or could not be reached.
    #[error("{action} {kind} {namespace}/{name}: {source}")]
    Api {
        /// What was attempted.
        action: &'static str,
        /// Kind of the object.
        kind: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What the client said.
        source: kube::Error,
    },
    /// The labels of a Secret the stream names cannot be read, so the
    /// operator cannot tell whether the stream may have it.
    #[error(
        "cannot read the labels of Secret {namespace}/{name}: {source}; the operator needs get on secrets in this namespace (the chart grants it unless workerUnlabelledSecrets is set)"
    )]
    SecretLabels {
        /// The stream's namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// What the client said.
        source: kube::Error,
    },
    /// The stream has no namespace (a cluster-scoped copy cannot exist).
    #[error("CdcStream {0} has no namespace")]
    NoNamespace(String),
    /// A child the API server would refuse, refused before asking.
    #[error("{0}")]
    Invalid(String),
}

/// The longest CronJob name Kubernetes accepts: its Jobs get an 11-character
/// suffix within the 63 of a label value.
pub const MAX_CRONJOB_NAME: usize = 52;

impl ReconcileError {
    /// A short label for the metric of errors by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            // The server answered with a refusal (conflict, invalid, forbidden...).
            ReconcileError::Api {
                source: kube::Error::Api(_),
                ..
            } => "api_rejected",
            ReconcileError::Api { .. } => "api_unreachable",
            ReconcileError::SecretLabels {
                source: kube::Error::Api(_),
                ..
            } => "api_rejected",
            ReconcileError::SecretLabels { .. } => "api_unreachable",
            ReconcileError::NoNamespace(_) => "no_namespace",
            ReconcileError::Invalid(_) => "invalid_child",
        }
    }
}

/// The time conditions are judged at; tests put a fake clock here.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// What every reconcile needs.
pub struct Context {
    client: Client,
    defaults: WorkerDefaults,
    recorder: Recorder,
    clock: Clock,
    resync: Duration,
    namespaces: Vec<String>,
}

impl Context {
    /// A context whose Events name `instance` (the pod) as their reporter,
    /// on the wall clock, looking at each stream again every [`RESYNC`].
    pub fn new(client: Client, defaults: WorkerDefaults, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: OPERATOR_FIELD_MANAGER.to_string(),
            instance,
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            defaults,
            clock: Arc::new(Utc::now),
            resync: RESYNC,
            namespaces: Vec::new(),
        }
    }

    /// Watches only CdcStreams (and owns only workers) in `namespaces`, so
    /// that namespaced Roles are enough; every namespace when empty.
    pub fn with_namespaces(mut self, namespaces: Vec<String>) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// Judges conditions at the time `clock` returns instead of the wall clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Looks at each stream again every `resync` (a stopped worker cannot
    /// report, so Live only turns False on such a look).
    pub fn with_resync(mut self, resync: Duration) -> Self {
        self.resync = resync;
        self
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    pub(super) fn defaults(&self) -> &WorkerDefaults {
        &self.defaults
    }

    /// The time conditions are judged at.
    pub(super) fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// How often everything is looked at again without any change.
    pub(super) fn resync(&self) -> Duration {
        self.resync
    }

    /// How much older than its worker's view a stream's status may be.
    fn allowance(&self) -> Duration {
        report_allowance(self.defaults.status_interval())
    }
}

/// What the reconciles of one scope (all namespaces, or one) share: the
/// context, and the worker pods their watch keeps.
pub struct Scope {
    context: Arc<Context>,
    pods: Store<Pod>,
    sources: Store<CdcSource>,
}

/// Runs the controller until `shutdown` completes; in-flight reconciles
/// finish first. Every reconcile is counted and timed in `metrics`. With
/// [`Context::with_namespaces`] it watches (and needs rights in) only those
/// namespaces, one controller each; otherwise every namespace.
pub async fn run_controller(
    context: Context,
    metrics: Arc<OperatorMetrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let scopes: Vec<Option<String>> = if context.namespaces.is_empty() {
        vec![None]
    } else {
        context.namespaces.iter().cloned().map(Some).collect()
    };
    let context = Arc::new(context);
    let shutdown = shutdown.shared();
    let controllers: Vec<(Controller<CdcStream>, Scope)> = scopes
        .iter()
        .map(|scope| scoped_controller(&context, scope.as_deref()))
        .collect();
    let stores: Vec<_> = controllers.iter().map(|(c, _)| c.store()).collect();
    metrics.count_phases_of(stores.clone());
    let supervisor = Arc::new(Supervisor::new(Arc::clone(&metrics), stores));
    let runs = controllers.into_iter().map(|(controller, scope)| {
        run_scope(
            controller,
            Arc::new(scope),
            Arc::clone(&supervisor),
            shutdown.clone(),
        )
        .boxed()
    });
    let source_runs = scopes.iter().map(|scope| {
        let (controller, scope) = scoped_source_controller(&context, scope.as_deref());
        run_source_scope(controller, Arc::new(scope), shutdown.clone()).boxed()
    });
    futures::future::join_all(runs.chain(source_runs)).await;
}

/// A controller of the CdcStreams of `namespace` (all when `None`) and the
/// Deployments and CronJobs the operator labels as its own there, woken by
/// a stream only when [`trigger_hash`] changes; and the scope its
/// reconciles see, with the store of the worker pods it watches.
fn scoped_controller(
    context: &Arc<Context>,
    namespace: Option<&str>,
) -> (Controller<CdcStream>, Scope) {
    let client = &context.client;
    let owned =
        watcher::Config::default().labels("app.kubernetes.io/managed-by=mssql-cdc-operator");
    let workers = watcher::Config::default().labels(WORKER_PODS);
    let (streams, stream_writer) = reflector::store();
    let clock = Arc::clone(&context.clock);
    let allowance = context.allowance();
    let changed = watcher(
        scoped_api::<CdcStream>(client, namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(stream_writer)
    .applied_objects()
    .predicate_filter(
        move |stream: &CdcStream| Some(trigger_hash(stream, clock(), allowance)),
        Default::default(),
    );
    let (pods, pod_writer) = reflector::store();
    let pod_changes = watcher(scoped_api::<Pod>(client, namespace), workers)
        .default_backoff()
        .reflect(pod_writer)
        .touched_objects();
    // A source made, edited or deleted wakes the streams naming it (its
    // own status writes do not: they change no generation).
    let (sources, source_writer) = reflector::store();
    let source_changes = watcher(
        scoped_api::<CdcSource>(client, namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(source_writer)
    .touched_objects()
    .predicate_filter(predicates::generation, Default::default());
    let (of_pods, of_sources) = (streams.clone(), streams.clone());
    let controller = Controller::for_stream(changed, streams)
        .owns(scoped_api::<Deployment>(client, namespace), owned.clone())
        .owns(scoped_api::<CronJob>(client, namespace), owned)
        .watches_stream(pod_changes, move |pod| streams_of_pod(&of_pods, pod))
        .watches_stream(source_changes, move |source: CdcSource| {
            let namespace = source.namespace().unwrap_or_default();
            streams_of_source(&of_sources, &namespace, &source.name_any())
        });
    let scope = Scope {
        context: Arc::clone(context),
        pods,
        sources,
    };
    (controller, scope)
}

/// The label selector of every worker pod (Deployments' and Jobs' alike).
const WORKER_PODS: &str = "app.kubernetes.io/name=mssql-cdc-worker";

/// The streams a worker pod runs, from its labels: its stream's, or
/// every stream of its source.
fn streams_of_pod(streams: &Store<CdcStream>, pod: Pod) -> Vec<ObjectRef<CdcStream>> {
    let namespace = pod.namespace().unwrap_or_default();
    if let Some(name) = pod.labels().get(STREAM_LABEL) {
        return vec![ObjectRef::new(name).within(&namespace)];
    }
    match pod.labels().get(SOURCE_LABEL) {
        Some(source) => streams_of_source(streams, &namespace, source),
        None => Vec::new(),
    }
}

/// The streams of `namespace` whose `spec.sourceRef` names `source`.
pub(super) fn streams_of_source(
    streams: &Store<CdcStream>,
    namespace: &str,
    source: &str,
) -> Vec<ObjectRef<CdcStream>> {
    streams
        .state()
        .iter()
        .filter(|stream| {
            stream.namespace().as_deref() == Some(namespace)
                && stream
                    .spec
                    .source_ref
                    .as_ref()
                    .is_some_and(|r| r.name == source)
        })
        .map(|stream| ObjectRef::from_obj(stream.as_ref()))
        .collect()
}

pub(super) fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

async fn run_scope(
    controller: Controller<CdcStream>,
    context: Arc<Scope>,
    supervisor: Arc<Supervisor>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let for_reconciles = Arc::clone(&supervisor);
    let for_outcomes = Arc::clone(&supervisor);
    controller
        .graceful_shutdown_on(shutdown)
        .run(
            move |stream, context| {
                let supervisor = Arc::clone(&for_reconciles);
                async move {
                    let observed = Arc::clone(&stream);
                    supervisor
                        .observe(&observed, reconcile(stream, context))
                        .await
                }
            },
            move |stream, error, _| error_policy(&supervisor, &stream, error),
            context,
        )
        .for_each(|outcome| {
            let supervisor = Arc::clone(&for_outcomes);
            async move {
                match outcome {
                    Ok((object, _)) => tracing::debug!(stream = %object, "reconciled"),
                    // A child's change for a stream that was just deleted.
                    Err(kube::runtime::controller::Error::ObjectNotFound(erased)) => {
                        tracing::debug!(stream = %erased, "the stream was deleted");
                        let mut stream = ObjectRef::<CdcStream>::new(&erased.name);
                        if let Some(namespace) = &erased.namespace {
                            stream = stream.within(namespace);
                        }
                        supervisor.forget(&stream);
                    }
                    Err(error) => tracing::warn!("reconcile failed: {error}"),
                }
            }
        })
        .await;
}

async fn reconcile(stream: Arc<CdcStream>, scope: Arc<Scope>) -> Result<Action, ReconcileError> {
    let name = stream.name_any();
    let namespace = stream
        .namespace()
        .ok_or_else(|| ReconcileError::NoNamespace(name.clone()))?;
    let found = match &stream.spec.source_ref {
        Some(source) => in_source(&scope, &stream, &namespace, &source.name).await,
        None => alone(&scope, &stream, &namespace).await,
    };
    report(&scope, &namespace, found).await
}

/// What a reconcile found before it reports: the stream as it is judged
/// (a stream of a source resolved against it), why no worker can run it,
/// the outcome of the writes, and the pods of the worker that runs it.
struct Found<'a> {
    judged: Cow<'a, CdcStream>,
    build: Result<(), BuildError>,
    applied: Result<Option<WorkloadFault>, ReconcileError>,
    pods: Vec<Pod>,
    runner: Runner,
}

/// A stream run by its own worker: that worker applied.
async fn alone<'a>(scope: &Scope, stream: &'a CdcStream, namespace: &str) -> Found<'a> {
    let context = &scope.context;
    let client = &context.client;
    let (built, mut applied) = build_and_apply(client, stream, namespace, &context.defaults).await;
    if let Err(error) = label_source(client, stream, namespace, None).await {
        applied = applied.and(Err(error));
    }
    Found {
        judged: Cow::Borrowed(stream),
        build: built.map(|_| ()),
        applied,
        pods: worker_pods(&scope.pods, namespace, STREAM_LABEL, &stream.name_any()),
        runner: Runner::Own,
    }
}

/// A table of a CdcSource: no worker of its own (one it had before it
/// moved into the source goes), the source's label, and judged as the
/// source's worker runs it, on that worker's pods.
async fn in_source<'a>(
    scope: &Scope,
    stream: &'a CdcStream,
    namespace: &str,
    source_name: &str,
) -> Found<'a> {
    let client = &scope.context.client;
    let mut applied = label_source(client, stream, namespace, Some(source_name)).await;
    let name = stream.name_any();
    for removed in [
        delete_owned::<Deployment>(client, namespace, &name, &stream.metadata).await,
        delete_owned::<CronJob>(client, namespace, &name, &stream.metadata).await,
    ] {
        applied = applied.and(removed);
    }
    let source = scope
        .sources
        .get(&ObjectRef::new(source_name).within(namespace));
    let (judged, build) = match source.map(|source| resolved_stream(&source, stream)) {
        None => (
            Cow::Borrowed(stream),
            Err(BuildError::SourceNotFound(source_name.to_string())),
        ),
        Some(Err(error)) => (Cow::Borrowed(stream), Err(error)),
        Some(Ok(resolved)) => (Cow::Owned(resolved), Ok(())),
    };
    Found {
        judged,
        build,
        applied: applied.map(|()| None),
        pods: worker_pods(&scope.pods, namespace, SOURCE_LABEL, source_name),
        runner: Runner::Source,
    }
}

/// Sets the label naming the stream's source (removes it when the stream
/// left its source); nothing is sent when the label is as it should be.
async fn label_source(
    client: &Client,
    stream: &CdcStream,
    namespace: &str,
    source: Option<&str>,
) -> Result<(), ReconcileError> {
    if stream.labels().get(SOURCE_LABEL).map(String::as_str) == source {
        return Ok(());
    }
    let name = stream.name_any();
    let labels = match source {
        Some(source) => serde_json::json!({SOURCE_LABEL: source}),
        None => serde_json::json!({}),
    };
    let patch = serde_json::json!({
        "apiVersion": crate::spec::API_VERSION,
        "kind": crate::spec::KIND,
        "metadata": {"name": name, "labels": labels},
    });
    let streams: Api<CdcStream> = Api::namespaced(client.clone(), namespace);
    streams
        .patch(&name, &apply_params(), &Patch::Apply(patch))
        .await
        .map(|_| ())
        .map_err(|source| api_error("label", "CdcStream", namespace, &name, source))
}

/// Events, and the phase and conditions into the status when they changed.
async fn report(
    scope: &Scope,
    namespace: &str,
    found: Found<'_>,
) -> Result<Action, ReconcileError> {
    let context = &scope.context;
    let client = &context.client;
    let Found {
        judged,
        build,
        applied,
        pods,
        runner,
    } = found;
    let stream = judged.as_ref();
    let name = stream.name_any();
    let build = build.as_ref().map(|_| ());
    let new_phase = phase(stream, build);
    let old_phase = stream.status.as_ref().and_then(|s| s.phase);
    let mut events: Vec<Transition> = transition(old_phase, new_phase, build)
        .into_iter()
        .collect();
    let reconcile_error = applied.as_ref().err().map(ToString::to_string);
    let workload_fault = applied.as_ref().ok().cloned().flatten();
    let observed = Observed {
        pods: &pods,
        failure: build.err(),
        reconcile_error: reconcile_error.as_deref(),
        workload_fault: workload_fault.as_ref(),
        runner,
        now: (context.clock)(),
        allowance: context.allowance(),
    };
    let conditions = conditions(stream, new_phase, &observed);
    let old_conditions = stream
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    events.extend(ready_changed(old_conditions, &conditions).map(ready_event));
    if let Some(error) = &reconcile_error {
        events.push(Transition {
            reason: RECONCILE_ERROR,
            note: format!("the operator cannot apply the worker: {error}"),
            warning: true,
        });
    }
    for change in events {
        publish(context, stream, change).await;
    }
    let generation = observed_generation(stream, new_phase);
    let status = if shows(stream, generation, new_phase, &conditions) {
        Ok(())
    } else {
        let streams: Api<CdcStream> = Api::namespaced(client.clone(), namespace);
        let patch = status_patch(&name, generation, new_phase, &conditions);
        streams
            .patch_status(&name, &apply_params(), &Patch::Apply(patch))
            .await
            .map(|_| ())
            .map_err(|source| api_error("apply status of", "CdcStream", namespace, &name, source))
    };
    // The child's error first: it is what the status reports.
    applied?;
    status?;
    let again = next_change(stream, build, &observed, context.resync)
        .map_or(context.resync, |soon| soon.max(SOONEST));
    Ok(Action::requeue(again))
}

/// Whether the stream's status already shows the operator's part: then
/// applying it again would change nothing and is not sent.
fn shows(
    stream: &CdcStream,
    generation: Option<i64>,
    phase: crate::spec::Phase,
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> bool {
    stream.status.as_ref().is_some_and(|status| {
        status.phase == Some(phase)
            && status.observed_generation == generation
            && status.conditions == conditions
    })
}

/// The worker the stream needs, judged by the policy and then against the
/// cluster (its Secrets' labels, the owner of the child's name), and the
/// outcome of applying it. When the cluster cannot tell, nothing is
/// applied or removed.
async fn build_and_apply(
    client: &Client,
    stream: &CdcStream,
    namespace: &str,
    defaults: &WorkerDefaults,
) -> (
    Result<Workload, BuildError>,
    Result<Option<WorkloadFault>, ReconcileError>,
) {
    let built = desired_workload(stream, defaults);
    let child = match &built {
        Ok(workload) => {
            admit_in_cluster(client, namespace, stream, workload, &defaults.policy).await
        }
        Err(_) => Ok(Ok(Child::Absent)),
    };
    let (built, child) = match child {
        Err(error) => return (built, Err(error)),
        Ok(Err(refused)) => (Err(refused), Child::Absent),
        Ok(Ok(child)) => (built, child),
    };
    let name = stream.name_any();
    let owner = Owned {
        meta: &stream.metadata,
        name: &name,
        kind: "CdcStream",
    };
    let mut applied = apply_workload(client, &owner, namespace, &built, child).await;
    if let (Ok(workload), Ok(fault)) = (&built, &mut applied)
        && let Some(said) = fault.take()
    {
        *fault = Some(explain_fault(client, namespace, workload, said).await);
    }
    (built, applied)
}

/// The owner of a worker, as applying it needs: its metadata, the name
/// of its child and its kind (for messages).
pub(super) struct Owned<'a> {
    pub(super) meta: &'a ObjectMeta,
    pub(super) name: &'a str,
    pub(super) kind: &'static str,
}

/// Applies the worker `built` describes and removes the other kind (or
/// both, when the policy refuses the owner). The apply is forced only
/// onto the owner's own `child`. Returns why the applied Deployment
/// cannot create its pods, when its status says so.
pub(super) async fn apply_workload(
    client: &Client,
    owner: &Owned<'_>,
    namespace: &str,
    built: &Result<Workload, BuildError>,
    child: Child,
) -> Result<Option<WorkloadFault>, ReconcileError> {
    let (name, meta) = (owner.name, owner.meta);
    let force = child == Child::Owned;
    let mut fault = None;
    match built {
        Ok(Workload::Continuous(deployment)) => {
            let applied = apply(
                Api::namespaced(client.clone(), namespace),
                name,
                deployment.as_ref(),
                force,
            )
            .await?;
            fault = WorkloadFault::of_deployment(&applied);
            delete_owned::<CronJob>(client, namespace, name, meta).await?;
        }
        Ok(Workload::Scheduled(cron_job)) => {
            if name.len() > MAX_CRONJOB_NAME {
                return Err(ReconcileError::Invalid(format!(
                    "a scheduled {kind}'s CronJob is named {name:?}, and CronJob names have at \
                     most {MAX_CRONJOB_NAME} characters; it has {}: recreate the {kind} under a \
                     shorter name",
                    name.len(),
                    kind = owner.kind,
                )));
            }
            let applied = apply(
                Api::namespaced(client.clone(), namespace),
                name,
                cron_job.as_ref(),
                force,
            )
            .await?;
            fault = failed_run(client, namespace, &applied).await?;
            delete_owned::<Deployment>(client, namespace, name, meta).await?;
        }
        // The policy refuses what the owner asks for: no worker runs it,
        // not even one built before the spec or the policy changed.
        Err(error) if error.removes_worker() => {
            tracing::warn!(owner = %name, namespace, "{error}");
            delete_owned::<Deployment>(client, namespace, name, meta).await?;
            delete_owned::<CronJob>(client, namespace, name, meta).await?;
        }
        // An invalid spec keeps whatever worker it had; the status says why.
        Err(error) => tracing::warn!(owner = %name, namespace, "{error}"),
    }
    Ok(fault)
}

/// Why the CronJob's last run failed, read from its Jobs only when its
/// status says the last run did not succeed (a healthy schedule costs no
/// request).
async fn failed_run(
    client: &Client,
    namespace: &str,
    cron_job: &CronJob,
) -> Result<Option<WorkloadFault>, ReconcileError> {
    if !WorkloadFault::last_run_unsuccessful(cron_job) {
        return Ok(None);
    }
    let labels = cron_job
        .spec
        .job_template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let name = cron_job.metadata.name.as_deref().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let list = jobs
        .list(&ListParams::default().labels(&labels))
        .await
        .map_err(|source| api_error("list", "Job".to_string(), namespace, name, source))?;
    Ok(WorkloadFault::of_jobs(cron_job, &list.items))
}

/// The worker pods of a stream or a source (labelled `label=name`), as
/// the watch of worker pods last saw them (none before its first list:
/// the WorkerRunning condition then says it does not know, and the list's
/// pods start a reconcile of their own).
pub(super) fn worker_pods(pods: &Store<Pod>, namespace: &str, label: &str, name: &str) -> Vec<Pod> {
    pods.state()
        .iter()
        .filter(|pod| {
            pod.namespace().as_deref() == Some(namespace)
                && pod.labels().get(label).map(String::as_str) == Some(name)
        })
        .map(|pod| pod.as_ref().clone())
        .collect()
}

/// Records an Event on the stream; failing to is logged, never fatal.
async fn publish(context: &Context, stream: &CdcStream, change: Transition) {
    let event = Event {
        type_: if change.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: change.reason.to_string(),
        note: Some(change.note),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    if let Err(error) = context
        .recorder
        .publish(&event, &stream.object_ref(&()))
        .await
    {
        tracing::warn!(stream = %stream.name_any(), "cannot record an Event: {error}");
    }
}

fn error_policy(supervisor: &Supervisor, stream: &CdcStream, error: &ReconcileError) -> Action {
    supervisor.retry(stream, error)
}

pub(super) fn apply_params() -> PatchParams {
    PatchParams::apply(OPERATOR_FIELD_MANAGER).force()
}

/// Server-side apply of `object`; forced only onto the stream's own child
/// (see [`admit_in_cluster`]), so that an object someone made meanwhile
/// makes the apply conflict instead of being taken over.
pub(super) async fn apply<K>(
    api: Api<K>,
    name: &str,
    object: &K,
    force: bool,
) -> Result<K, ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let params = if force {
        apply_params()
    } else {
        PatchParams::apply(OPERATOR_FIELD_MANAGER)
    };
    api.patch(name, &params, &Patch::Apply(object))
        .await
        .map_err(|source| api_error("apply", kind_of::<K>(), api_namespace(object), name, source))
}

/// Deletes the child `name` of kind `K` if `owner` (a stream or a source)
/// owns it (after a trigger change swapped Deployment and CronJob, or a
/// stream moved into a source); someone else's is left.
pub(super) async fn delete_owned<K: ChildKind>(
    client: &Client,
    namespace: &str,
    name: &str,
    owner: &ObjectMeta,
) -> Result<(), ReconcileError> {
    if let Ok(Child::Owned) = child_state::<K>(client, namespace, name, owner).await? {
        let api: Api<K> = Api::namespaced(client.clone(), namespace);
        api.delete(name, &DeleteParams::background())
            .await
            .map_err(|source| api_error("delete", kind_of::<K>(), namespace, name, source))?;
    }
    Ok(())
}

fn kind_of<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).to_string()
}

fn api_namespace<K: Resource>(object: &K) -> &str {
    object.meta().namespace.as_deref().unwrap_or_default()
}

/// A [`ReconcileError::Api`] for `action` on the object.
pub(super) fn api_error(
    action: &'static str,
    kind: impl Into<String>,
    namespace: &str,
    name: &str,
    source: kube::Error,
) -> ReconcileError {
    ReconcileError::Api {
        action,
        kind: kind.into(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        source,
    }
}
