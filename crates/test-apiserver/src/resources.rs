//! The registry of served resource types: the fixed built-ins plus the types
//! that established CustomResourceDefinitions add at run time.

use serde_json::Value;
use std::sync::{Arc, RwLock};

/// One served version of a resource type.
#[derive(Debug, Clone)]
pub struct VersionInfo {
    /// Version name, e.g. `v1`.
    pub name: String,
    /// Structural OpenAPI v3 schema (CRDs only).
    pub schema: Option<Value>,
    /// `additionalPrinterColumns` (CRDs only).
    pub printer_columns: Vec<Value>,
    /// Whether `/status` is a subresource for this version.
    pub status_subresource: bool,
}

/// A resource type the server serves.
#[derive(Debug, Clone)]
pub struct ResourceType {
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Served versions; the first is the preferred one.
    pub versions: Vec<VersionInfo>,
    /// True for types created by a CustomResourceDefinition.
    pub is_crd: bool,
    /// True for the review kinds that are only ever created, never stored
    /// (SelfSubjectAccessReview and the like).
    pub create_only: bool,
}

impl ResourceType {
    /// `plural.group` (or `plural` for the core group) as used in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `group/version` or `version` for the core group.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// The named served version.
    pub fn version(&self, name: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|v| v.name == name)
    }

    /// The verbs discovery advertises.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    /// Subresources other than `status`, with their verbs.
    pub fn extra_subresources(&self) -> &'static [(&'static str, &'static [&'static str])] {
        match (self.group.as_str(), self.kind.as_str()) {
            ("", "Pod") => &[("log", &["get"])],
            ("", "ServiceAccount") => &[("token", &["create"])],
            _ => &[],
        }
    }

    /// Whether the status subresource is enabled for `version`.
    pub fn has_status(&self, version: &str) -> bool {
        self.version(version).is_some_and(|v| v.status_subresource)
    }
}

struct Builtin(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
);

/// (group, version, kind, plural, namespaced, shortNames, status subresource)
const BUILTINS: &[Builtin] = &[
    Builtin("", "v1", "Namespace", "namespaces", false, &["ns"], true),
    Builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"], false),
    Builtin("", "v1", "Secret", "secrets", true, &[], false),
    Builtin(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
    ),
    Builtin("", "v1", "Service", "services", true, &["svc"], true),
    Builtin("", "v1", "Pod", "pods", true, &["po"], true),
    Builtin("", "v1", "Event", "events", true, &["ev"], false),
    Builtin("", "v1", "Endpoints", "endpoints", true, &["ep"], false),
    Builtin(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
        true,
    ),
    Builtin("", "v1", "Node", "nodes", false, &["no"], true),
    Builtin(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        false,
        &["pv"],
        true,
    ),
    Builtin(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
        &["sc"],
        false,
    ),
    Builtin(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        true,
        &["ev"],
        false,
    ),
    Builtin(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
    ),
    Builtin(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        true,
    ),
    Builtin(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        true,
        &["sts"],
        true,
    ),
    Builtin("batch", "v1", "Job", "jobs", true, &[], true),
    Builtin("batch", "v1", "CronJob", "cronjobs", true, &["cj"], true),
    Builtin(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        true,
        &[],
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        &[],
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        false,
    ),
    Builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        true,
    ),
    Builtin(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        true,
    ),
];

fn builtin_types() -> Vec<ResourceType> {
    BUILTINS
        .iter()
        .map(|Builtin(g, v, k, p, ns, short, status)| ResourceType {
            group: g.to_string(),
            kind: k.to_string(),
            plural: p.to_string(),
            singular: k.to_lowercase(),
            namespaced: *ns,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            categories: if matches!(
                *k,
                "Pod" | "Service" | "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" | "CronJob"
            ) {
                vec!["all".into()]
            } else {
                vec![]
            },
            versions: vec![VersionInfo {
                name: v.to_string(),
                schema: None,
                printer_columns: vec![],
                status_subresource: *status,
            }],
            is_crd: false,
            create_only: false,
        })
        .chain(review_types())
        .collect()
}

/// The create-only review kinds of `auth::reviews`.
fn review_types() -> impl Iterator<Item = ResourceType> {
    crate::auth::reviews::KINDS
        .iter()
        .map(|(group, plural, kind, namespaced)| ResourceType {
            group: group.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            singular: kind.to_lowercase(),
            namespaced: *namespaced,
            short_names: vec![],
            categories: vec![],
            versions: vec![VersionInfo {
                name: "v1".into(),
                schema: None,
                printer_columns: vec![],
                status_subresource: false,
            }],
            is_crd: false,
            create_only: true,
        })
}

/// Thread-safe registry of resource types.
#[derive(Clone)]
pub struct Registry {
    types: Arc<RwLock<Vec<Arc<ResourceType>>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry holding the built-in types.
    pub fn new() -> Self {
        Self {
            types: Arc::new(RwLock::new(
                builtin_types().into_iter().map(Arc::new).collect(),
            )),
        }
    }

    /// Snapshot of all types.
    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.types.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Looks up a type by group, version and plural.
    pub fn by_plural(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.all()
            .into_iter()
            .find(|t| t.group == group && t.plural == plural && t.version(version).is_some())
    }

    /// Looks up a type by group and kind (any version).
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.all()
            .into_iter()
            .find(|t| t.group == group && t.kind == kind)
    }

    /// Adds or replaces a CRD-defined type.
    pub fn upsert_crd(&self, t: ResourceType) {
        let mut types = self.types.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|x| !(x.is_crd && x.group == t.group && x.plural == t.plural));
        types.push(Arc::new(t));
    }

    /// Removes a CRD-defined type.
    pub fn remove_crd(&self, group: &str, plural: &str) {
        let mut types = self.types.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|x| !(x.is_crd && x.group == group && x.plural == plural));
    }

    /// Sorted, de-duplicated API groups with their versions (preferred first).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.all() {
            let entry = match out.iter_mut().position(|(g, _)| *g == t.group) {
                Some(i) => &mut out[i].1,
                None => {
                    out.push((t.group.clone(), vec![]));
                    let last = out.len() - 1;
                    &mut out[last].1
                }
            };
            for v in &t.versions {
                if !entry.contains(&v.name) {
                    entry.push(v.name.clone());
                }
            }
        }
        out
    }
}
