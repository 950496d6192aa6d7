//! The Helm chart through Helm itself (PyPI `helm-python-sdk`): lint clean,
//! hardened and least-privilege when rendered, cluster-wide or namespaced
//! RBAC as `worker.namespaces` says, the worker settings passed to the
//! operator, a values schema that refuses what it does not know, the CRD
//! as a template behind `crds.enabled` and `crds.keep`; installed against
//! the test API server, upgraded with a changed CRD (which Helm updates,
//! as it never does for a chart's `crds/`), and uninstalled with the CRD
//! kept.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use mssql_cdc::operator::crd::{chart_template_of, crd};

use crate::support::chart::{CHART, documents, helm, helm_fails, release, render};
use crate::support::kube::{KubeEnv, repo_file};
use crate::support::operator::stream_manifest;

/// The operator container's arguments in a rendered chart.
fn operator_args(rendered: &serde_json::Value) -> Vec<String> {
    let deployment: Deployment =
        serde_yaml::from_value(documents(rendered, "deployment.yaml").remove(0))
            .expect("Deployment");
    let pod = deployment.spec.template.spec.expect("pod spec");
    pod.containers[0].args.clone().unwrap_or_default()
}

/// The rules of a rendered Role or ClusterRole: (resources, verbs).
fn rules(role: &serde_yaml::Value) -> Vec<(Vec<String>, Vec<String>)> {
    let role: Role = serde_yaml::from_value(role.clone()).expect("a role");
    role.rules
        .iter()
        .flatten()
        .map(|r| (r.resources.clone().unwrap_or_default(), r.verbs.clone()))
        .collect()
}

