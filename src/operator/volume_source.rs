//! Each worker volume must have exactly one source. The CRD's rule refuses
//! a stream without, but one stored under an older CRD (whose schema kept
//! unknown keys) can hold a misspelt source the API server now prunes on
//! read: the volume arrives with its name alone, and Kubernetes would make
//! it an `emptyDir`, putting the checkpoint on a volume the next pod loses.

use k8s_openapi::api::core::v1::Volume;

use super::children::BuildError;

/// Refuses, naming the volume, one with no source or with several.
pub fn check_one_source_each(volumes: &[Volume]) -> Result<(), BuildError> {
    for (i, volume) in volumes.iter().enumerate() {
        let sources = sources(volume);
        let problem = match sources.len() {
            1 => continue,
            0 => format!(
                "volume {:?} has no source (persistentVolumeClaim, emptyDir, secret...), \
                 so Kubernetes would make it an emptyDir; set its source (a misspelt one \
                 is dropped)",
                volume.name
            ),
            _ => format!(
                "volume {:?} has {} sources ({}); a volume has exactly one",
                volume.name,
                sources.len(),
                sources.join(", ")
            ),
        };
        return Err(BuildError::worker(
            format!("spec.worker.volumes[{i}]"),
            problem,
        ));
    }
    Ok(())
}

/// The source keys a volume sets, as it would be sent (every key but its
/// name), so a source k8s-openapi adds is counted without a change here.
fn sources(volume: &Volume) -> Vec<String> {
    serde_json::to_value(volume)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|m| m.keys().filter(|k| *k != "name").cloned().collect())
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "volume_source_tests.rs"]
mod tests;
