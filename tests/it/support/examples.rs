//! The files of `examples/kubernetes/` as the tests apply them: parsed as
//! they are, then pointed at the test's own servers and nothing else (the
//! SQL Server's address and its self-signed certificate, the object
//! store's endpoint, as the harness's pods reach them). Each pod has a
//! network of its own, so workers keep their default metrics port.
//! Secrets are applied unchanged: the test's servers are given the
//! examples' placeholder credentials instead.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_yaml::{Mapping, Value};

use super::kube::repo_file;
use super::server::Endpoint;

/// Where the examples live, relative to the repository.
pub const EXAMPLES_DIR: &str = "examples/kubernetes";

/// One example file: its YAML documents, possibly changed.
#[derive(Debug, Clone)]
pub struct Example {
    /// The file name in [`EXAMPLES_DIR`].
    pub file: String,
    docs: Vec<Value>,
}

/// Every file of [`EXAMPLES_DIR`], by name.
pub fn example_files() -> Vec<String> {
    let dir = repo_file(EXAMPLES_DIR);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml") || name.ends_with(".yml"))
        .collect();
    files.sort();
    files
}

/// The YAML documents of `text`, without empty ones.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

impl Example {
    /// `file` of [`EXAMPLES_DIR`] as it is committed.
    pub fn load(file: &str) -> Self {
        let path = Path::new(&repo_file(EXAMPLES_DIR)).join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Example {
            file: file.to_string(),
            docs: yaml_documents(&text),
        }
    }

    /// The example's CdcStream.
    pub fn stream(&self) -> &Value {
        self.docs
            .iter()
            .find(|d| d["kind"] == "CdcStream")
            .unwrap_or_else(|| panic!("{} has no CdcStream", self.file))
    }

    fn stream_mut(&mut self) -> &mut Mapping {
        let file = self.file.clone();
        self.docs
            .iter_mut()
            .find(|d| d["kind"] == "CdcStream")
            .and_then(|d| d.get_mut("spec"))
            .and_then(Value::as_mapping_mut)
            .unwrap_or_else(|| panic!("{file} has no CdcStream spec"))
    }

    /// The CdcStream's name.
    pub fn stream_name(&self) -> String {
        text(&self.stream()["metadata"]["name"])
    }

    /// The names of every CdcStream of the file, in its order.
    pub fn stream_names(&self) -> Vec<String> {
        self.docs
            .iter()
            .filter(|d| d["kind"] == "CdcStream")
            .map(|d| text(&d["metadata"]["name"]))
            .collect()
    }

    /// The example's CdcSource, if it has one.
    pub fn source(&self) -> Option<&Value> {
        self.docs.iter().find(|d| d["kind"] == "CdcSource")
    }

    /// The CdcSource's name.
    pub fn source_name(&self) -> String {
        let source = self
            .source()
            .unwrap_or_else(|| panic!("{} has no CdcSource", self.file));
        text(&source["metadata"]["name"])
    }

    /// Where the SQL login is: the CdcSource's `spec.connection`, or the
    /// stream's `spec.source`.
    fn connection(&self) -> &Value {
        match self.source() {
            Some(source) => &source["spec"]["connection"],
            None => &self.stream()["spec"]["source"],
        }
    }

    /// `credentials.username` of the stream's (or the source's) connection.
    pub fn login(&self) -> String {
        text(&self.connection()["credentials"]["username"])
    }

    /// `stringData.<key>` of the Secret `name`.
    pub fn secret(&self, name: &str, key: &str) -> String {
        let secret = self
            .docs
            .iter()
            .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{} has no Secret {name}", self.file));
        text(&secret["stringData"][key])
    }

    /// The password of the stream's SQL login, from the example's Secret.
    pub fn sql_password(&self) -> String {
        let secret = &self.connection()["credentials"]["passwordFrom"]["secretKeyRef"];
        self.secret(&text(&secret["name"]), &text(&secret["key"]))
    }

    /// The source at `endpoint` (the test's SQL Server), whose
    /// self-signed certificate the stream (or the CdcSource) must accept.
    pub fn at_sql_server(mut self, endpoint: &Endpoint) -> Self {
        let in_source = self.source().is_some();
        let source = if in_source {
            self.docs
                .iter_mut()
                .find(|d| d["kind"] == "CdcSource")
                .and_then(|d| d.get_mut("spec")?.get_mut("connection"))
                .and_then(Value::as_mapping_mut)
                .expect("spec.connection")
        } else {
            self.stream_mut()
                .get_mut("source")
                .and_then(Value::as_mapping_mut)
                .expect("spec.source")
        };
        source.insert("host".into(), endpoint.host.clone().into());
        source.insert("port".into(), u64::from(endpoint.port).into());
        source.insert("trustServerCertificate".into(), true.into());
        self
    }

    /// `options` added to `spec.storageOptions` (an emulator's endpoint).
    pub fn with_storage_options(mut self, options: &BTreeMap<String, String>) -> Self {
        let spec = self.stream_mut();
        let existing = spec
            .entry("storageOptions".into())
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        let map = existing.as_mapping_mut().expect("storageOptions is a map");
        for (key, value) in options {
            map.insert(key.clone().into(), value.clone().into());
        }
        self
    }

    /// The example as it was before `spec.worker` could add volumes: its
    /// lake and checkpoint on the container's root filesystem.
    pub fn without_volumes(mut self) -> Self {
        if let Some(worker) = self
            .stream_mut()
            .get_mut("worker")
            .and_then(Value::as_mapping_mut)
        {
            worker.remove("volumes");
            worker.remove("volumeMounts");
        }
        self.docs.retain(|d| d["kind"] != "PersistentVolumeClaim");
        self
    }

    /// The example's claims bound to the PersistentVolume `volume` (one an
    /// administrator made), not provisioned from the default class.
    pub fn with_claims_bound_to(mut self, volume: &str) -> Self {
        for claim in self
            .docs
            .iter_mut()
            .filter(|d| d["kind"] == "PersistentVolumeClaim")
        {
            let spec = claim
                .get_mut("spec")
                .and_then(Value::as_mapping_mut)
                .expect("the claim's spec");
            spec.insert("storageClassName".into(), "".into());
            spec.insert("volumeName".into(), volume.into());
        }
        self
    }

    /// The documents as one YAML file.
    pub fn to_yaml(&self) -> String {
        self.docs
            .iter()
            .map(|d| serde_yaml::to_string(d).expect("YAML"))
            .collect::<Vec<_>>()
            .join("---\n")
    }
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value:?}"))
        .to_string()
}