#[tokio::test]
async fn chart_lints_clean_and_renders_hardened_least_privilege() {
    let Some(lint) = helm(&["lint", &repo_file(CHART)]).await else {
        return;
    };
    assert_eq!(lint["errors"], serde_json::json!([]), "{lint}");

    let Some(rendered) = render("cdc", "ops", "{}").await else {
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
    let args = operator_args(&rendered);
    assert!(args.contains(&"operator".to_string()), "{args:?}");
    // Leader election is on by default, on a Lease only the operator's
    // namespace grants (POD_NAMESPACE).
    for arg in [
        "--leader-election",
        "--lease-name=mssql-cdc-operator",
        "--lease-duration=15s",
        // The operator's own resync, which bounds how late Live turns False.
        "--resync=60s",
        "--worker-service-account=cdc-mssql-cdc-operator-worker",
        // The operator's own defaults, spelt out: never hostPath, and only
        // labelled Secrets.
        "--worker-volume-types=persistentVolumeClaim,emptyDir,configMap,secret,csi",
        "--worker-secret-label=mssql-cdc.io/allow=true",
    ] {
        assert!(args.contains(&arg.to_string()), "{arg} missing: {args:?}");
    }
    // Nothing allowed beyond the defaults, every namespace watched.
    assert!(
        args.iter().all(|a| !a.starts_with("--worker-images")
            && !a.starts_with("--worker-service-accounts")
            && !a.starts_with("--worker-env")
            && a != "--worker-unlabelled-secrets"
            && !a.starts_with("--watch-namespaces")),
        "{args:?}"
    );
    let env: Vec<String> = container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert!(env.contains(&"POD_NAMESPACE".to_string()), "{env:?}");
    let operator_rbac = documents(&rendered, "rbac-operator.yaml");
    let lease_role = operator_rbac
        .iter()
        .find(|d| d["kind"] == "Role")
        .expect("leader-election Role");
    assert_eq!(lease_role["metadata"]["namespace"], "ops");
    assert_eq!(
        rules(lease_role),
        [(
            vec!["leases".to_string()],
            vec![
                "get".to_string(),
                "create".to_string(),
                "update".to_string(),
                "patch".to_string()
            ]
        )]
    );
    assert!(operator_rbac.iter().any(|d| d["kind"] == "ClusterRole"));

    // Workers: get the stream and patch its status, in the release
    // namespace; a source's worker also lists and watches the streams,
    // gets its source and patches the source's status; nothing else.
    let worker_roles: Vec<serde_yaml::Value> = documents(&rendered, "rbac-worker.yaml")
        .into_iter()
        .filter(|d| d["kind"] == "Role")
        .collect();
    assert_eq!(worker_roles.len(), 2);
    assert!(
        worker_roles
            .iter()
            .all(|r| r["metadata"]["namespace"] == "ops")
    );
    let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rules(&worker_roles[0]),
        [
            (strings(&["cdcstreams"]), strings(&["get"])),
            (strings(&["cdcstreams/status"]), strings(&["patch"])),
        ]
    );
    assert_eq!(
        worker_roles[1]["metadata"]["name"],
        "cdc-mssql-cdc-operator-source-worker"
    );
    assert_eq!(
        rules(&worker_roles[1]),
        [
            (strings(&["cdcstreams"]), strings(&["list", "watch"])),
            (strings(&["cdcsources"]), strings(&["get"])),
            (strings(&["cdcsources/status"]), strings(&["patch"])),
        ]
    );
    // Without leader election: no Lease flags and no Lease Role.
    let single = r#"{"leaderElection":{"enabled":false}}"#;
    let Some(rendered_single) = render("cdc", "ops", single).await else {
        return;
    };
    assert!(
        !operator_args(&rendered_single).contains(&"--leader-election".to_string()),
        "no --leader-election"
    );
    assert!(
        !documents(&rendered_single, "rbac-operator.yaml")
            .iter()
            .any(|d| d["kind"] == "Role"),
        "no Lease Role without leader election"
    );
    // Of Secrets the operator may only get one (for its labels), and
    // nothing at all when it does not check them.
    let secret_rules = |rendered: &serde_json::Value| -> Vec<Vec<String>> {
        documents(rendered, "rbac-operator.yaml")
            .iter()
            .filter(|d| d["kind"] == "ClusterRole")
            .flat_map(|role| {
                let role: ClusterRole = serde_yaml::from_value(role.clone()).expect("ClusterRole");
                role.rules
                    .into_iter()
                    .flatten()
                    .map(|r| (r.resources.unwrap_or_default(), r.verbs))
            })
            .filter(|(resources, _)| resources.iter().any(|r| r == "secrets"))
            .map(|(resources, verbs)| {
                assert_eq!(resources, ["secrets"]);
                verbs
            })
            .collect()
    };
    assert_eq!(secret_rules(&rendered), [["get"]]);
    let Some(unchecked) = render("cdc", "ops", r#"{"workerUnlabelledSecrets":true}"#).await else {
        return;
    };
    assert_eq!(secret_rules(&unchecked), Vec::<Vec<String>>::new());
    let args = operator_args(&unchecked);
    assert!(
        args.contains(&"--worker-unlabelled-secrets".to_string()),
        "{args:?}"
    );
    assert!(
        args.iter().all(|a| !a.starts_with("--worker-secret-label")),
        "{args:?}"
    );
}

#[tokio::test]
async fn worker_namespaces_make_the_operator_watch_only_them_with_roles() {
    let values = r#"{"worker":{"namespaces":["team-a","team-b"]}}"#;
    let Some(rendered) = render("cdc", "ops", values).await else {
        return;
    };
    let args = operator_args(&rendered);
    assert!(
        args.contains(&"--watch-namespaces=team-a,team-b".to_string()),
        "{args:?}"
    );
    let operator_rbac = documents(&rendered, "rbac-operator.yaml");
    assert!(
        operator_rbac
            .iter()
            .all(|d| d["kind"] != "ClusterRole" && d["kind"] != "ClusterRoleBinding"),
        "no cluster-wide rights"
    );
    let roles: Vec<&serde_yaml::Value> = operator_rbac
        .iter()
        .filter(|d| d["kind"] == "Role" && d["metadata"]["name"] == "cdc-mssql-cdc-operator")
        .collect();
    let namespaces: Vec<&str> = roles
        .iter()
        .filter_map(|r| r["metadata"]["namespace"].as_str())
        .collect();
    assert_eq!(namespaces, ["team-a", "team-b"]);
    let resources: Vec<String> = rules(roles[0]).into_iter().flat_map(|(r, _)| r).collect();
    for needed in [
        "cdcstreams",
        "cdcstreams/status",
        "cdcsources",
        "cdcsources/status",
        "deployments",
        "cronjobs",
        "jobs",
        "pods",
        "events",
        "secrets",
    ] {
        assert!(resources.contains(&needed.to_string()), "{resources:?}");
    }
    // Each Role is bound to the operator's account in the release namespace.
    let bindings: Vec<RoleBinding> = operator_rbac
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" && d["metadata"]["name"] == "cdc-mssql-cdc-operator")
        .map(|d| serde_yaml::from_value(d.clone()).expect("RoleBinding"))
        .collect();
    assert_eq!(bindings.len(), 2);
    for binding in bindings {
        let subject = &binding.subjects.unwrap_or_default()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("cdc-mssql-cdc-operator", Some("ops"))
        );
    }
    // The workers' account and Role in each namespace.
    let worker_namespaces: Vec<String> = documents(&rendered, "rbac-worker.yaml")
        .iter()
        .filter(|d| d["kind"] == "Role" && d["metadata"]["name"] == "cdc-mssql-cdc-operator-worker")
        .filter_map(|d| d["metadata"]["namespace"].as_str().map(str::to_string))
        .collect();
    assert_eq!(worker_namespaces, ["team-a", "team-b"]);
}

