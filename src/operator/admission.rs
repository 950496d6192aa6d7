//! What the operator checks against the cluster before it applies a
//! worker, which the pure policy cannot see: that every Secret the stream
//! names carries the label the operator requires (read as metadata only,
//! never a Secret's data), and that the child of the stream's name is the
//! stream's own, so that a forced apply never takes over (and garbage
//! collection never deletes) an object someone else made.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::spec::CdcStream;

use super::children::{BuildError, Workload};
use super::controller::{ReconcileError, api_error};
use super::policy::WorkerPolicy;
use super::secret_refs::{FoundSecrets, admit_secrets, secret_refs};
use super::worker_condition::WorkloadFault;

/// Whether the child of the stream's name exists (and is the stream's):
/// an apply may then be forced; a new one is created by an apply that is
/// not, which a concurrent creator's object makes conflict instead of
/// being taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// No object of the child's kind and name.
    Absent,
    /// The stream's own child.
    Owned,
}

/// The cluster's verdict on `workload` for `stream`: a refusal (an
/// unlabelled or missing Secret, a child the stream does not own), or the
/// child's state; an error when the API server cannot tell.
pub async fn admit_in_cluster(
    client: &Client,
    namespace: &str,
    stream: &CdcStream,
    workload: &Workload,
    policy: &WorkerPolicy,
) -> Result<Result<Child, BuildError>, ReconcileError> {
    let owner = Owner {
        meta: &stream.metadata,
        secrets: secret_refs(stream),
        child: &stream.name_any(),
    };
    admit_owner_in_cluster(client, namespace, &owner, workload, policy).await
}

/// What owns a worker, as the cluster checks see it: a CdcStream or a
/// CdcSource.
pub struct Owner<'a> {
    /// Its metadata (its uid owns the child).
    pub meta: &'a ObjectMeta,
    /// The Secrets it names.
    pub secrets: Vec<super::secret_refs::SecretRef>,
    /// The name of its child.
    pub child: &'a str,
}

/// [`admit_in_cluster`] for any owner.
pub async fn admit_owner_in_cluster(
    client: &Client,
    namespace: &str,
    owner: &Owner<'_>,
    workload: &Workload,
    policy: &WorkerPolicy,
) -> Result<Result<Child, BuildError>, ReconcileError> {
    if let Some(label) = &policy.secret_label {
        let refs = &owner.secrets;
        let found = read_secret_labels(client, namespace, refs.iter().map(|r| &r.name)).await?;
        if let Err(refusal) = admit_secrets(label, refs, &found) {
            return Ok(Err(refusal.into()));
        }
    }
    let (name, meta) = (owner.child, owner.meta);
    match workload {
        Workload::Continuous(_) => child_state::<Deployment>(client, namespace, name, meta).await,
        Workload::Scheduled(_) => child_state::<CronJob>(client, namespace, name, meta).await,
    }
}

/// The labels of each of `names` (once each), read as metadata only
/// (`PartialObjectMetadata`: the operator needs `get` on Secrets, but never
/// asks for their data).
async fn read_secret_labels<'a>(
    client: &Client,
    namespace: &str,
    names: impl Iterator<Item = &'a String>,
) -> Result<FoundSecrets, ReconcileError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut found = FoundSecrets::new();
    for name in names.collect::<BTreeSet<_>>() {
        let meta =
            api.get_metadata_opt(name)
                .await
                .map_err(|source| ReconcileError::SecretLabels {
                    namespace: namespace.to_string(),
                    name: name.clone(),
                    source,
                })?;
        found.insert(
            name.clone(),
            meta.map(|m| m.metadata.labels.unwrap_or_default()),
        );
    }
    Ok(found)
}

/// A kind of child the operator makes (Deployment, CronJob): namespaced,
/// read and written whole.
pub trait ChildKind:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> ChildKind for K where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// Whether the `K` of `name` is absent, the owner's (a stream or a
/// source, by its metadata), or someone else's.
pub(super) async fn child_state<K: ChildKind>(
    client: &Client,
    namespace: &str,
    name: &str,
    owner: &ObjectMeta,
) -> Result<Result<Child, BuildError>, ReconcileError> {
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let kind = K::kind(&()).to_string();
    let existing = api
        .get_metadata_opt(name)
        .await
        .map_err(|source| api_error("read", kind.clone(), namespace, name, source))?;
    Ok(match existing {
        None => Ok(Child::Absent),
        Some(child) if owned_by(&child.metadata, owner) => Ok(Child::Owned),
        Some(_) => Err(BuildError::ChildNotOwned {
            kind,
            name: name.to_string(),
        }),
    })
}

/// Whether `child` has an ownerReference to `owner` (by uid: a stream
/// deleted and made again under the same name owns nothing of the old).
pub fn owned_by(child: &ObjectMeta, owner: &ObjectMeta) -> bool {
    let Some(uid) = owner.uid.as_ref() else {
        return false;
    };
    child
        .owner_references
        .iter()
        .flatten()
        .any(|owner| &owner.uid == uid)
}

/// The reason of a worker whose ServiceAccount does not exist in its
/// stream's namespace (the chart creates one only in `worker.namespaces`).
pub const WORKER_SERVICE_ACCOUNT_MISSING: &str = "WorkerServiceAccountMissing";

/// `fault` said more precisely where the operator can tell: pods refused
/// because their ServiceAccount does not exist. Asked only once the
/// Deployment reports a failure, so a healthy stream costs no request.
pub async fn explain_fault(
    client: &Client,
    namespace: &str,
    workload: &Workload,
    fault: WorkloadFault,
) -> WorkloadFault {
    let Workload::Continuous(deployment) = workload else {
        return fault;
    };
    let account = deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.service_account_name.clone())
        .unwrap_or_else(|| "default".to_string());
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    match api.get_metadata_opt(&account).await {
        Ok(None) => WorkloadFault {
            reason: WORKER_SERVICE_ACCOUNT_MISSING.to_string(),
            message: format!(
                "ServiceAccount {account} does not exist in namespace {namespace}, so no worker \
                 pod can be created ({}); add {namespace} to the chart's worker.namespaces \
                 (helm upgrade creates the account and its Role there), or set \
                 spec.worker.serviceAccountName to an account of {namespace}",
                fault.message
            ),
        },
        Ok(Some(_)) => fault,
        Err(error) => {
            tracing::debug!(
                namespace,
                account,
                "cannot look up the worker's ServiceAccount: {error}"
            );
            fault
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::test_fixtures::stream;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned(uid: &str) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: "mssql-cdc.io/v1alpha1".into(),
                kind: "CdcStream".into(),
                name: "orders".into(),
                uid: uid.into(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_child_is_owned_by_the_stream_of_its_owner_uid_only() {
        let orders = stream(serde_json::json!({}));
        let orders = &orders.metadata;
        assert!(owned_by(&owned("7f3c-uid"), orders));
        // Same name, another stream (deleted and made again).
        assert!(!owned_by(&owned("another-uid"), orders));
        assert!(!owned_by(&ObjectMeta::default(), orders));
        let no_uid = stream(serde_json::json!({"metadata": {"uid": null}}));
        assert!(!owned_by(&owned(""), &no_uid.metadata));
    }
}
