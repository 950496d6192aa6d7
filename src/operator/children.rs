//! The worker a stream needs, as pure data: a Deployment for a continuous
//! stream, a CronJob for a scheduled `availableNow` stream, around the pod
//! `pod` builds, once `policy` allows the image, ServiceAccount, volumes
//! and variables the stream asks for. No API calls here; `controller` applies what this
//! builds.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;

use crate::spec::{
    CdcSource, CdcStream, PasswordSource, SourceConfig, SourceRefError, StreamConfig,
    ValidationErrors, WorkerSpec, source_connection_config, source_stream_config,
};

use super::pod::pod_template;
use super::policy::{Refusal, WorkerPolicy};

/// The variable the worker reads the SQL password from; the operator fills
/// it from the stream's `passwordFrom.secretKeyRef`.
pub const PASSWORD_ENV: &str = "MSSQL_CDC_PASSWORD";
/// The variable the worker reads the monitoring login's password from,
/// filled from `spec.source.monitoring`'s `secretKeyRef`.
pub const MONITORING_PASSWORD_ENV: &str = "MSSQL_CDC_MONITORING_PASSWORD";
/// Port of the worker's `/healthz` (the worker's default `--listen` port).
pub const WORKER_PORT: i32 = 8080;
/// Label naming the stream a child belongs to.
pub const STREAM_LABEL: &str = "mssql-cdc.io/stream";
/// Label naming the CdcSource a stream is a table of (set by the operator,
/// so `kubectl get cdcs -l mssql-cdc.io/source=sales` lists its tables),
/// and the source a source worker's children belong to.
pub const SOURCE_LABEL: &str = "mssql-cdc.io/source";

/// What a worker pod runs for `stream`: its validated spec, with the
/// password read from [`PASSWORD_ENV`], where the pod this module builds
/// puts the Secret's value.
pub fn worker_config(stream: &CdcStream) -> Result<StreamConfig, ValidationErrors> {
    Ok(passwords_from_pod_env(stream.spec.validate()?))
}

/// What a source's worker pod runs for `stream`, one table of `source`:
/// the stream resolved from the source's connection and defaults
/// (`spec::source_stream_config`), with the passwords read from the
/// variables the pod has them in, as [`worker_config`].
pub fn source_worker_config(
    source: &CdcSource,
    stream: &CdcStream,
) -> Result<StreamConfig, SourceRefError> {
    let source_name = source.metadata.name.as_deref().unwrap_or_default();
    let stream_name = stream.metadata.name.as_deref().unwrap_or_default();
    let config = source_stream_config(source_name, &source.spec, stream_name, &stream.spec)?;
    Ok(passwords_from_pod_env(config))
}

/// The connection of `source` alone, as its worker pod has it (passwords
/// as [`source_worker_config`]): what the worker's discovery asks the
/// database's catalog on, with or without any stream.
pub fn source_worker_connection(source: &CdcSource) -> Result<SourceConfig, SourceRefError> {
    let source_name = source.metadata.name.as_deref().unwrap_or_default();
    let mut connection = source_connection_config(source_name, &source.spec)?;
    source_passwords_from_pod_env(&mut connection);
    Ok(connection)
}

/// A password from a Secret is in the pod's environment: the operator puts
/// it there ([`PASSWORD_ENV`], [`MONITORING_PASSWORD_ENV`]).
fn passwords_from_pod_env(mut config: StreamConfig) -> StreamConfig {
    source_passwords_from_pod_env(&mut config.source);
    config
}

fn source_passwords_from_pod_env(source: &mut SourceConfig) {
    if matches!(source.password, PasswordSource::SecretKeyRef { .. }) {
        source.password = PasswordSource::Env(PASSWORD_ENV.to_string());
    }
    if let Some(login) = source.monitoring.as_mut()
        && matches!(login.password, PasswordSource::SecretKeyRef { .. })
    {
        login.password = PasswordSource::Env(MONITORING_PASSWORD_ENV.to_string());
    }
}

/// Operator-wide settings of every worker: defaults a stream's
/// `spec.worker` may override or add to, and what it may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerDefaults {
    /// Image of the worker (the operator's own).
    pub image: String,
    /// ServiceAccount of workers (the Helm chart's worker account).
    pub service_account: Option<String>,
    /// Pull secrets of every worker pod (the chart's
    /// `worker.imagePullSecrets`), before the stream's own.
    pub image_pull_secrets: Vec<String>,
    /// Labels of every worker pod (the chart's `worker.podLabels`); a
    /// stream's `podLabels` win over them.
    pub pod_labels: BTreeMap<String, String>,
    /// What a stream may ask for: images, ServiceAccounts, volume types,
    /// variables and Secrets.
    pub policy: WorkerPolicy,
    /// The worker's log level (`--log-level`), when not the default.
    pub log_level: Option<String>,
    /// How often workers write moving numbers into the status
    /// (`--status-interval`), when not [`super::verdict::DEFAULT_STATUS_INTERVAL`];
    /// the operator widens its age limits by the matching allowance.
    pub status_interval: Option<std::time::Duration>,
}

