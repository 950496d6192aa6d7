//! The worker a stream needs, as pure data: a Deployment for a continuous
//! stream, a CronJob for a scheduled `availableNow` stream. No API calls
//! here; `controller` applies what this builds.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, SeccompProfile,
    SecretKeySelector, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use crate::spec::{CdcStream, PasswordSource, StreamConfig, ValidationErrors};

/// The variable the worker reads the SQL password from; the operator fills
/// it from the stream's `passwordFrom.secretKeyRef`.
pub const PASSWORD_ENV: &str = "MSSQL_CDC_PASSWORD";
/// Port of the worker's `/healthz` (the worker's default `--listen` port).
pub const WORKER_PORT: i32 = 8080;
/// Label naming the stream a child belongs to.
pub const STREAM_LABEL: &str = "mssql-cdc.io/stream";
/// Unprivileged user the worker runs as (distroless `nonroot`).
const WORKER_UID: i64 = 65532;

/// What a worker pod runs for `stream`: its validated spec, with the
/// password read from [`PASSWORD_ENV`], where the pod this module builds
/// puts the Secret's value.
pub fn worker_config(stream: &CdcStream) -> Result<StreamConfig, ValidationErrors> {
    let mut config = stream.spec.validate()?;
    if matches!(config.source.password, PasswordSource::SecretKeyRef { .. }) {
        config.source.password = PasswordSource::Env(PASSWORD_ENV.to_string());
    }
    Ok(config)
}

/// Operator-wide defaults a stream's `spec.worker` may override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerDefaults {
    /// Image of the worker (the operator's own).
    pub image: String,
    /// ServiceAccount of workers (the Helm chart's worker account).
    pub service_account: Option<String>,
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
}

/// The worker for `stream`.
pub fn desired_workload(
    stream: &CdcStream,
    defaults: &WorkerDefaults,
) -> Result<Workload, BuildError> {
    let meta = ChildMeta::of(stream)?;
    let template = pod_template(stream, &meta, defaults)?;
    let trigger = &stream.spec.trigger;
    match (trigger.available_now == Some(true), &trigger.schedule) {
        (true, Some(schedule)) => Ok(Workload::Scheduled(Box::new(cron_job(
            stream, &meta, template, schedule,
        )))),
        (true, None) => Err(BuildError::AvailableNowWithoutSchedule),
        (false, _) => Ok(Workload::Continuous(Box::new(deployment(
            stream, &meta, template,
        )))),
    }
}

/// Name, namespace, labels and owner reference shared by a stream's children.
struct ChildMeta {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
    owner: OwnerReference,
}

impl ChildMeta {
    fn of(stream: &CdcStream) -> Result<Self, BuildError> {
        let name = stream
            .metadata
            .name
            .clone()
            .ok_or(BuildError::Metadata("name"))?;
        let namespace = stream
            .metadata
            .namespace
            .clone()
            .ok_or(BuildError::Metadata("namespace"))?;
        let owner = stream
            .controller_owner_ref(&())
            .ok_or(BuildError::Metadata("uid"))?;
        Ok(ChildMeta {
            labels: selector_labels(&name),
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
            name: Some(self.name.clone()),
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

fn deployment(stream: &CdcStream, meta: &ChildMeta, template: PodTemplateSpec) -> Deployment {
    Deployment {
        metadata: meta.object_meta(),
        spec: DeploymentSpec {
            replicas: Some(if stream.spec.suspend { 0 } else { 1 }),
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
    stream: &CdcStream,
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
            suspend: Some(stream.spec.suspend),
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

fn pod_template(
    stream: &CdcStream,
    meta: &ChildMeta,
    defaults: &WorkerDefaults,
) -> Result<PodTemplateSpec, BuildError> {
    let secret = stream
        .spec
        .source
        .credentials
        .password_from
        .secret_key_ref
        .as_ref()
        .ok_or(BuildError::PasswordNotFromSecret)?;
    let worker = stream.spec.worker.clone().unwrap_or_default();
    let mut env = vec![EnvVar {
        name: PASSWORD_ENV.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.name.clone(),
                key: secret.key.clone(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }];
    env.extend(worker.env.iter().cloned());
    let health = |initial_delay: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::String("http".into()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(10),
        ..Probe::default()
    };
    let container = Container {
        name: "worker".into(),
        image: Some(
            worker
                .image
                .clone()
                .unwrap_or_else(|| defaults.image.clone()),
        ),
        command: Some(vec!["mssql-cdc".into()]),
        args: Some(vec![
            "--log-format=json".into(),
            "worker".into(),
            "--stream".into(),
            format!("{}/{}", meta.namespace, meta.name),
        ]),
        env: Some(env),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: WORKER_PORT,
            ..ContainerPort::default()
        }]),
        liveness_probe: Some(health(30)),
        readiness_probe: Some(health(5)),
        resources: worker.resources.clone(),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            seccomp_profile: Some(runtime_default()),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "tmp".into(),
            mount_path: "/tmp".into(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    Ok(PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(meta.labels.clone()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            service_account_name: worker
                .service_account_name
                .clone()
                .or_else(|| defaults.service_account.clone()),
            node_selector: (!worker.node_selector.is_empty()).then(|| worker.node_selector.clone()),
            tolerations: (!worker.tolerations.is_empty()).then(|| worker.tolerations.clone()),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(WORKER_UID),
                run_as_group: Some(WORKER_UID),
                seccomp_profile: Some(runtime_default()),
                ..PodSecurityContext::default()
            }),
            volumes: Some(vec![Volume {
                name: "tmp".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
    })
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        localhost_profile: None,
    }
}

#[cfg(test)]
#[path = "children_tests.rs"]
mod tests;
