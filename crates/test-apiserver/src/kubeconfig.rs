//! The kubeconfig clients (kubectl, Helm, kube-rs) use to reach the server.

/// Renders a kubeconfig for a plain-HTTP server at `url`.
pub fn render(url: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: test-apiserver
  cluster:
    server: {url}
contexts:
- name: test-apiserver
  context:
    cluster: test-apiserver
    user: test-user
    namespace: default
current-context: test-apiserver
users:
- name: test-user
  user: {{}}
preferences: {{}}
"
    )
}
