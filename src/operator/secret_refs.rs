//! Every Secret a stream makes its worker pod read, and the label that
//! lets it. The kubelet reads a pod's Secrets with its own rights, so a
//! stream could otherwise name any Secret of its namespace (and send the
//! password to a listener it controls): the operator hands a stream only
//! the Secrets labelled for it (`--worker-secret-label`).
//!
//! The list is pure data, from the spec; `admission` reads the labels.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::api::core::v1::{LocalObjectReference, Volume};

use crate::spec::{CdcSource, CdcStream, CredentialsSpec, MonitoringSpec, WorkerSpec};

use super::policy::Refusal;

/// The label the operator requires when not told otherwise.
pub const DEFAULT_SECRET_LABEL: &str = "mssql-cdc.io/allow=true";

/// A label a Secret must carry: `KEY=VALUE`, or `KEY` with any value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretLabel {
    /// The label's key.
    pub key: String,
    /// Its value; any value when `None`.
    pub value: Option<String>,
}

impl Default for SecretLabel {
    /// [`DEFAULT_SECRET_LABEL`].
    fn default() -> Self {
        SecretLabel {
            key: "mssql-cdc.io/allow".into(),
            value: Some("true".into()),
        }
    }
}

/// Why a `--worker-secret-label` does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected KEY=VALUE or KEY (a label key), got {0:?}")]
pub struct BadSecretLabel(String);

impl FromStr for SecretLabel {
    type Err = BadSecretLabel;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (key, value) = match text.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim().to_string())),
            None => (text.trim(), None),
        };
        let valid = !key.is_empty() && !key.contains([',', ' ']);
        if !valid {
            return Err(BadSecretLabel(text.to_string()));
        }
        Ok(SecretLabel {
            key: key.to_string(),
            value,
        })
    }
}

impl fmt::Display for SecretLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{}={value}", self.key),
            None => write!(f, "{}", self.key),
        }
    }
}

impl SecretLabel {
    /// Whether `labels` (a Secret's) carry this label.
    pub fn carried_by(&self, labels: &BTreeMap<String, String>) -> bool {
        match (labels.get(&self.key), &self.value) {
            (Some(_), None) => true,
            (Some(found), Some(wanted)) => found == wanted,
            (None, _) => false,
        }
    }
}

/// One Secret a stream names, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// The field, e.g. `spec.worker.env[0].valueFrom.secretKeyRef.name`.
    pub field: String,
    /// The Secret's name (in the stream's namespace).
    pub name: String,
}

/// Every Secret `stream` names, in the order of the spec: the SQL and
/// monitoring passwords, `env` values, `envFrom`, the stream's pull
/// secrets and every volume (a Secret volume, a projected Secret, the
/// Secret a CSI driver or a network volume logs in with).
pub fn secret_refs(stream: &CdcStream) -> Vec<SecretRef> {
    let source = &stream.spec.source;
    refs_of(
        "spec.source",
        source.credentials.as_ref(),
        source.monitoring.as_ref(),
        stream.spec.worker.as_ref(),
    )
}

/// Every Secret a CdcSource names, as [`secret_refs`]: its connection's
/// passwords and its `spec.worker`.
pub fn source_secret_refs(source: &CdcSource) -> Vec<SecretRef> {
    let connection = &source.spec.connection;
    refs_of(
        "spec.connection",
        Some(&connection.credentials),
        connection.monitoring.as_ref(),
        source.spec.worker.as_ref(),
    )
}

