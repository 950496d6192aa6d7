//! The Helm chart through Helm itself (PyPI `helm-python-sdk`): lint clean,
//! hardened and least-privilege when rendered, and installed against the
//! test API server, which accepts every object.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;

use crate::support::kube::{KubeEnv, repo_file};

use crate::support::chart::{CHART, documents, helm};

#[tokio::test]
async fn chart_lints_clean_and_renders_hardened_least_privilege() {
    let Some(lint) = helm(&["lint", &repo_file(CHART)]).await else {
        return;
    };
    assert_eq!(lint["errors"], serde_json::json!([]), "{lint}");

    let values = r#"{"worker":{"namespaces":["team-a","team-b"]}}"#;
    let Some(rendered) = helm(&["render", &repo_file(CHART), "cdc", "ops", values]).await else {
        return;
    };
    let deployment: Deployment =
        serde_yaml::from_value(documents(&rendered, "deployment.yaml").remove(0))
            .expect("Deployment");
    let pod = deployment.spec.template.spec.expect("pod spec");
    let pod_security = pod.security_context.expect("pod securityContext");
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(
        pod_security.seccomp_profile.map(|p| p.type_),
        Some("RuntimeDefault".to_string())
    );
    let container = &pod.containers[0];
    let security = container
        .security_context
        .clone()
        .expect("container securityContext");
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(
        security.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_string()])
    );
    let args = container.args.clone().unwrap_or_default();
    assert!(args.contains(&"operator".to_string()), "{args:?}");
    // Leader election is on by default, on a Lease only the operator's
    // namespace grants (POD_NAMESPACE).
    for arg in [
        "--leader-election",
        "--lease-name=mssql-cdc-operator",
        "--lease-duration=15s",
    ] {
        assert!(args.contains(&arg.to_string()), "{arg} missing: {args:?}");
    }
    let env: Vec<String> = container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert!(env.contains(&"POD_NAMESPACE".to_string()), "{env:?}");
    let lease_role: Role = serde_yaml::from_value(
        documents(&rendered, "rbac-operator.yaml")
            .into_iter()
            .find(|d| d["kind"] == "Role")
            .expect("leader-election Role"),
    )
    .expect("Role");
    assert_eq!(lease_role.metadata.namespace.as_deref(), Some("ops"));
    let lease_rules: Vec<Vec<String>> = lease_role
        .rules
        .iter()
        .flatten()
        .map(|r| r.resources.clone().unwrap_or_default())
        .collect();
    assert_eq!(lease_rules, [vec!["leases".to_string()]]);

    // Workers: one Role per namespace, get the stream and patch its status.
    let worker_roles: Vec<Role> = documents(&rendered, "rbac-worker.yaml")
        .into_iter()
        .filter(|d| d["kind"] == "Role")
        .map(|d| serde_yaml::from_value(d).expect("Role"))
        .collect();
    let namespaces: Vec<_> = worker_roles
        .iter()
        .filter_map(|r| r.metadata.namespace.clone())
        .collect();
    assert_eq!(namespaces, ["team-a", "team-b"]);
    let rules: Vec<(Vec<String>, Vec<String>)> = worker_roles[0]
        .rules
        .iter()
        .flatten()
        .map(|r| (r.resources.clone().unwrap_or_default(), r.verbs.clone()))
        .collect();
    assert_eq!(
        rules,
        [
            (vec!["cdcstreams".to_string()], vec!["get".to_string()]),
            (
                vec!["cdcstreams/status".to_string()],
                vec!["patch".to_string()]
            ),
        ]
    );
    // Without leader election: no Lease flags and no Lease Role.
    let single = r#"{"leaderElection":{"enabled":false}}"#;
    let Some(rendered_single) = helm(&["render", &repo_file(CHART), "cdc", "ops", single]).await
    else {
        return;
    };
    let deployment = &rendered_single["mssql-cdc-operator/templates/deployment.yaml"];
    assert!(
        !deployment
            .as_str()
            .unwrap_or_default()
            .contains("--leader-election"),
        "{deployment}"
    );
    assert!(
        !documents(&rendered_single, "rbac-operator.yaml")
            .iter()
            .any(|d| d["kind"] == "Role"),
        "no Lease Role without leader election"
    );
    // The operator never reads Secrets.
    let operator_rules = rendered["mssql-cdc-operator/templates/rbac-operator.yaml"]
        .as_str()
        .unwrap_or_default();
    assert!(!operator_rules.contains("secrets"), "{operator_rules}");
}

#[tokio::test]
async fn chart_installs_against_the_api_server() {
    let env = KubeEnv::start().await;
    let kubeconfig = env.kubeconfig.display().to_string();
    let Some(installed) = helm(&[
        "install",
        &kubeconfig,
        &repo_file(CHART),
        "cdc",
        "default",
        "{}",
    ])
    .await
    else {
        return;
    };
    assert_eq!(installed["status"], "deployed", "{installed}");

    let client = env.client().await;
    let name = "cdc-mssql-cdc-operator";
    Api::<CustomResourceDefinition>::all(client.clone())
        .get("cdcstreams.mssql-cdc.io")
        .await
        .expect("the chart's CRD");
    Api::<Deployment>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .expect("operator Deployment");
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), "default");
    accounts.get(name).await.expect("operator ServiceAccount");
    accounts
        .get(&format!("{name}-worker"))
        .await
        .expect("worker ServiceAccount");
    Api::<ClusterRole>::all(client.clone())
        .get(name)
        .await
        .expect("operator ClusterRole");
    Api::<ClusterRoleBinding>::all(client.clone())
        .get(name)
        .await
        .expect("operator ClusterRoleBinding");
    let roles = Api::<Role>::namespaced(client.clone(), "default");
    roles
        .get(&format!("{name}-leader-election"))
        .await
        .expect("leader election Role");
    roles
        .get(&format!("{name}-worker"))
        .await
        .expect("worker Role");
    Api::<RoleBinding>::namespaced(client.clone(), "default")
        .get(&format!("{name}-worker"))
        .await
        .expect("worker RoleBinding");
    Api::<Service>::namespaced(client.clone(), "default")
        .get(&format!("{name}-metrics"))
        .await
        .expect("metrics Service");

    // The CRD Helm installed serves CdcStreams.
    let example = repo_file("examples/kubernetes/orders-continuous.yaml");
    let out = env.kubectl_ok(&["apply", "-f", &example]).await;
    assert!(
        out.contains("cdcstream.mssql-cdc.io/orders created"),
        "{out}"
    );
}
