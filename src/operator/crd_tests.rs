use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

use super::*;

fn schema() -> JSONSchemaProps {
    crd().spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.clone())
        .expect("the CRD has a schema")
}

/// Paths of properties without a description, for `kubectl explain`.
fn undescribed(node: &JSONSchemaProps, path: &str, out: &mut Vec<String>) {
    for (name, child) in node.properties.iter().flatten() {
        let child_path = format!("{path}.{name}");
        if child.description.as_deref().unwrap_or_default().is_empty() {
            out.push(child_path.clone());
        }
        undescribed(child, &child_path, out);
    }
    if let Some(items) = node.items.as_ref().and_then(|i| match i {
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(s) => Some(s),
        _ => None,
    }) {
        undescribed(items, &format!("{path}[]"), out);
    }
}

#[test]
fn every_spec_and_status_field_is_described() {
    let schema = schema();
    let mut missing = Vec::new();
    for root in ["spec", "status"] {
        let node = &schema.properties.as_ref().expect("properties")[root];
        undescribed(node, root, &mut missing);
    }
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "fields without a doc comment"
    );
}

#[test]
fn passwords_come_only_from_secrets() {
    let yaml = serde_yaml::to_value(schema()).expect("yaml");
    let password_from = &yaml["properties"]["spec"]["properties"]["source"]["properties"]["credentials"]
        ["properties"]["passwordFrom"];
    let keys: Vec<&str> = password_from["properties"]
        .as_mapping()
        .expect("properties")
        .keys()
        .filter_map(|k| k.as_str())
        .collect();
    assert_eq!(keys, ["secretKeyRef"]);
    assert_eq!(password_from["required"][0].as_str(), Some("secretKeyRef"));
}

#[test]
fn printer_columns_show_health_at_a_glance() {
    let crd = crd();
    let names: Vec<String> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(
        names,
        ["Phase", "Ready", "Lag", "Headroom", "Finalized", "Age"]
    );
    assert!(
        crd.spec.versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );
}

#[test]
fn immutability_and_exclusivity_are_cel_rules() {
    let yaml = serde_yaml::to_string(&schema()).expect("yaml");
    for rule in [
        "self == oldSelf",
        "self.location == oldSelf.location",
        "self.name == oldSelf.name",
        "self.host == oldSelf.host",
        "self.database == oldSelf.database",
        "self.table == oldSelf.table",
        "!(has(self.processingTime) && has(self.availableNow))",
        "!has(self.schedule) || (has(self.availableNow) && self.availableNow)",
    ] {
        assert!(yaml.contains(rule), "no CEL rule {rule:?}");
    }
}

/// The committed copies must equal `mssql-cdc crd` (and the reference page
/// `mssql-cdc crd --reference`). With `MSSQL_CDC_REGENERATE=1` the test
/// rewrites them instead.
#[test]
fn committed_crd_files_match_the_generator() {
    let crd = crd_yaml().expect("yaml");
    let reference = crate::operator::crd_reference::crd_reference();
    let files = GENERATED_FILES
        .iter()
        .map(|file| (*file, &crd))
        .chain([(GENERATED_REFERENCE, &reference)]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let regenerate = std::env::var_os("MSSQL_CDC_REGENERATE").is_some();
    for (file, expected) in files {
        let path = root.join(file);
        if regenerate {
            std::fs::write(&path, expected).expect("write generated file");
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            &committed == expected,
            "{file} differs from `mssql-cdc crd`; regenerate the generated files with\n  \
             MSSQL_CDC_REGENERATE=1 cargo test --workspace --all-targets --locked \
             --features mssql-cdc/failpoints --lib committed_crd_files"
        );
    }
}