/// The Secrets of the logins under `login_field` and of a `spec.worker`.
fn refs_of(
    login_field: &str,
    credentials: Option<&CredentialsSpec>,
    monitoring: Option<&MonitoringSpec>,
    worker: Option<&WorkerSpec>,
) -> Vec<SecretRef> {
    let mut refs = Vec::new();
    let mut add = |field: String, name: &str| {
        refs.push(SecretRef {
            field,
            name: name.to_string(),
        })
    };
    if let Some(r) = credentials.and_then(|c| c.password_from.secret_key_ref.as_ref()) {
        add(
            format!("{login_field}.credentials.passwordFrom.secretKeyRef.name"),
            &r.name,
        );
    }
    if let Some(r) = monitoring.and_then(|m| m.credentials.password_from.secret_key_ref.as_ref()) {
        add(
            format!("{login_field}.monitoring.credentials.passwordFrom.secretKeyRef.name"),
            &r.name,
        );
    }
    let Some(worker) = worker else {
        return refs;
    };
    for (i, var) in worker.env.iter().enumerate() {
        if let Some(r) = var
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
        {
            add(
                format!("spec.worker.env[{i}].valueFrom.secretKeyRef.name"),
                &r.name,
            );
        }
    }
    for (i, source) in worker.env_from.iter().enumerate() {
        if let Some(r) = &source.secret_ref {
            add(format!("spec.worker.envFrom[{i}].secretRef.name"), &r.name);
        }
    }
    for (i, secret) in worker.image_pull_secrets.iter().enumerate() {
        add(
            format!("spec.worker.imagePullSecrets[{i}].name"),
            &secret.name,
        );
    }
    for (i, volume) in worker.volumes.iter().enumerate() {
        for (path, name) in volume_secrets(volume) {
            add(format!("spec.worker.volumes[{i}].{path}"), &name);
        }
    }
    refs
}

/// The labels of the Secrets a stream names, as the operator read them:
/// `None` for a Secret that does not exist.
pub type FoundSecrets = BTreeMap<String, Option<BTreeMap<String, String>>>;

/// Whether every Secret of `refs` carries `label`, judged on `found`; the
/// first that does not (or does not exist) is refused.
pub fn admit_secrets(
    label: &SecretLabel,
    refs: &[SecretRef],
    found: &FoundSecrets,
) -> Result<(), Refusal> {
    for r in refs {
        match found.get(&r.name) {
            Some(Some(labels)) if label.carried_by(labels) => {}
            Some(Some(_)) => {
                return Err(Refusal::SecretNotLabelled {
                    field: r.field.clone(),
                    secret: r.name.clone(),
                    label: label.clone(),
                });
            }
            Some(None) | None => {
                return Err(Refusal::SecretNotFound {
                    field: r.field.clone(),
                    secret: r.name.clone(),
                    label: label.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The name of a Secret reference, when there is one.
fn local(reference: Option<&LocalObjectReference>) -> Option<&String> {
    reference.map(|r| &r.name)
}

/// The Secrets one volume names: (path below the volume, name).
fn volume_secrets(volume: &Volume) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut add = |path: &str, name: Option<&String>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            found.push((path.to_string(), name.clone()));
        }
    };
    add(
        "secret.secretName",
        volume.secret.as_ref().and_then(|s| s.secret_name.as_ref()),
    );
    if let Some(projected) = &volume.projected {
        for (j, source) in projected.sources.iter().flatten().enumerate() {
            add(
                &format!("projected.sources[{j}].secret.name"),
                source.secret.as_ref().map(|s| &s.name),
            );
        }
    }
    add(
        "csi.nodePublishSecretRef.name",
        local(
            volume
                .csi
                .as_ref()
                .and_then(|c| c.node_publish_secret_ref.as_ref()),
        ),
    );
    add(
        "azureFile.secretName",
        volume.azure_file.as_ref().map(|a| &a.secret_name),
    );
    add(
        "cephfs.secretRef.name",
        local(volume.cephfs.as_ref().and_then(|c| c.secret_ref.as_ref())),
    );
    add(
        "cinder.secretRef.name",
        local(volume.cinder.as_ref().and_then(|c| c.secret_ref.as_ref())),
    );
    add(
        "flexVolume.secretRef.name",
        local(
            volume
                .flex_volume
                .as_ref()
                .and_then(|c| c.secret_ref.as_ref()),
        ),
    );
    add(
        "iscsi.secretRef.name",
        local(volume.iscsi.as_ref().and_then(|c| c.secret_ref.as_ref())),
    );
    add(
        "rbd.secretRef.name",
        local(volume.rbd.as_ref().and_then(|c| c.secret_ref.as_ref())),
    );
    add(
        "scaleIO.secretRef.name",
        local(volume.scale_io.as_ref().map(|c| &c.secret_ref)),
    );
    add(
        "storageos.secretRef.name",
        local(
            volume
                .storageos
                .as_ref()
                .and_then(|c| c.secret_ref.as_ref()),
        ),
    );
    found
}

#[cfg(test)]
#[path = "secret_refs_tests.rs"]
mod tests;
