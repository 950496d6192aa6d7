//! How a source's worker writes `status.discovery`: server-side apply
//! under a field manager of its own, [`DISCOVERY_FIELD_MANAGER`], so that
//! neither the operator's apply of the rolled-up status (which leaves the
//! field out) nor any other status the worker writes removes it. A source
//! whose `spec.discovery` went away loses the field through a merge patch
//! setting it to null: an apply that stops naming a field may leave its
//! emptied parent object behind, which the schema's required `count`
//! refuses.

use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::spec::{API_VERSION, CdcSource, DiscoveryStatus, SOURCE_KIND};

/// The field manager of `status.discovery`; the source's worker alone
/// applies under it.
pub const DISCOVERY_FIELD_MANAGER: &str = "mssql-cdc-source-discovery";

/// Why `status.discovery` was not written.
#[derive(Debug, thiserror::Error)]
#[error("cannot apply status.discovery of CdcSource {name}: {source}")]
pub struct DiscoveryReportError {
    /// The source.
    pub name: String,
    /// What the API server said.
    #[source]
    pub source: kube::Error,
}

/// The server-side apply body: `status.discovery` alone.
pub fn discovery_patch(name: &str, discovery: &DiscoveryStatus) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": SOURCE_KIND,
        "metadata": {"name": name},
        "status": {"discovery": discovery},
    })
}

/// Writes `discovery` into the source `name`'s status ([`discovery_patch`]),
/// or removes the field when `None`.
pub async fn apply_discovery(
    api: &Api<CdcSource>,
    name: &str,
    discovery: Option<&DiscoveryStatus>,
) -> Result<(), DiscoveryReportError> {
    let written = match discovery {
        Some(found) => {
            let params = PatchParams::apply(DISCOVERY_FIELD_MANAGER);
            api.patch_status(name, &params, &Patch::Apply(discovery_patch(name, found)))
                .await
        }
        None => {
            let params = PatchParams {
                field_manager: Some(DISCOVERY_FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            };
            let removed = serde_json::json!({"status": {"discovery": null}});
            api.patch_status(name, &params, &Patch::Merge(removed))
                .await
        }
    };
    written.map(|_| ()).map_err(|source| DiscoveryReportError {
        name: name.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_holds_discovery_alone() {
        let found = DiscoveryStatus {
            count: 2,
            tables: vec!["dbo.a".into(), "dbo.b".into()],
        };
        let patch = discovery_patch("shop", &found);
        assert_eq!(
            patch["status"],
            serde_json::json!({"discovery": {"count": 2, "tables": ["dbo.a", "dbo.b"]}})
        );
        assert_eq!(patch["kind"], "CdcSource");
    }
}