impl WorkerDefaults {
    /// How often workers write moving numbers into the status.
    pub fn status_interval(&self) -> std::time::Duration {
        self.status_interval
            .unwrap_or(super::verdict::DEFAULT_STATUS_INTERVAL)
    }

    /// Workers of `image` running as the namespace's default account, with
    /// nothing else allowed.
    pub fn new(image: impl Into<String>) -> Self {
        WorkerDefaults {
            image: image.into(),
            service_account: None,
            image_pull_secrets: Vec::new(),
            pod_labels: BTreeMap::new(),
            policy: WorkerPolicy::default(),
            log_level: None,
            status_interval: None,
        }
    }
}

/// The one child a stream owns.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// A continuous stream: one replica, never two at once.
    Continuous(Box<Deployment>),
    /// A scheduled `availableNow` stream.
    Scheduled(Box<CronJob>),
}

/// Why no worker can be built for a stream; shown in its status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The object lacks metadata the API server always sets.
    #[error("metadata.{0} is missing")]
    Metadata(&'static str),
    /// The password must come from a Secret in the cluster.
    #[error(
        "spec.source.credentials.passwordFrom: set secretKeyRef; env and file are for local runs"
    )]
    PasswordNotFromSecret,
    /// `availableNow` without a schedule would restart forever.
    #[error("spec.trigger: availableNow needs trigger.schedule when run by the operator")]
    AvailableNowWithoutSchedule,
    /// A `spec.worker` field the pod cannot have.
    #[error("{field}: {problem}")]
    Worker {
        /// The field, e.g. `spec.worker.volumeMounts[0].name`.
        field: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// The operator's policy refuses what the stream asks for.
    #[error(transparent)]
    NotAllowed(#[from] Refusal),
    /// An object of the child's kind and name exists that this stream
    /// does not own: applying would take it over (and garbage collection
    /// would later delete it with the stream).
    #[error(
        "{kind} {name} exists and this CdcStream does not own it (no ownerReference with its uid): the operator does not take it over; delete or rename that {kind}, or give the stream another name"
    )]
    ChildNotOwned {
        /// Its kind, `Deployment` or `CronJob`.
        kind: String,
        /// Its name, the stream's.
        name: String,
    },
    /// The stream names a CdcSource that does not exist.
    #[error(
        "spec.sourceRef names CdcSource {0:?}, which does not exist in this namespace: create it (kubectl get cdcsrc lists those that do), or fix spec.sourceRef"
    )]
    SourceNotFound(String),
    /// The stream cannot be run as a table of its CdcSource.
    #[error("{message}")]
    NotInSource {
        /// `SourceRefError::reason`: `NotAMemberOfSource`,
        /// `LocationNotAllowed`, `StorageOptionNotAllowed` or `InvalidSpec`.
        reason: &'static str,
        /// What is wrong and the fix.
        message: String,
    },
}

impl From<SourceRefError> for BuildError {
    fn from(error: SourceRefError) -> Self {
        let message = match &error {
            SourceRefError::OtherSource { .. }
            | SourceRefError::SourceField { .. }
            | SourceRefError::Invalid { .. } => format!("{error}; fix the stream or its CdcSource"),
            _ => error.to_string(),
        };
        BuildError::NotInSource {
            reason: error.reason(),
            message,
        }
    }
}

