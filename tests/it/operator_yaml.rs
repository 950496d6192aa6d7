//! Every YAML the project prints or ships reads the same in a YAML 1.1
//! reader and a YAML 1.2 reader. kubectl, Helm, Argo CD and Flux read YAML
//! 1.1 (go-yaml v2: `off`, `on`, `yes`, `no`, `y` and `n` are booleans
//! there); serde_yaml reads YAML 1.2. The 1.1 reader here is PyYAML (the
//! test virtualenv's) with go-yaml's `y`/`n` added
//! (`support/py/yaml11.py`). Checked: `mssql-cdc crd`, `crds/`, the
//! examples, the chart's values and its templates as Helm renders them
//! (with defaults, and with values full of YAML 1.1 words), and every
//! `yaml` block of the docs.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::support::chart::{CHART, render};
use crate::support::examples::{EXAMPLES_DIR, example_files};
use crate::support::kube::repo_file;
use crate::support::tools::{PYTHON, run_python};

const READER: &str = include_str!("support/py/yaml11.py");

/// The documents of `text` as JSON, read as YAML 1.2; `Err` with why not.
fn read_yaml_1_2(text: &str) -> Result<Vec<serde_json::Value>, String> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            let value = serde_yaml::Value::deserialize(doc).map_err(|e| e.to_string())?;
            serde_json::to_value(value).map_err(|e| e.to_string())
        })
        .filter(|doc| !matches!(doc, Ok(serde_json::Value::Null)))
        .collect()
}

/// The ```yaml blocks of a Markdown file.
fn yaml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, fence) if fence.starts_with("```yaml") || fence.starts_with("```yml") => {
                current = Some(String::new());
            }
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// Every YAML text the project emits, by a name saying where it is from.
async fn emitted_yaml() -> Option<Vec<(String, String)>> {
    let mut texts = Vec::new();
    let crd = std::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .arg("crd")
        .output()
        .expect("mssql-cdc crd runs");
    assert!(crd.status.success());
    texts.push((
        "mssql-cdc crd".to_string(),
        String::from_utf8(crd.stdout).expect("UTF-8"),
    ));
    let read = |relative: &str| {
        std::fs::read_to_string(repo_file(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
    };
    texts.push(("crds/cdcstreams.yaml".into(), read("crds/cdcstreams.yaml")));
    for file in example_files() {
        let path = format!("{EXAMPLES_DIR}/{file}");
        texts.push((path.clone(), read(&path)));
    }
    for file in ["values.yaml", "Chart.yaml"] {
        let path = format!("{CHART}/{file}");
        texts.push((path.clone(), read(&path)));
    }
    // YAML 1.1 words in every value the templates copy into YAML.
    let tricky = r#"{
        "worker": {"namespaces": ["on", "team-b"],
                   "serviceAccount": {"annotations": {"example.com/flag": "on", "y": "n"}},
                   "podLabels": {"example.com/enabled": "yes"},
                   "imagePullSecrets": [{"name": "no"}]},
        "workerImages": ["registry.example.com/off/"],
        "workerServiceAccounts": ["off"],
        "workerEnv": ["off", "YES_*"],
        "workerVolumeTypes": ["emptyDir"],
        "workerSecretLabel": "on",
        "podAnnotations": {"example.com/null": "null"},
        "nodeSelector": {"example.com/y": "y"},
        "metrics": {"serviceMonitor": {"enabled": true, "labels": {"release": "yes"}},
                    "podMonitor": {"enabled": true}}
    }"#;
    let renders = [
        ("defaults", "cdc", "ops", "{}"),
        ("YAML 1.1 words", "cdc", "ops", tricky),
        ("release on in namespace off", "on", "off", "{}"),
    ];
    for (label, release, namespace, values) in renders {
        let rendered = render(release, namespace, values).await?;
        for (template, text) in rendered.as_object().expect("templates") {
            if template.ends_with(".yaml") {
                let text = text.as_str().unwrap_or_default().to_string();
                texts.push((format!("{template} ({label})"), text));
            }
        }
    }
    let docs = std::fs::read_dir(repo_file("docs")).expect("docs");
    let pages = docs
        .filter_map(|e| e.ok().map(|e| e.path()))
        .chain([Path::new(&repo_file("README.md")).to_path_buf()])
        .filter(|p| p.extension().is_some_and(|x| x == "md"));
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("a doc page");
        for (i, block) in yaml_blocks(&text).into_iter().enumerate() {
            texts.push((format!("{} yaml block {}", page.display(), i + 1), block));
        }
    }
    Some(texts)
}

#[tokio::test]
async fn every_yaml_we_emit_reads_the_same_in_yaml_1_1_and_1_2() {
    let Some(python) = PYTHON.find() else {
        return;
    };
    let Some(texts) = emitted_yaml().await else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, (_, text))| {
            let path = dir.path().join(format!("{i}.yaml"));
            std::fs::write(&path, text).expect("write");
            path.display().to_string()
        })
        .collect();
    let out = run_python(&python, READER, &files, Duration::from_secs(120)).await;
    assert!(
        out.status.success(),
        "the YAML 1.1 reader failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml_1_1: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(yaml_1_1.len(), texts.len());
    let mut differ = Vec::new();
    for ((name, text), read_1_1) in texts.iter().zip(&yaml_1_1) {
        let as_1_1 = read_1_1["documents"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        match read_yaml_1_2(text) {
            Ok(as_1_2) if as_1_2 == as_1_1 => {}
            Ok(as_1_2) => {
                let first = as_1_2
                    .iter()
                    .zip(&as_1_1)
                    .find(|(a, b)| a != b)
                    .map(|(a, b)| format!("YAML 1.2: {a}\nYAML 1.1: {b}"))
                    .unwrap_or_else(|| "a different number of documents".to_string());
                differ.push(format!("{name}:\n{first}"));
            }
            Err(error) => differ.push(format!("{name}: YAML 1.2 cannot read it: {error}")),
        }
    }
    assert!(
        differ.is_empty(),
        "quote what YAML 1.1 reads as a bool or null:\n{}",
        differ.join("\n\n")
    );
    // The checks ran on something: the CRD, the examples, the templates.
    assert!(texts.len() > 20, "{}", texts.len());
}

#[test]
fn yaml_blocks_are_found_in_markdown() {
    let page = "text\n```yaml\na: 1\n```\n```sh\nls\n```\n  ```yaml\nb: 2\n  ```\n";
    assert_eq!(yaml_blocks(page), ["a: 1\n", "b: 2\n"]);
}
