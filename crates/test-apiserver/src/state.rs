//! Shared server state and the request target/option types the operation
//! modules work with.

use crate::clock::Clock;
use crate::resources::{Registry, ResourceType};
use crate::store::{Gr, Store};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Everything request handlers and in-process controllers share.
#[derive(Clone)]
pub struct State {
    pub store: Store,
    /// Every request and every write, counted.
    pub traffic: crate::traffic::Traffic,
    pub registry: Registry,
    pub clock: Clock,
    /// `host:port` the server listens on (for `/api` serverAddressByClientCIDRs).
    pub addr: String,
    /// How often watches with `allowWatchBookmarks=true` get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// Hands out fake ClusterIPs.
    pub next_ip: Arc<AtomicU32>,
    /// Directory where the harness kubelet writes container logs (`pods/log`).
    pub log_dir: Option<std::path::PathBuf>,
    /// The CA, the serving certificate and the token signing key.
    pub auth: Arc<AuthState>,
}

/// What authentication needs: the CA (its certificate is every pod's
/// `ca.crt`) and the key that signs ServiceAccount tokens.
pub struct AuthState {
    pub pki: crate::tls::Pki,
    pub signer: crate::auth::tokens::Signer,
}

impl State {
    /// A fresh fake ClusterIP in 10.96.0.0/12.
    pub fn cluster_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed) + 10;
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }
}

/// What a request addresses.
#[derive(Debug, Clone)]
pub struct Target {
    pub rt: Arc<ResourceType>,
    pub version: String,
    /// Empty for cluster-scoped types and cross-namespace lists.
    pub namespace: String,
    /// Empty for collection requests.
    pub name: String,
    /// `status` for the status subresource, else empty.
    pub sub: String,
}

impl Target {
    /// The store key of the type.
    pub fn gr(&self) -> Gr {
        crate::events::storage(&self.rt.group, &self.rt.plural)
    }

    /// `apiVersion` for objects served through this target.
    pub fn api_version(&self) -> String {
        self.rt.api_version(&self.version)
    }

    /// The CRD schema for the addressed version, if any.
    pub fn schema(&self) -> Option<&serde_json::Value> {
        self.rt
            .version(&self.version)
            .and_then(|v| v.schema.as_ref())
    }

    /// `Kind.group` as used in Invalid messages.
    pub fn qualified_kind(&self) -> String {
        if self.rt.group.is_empty() {
            self.rt.kind.clone()
        } else {
            format!("{}.{}", self.rt.kind, self.rt.group)
        }
    }
}

/// Options of create/update/patch requests.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub manager: String,
    pub dry_run: bool,
    pub force: bool,
    /// `fieldValidation=Strict`: unknown fields are an error instead of being pruned.
    pub strict: bool,
}

/// Options of delete requests.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// `Background` (default), `Foreground` or `Orphan`.
    pub propagation: String,
    pub dry_run: bool,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    /// `gracePeriodSeconds`: 0 deletes a running pod at once.
    pub grace_period_seconds: Option<i64>,
}
