//! The Helm chart through Helm itself (PyPI `helm-python-sdk`): lint,
//! render and install, and the whole chart as rendered, which the operator
//! tests apply with kubectl so that the operator runs in its own pod under
//! the chart's ServiceAccounts and RBAC, its workers too.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::kube::{KubeEnv, repo_file};
use super::tools::{PYTHON, run_python};

const SCRIPT: &str = include_str!("py/helm_chart.py");
/// The chart, relative to the repository.
pub const CHART: &str = "charts/mssql-cdc-operator";

/// Runs the Helm script; `None` when Python is missing and allowed to be.
pub async fn helm(args: &[&str]) -> Option<Value> {
    let python = PYTHON.find()?;
    let out = run_python(&python, SCRIPT, args, Duration::from_secs(120)).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{stdout}\n{stderr}"
    );
    Some(serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("JSON result"))
}

/// `helm ACTION` (`install` or `upgrade`) of `chart` as the release `cdc`
/// in the namespace `default` of `kube`, with `values` (JSON); the
/// release's summary, whose `status` the caller checks.
pub async fn release(kube: &KubeEnv, action: &str, chart: &str, values: &str) -> Option<Value> {
    let kubeconfig = kube.kubeconfig.display().to_string();
    helm(&[action, &kubeconfig, chart, "cdc", "default", values]).await
}

