//! Authentication and RBAC with the real kubectl: the admin kubeconfig
//! (client certificate of the server's CA) may do anything; a token from
//! `kubectl create token` authenticates as its ServiceAccount and is
//! refused until a Role and RoleBinding allow it, with kube-apiserver's 403
//! message; `kubectl auth can-i` answers for both, with and without `--as`.

use crate::common::{self, Env};
use crate::kubectl::{ok, run};

/// A kubeconfig file for `token` next to the admin's.
fn token_kubeconfig(env: &Env, token: &str) -> std::path::PathBuf {
    let path = env.dir.path().join("token-kubeconfig");
    std::fs::write(&path, env.server.kubeconfig_with_token(token)).expect("write kubeconfig");
    path
}

/// kubectl as the user of `kubeconfig`.
async fn as_user(env: &Env, kubeconfig: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut c = crate::kubectl::cmd(env, args);
    c.env("KUBECONFIG", kubeconfig);
    common::within("kubectl", c.output())
        .await
        .expect("spawn kubectl")
}

fn text(out: &std::process::Output) -> (bool, String, String) {
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

#[tokio::test]
async fn tokens_are_refused_until_rbac_allows_and_can_i_answers() {
    let env = common::start().await;
    ok(&env, &["create", "serviceaccount", "reader"]).await;
    ok(
        &env,
        &[
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=password=s3cret",
        ],
    )
    .await;
    let token = ok(&env, &["create", "token", "reader"]).await;
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let kc = token_kubeconfig(&env, token);

    // Who the token is.
    let (_, whoami, _) = text(
        &as_user(
            &env,
            &kc,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
        )
        .await,
    );
    assert_eq!(whoami, "system:serviceaccount:default:reader");

    // Refused, with kube-apiserver's message.
    let (okay, _, err) = text(&as_user(&env, &kc, &["get", "secret", "db"]).await);
    assert!(!okay);
    assert!(
        err.contains(
            "secrets \"db\" is forbidden: User \"system:serviceaccount:default:reader\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""
        ),
        "{err}"
    );
    let (okay, answer, _) = text(&as_user(&env, &kc, &["auth", "can-i", "get", "secrets"]).await);
    assert_eq!((okay, answer.as_str()), (false, "no"));
    let (_, answer, _) = text(
        &run(
            &env,
            &[
                "auth",
                "can-i",
                "get",
                "secrets",
                "--as=system:serviceaccount:default:reader",
            ],
        )
        .await,
    );
    assert_eq!(answer, "no");
    let (_, answer, _) = text(&run(&env, &["auth", "can-i", "get", "secrets"]).await);
    assert_eq!(answer, "yes", "the admin may");

    // A Role for one Secret by name, bound to the account.
    ok(
        &env,
        &[
            "create",
            "role",
            "secret-reader",
            "--verb=get",
            "--resource=secrets",
            "--resource-name=db",
        ],
    )
    .await;
    ok(
        &env,
        &[
            "create",
            "rolebinding",
            "reader",
            "--role=secret-reader",
            "--serviceaccount=default:reader",
        ],
    )
    .await;
    let (okay, out, err) = text(
        &as_user(
            &env,
            &kc,
            &["get", "secret", "db", "-o", "jsonpath={.data.password}"],
        )
        .await,
    );
    assert!(okay, "{err}");
    assert_eq!(out, "czNjcmV0");
    for (args, want) in [
        (vec!["auth", "can-i", "get", "secrets/db"], "yes"),
        (vec!["auth", "can-i", "get", "secrets/other"], "no"),
        (vec!["auth", "can-i", "list", "secrets"], "no"),
        (
            vec!["auth", "can-i", "get", "secrets/db", "-n", "kube-system"],
            "no",
        ),
    ] {
        let (_, answer, _) = text(&as_user(&env, &kc, &args).await);
        assert_eq!(answer, want, "{args:?}");
        let mut admin_as = args.clone();
        admin_as.push("--as=system:serviceaccount:default:reader");
        let (_, answer, _) = text(&run(&env, &admin_as).await);
        assert_eq!(answer, want, "{admin_as:?}");
    }
    let (okay, _, err) = text(&as_user(&env, &kc, &["get", "secrets"]).await);
    assert!(
        !okay && err.contains("cannot list resource \"secrets\""),
        "{err}"
    );

    // The account may not impersonate the admin, and a forged token is 401.
    let (okay, _, err) =
        text(&as_user(&env, &kc, &["get", "secret", "db", "--as=kubernetes-admin"]).await);
    assert!(
        !okay && err.contains("cannot impersonate resource \"users\""),
        "{err}"
    );
    let forged = format!("{}x", token);
    let (okay, _, err) = text(
        &as_user(
            &env,
            &token_kubeconfig(&env, &forged),
            &["get", "secret", "db"],
        )
        .await,
    );
    assert!(!okay && err.contains("Unauthorized"), "{err}");

    // Deleting the ServiceAccount revokes its tokens.
    ok(&env, &["delete", "serviceaccount", "reader"]).await;
    let (okay, _, err) = text(&as_user(&env, &kc, &["get", "secret", "db"]).await);
    assert!(!okay && err.contains("Unauthorized"), "{err}");
}

#[tokio::test]
async fn cluster_roles_wildcards_subresources_and_aggregation() {
    let env = common::start().await;
    ok(&env, &["create", "serviceaccount", "ops"]).await;
    let as_ops = "--as=system:serviceaccount:default:ops";
    let manifest = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: status-writer}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {example.com/aggregate-to-status-writer: "true"}}]
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: status-part, labels: {example.com/aggregate-to-status-writer: "true"}}
rules:
- {apiGroups: ["apps"], resources: ["*/status"], verbs: ["patch"]}
- {apiGroups: ["*"], resources: ["configmaps"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ops, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: status-writer}
subjects: [{kind: ServiceAccount, name: ops, namespace: default}]
"#;
    let file = env.dir.path().join("rbac.yaml");
    std::fs::write(&file, manifest).expect("write");
    ok(&env, &["apply", "-f", &file.display().to_string()]).await;
    for (args, want) in [
        (
            vec![
                "auth",
                "can-i",
                "patch",
                "deployments",
                "--subresource=status",
            ],
            "yes",
        ),
        (vec!["auth", "can-i", "patch", "deployments"], "no"),
        (vec!["auth", "can-i", "delete", "configmaps"], "yes"),
        (
            vec!["auth", "can-i", "delete", "configmaps", "-n", "kube-system"],
            "no",
        ),
        (vec!["auth", "can-i", "list", "nodes"], "no"),
    ] {
        let mut a = args.clone();
        a.push(as_ops);
        let (_, answer, _) = text(&run(&env, &a).await);
        assert_eq!(answer, want, "{a:?}");
    }
}
