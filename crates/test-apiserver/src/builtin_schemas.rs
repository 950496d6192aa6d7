//! OpenAPI v3 schemas for the built-in kinds, generated from k8s-openapi's
//! `schemars` implementations (which carry the upstream field descriptions),
//! so `kubectl explain deployment.spec.replicas` works as on a real server.

use k8s_openapi::api::{apps, batch, coordination, core, events, policy, rbac, storage};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value};

/// Registers `T` (and what it references) with the generator; returns its
/// component name.
fn add<T: JsonSchema>(g: &mut SchemaGenerator) -> String {
    g.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// Schemas of the built-in kinds of one group/version.
pub struct Generator(SchemaGenerator);

impl Default for Generator {
    fn default() -> Self {
        Self(SchemaSettings::openapi3().into_generator())
    }
}

impl Generator {
    /// Adds the schema of a built-in kind; returns its component name, or
    /// `None` if the kind is not one we serve.
    pub fn kind(&mut self, group: &str, kind: &str) -> Option<String> {
        let g = &mut self.0;
        Some(match (group, kind) {
            ("", "Namespace") => add::<core::v1::Namespace>(g),
            ("", "ConfigMap") => add::<core::v1::ConfigMap>(g),
            ("", "Secret") => add::<core::v1::Secret>(g),
            ("", "ServiceAccount") => add::<core::v1::ServiceAccount>(g),
            ("", "Service") => add::<core::v1::Service>(g),
            ("", "Pod") => add::<core::v1::Pod>(g),
            ("", "Event") => add::<core::v1::Event>(g),
            ("", "Endpoints") => add::<core::v1::Endpoints>(g),
            ("", "PersistentVolumeClaim") => add::<core::v1::PersistentVolumeClaim>(g),
            ("", "Node") => add::<core::v1::Node>(g),
            ("", "PersistentVolume") => add::<core::v1::PersistentVolume>(g),
            ("storage.k8s.io", "StorageClass") => add::<storage::v1::StorageClass>(g),
            ("events.k8s.io", "Event") => add::<events::v1::Event>(g),
            ("apps", "Deployment") => add::<apps::v1::Deployment>(g),
            ("apps", "ReplicaSet") => add::<apps::v1::ReplicaSet>(g),
            ("apps", "StatefulSet") => add::<apps::v1::StatefulSet>(g),
            ("batch", "Job") => add::<batch::v1::Job>(g),
            ("batch", "CronJob") => add::<batch::v1::CronJob>(g),
            ("coordination.k8s.io", "Lease") => add::<coordination::v1::Lease>(g),
            ("rbac.authorization.k8s.io", "Role") => add::<rbac::v1::Role>(g),
            ("rbac.authorization.k8s.io", "RoleBinding") => add::<rbac::v1::RoleBinding>(g),
            ("rbac.authorization.k8s.io", "ClusterRole") => add::<rbac::v1::ClusterRole>(g),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
                add::<rbac::v1::ClusterRoleBinding>(g)
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                add::<apiextensions::v1::CustomResourceDefinition>(g)
            }
            ("policy", "PodDisruptionBudget") => add::<policy::v1::PodDisruptionBudget>(g),
            _ => return None,
        })
    }

    /// Every schema added so far, keyed by component name.
    pub fn into_schemas(mut self) -> Map<String, Value> {
        self.0.take_definitions(true)
    }
}
