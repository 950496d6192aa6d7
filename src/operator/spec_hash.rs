//! The hash of what a worker runs: every spec field the engine reads, so
//! that an edit of any of them changes the pod template (the Deployment
//! rolls, a CronJob's next run takes it) and the worker can report which
//! spec it runs. `alerts` (the operator's limits), `suspend` (the
//! replicas) and `worker` (the pod itself) are left out. A CdcSource's
//! worker is hashed the same way over the source's spec; its streams are
//! not part of it, so adding a table does not restart the worker.

use sha2::{Digest, Sha256};

use crate::spec::{CdcSourceSpec, CdcStreamSpec};

/// The pod template annotation carrying [`spec_hash`].
pub const SPEC_HASH_ANNOTATION: &str = "mssql-cdc.io/spec-hash";

/// The spec fields that do not reach the engine.
const NOT_RUN: [&str; 3] = ["alerts", "suspend", "worker"];

/// 16 hex digits of the SHA-256 of the engine's part of `spec`, as
/// canonical JSON (keys sorted).
pub fn spec_hash(spec: &CdcStreamSpec) -> String {
    let mut value = serde_json::to_value(spec).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        for field in NOT_RUN {
            fields.remove(field);
        }
    }
    digest_of(&value)
}

/// [`spec_hash`] of a CdcSource: its `suspend`, `worker` and the alert
/// limits of its `defaults` do not reach the engine either, nor
/// `discovery` (report only: the worker reads it again on its timer).
pub fn source_spec_hash(spec: &CdcSourceSpec) -> String {
    let mut value = serde_json::to_value(spec).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        for field in NOT_RUN {
            fields.remove(field);
        }
        fields.remove("discovery");
        if let Some(defaults) = fields.get_mut("defaults").and_then(|d| d.as_object_mut()) {
            defaults.remove("alerts");
        }
    }
    digest_of(&value)
}

fn digest_of(value: &serde_json::Value) -> String {
    let digest = Sha256::digest(value.to_string().as_bytes());
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{source_spec_hash, spec_hash};
    use crate::operator::test_fixtures::{source, stream};

    #[test]
    fn a_sources_discovery_does_not_roll_its_worker() {
        let base = source(serde_json::json!({})).spec;
        let mut discovering = base.clone();
        discovering.discovery = Some(crate::spec::DiscoverySpec {
            include: vec!["sales.*".into()],
            exclude: Vec::new(),
        });
        assert_eq!(source_spec_hash(&discovering), source_spec_hash(&base));
    }

    #[test]
    fn only_what_the_engine_reads_changes_the_hash() {
        let base = stream(serde_json::json!({})).spec;
        let hash = spec_hash(&base);
        assert_eq!(hash.len(), 16);
        let mut alerts = base.clone();
        alerts.alerts = Some(crate::spec::AlertsSpec {
            silence: Some("1h".into()),
            ..Default::default()
        });
        let mut suspended = base.clone();
        suspended.suspend = true;
        for same in [alerts, suspended] {
            assert_eq!(spec_hash(&same), hash);
        }
        let mut trigger = base.clone();
        trigger.trigger.processing_time = Some("2s".into());
        let mut chunks = base.clone();
        chunks.snapshot = Some(crate::spec::SnapshotSpec {
            chunk_rows: 5,
            ..Default::default()
        });
        for changed in [trigger, chunks] {
            assert_ne!(spec_hash(&changed), hash);
        }
    }
}