impl BuildError {
    pub(super) fn worker(field: impl Into<String>, problem: impl Into<String>) -> Self {
        BuildError::Worker {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The reason of the stream's Event and Ready condition.
    pub fn reason(&self) -> &'static str {
        match self {
            BuildError::NotAllowed(refusal) => refusal.reason(),
            BuildError::ChildNotOwned { .. } => "ChildNotOwned",
            BuildError::SourceNotFound(_) => "SourceNotFound",
            BuildError::NotInSource { reason, .. } => reason,
            _ => "InvalidSpec",
        }
    }

    /// Whether a worker built before must go too: the policy refuses what
    /// it would run, or the child's name is taken (an invalid spec keeps
    /// the last good worker running). Only children the stream owns are
    /// ever deleted. A table its source cannot run is not run by the
    /// source's worker either.
    pub fn removes_worker(&self) -> bool {
        matches!(
            self,
            BuildError::NotAllowed(_)
                | BuildError::ChildNotOwned { .. }
                | BuildError::SourceNotFound(_)
                | BuildError::NotInSource { .. }
        )
    }
}

/// The worker for `stream`.
pub fn desired_workload(
    stream: &CdcStream,
    defaults: &WorkerDefaults,
) -> Result<Workload, BuildError> {
    let meta = ChildMeta::of(stream, None, selector_labels)?;
    admit(stream.spec.worker.as_ref(), defaults)?;
    let stream_ref = format!("{}/{}", meta.namespace, meta.name);
    let template = pod_template(stream, &stream_ref, &meta.labels, defaults)?;
    workload(&stream.spec.trigger, stream.spec.suspend, &meta, template)
}

/// A Deployment for a continuous trigger, a CronJob for `availableNow`
/// on a schedule, around `template`.
pub(super) fn workload(
    trigger: &crate::spec::TriggerSpec,
    suspend: bool,
    meta: &ChildMeta,
    template: PodTemplateSpec,
) -> Result<Workload, BuildError> {
    match (trigger.available_now == Some(true), &trigger.schedule) {
        (true, Some(schedule)) => Ok(Workload::Scheduled(Box::new(cron_job(
            suspend, meta, template, schedule,
        )))),
        (true, None) => Err(BuildError::AvailableNowWithoutSchedule),
        (false, _) => Ok(Workload::Continuous(Box::new(deployment(
            suspend, meta, template,
        )))),
    }
}

/// The policy's verdict on the image, ServiceAccount, volumes and
/// variables a `spec.worker` asks for (its Secrets are judged against the
/// cluster, by `admission`).
pub(super) fn admit(worker: Option<&WorkerSpec>, defaults: &WorkerDefaults) -> Result<(), Refusal> {
    if let Some(worker) = worker {
        defaults.policy.admit_pod(worker)?;
    }
    let image = worker
        .and_then(|w| w.image.as_deref())
        .unwrap_or(&defaults.image);
    defaults.policy.admit_image(image, &defaults.image)?;
    defaults.policy.admit_service_account(
        worker.and_then(|w| w.service_account_name.as_deref()),
        defaults.service_account.as_deref(),
    )
}

/// Name, namespace, labels and owner reference shared by the children of
/// a stream (or of a CdcSource).
pub(super) struct ChildMeta {
    /// The owner's name.
    pub(super) name: String,
    /// The child's name (the owner's, for a stream).
    pub(super) child: String,
    pub(super) namespace: String,
    pub(super) labels: BTreeMap<String, String>,
    owner: OwnerReference,
}

impl ChildMeta {
    /// The metadata of `owner`'s children, named `child` (the owner's own
    /// name when `None`), selected by `selector(name)`.
    pub(super) fn of<K: Resource<DynamicType = ()>>(
        owner: &K,
        child: Option<fn(&str) -> String>,
        selector: fn(&str) -> BTreeMap<String, String>,
    ) -> Result<Self, BuildError> {
        let meta = owner.meta();
        let name = meta.name.clone().ok_or(BuildError::Metadata("name"))?;
        let namespace = meta
            .namespace
            .clone()
            .ok_or(BuildError::Metadata("namespace"))?;
        let owner = owner
            .controller_owner_ref(&())
            .ok_or(BuildError::Metadata("uid"))?;
        Ok(ChildMeta {
            labels: selector(&name),
            child: child.map_or_else(|| name.clone(), |child| child(&name)),
            name,
            namespace,
            owner,
        })
    }

    fn object_meta(&self) -> ObjectMeta {
        let mut labels = self.labels.clone();
        labels.insert(
            "app.kubernetes.io/managed-by".into(),
            "mssql-cdc-operator".into(),
        );
        ObjectMeta {
            name: Some(self.child.clone()),
            namespace: Some(self.namespace.clone()),
            labels: Some(labels),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// Labels that select a stream's worker pods.
pub fn selector_labels(stream_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".into(), "mssql-cdc-worker".into()),
        (STREAM_LABEL.into(), stream_name.into()),
    ])
}

fn deployment(suspend: bool, meta: &ChildMeta, template: PodTemplateSpec) -> Deployment {
    Deployment {
        metadata: meta.object_meta(),
        spec: DeploymentSpec {
            replicas: Some(if suspend { 0 } else { 1 }),
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            }),
            selector: LabelSelector {
                match_labels: Some(meta.labels.clone()),
                match_expressions: None,
            },
            template,
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

fn cron_job(
    suspend: bool,
    meta: &ChildMeta,
    mut template: PodTemplateSpec,
    schedule: &str,
) -> CronJob {
    if let Some(pod) = template.spec.as_mut() {
        pod.restart_policy = Some("OnFailure".into());
    }
    CronJob {
        metadata: meta.object_meta(),
        spec: CronJobSpec {
            schedule: schedule.to_string(),
            suspend: Some(suspend),
            concurrency_policy: Some("Forbid".into()),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(meta.labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(JobSpec {
                    backoff_limit: Some(3),
                    template,
                    ..JobSpec::default()
                }),
            },
            ..CronJobSpec::default()
        },
        status: None,
    }
}

#[cfg(test)]
#[path = "children_tests.rs"]
mod tests;
