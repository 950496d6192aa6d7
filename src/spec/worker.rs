//! How the operator runs a stream's worker pod (`spec.worker`). Only the
//! operator reads it; `mssql-cdc run` ignores it.
//!
//! The fields are core/v1 types, so they mean exactly what they mean in a
//! Deployment. Every one has a closed schema in the CRD, so the API server
//! refuses (or, without strict validation, prunes) a misspelt key instead
//! of storing it for the operator's typed structs to drop. The largest
//! (volumes, affinity, topology spread constraints) get theirs from
//! `worker_schema`: the upstream schemas with short descriptions, and a
//! rule that a volume has exactly one source. The API server checks the
//! values (a missing claim, a disallowed volume type...) when the operator
//! applies the worker, and the operator reports a rejection on the stream.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, LocalObjectReference, ResourceRequirements, Toleration,
    TopologySpreadConstraint, Volume, VolumeMount,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::worker_schema;

/// Name of the `emptyDir` the operator always mounts on `/tmp`.
pub const TMP_VOLUME: &str = "tmp";

/// The worker pod's image, identity, placement, environment and storage.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSpec {
    /// Container image of the worker; the operator's own image when absent.
    /// The operator runs only images its allow-list (`--worker-images`)
    /// names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// Secrets the kubelet pulls the image with, added to the operator's
    /// own (`--worker-image-pull-secrets`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// CPU and memory requests and limits of the worker container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Node labels the worker pod must run on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the worker pod tolerates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Node and pod affinity of the worker pod (core/v1 Affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "worker_schema::affinity")]
    pub affinity: Option<Affinity>,
    /// How the worker pod spreads across zones or nodes (core/v1
    /// TopologySpreadConstraint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "worker_schema::topology_spread")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// PriorityClass of the worker pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub priority_class_name: Option<String>,
    /// ServiceAccount of the worker pod; it needs only to get its CdcStream
    /// and patch its status (the Helm chart creates one). The operator runs
    /// only the accounts its allow-list (`--worker-service-accounts`) names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub service_account_name: Option<String>,
    /// Labels of the worker pod, e.g. for NetworkPolicies or cost
    /// allocation, and Azure workload identity
    /// (`azure.workload.identity/use`). The operator's own labels
    /// (`app.kubernetes.io/name`, `mssql-cdc.io/stream`) cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "!('app.kubernetes.io/name' in self) && !('mssql-cdc.io/stream' in self)",
        "message": "podLabels cannot set app.kubernetes.io/name or mssql-cdc.io/stream: the operator selects its workers by them"
    }]))]
    pub pod_labels: BTreeMap<String, String>,
    /// Annotations of the worker pod, e.g. for cloud identity (IRSA's
    /// `eks.amazonaws.com/...`, GKE's or Azure's workload identity).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_annotations: BTreeMap<String, String>,
    /// Extra environment variables of the worker container, e.g. storage
    /// credentials from Secrets. The operator sets only the names its
    /// policy lists (`--worker-env`, none by default), and a Secret only
    /// when it carries the operator's label (`--worker-secret-label`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// ConfigMaps and Secrets whose keys become environment variables of
    /// the worker container; refused unless the operator allows it
    /// (`--worker-env-from`), and a Secret only with the operator's label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    /// Volumes of the worker pod (core/v1 Volume): a PersistentVolumeClaim
    /// for a local lake and checkpoint, a Secret with a CA bundle, a
    /// projected token for cloud identity. `tmp` is the operator's own.
    /// Only the types the operator allows (`--worker-volume-types`; never
    /// `hostPath` by default), and Secrets with the operator's label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "worker_schema::volumes")]
    pub volumes: Vec<Volume>,
    /// Where the worker container mounts `volumes` (core/v1 VolumeMount).
    /// The root filesystem is read-only: a lake or checkpoint on a local
    /// path must be on one of these (or on `/tmp`, which a new pod loses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.all(m, m.mountPath != '/tmp')",
        "message": "/tmp is the operator's own emptyDir: mount volumes elsewhere"
    }]))]
    pub volume_mounts: Vec<VolumeMount>,
    /// The user, groups and volume ownership of the worker pod, within
    /// what the restricted Pod Security level allows. By default the worker
    /// runs as 65532 (user and group) with `fsGroup: 65532` and
    /// `fsGroupChangePolicy: OnRootMismatch`, so a fresh cloud disk (its
    /// root owned by root, mode 0755) is writable; a field set here
    /// replaces that default alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<WorkerPodSecurity>,
}

/// The fields of a pod's `securityContext` a worker may set: the restricted
/// Pod Security level keeps `runAsNonRoot` and the seccomp profile, so
/// those stay the operator's.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerPodSecurity {
    /// The user the worker runs as (never root: `runAsNonRoot` holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2147483647))]
    pub run_as_user: Option<i64>,
    /// The primary group the worker runs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2147483647))]
    pub run_as_group: Option<i64>,
    /// The group the kubelet gives the pod's volumes (and adds to the
    /// worker's groups), so a volume whose root another user owns is
    /// writable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2147483647))]
    pub fs_group: Option<i64>,
    /// When the kubelet changes a volume's ownership to `fsGroup`:
    /// `OnRootMismatch` (only when its root differs: fast on a large
    /// volume) or `Always` (every mount, the whole tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_group_change_policy: Option<FsGroupChangePolicy>,
    /// More groups of the worker, e.g. one an NFS export grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(range(min = 0, max = 2147483647)))]
    pub supplemental_groups: Vec<i64>,
}

/// When the kubelet changes a volume's ownership (core/v1's values).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum FsGroupChangePolicy {
    /// Only when the volume root's owner or permissions differ.
    OnRootMismatch,
    /// On every mount, recursively.
    Always,
}

impl FsGroupChangePolicy {
    /// The value core/v1 spells.
    pub fn as_str(self) -> &'static str {
        match self {
            FsGroupChangePolicy::OnRootMismatch => "OnRootMismatch",
            FsGroupChangePolicy::Always => "Always",
        }
    }
}
