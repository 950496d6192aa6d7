//! The worker pod a stream's Deployment or CronJob runs, as pure data:
//! the hardened container the operator always builds (non-root, read-only
//! root, `/tmp` on an emptyDir, probes, the password from the Secret), plus
//! what `spec.worker` and the operator's flags add (volumes, identity,
//! placement, environment). The checks here reject what would make a pod
//! the API server refuses or one the operator cannot select.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, LocalObjectReference, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    SeccompProfile, SecretKeySelector, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::spec::{
    CdcStream, CredentialsSpec, FsGroupChangePolicy, MonitoringSpec, SecretKeyRef, TMP_VOLUME,
    WorkerPodSecurity, WorkerSpec,
};

use super::children::{
    BuildError, MONITORING_PASSWORD_ENV, PASSWORD_ENV, WORKER_PORT, WorkerDefaults,
};
use super::spec_hash::{SPEC_HASH_ANNOTATION, spec_hash};

/// Unprivileged user the worker runs as (distroless `nonroot`).
const WORKER_UID: i64 = 65532;
/// Where the operator's emptyDir is mounted.
const TMP_PATH: &str = "/tmp";

/// The pod of `stream`'s worker, labelled with `selector` (which no other
/// label may override), running `mssql-cdc worker --stream NS/NAME`.
pub fn pod_template(
    stream: &CdcStream,
    stream_ref: &str,
    selector: &BTreeMap<String, String>,
    defaults: &WorkerDefaults,
) -> Result<PodTemplateSpec, BuildError> {
    let inputs = PodInputs {
        credentials: stream.spec.source.credentials.as_ref(),
        monitoring: stream.spec.source.monitoring.as_ref(),
        worker: stream.spec.worker.as_ref(),
        runs: Runs::Stream(stream_ref),
        spec_hash: spec_hash(&stream.spec),
    };
    worker_pod(&inputs, selector, defaults)
}

/// What a worker pod is made of, whether it runs one stream or a whole
/// CdcSource: the logins whose passwords come from Secrets, what
/// `spec.worker` asks for, what it runs and the hash of that spec.
pub struct PodInputs<'a> {
    /// The reader's login.
    pub credentials: Option<&'a CredentialsSpec>,
    /// The monitoring login, if any.
    pub monitoring: Option<&'a MonitoringSpec>,
    /// The pod as the spec asks for it.
    pub worker: Option<&'a WorkerSpec>,
    /// What the worker's command runs.
    pub runs: Runs<'a>,
    /// The hash of the spec it runs ([`SPEC_HASH_ANNOTATION`]).
    pub spec_hash: String,
}

/// What a worker runs: `worker --stream NS/NAME` or `worker --source NS/NAME`.
#[derive(Debug, Clone, Copy)]
pub enum Runs<'a> {
    /// One CdcStream alone.
    Stream(&'a str),
    /// Every table of one CdcSource.
    Source(&'a str),
}

/// The hardened worker pod for `inputs`, labelled with `selector`.
pub fn worker_pod(
    inputs: &PodInputs<'_>,
    selector: &BTreeMap<String, String>,
    defaults: &WorkerDefaults,
) -> Result<PodTemplateSpec, BuildError> {
    let secret = inputs
        .credentials
        .and_then(|credentials| credentials.password_from.secret_key_ref.as_ref())
        .ok_or(BuildError::PasswordNotFromSecret)?;
    let worker = inputs.worker.cloned().unwrap_or_default();
    check(&worker)?;
    let mut env = vec![secret_env(PASSWORD_ENV, secret)];
    if let Some(reference) = inputs
        .monitoring
        .and_then(|m| m.credentials.password_from.secret_key_ref.as_ref())
    {
        env.push(secret_env(MONITORING_PASSWORD_ENV, reference));
    }
    env.extend(worker.env.iter().cloned());
    let mut mounts = vec![VolumeMount {
        name: TMP_VOLUME.into(),
        mount_path: TMP_PATH.into(),
        ..VolumeMount::default()
    }];
    mounts.extend(worker.volume_mounts.iter().cloned());
    let mut volumes = vec![Volume {
        name: TMP_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    volumes.extend(worker.volumes.iter().cloned());

    let container = Container {
        name: "worker".into(),
        image: Some(
            worker
                .image
                .clone()
                .unwrap_or_else(|| defaults.image.clone()),
        ),
        command: Some(vec!["mssql-cdc".into()]),
        args: Some(worker_args(inputs.runs, defaults)),
        env: Some(env),
        env_from: non_empty(worker.env_from.clone()),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: WORKER_PORT,
            ..ContainerPort::default()
        }]),
        liveness_probe: Some(health_probe(30)),
        readiness_probe: Some(health_probe(5)),
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
        // A worker that fails before it could say more leaves the tail of
        // its log (its error) in the pod's status.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    Ok(PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels(selector, defaults, &worker)),
            annotations: Some(pod_annotations(&inputs.spec_hash, &worker)),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            service_account_name: worker
                .service_account_name
                .clone()
                .or_else(|| defaults.service_account.clone()),
            image_pull_secrets: non_empty(pull_secrets(defaults, &worker)),
            node_selector: non_empty_map(worker.node_selector.clone()),
            tolerations: non_empty(worker.tolerations.clone()),
            affinity: worker.affinity.clone(),
            topology_spread_constraints: non_empty(worker.topology_spread_constraints.clone()),
            priority_class_name: worker.priority_class_name.clone(),
            security_context: Some(pod_security(worker.pod_security_context.as_ref())),
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
    })
}