#[tokio::test]
async fn worker_values_reach_the_operator_and_the_worker_account() {
    let values = r#"{
        "workerImages": ["registry.acme.io/cdc/", "registry.acme.io/tools/cdc"],
        "workerServiceAccounts": ["s3-writer", "adls-writer"],
        "workerVolumeTypes": ["persistentVolumeClaim", "hostPath"],
        "workerEnv": ["AWS_ROLE_ARN", "AZURE_STORAGE_*"],
        "workerEnvFrom": true,
        "workerSecretLabel": "team.example.com/cdc",
        "worker": {
            "imagePullSecrets": [{"name": "regcred"}, {"name": "mirror"}],
            "podLabels": {"team": "data", "cost-center": "cdc"},
            "serviceAccount": {"annotations": {
                "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/cdc-lake"}}
        }
    }"#;
    let Some(rendered) = render("cdc", "ops", values).await else {
        return;
    };
    let args = operator_args(&rendered);
    for arg in [
        "--worker-images=registry.acme.io/cdc/,registry.acme.io/tools/cdc",
        "--worker-service-accounts=s3-writer,adls-writer",
        "--worker-volume-types=persistentVolumeClaim,hostPath",
        "--worker-env=AWS_ROLE_ARN,AZURE_STORAGE_*",
        "--worker-env-from",
        "--worker-secret-label=team.example.com/cdc",
        "--worker-image-pull-secrets=regcred,mirror",
        "--worker-pod-labels=cost-center=cdc,team=data",
    ] {
        assert!(args.contains(&arg.to_string()), "{arg} missing: {args:?}");
    }
    let worker_account: ServiceAccount = documents(&rendered, "serviceaccount.yaml")
        .into_iter()
        .map(|d| serde_yaml::from_value(d).expect("ServiceAccount"))
        .find(|a: &ServiceAccount| {
            a.metadata.name.as_deref() == Some("cdc-mssql-cdc-operator-worker")
        })
        .expect("the worker ServiceAccount");
    assert_eq!(
        worker_account.metadata.annotations.unwrap_or_default()["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::111122223333:role/cdc-lake"
    );
}

