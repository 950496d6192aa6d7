//! The kubeconfig clients (kubectl, Helm, kube-rs) use to reach the server.

use crate::tls::ClientCert;
use base64::Engine;

/// How the kubeconfig's user authenticates.
pub enum Credentials {
    /// A client certificate of the server's CA.
    ClientCert(ClientCert),
    /// A bearer token (a ServiceAccount token).
    Token(String),
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Renders a kubeconfig for the server at `url`, trusting `ca_pem`.
pub fn render(url: &str, ca_pem: &str, credentials: &Credentials) -> String {
    let user = match credentials {
        Credentials::ClientCert(c) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&c.cert_pem),
            b64(&c.key_pem)
        ),
        Credentials::Token(t) => format!("    token: {t}\n"),
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: test-apiserver
  cluster:
    server: {url}
    certificate-authority-data: {ca}
contexts:
- name: test-apiserver
  context:
    cluster: test-apiserver
    user: test-user
    namespace: default
current-context: test-apiserver
users:
- name: test-user
  user:
{user}preferences: {{}}
",
        ca = b64(ca_pem),
    )
}