/// The worker pod's security context: never root, the runtime's seccomp
/// profile, and by default user, group and `fsGroup` 65532 with
/// `OnRootMismatch`, so a fresh cloud disk (root-owned, 0755) is writable
/// and a large one is not walked on every start; `spec.worker.
/// podSecurityContext` replaces each of those it sets.
fn pod_security(custom: Option<&WorkerPodSecurity>) -> PodSecurityContext {
    let custom = custom.cloned().unwrap_or_default();
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(custom.run_as_user.unwrap_or(WORKER_UID)),
        run_as_group: Some(custom.run_as_group.unwrap_or(WORKER_UID)),
        fs_group: Some(custom.fs_group.unwrap_or(WORKER_UID)),
        fs_group_change_policy: Some(
            custom
                .fs_group_change_policy
                .unwrap_or(FsGroupChangePolicy::OnRootMismatch)
                .as_str()
                .to_string(),
        ),
        supplemental_groups: non_empty(custom.supplemental_groups),
        seccomp_profile: Some(runtime_default()),
        ..PodSecurityContext::default()
    }
}

/// `mssql-cdc --log-format=json [--log-level=L] worker --stream NS/NAME
/// [--status-interval=D]` (or `--source NS/NAME`).
fn worker_args(runs: Runs<'_>, defaults: &WorkerDefaults) -> Vec<String> {
    let mut args = vec!["--log-format=json".to_string()];
    if let Some(level) = &defaults.log_level {
        args.push(format!("--log-level={level}"));
    }
    let (flag, reference) = match runs {
        Runs::Stream(reference) => ("--stream", reference),
        Runs::Source(reference) => ("--source", reference),
    };
    args.extend(["worker".into(), flag.into(), reference.to_string()]);
    if let Some(interval) = defaults.status_interval {
        args.push(format!(
            "--status-interval={}",
            humantime::format_duration(interval)
        ));
    }
    args
}

/// The spec's annotations, and the hash of the spec the pod runs: an
/// edit the engine would see changes the template, so the worker rolls.
fn pod_annotations(spec_hash: &str, worker: &WorkerSpec) -> BTreeMap<String, String> {
    let mut annotations = worker.pod_annotations.clone();
    annotations.insert(SPEC_HASH_ANNOTATION.into(), spec_hash.to_string());
    annotations
}

/// A variable of the worker container from a Secret's key.
fn secret_env(name: &str, secret: &SecretKeyRef) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.name.clone(),
                key: secret.key.clone(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}

/// The operator's labels for all workers, then the stream's; the selector
/// labels last, so that nothing can detach a pod from its Deployment.
fn pod_labels(
    selector: &BTreeMap<String, String>,
    defaults: &WorkerDefaults,
    worker: &WorkerSpec,
) -> BTreeMap<String, String> {
    let mut labels = defaults.pod_labels.clone();
    labels.extend(worker.pod_labels.clone());
    labels.extend(selector.clone());
    labels
}

/// The operator's pull secrets, then the stream's, each name once.
fn pull_secrets(defaults: &WorkerDefaults, worker: &WorkerSpec) -> Vec<LocalObjectReference> {
    let mut seen = BTreeSet::new();
    defaults
        .image_pull_secrets
        .iter()
        .map(|name| LocalObjectReference { name: name.clone() })
        .chain(worker.image_pull_secrets.iter().cloned())
        .filter(|secret| seen.insert(secret.name.clone()))
        .collect()
}

/// What the API server would refuse in the pod, or what would take the
/// operator's own volume or labels, named by the field to fix.
fn check(worker: &WorkerSpec) -> Result<(), BuildError> {
    super::volume_source::check_one_source_each(&worker.volumes)?;
    let mut names = BTreeSet::new();
    for (i, volume) in worker.volumes.iter().enumerate() {
        let field = format!("spec.worker.volumes[{i}].name");
        if volume.name == TMP_VOLUME {
            return Err(BuildError::worker(
                field,
                "tmp is the operator's own emptyDir on /tmp; give the volume another name",
            ));
        }
        if !names.insert(volume.name.as_str()) {
            return Err(BuildError::worker(
                field,
                format!("{:?} names two volumes; names must be unique", volume.name),
            ));
        }
    }
    for (i, mount) in worker.volume_mounts.iter().enumerate() {
        if !names.contains(mount.name.as_str()) {
            return Err(BuildError::worker(
                format!("spec.worker.volumeMounts[{i}].name"),
                format!(
                    "no volume {:?} in spec.worker.volumes; add it or fix the name",
                    mount.name
                ),
            ));
        }
        if mount.mount_path.trim_end_matches('/') == TMP_PATH {
            return Err(BuildError::worker(
                format!("spec.worker.volumeMounts[{i}].mountPath"),
                "/tmp is the operator's own emptyDir; mount the volume elsewhere",
            ));
        }
    }
    for (i, var) in worker.env.iter().enumerate() {
        if [PASSWORD_ENV, MONITORING_PASSWORD_ENV].contains(&var.name.as_str()) {
            return Err(BuildError::worker(
                format!("spec.worker.env[{i}].name"),
                format!(
                    "{} is the operator's own, filled from passwordFrom; remove it",
                    var.name
                ),
            ));
        }
    }
    let selector = super::children::selector_labels("");
    let taken = |key: &String| selector.contains_key(key) || key == super::children::SOURCE_LABEL;
    if let Some(key) = worker.pod_labels.keys().find(|k| taken(k)) {
        return Err(BuildError::worker(
            format!("spec.worker.podLabels.{key}"),
            "the operator selects its workers by this label; remove it",
        ));
    }
    Ok(())
}

fn health_probe(initial_delay: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::String("http".into()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(10),
        ..Probe::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        localhost_profile: None,
    }
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

fn non_empty_map(map: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!map.is_empty()).then_some(map)
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