/// What Helm says when it refuses `args` (the test fails if it does not);
/// `None` when Python is missing and allowed to be.
pub async fn helm_fails(args: &[&str]) -> Option<String> {
    let python = PYTHON.find()?;
    let out = run_python(&python, SCRIPT, args, Duration::from_secs(120)).await;
    assert!(
        !out.status.success(),
        "helm {args:?} should have failed:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The chart rendered for `release` in `namespace` with `values` (JSON).
pub async fn render(release: &str, namespace: &str, values: &str) -> Option<Value> {
    helm(&["render", &repo_file(CHART), release, namespace, values]).await
}

/// The YAML documents of one rendered template.
pub fn documents(rendered: &Value, template: &str) -> Vec<serde_yaml::Value> {
    let text = rendered[format!("mssql-cdc-operator/templates/{template}")]
        .as_str()
        .unwrap_or_else(|| panic!("no template {template}"));
    serde_yaml::Deserializer::from_str(text)
        .filter_map(|doc| serde_yaml::Value::deserialize(doc).ok())
        .filter(|doc| !doc.is_null())
        .collect()
}

/// `documents` written to the scratch file `name` and applied with kubectl
/// (as the admin).
async fn apply_documents(kube: &KubeEnv, name: &str, documents: &[serde_yaml::Value]) {
    let text: Vec<String> = documents
        .iter()
        .map(|d| serde_yaml::to_string(d).expect("YAML"))
        .collect();
    let file = kube.write(name, &text.join("---\n"));
    kube.kubectl_ok(&["apply", "-f", &file]).await;
}

/// The whole chart as Helm renders it: every object of every template, the
/// operator's Deployment included, so that the harness kubelet runs the
/// operator in its own pod, as its ServiceAccount, with the flags the
/// chart gives it.
pub struct ChartRelease {
    /// The Helm release name.
    pub release: String,
    /// The release's namespace (the operator's, and the workers' here).
    pub namespace: String,
    documents: Vec<serde_yaml::Value>,
}

/// The ConfigMap an operator with [`ChartRelease::with_test_clock`] takes
/// its clock from (`MSSQL_CDC_TEST_CLOCK`, failpoints builds only).
pub const TEST_CLOCK_CONFIG_MAP: &str = "mssql-cdc-test-clock";

impl ChartRelease {
    /// The chart rendered for `release` in `namespace` with `values`
    /// (JSON); `None` when Python is missing and allowed to be.
    pub async fn render(release: &str, namespace: &str, values: &str) -> Option<Self> {
        let rendered = render(release, namespace, values).await?;
        let documents = rendered
            .as_object()
            .expect("templates")
            .iter()
            .filter(|(template, _)| template.ends_with(".yaml"))
            .flat_map(|(template, _)| {
                let name = template.trim_start_matches("mssql-cdc-operator/templates/");
                documents(&rendered, name)
            })
            .collect();
        Some(ChartRelease {
            release: release.to_string(),
            namespace: namespace.to_string(),
            documents,
        })
    }

    /// The operator's ServiceAccount (and Roles), as the chart names it.
    pub fn operator_account(&self) -> String {
        format!("{}-mssql-cdc-operator", self.release)
    }

    /// The workers' ServiceAccount.
    pub fn worker_account(&self) -> String {
        format!("{}-worker", self.operator_account())
    }

    /// Removes the rules on `resource` from the operator's Roles and
    /// ClusterRole: how a test proves that the operator needs them.
    pub fn without_operator_rule_on(mut self, resource: &str) -> Self {
        let operator = self.operator_account();
        for doc in &mut self.documents {
            let is_operator_role = matches!(doc["kind"].as_str(), Some("Role" | "ClusterRole"))
                && doc["metadata"]["name"].as_str() == Some(operator.as_str());
            if let (true, Some(rules)) = (is_operator_role, doc["rules"].as_sequence_mut()) {
                rules.retain(|rule| {
                    !rule["resources"]
                        .as_sequence()
                        .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(resource)))
                });
            }
        }
        self
    }

    /// Removes `verb` from the worker Role's rule on `resource`: how a test
    /// proves that RBAC bites.
    pub fn without_worker_verb(mut self, resource: &str, verb: &str) -> Self {
        let role = self.worker_account();
        for doc in &mut self.documents {
            let is_worker_role =
                doc["kind"] == "Role" && doc["metadata"]["name"].as_str() == Some(role.as_str());
            if !is_worker_role {
                continue;
            }
            if let Some(rules) = doc["rules"].as_sequence_mut() {
                for rule in rules.iter_mut() {
                    let on = rule["resources"]
                        .as_sequence()
                        .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(resource)));
                    if let (true, Some(verbs)) = (on, rule["verbs"].as_sequence_mut()) {
                        verbs.retain(|v| v.as_str() != Some(verb));
                    }
                }
                rules.retain(|r| r["verbs"].as_sequence().is_some_and(|v| !v.is_empty()));
            }
        }
        self
    }

    /// The operator on the test's clock: its container gets
    /// `MSSQL_CDC_TEST_CLOCK` (a switch of failpoints builds only) naming
    /// the ConfigMap [`TEST_CLOCK_CONFIG_MAP`], which
    /// [`KubeEnv::advance_clock`] writes, and a Role of the test's own
    /// lets its ServiceAccount watch that ConfigMap. Nothing else of the
    /// chart changes.
    pub fn with_test_clock(mut self) -> Self {
        let value = format!("{}/{TEST_CLOCK_CONFIG_MAP}", self.namespace);
        // The operator's is the chart's one Deployment.
        let env = self
            .documents
            .iter_mut()
            .find(|doc| doc["kind"] == "Deployment")
            .and_then(|doc| {
                doc["spec"]["template"]["spec"]["containers"][0]["env"].as_sequence_mut()
            })
            .expect("the operator's Deployment with its env");
        env.push(yaml(&format!(
            "{{name: MSSQL_CDC_TEST_CLOCK, value: \"{value}\"}}"
        )));
        let (ns, account) = (&self.namespace, self.operator_account());
        for text in [
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {TEST_CLOCK_CONFIG_MAP}, namespace: {ns}}}\n\
                 data: {{offsetSeconds: \"0\"}}\n"
            ),
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n\
                 metadata: {{name: {TEST_CLOCK_CONFIG_MAP}, namespace: {ns}}}\n\
                 rules: [{{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list, watch]}}]\n"
            ),
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n\
                 metadata: {{name: {TEST_CLOCK_CONFIG_MAP}, namespace: {ns}}}\n\
                 roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {TEST_CLOCK_CONFIG_MAP}}}\n\
                 subjects: [{{kind: ServiceAccount, name: {account}, namespace: {ns}}}]\n"
            ),
        ] {
            self.documents.push(yaml(&text));
        }
        self
    }

    /// The cluster-scoped objects (ClusterRole and ClusterRoleBinding),
    /// which a real cluster keeps after the test's namespace is gone.
    pub fn cluster_scoped(&self) -> Vec<(String, String)> {
        self.documents
            .iter()
            .filter(|d| {
                matches!(
                    d["kind"].as_str(),
                    Some("ClusterRole" | "ClusterRoleBinding")
                )
            })
            .map(|d| {
                (
                    d["kind"].as_str().unwrap_or_default().to_lowercase(),
                    d["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect()
    }

    /// Applies every object with kubectl (as the admin).
    pub async fn apply(&self, kube: &KubeEnv) {
        apply_documents(kube, "chart-release.yaml", &self.documents).await;
    }
}

/// One YAML document the test writes itself.
fn yaml(text: &str) -> serde_yaml::Value {
    serde_yaml::from_str(text).expect("the test's YAML")
}
