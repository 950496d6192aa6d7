use super::*;

#[test]
fn first_sentence_skips_abbreviations_and_caps_length() {
    assert_eq!(
        first_sentence("path of the directory, e.g. /data. More info: x"),
        "path of the directory, e.g. /data."
    );
    assert_eq!(first_sentence("line one\nline two"), "line one");
    let long = "word ".repeat(100);
    let cut = first_sentence(&long);
    assert!(cut.len() <= MAX_DESCRIPTION + 3, "{cut}");
    assert!(cut.ends_with("..."), "{cut}");
}

#[test]
fn a_deprecation_after_the_first_sentence_is_kept() {
    assert_eq!(
        short_description("cinder represents a volume. Deprecated: Cinder is deprecated."),
        "cinder represents a volume. (Deprecated.)"
    );
    assert_eq!(
        short_description("Deprecated: use csi."),
        "Deprecated: use csi."
    );
    assert_eq!(short_description("path of the file."), "path of the file.");
}

#[test]
fn the_exactly_one_rule_sums_every_source() {
    let rule = exactly_one_rule(&["a".into(), "b".into()]);
    assert_eq!(rule, "(has(self.a) ? 1 : 0) + (has(self.b) ? 1 : 0) == 1");
}

fn worker_schema(field: &str) -> Value {
    // Inlined, as the CRD has it.
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let schema = generator
        .into_root_schema_for::<crate::spec::WorkerSpec>()
        .to_value();
    schema["properties"][field].clone()
}

#[test]
fn a_volume_lists_every_source_and_needs_exactly_one() {
    let volumes = worker_schema("volumes");
    assert_eq!(volumes["maxItems"], json!(MAX_VOLUMES));
    let item = &volumes["items"];
    let sources = volume_sources(item);
    for source in [
        "persistentVolumeClaim",
        "emptyDir",
        "secret",
        "csi",
        "projected",
        "nfs",
        "image",
    ] {
        assert!(
            sources.iter().any(|s| s == source),
            "{source} missing: {sources:?}"
        );
    }
    let rule = item["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .unwrap_or_default();
    assert!(!rule.contains("self.name"), "{rule}");
    assert_eq!(rule.matches("has(").count(), sources.len(), "{rule}");
    // The claim template takes labels and annotations only.
    let metadata = item
        .pointer(
            "/properties/ephemeral/properties/volumeClaimTemplate/properties/metadata/properties",
        )
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect::<Vec<_>>());
    assert_eq!(
        metadata,
        Some(vec!["annotations".to_string(), "labels".to_string()])
    );
}

#[test]
fn spread_policies_and_affinity_terms_are_closed() {
    let spread = worker_schema("topologySpreadConstraints");
    let properties = &spread["items"]["properties"];
    for field in ["labelSelector", "matchLabelKeys", "minDomains"] {
        assert!(properties.get(field).is_some(), "{field}");
    }
    assert_eq!(
        properties["nodeTaintsPolicy"]["enum"],
        json!(["Honor", "Ignore"])
    );
    let affinity = worker_schema("affinity");
    let term = affinity.pointer(
        "/properties/podAntiAffinity/properties/requiredDuringSchedulingIgnoredDuringExecution/items/properties/labelSelector/properties/matchExpressions",
    );
    assert!(term.is_some(), "{affinity}");
}
