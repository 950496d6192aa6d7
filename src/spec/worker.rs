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
}