#[tokio::test]
async fn the_values_schema_refuses_what_it_does_not_know() {
    let chart = repo_file(CHART);
    let refused = [
        (r#"{"workerImage": ["x"]}"#, "workerImage"),
        (r#"{"worker": {"podLabel": {"a": "b"}}}"#, "podLabel"),
        (
            r#"{"worker": {"imagePullSecrets": ["regcred"]}}"#,
            "imagePullSecrets",
        ),
        (
            r#"{"workerServiceAccounts": ["Not_A_Name"]}"#,
            "workerServiceAccounts",
        ),
        (r#"{"crds": {"enabled": "yes"}}"#, "crds"),
        (r#"{"workerEnv": ["A,B"]}"#, "workerEnv"),
        (
            r#"{"workerVolumeTypes": ["host path"]}"#,
            "workerVolumeTypes",
        ),
        (r#"{"workerSecretLabel": "a=b,c=d"}"#, "workerSecretLabel"),
        (r#"{"workerEnvFrom": "yes"}"#, "workerEnvFrom"),
        (r#"{"worker": {"namespaces": [""]}}"#, "namespaces"),
    ];
    for (values, field) in refused {
        let Some(error) = helm_fails(&["render", &chart, "cdc", "ops", values]).await else {
            return;
        };
        assert!(error.contains(field), "{values}: {error}");
    }
}

#[tokio::test]
async fn the_crd_is_a_template_behind_crds_enabled_and_keep() {
    let Some(rendered) = render("cdc", "ops", "{}").await else {
        return;
    };
    let mut expected = serde_json::to_value(crd()).expect("json");
    expected["metadata"]["annotations"] = serde_json::json!({"helm.sh/resource-policy": "keep"});
    let docs = documents(&rendered, "crd.yaml");
    assert_eq!(docs.len(), 1);
    let rendered_crd = serde_json::to_value(&docs[0]).expect("json");
    assert_eq!(
        rendered_crd, expected,
        "the chart's CRD is `mssql-cdc crd`'s"
    );

    let Some(not_kept) = render("cdc", "ops", r#"{"crds":{"keep":false}}"#).await else {
        return;
    };
    let docs = documents(&not_kept, "crd.yaml");
    assert!(
        docs[0]["metadata"]["annotations"].is_null(),
        "{:?}",
        docs[0]
    );

    let Some(disabled) = render("cdc", "ops", r#"{"crds":{"enabled":false}}"#).await else {
        return;
    };
    assert!(documents(&disabled, "crd.yaml").is_empty());
}

#[tokio::test]
async fn chart_installs_against_the_api_server() {
    let env = KubeEnv::start().await;
    let Some(installed) = release(&env, "install", &repo_file(CHART), "{}").await else {
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

    // Self-service: the cluster's own `edit` and `view` roles, bound in one
    // namespace, now cover CdcStreams there (the chart's aggregated roles).
    env.kubectl_ok(&["create", "namespace", "team"]).await;
    env.kubectl_ok(&[
        "create",
        "rolebinding",
        "alice-edit",
        "--clusterrole=edit",
        "--user=alice",
        "-n",
        "team",
    ])
    .await;
    env.kubectl_ok(&[
        "create",
        "rolebinding",
        "bob-view",
        "--clusterrole=view",
        "--user=bob",
        "-n",
        "team",
    ])
    .await;
    let stream = env.write("team-stream.yaml", &stream_manifest("mine", "{}"));
    let out = env
        .kubectl_ok(&["--as=alice", "-n", "team", "apply", "-f", &stream])
        .await;
    assert!(out.contains("cdcstream.mssql-cdc.io/mine created"), "{out}");
    // `kubectl auth can-i VERB RESOURCE[/NAME] [--subresource=S]`.
    let can = |user: &'static str, verb: &'static str, what: &'static str, ns: &'static str| {
        let env = &env;
        async move {
            let (resource, subresource) = match what.split_once('/') {
                Some((resource, sub)) => (resource, Some(format!("--subresource={sub}"))),
                None => (what, None),
            };
            let mut args = vec!["--as", user, "-n", ns, "auth", "can-i", verb, resource];
            args.extend(subresource.as_deref());
            let out = env.kubectl(&args).await;
            String::from_utf8_lossy(&out.stdout).trim() == "yes"
        }
    };
    assert!(
        can("bob", "list", "cdcstreams", "team").await,
        "view reads streams"
    );
    assert!(
        !can("bob", "create", "cdcstreams", "team").await,
        "view writes none"
    );
    assert!(
        can("alice", "delete", "cdcstreams", "team").await,
        "edit deletes"
    );
    assert!(
        !can("alice", "patch", "cdcstreams/status", "team").await,
        "the status stays the operator's and the workers'"
    );
    assert!(
        !can("alice", "create", "cdcstreams", "default").await,
        "edit in team only"
    );
}

/// Copies the chart to `dir` with the CRD template of `crd`.
fn chart_with_crd(dir: &std::path::Path, crd: &CustomResourceDefinition) -> std::path::PathBuf {
    let chart = dir.join("mssql-cdc-operator");
    copy_dir(std::path::Path::new(&repo_file(CHART)), &chart);
    let template = chart_template_of(crd).expect("template");
    std::fs::write(chart.join("templates/crd.yaml"), template).expect("write template");
    chart
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read chart") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[tokio::test]
async fn helm_upgrade_updates_a_changed_crd_and_uninstall_keeps_it() {
    let env = KubeEnv::start().await;
    let kubeconfig = env.kubeconfig.display().to_string();
    // The chart as it was before spec.worker.volumes existed.
    let mut old = serde_json::to_value(crd()).expect("json");
    let worker = &mut old["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["worker"]["properties"];
    worker
        .as_object_mut()
        .expect("worker properties")
        .retain(|name, _| name != "volumes" && name != "volumeMounts");
    let old: CustomResourceDefinition = serde_json::from_value(old).expect("the old CRD");
    let dir = tempfile::tempdir().expect("tempdir");
    let old_chart = chart_with_crd(dir.path(), &old);
    let old_chart = old_chart.display().to_string();
    let Some(installed) = release(&env, "install", &old_chart, "{}").await else {
        return;
    };
    assert_eq!(installed["status"], "deployed", "{installed}");
    let with_volume = stream_manifest(
        "orders",
        "{volumes: [{name: lake, persistentVolumeClaim: {claimName: lake}}], \
         volumeMounts: [{name: lake, mountPath: /lake}]}",
    );
    let file = env.write("orders.yaml", &with_volume);
    let refused = env.kubectl_fails(&["apply", "-f", &file]).await;
    assert!(
        refused.contains("unknown field \"spec.worker.volumes\""),
        "the old schema does not know volumes: {refused}"
    );

    let Some(upgraded) = release(&env, "upgrade", &repo_file(CHART), "{}").await else {
        return;
    };
    assert_eq!(upgraded["status"], "deployed", "{upgraded}");
    env.kubectl_ok(&["apply", "-f", &file]).await;
    let stored = env
        .kubectl_ok(&[
            "get",
            "cdcs",
            "orders",
            "-o",
            "jsonpath={.spec.worker.volumes[0].persistentVolumeClaim.claimName}",
        ])
        .await;
    assert_eq!(stored, "lake", "the upgraded CRD keeps the volume");

    // helm uninstall leaves the CRD, and so the stream.
    helm(&["uninstall", &kubeconfig, "cdc", "default"]).await;
    let client = env.client().await;
    let kept = Api::<CustomResourceDefinition>::all(client)
        .get("cdcstreams.mssql-cdc.io")
        .await
        .expect("the CRD is kept");
    assert_eq!(
        kept.metadata.annotations.unwrap_or_default()["helm.sh/resource-policy"],
        "keep"
    );
    env.kubectl_ok(&["get", "cdcs", "orders"]).await;
}

#[tokio::test]
async fn a_crd_applied_before_the_chart_is_adopted_once_labelled() {
    // As chart 0.1.x left it: the CdcStream CRD from `crds/` (it had no
    // CdcSource), without Helm's marks.
    let env = KubeEnv::start().await;
    env.kubectl_ok(&["apply", "-f", &repo_file("crds/cdcstreams.yaml")])
        .await;
    let kubeconfig = env.kubeconfig.display().to_string();
    let chart = repo_file(CHART);
    let Some(refused) = helm_fails(&["install", &kubeconfig, &chart, "cdc", "default", "{}"]).await
    else {
        return;
    };
    assert!(refused.contains("invalid ownership metadata"), "{refused}");
    // The commands of docs/kubernetes.md, "Upgrading from chart 0.1.x".
    let crd = "crd/cdcstreams.mssql-cdc.io";
    env.kubectl_ok(&["label", crd, "app.kubernetes.io/managed-by=Helm"])
        .await;
    env.kubectl_ok(&[
        "annotate",
        crd,
        "meta.helm.sh/release-name=cdc",
        "meta.helm.sh/release-namespace=default",
    ])
    .await;
    let Some(installed) = release(&env, "install", &chart, "{}").await else {
        return;
    };
    assert_eq!(installed["status"], "deployed", "{installed}");
    let kept = env
        .kubectl_ok(&[
            "get",
            crd,
            "-o",
            "jsonpath={.metadata.annotations.helm\\.sh/resource-policy}",
        ])
        .await;
    assert_eq!(kept, "keep", "Helm now manages the CRD");
}
