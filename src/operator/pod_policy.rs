//! What of the pod a stream may shape: the types of its volumes
//! (`--worker-volume-types`; a `hostPath` would mount the node) and the
//! variables it sets (`--worker-env`, `--worker-env-from`; a variable can
//! change what the worker does, or carry a Secret). The Secrets these name
//! are checked apart (`secret_refs`), against the cluster.

use k8s_openapi::api::core::v1::{EnvVar, Volume};

use crate::spec::WorkerSpec;

use super::policy::{Allowed, Refusal, WorkerPolicy};

/// The projected source every projected volume may hold: a token of the
/// pod's own (allowed) ServiceAccount, which cloud workload identity
/// needs and which gives the worker nothing it does not have already.
const SERVICE_ACCOUNT_TOKEN: &str = "serviceAccountToken";
/// The volume type whose sources are judged one by one.
const PROJECTED: &str = "projected";
/// What the API server makes of a volume without a source.
const EMPTY_DIR: &str = "emptyDir";

impl WorkerPolicy {
    /// Whether the volumes, `env` and `envFrom` of `worker` are allowed.
    pub fn admit_pod(&self, worker: &WorkerSpec) -> Result<(), Refusal> {
        for (i, volume) in worker.volumes.iter().enumerate() {
            self.admit_volume(i, volume)?;
        }
        for (i, var) in worker.env.iter().enumerate() {
            self.admit_env(i, var)?;
        }
        match worker.env_from.first() {
            Some(_) if !self.env_from => Err(Refusal::EnvFrom {
                field: "spec.worker.envFrom[0]".into(),
            }),
            _ => Ok(()),
        }
    }

    fn admit_volume(&self, index: usize, volume: &Volume) -> Result<(), Refusal> {
        let field = |path: &str| format!("spec.worker.volumes[{index}].{path}");
        for kind in volume_types(volume) {
            if self.allows_volume(&kind) {
                continue;
            }
            if kind != PROJECTED {
                return Err(self.volume_refusal(field(&kind), kind));
            }
            // A projected volume is judged by its sources.
            let sources = volume
                .projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten());
            for (j, source) in sources.enumerate() {
                for source_kind in object_keys(source) {
                    if source_kind != SERVICE_ACCOUNT_TOKEN && !self.allows_volume(&source_kind) {
                        let at = field(&format!("projected.sources[{j}].{source_kind}"));
                        return Err(self.volume_refusal(at, source_kind));
                    }
                }
            }
        }
        Ok(())
    }

    fn allows_volume(&self, kind: &str) -> bool {
        self.volume_types.iter().any(|t| t == kind)
    }

    fn volume_refusal(&self, field: String, kind: String) -> Refusal {
        Refusal::VolumeType {
            field,
            kind,
            allowed: Allowed::new("volume type", self.volume_types.clone()),
        }
    }

    fn admit_env(&self, index: usize, var: &EnvVar) -> Result<(), Refusal> {
        if self
            .env
            .iter()
            .any(|pattern| name_matches(&var.name, pattern))
        {
            return Ok(());
        }
        Err(Refusal::Env {
            field: format!("spec.worker.env[{index}].name"),
            name: var.name.clone(),
            allowed: Allowed::new("variable", self.env.clone()),
        })
    }
}

/// Whether the variable `name` matches `pattern`: the name itself, or
/// `PREFIX*` for every name starting with `PREFIX`.
fn name_matches(name: &str, pattern: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// The volume's source types, as core/v1 spells them (`hostPath`,
/// `persistentVolumeClaim`...): every field but its name, so that a type
/// this code has never heard of is judged like any other. A volume
/// without a source is an emptyDir, as the API server defaults it.
fn volume_types(volume: &Volume) -> Vec<String> {
    let mut kinds: Vec<String> = object_keys(volume)
        .into_iter()
        .filter(|k| k != "name")
        .collect();
    if kinds.is_empty() {
        kinds.push(EMPTY_DIR.into());
    }
    kinds
}

/// The fields `value` serializes with (those that are set).
fn object_keys(value: &impl serde::Serialize) -> Vec<String> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[path = "pod_policy_tests.rs"]
mod tests;
