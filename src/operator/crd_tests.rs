use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

use super::*;

fn schema() -> JSONSchemaProps {
    schema_of(&crd())
}

fn schema_of(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> JSONSchemaProps {
    crd.spec.versions[0]
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
    let mut missing = Vec::new();
    for schema in [schema(), schema_of(&source_crd())] {
        for root in ["spec", "status"] {
            let node = &schema.properties.as_ref().expect("properties")[root];
            undescribed(node, root, &mut missing);
        }
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
        [
            "Phase",
            "Ready",
            "Reason",
            "Lag",
            "Headroom",
            "Finalized",
            "Age",
            "Silver",
            "Table",
            "Target",
            "Message"
        ]
    );
    // Ready's reason at a glance; the rest only in `kubectl get -o wide`.
    let wide: Vec<String> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .filter(|c| c.priority == Some(1))
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(wide, ["Silver", "Table", "Target", "Message"]);
    // Silver's applied position only in `kubectl get -o wide`.
    let silver = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .find(|c| c.name == "Silver")
        .map(|c| (c.priority, c.json_path.clone()));
    assert_eq!(
        silver,
        Some((Some(1), ".status.silver.appliedLsn".to_string()))
    );
    assert!(has_status_subresource(&crd));
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
    let files = [
        (GENERATED_CRD, crd_yaml().expect("yaml")),
        (
            GENERATED_CHART_TEMPLATE,
            chart_template().expect("template"),
        ),
        (
            GENERATED_REFERENCE,
            crate::operator::crd_reference::crd_reference(),
        ),
        (GENERATED_SOURCE_CRD, source_crd_yaml().expect("yaml")),
        (
            GENERATED_SOURCE_CHART_TEMPLATE,
            source_chart_template().expect("template"),
        ),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let regenerate = std::env::var_os("MSSQL_CDC_REGENERATE").is_some();
    for (file, expected) in files {
        let path = root.join(file);
        if regenerate {
            std::fs::write(&path, &expected).expect("write generated file");
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == expected,
            "{file} differs from `mssql-cdc crd`; regenerate the generated files with\n  \
             MSSQL_CDC_REGENERATE=1 cargo test --workspace --all-targets --locked \
             --features mssql-cdc/failpoints --lib committed_crd_files"
        );
    }
}

/// What client-side `kubectl apply -f crds/` stores in
/// `kubectl.kubernetes.io/last-applied-configuration`: the file's object
/// as Go's JSON encoder writes it (`<`, `>` and `&` escaped, a final
/// newline).
fn last_applied_configuration(yaml: &str) -> String {
    let object: serde_json::Value = serde_yaml::from_str(yaml).expect("YAML");
    let json = serde_json::to_string(&object).expect("json");
    let escaped = json
        .replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    format!("{escaped}\n")
}

#[test]
fn kubectl_apply_can_store_the_crd_in_its_annotation() {
    // The API server allows 256 KiB of annotations, keys included.
    let key = "kubectl.kubernetes.io/last-applied-configuration";
    let size = key.len() + last_applied_configuration(&crd_yaml().expect("yaml")).len();
    assert!(
        size < CLIENT_SIDE_APPLY_LIMIT * 3 / 4,
        "the CRD takes {size} bytes of annotation; `kubectl apply -f crds/` fails past \
         {CLIENT_SIDE_APPLY_LIMIT} (keep a margin for growth: shorten the descriptions of large \
         core types, see src/spec/worker_schema.rs)"
    );
}

#[test]
fn the_annotation_escapes_as_go_does() {
    let stored = last_applied_configuration("a: \"x && y < z > w\"\n");
    assert_eq!(
        stored,
        "{\"a\":\"x \\u0026\\u0026 y \\u003c z \\u003e w\"}\n"
    );
}

/// Paths of schema nodes that keep fields the schema does not name.
fn preserving(node: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&serde_json::json!(true)) {
        out.push(path.to_string());
    }
    for (name, child) in node["properties"].as_object().into_iter().flatten() {
        preserving(child, &format!("{path}.{name}"), out);
    }
    for key in ["items", "additionalProperties"] {
        if node[key].is_object() {
            preserving(&node[key], &format!("{path}.{key}"), out);
        }
    }
}

#[test]
fn no_spec_field_keeps_unknown_fields() {
    // The operator reads a CdcStream into typed structs, which drop a key
    // they do not know: a misspelt field must be refused, not stored.
    let schema = serde_json::to_value(schema()).expect("json");
    let mut open = Vec::new();
    preserving(&schema, "", &mut open);
    assert_eq!(open, Vec::<String>::new());
}

#[test]
fn the_crd_is_listed_in_its_category() {
    let names = crd().spec.names;
    assert_eq!(names.categories, Some(vec!["mssql-cdc".to_string()]));
    assert_eq!(names.short_names, Some(vec!["cdcs".to_string()]));
}

#[test]
fn enums_are_quoted_for_yaml_1_1_readers() {
    let yaml = crd_yaml().expect("yaml");
    assert!(yaml.contains("- \"off\""), "encrypt's off must be quoted");
    assert!(!yaml.contains("- off\n"));
    let back: serde_json::Value = serde_yaml::from_str(&yaml).expect("YAML");
    assert_eq!(back, serde_json::to_value(crd()).expect("json"));
}

#[test]
fn the_chart_template_is_the_crd_behind_enabled_and_keep() {
    let template = chart_template().expect("template");
    let lines: Vec<&str> = template.lines().collect();
    assert_eq!(lines.first(), Some(&"{{- if .Values.crds.enabled }}"));
    assert_eq!(lines.last(), Some(&"{{- end }}"));
    assert!(
        template.contains(
            "  name: cdcstreams.mssql-cdc.io\n  {{- if .Values.crds.keep }}\n  annotations:\n    helm.sh/resource-policy: keep\n  {{- end }}\n"
        ),
        "{}",
        &template[..400]
    );
    // Without the template lines it is `mssql-cdc crd`'s output.
    let plain: Vec<&str> = lines
        .iter()
        .filter(|l| !l.trim_start().starts_with("{{"))
        .filter(|l| **l != "  annotations:" && !l.contains("helm.sh/resource-policy"))
        .copied()
        .collect();
    assert_eq!(plain.join("\n") + "\n", crd_yaml().expect("yaml"));
}

/// Every node of a schema as JSON, with its path.
fn nodes<'a>(
    node: &'a serde_json::Value,
    path: String,
    out: &mut Vec<(String, &'a serde_json::Value)>,
) {
    out.push((path.clone(), node));
    if let Some(properties) = node.get("properties").and_then(|p| p.as_object()) {
        for (name, child) in properties {
            nodes(child, format!("{path}.{name}"), out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get(key).filter(|c| c.is_object()) {
            nodes(child, format!("{path}[]"), out);
        }
    }
}

#[test]
fn every_format_is_one_the_api_server_knows() {
    let schema = serde_json::to_value(schema()).expect("json");
    let source = serde_json::to_value(schema_of(&source_crd())).expect("json");
    let mut all = Vec::new();
    nodes(&schema, String::new(), &mut all);
    nodes(&source, "(CdcSource)".into(), &mut all);
    let unknown: Vec<String> = all
        .iter()
        .filter_map(|(path, node)| {
            let format = node.get("format")?.as_str()?;
            let string = node.get("type").and_then(|t| t.as_str()) == Some("string");
            (!string || !KNOWN_STRING_FORMATS.contains(&format))
                .then(|| format!("{path}: {format}"))
        })
        .collect();
    assert_eq!(unknown, Vec::<String>::new(), "formats kubectl warns about");
    // The bounds the formats named stay.
    let port = &schema["properties"]["spec"]["properties"]["source"]["properties"]["port"];
    assert_eq!(port["minimum"], 1.0, "{port}");
    assert_eq!(port["maximum"], 65535.0, "{port}");
}

#[test]
fn every_string_list_and_map_of_the_spec_is_bounded_for_cel() {
    let schema = serde_json::to_value(schema()).expect("json");
    let source = serde_json::to_value(schema_of(&source_crd())).expect("json");
    let mut all = Vec::new();
    nodes(&schema["properties"]["spec"], "spec".into(), &mut all);
    nodes(
        &source["properties"]["spec"],
        "(CdcSource) spec".into(),
        &mut all,
    );
    let unbounded: Vec<&str> = all
        .iter()
        .filter(
            |(_, node)| match node.get("type").and_then(|t| t.as_str()) {
                Some("string") => {
                    node.get("maxLength").is_none()
                        && node.get("enum").is_none()
                        && node.get("format").is_none()
                }
                Some("array") => node.get("maxItems").is_none(),
                Some("object") => {
                    node.get("additionalProperties").is_some()
                        && node.get("maxProperties").is_none()
                }
                _ => false,
            },
        )
        .map(|(path, _)| path.as_str())
        .collect();
    assert_eq!(unbounded, Vec::<&str>::new(), "unbounded spec fields");
    let columns = &schema["properties"]["spec"]["properties"]["source"]["properties"]["columns"];
    assert_eq!(columns["maxItems"], 1024, "SQL Server allows 1,024 columns");
}

#[test]
fn the_source_crd_is_listed_with_the_streams_and_shows_its_tables() {
    let crd = source_crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("cdcsources.mssql-cdc.io")
    );
    assert_eq!(
        crd.spec.names.categories,
        Some(vec!["mssql-cdc".to_string()])
    );
    assert_eq!(crd.spec.names.short_names, Some(vec!["cdcsrc".to_string()]));
    let columns: Vec<(String, String)> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.json_path.clone()))
        .collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Database",
            "Tables",
            "Failed",
            "Max lag",
            "Min headroom",
            "Finalized",
            "Uncovered",
            "Age"
        ]
    );
    // Every column reads a field the status has.
    let status =
        serde_json::to_value(schema_of(&crd)).expect("json")["properties"]["status"]["properties"]
            .clone();
    for (name, path) in &columns {
        if let Some(field) = path.strip_prefix(".status.") {
            let first = field.split('.').next().unwrap_or_default();
            assert!(status.get(first).is_some(), "{name}: {path}");
        }
    }
    assert!(has_status_subresource(&crd));
    let yaml = serde_yaml::to_value(schema_of(&crd)).expect("yaml");
    let password_from = &yaml["properties"]["spec"]["properties"]["connection"]["properties"]["credentials"]
        ["properties"]["passwordFrom"];
    assert_eq!(password_from["required"][0].as_str(), Some("secretKeyRef"));
    assert_eq!(
        password_from["properties"].as_mapping().map(|m| m.len()),
        Some(1),
        "only secretKeyRef"
    );
}

fn has_status_subresource(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> bool {
    crd.spec.versions[0]
        .subresources
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .is_some()
}
