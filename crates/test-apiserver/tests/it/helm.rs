//! Helm (v4 SDK via PyPI `helm-python-sdk`) lints, installs and uninstalls a
//! tiny chart against the server.
//!
//! The Python interpreter comes from `TEST_APISERVER_PYTHON` (set by
//! `scripts/test` to the venv it creates), else `<workspace>/.venv/bin/python`.

use crate::common::{self, Env, eventually, within};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use std::path::PathBuf;
use tokio::process::Command;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TEST_APISERVER_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    if venv.exists() {
        return venv;
    }
    panic!(
        "no Python with helm-python-sdk: set TEST_APISERVER_PYTHON, or run \
         `python3 -m venv .venv && .venv/bin/pip install helm-python-sdk` at the workspace root"
    )
}

async fn helm(env: &Env, action: &str) -> serde_json::Value {
    let chart = common::fixture("chart");
    let out = within(
        &format!("helm {action}"),
        Command::new(python())
            .arg(common::fixture("helm_install.py"))
            .arg(&env.kubeconfig)
            .arg(&chart)
            .arg(action)
            .arg("tiny")
            .env("HOME", env.dir.path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("run python");
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "helm {action} failed:\n{so}\n{se}");
    serde_json::from_str(so.lines().last().unwrap_or_default()).expect("json result")
}

#[tokio::test]
async fn helm_lint_install_uninstall() {
    let env = common::start().await;
    let client = env.client().await;
    assert_eq!(helm(&env, "lint").await["errors"], serde_json::json!([]));

    let installed = helm(&env, "install").await;
    assert_eq!(installed["status"], "deployed", "{installed}");
    assert_eq!(installed["releases"], serde_json::json!(["tiny"]));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms.get("tiny-config").await.expect("configmap from chart");
    assert_eq!(
        cm.data.and_then(|d| d.get("message").cloned()).as_deref(),
        Some("from-helm")
    );
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deploys.get("tiny").await.expect("deployment from chart");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let storage = secrets
        .list(&ListParams::default().labels("owner=helm,name=tiny"))
        .await
        .expect("list");
    assert_eq!(storage.items.len(), 1, "Helm release secret");

    let removed = helm(&env, "uninstall").await;
    assert_eq!(removed["releases"], serde_json::json!([]));
    let deploys2 = deploys.clone();
    eventually("chart objects removed", move || {
        let (cms, deploys) = (cms.clone(), deploys2.clone());
        async move {
            let gone = cms.get_opt("tiny-config").await.ok()?.is_none()
                && deploys.get_opt("tiny").await.ok()?.is_none();
            gone.then_some(())
        }
    })
    .await;
}
