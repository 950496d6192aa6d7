//! A stand-in for AWS STS's `AssumeRoleWithWebIdentity`, over HTTPS as
//! object_store requires, for the S3 example on moto. (moto's own STS
//! reads the call's parameters from a form body only, while object_store
//! sends them in the query string.) It hands out fixed temporary
//! credentials, which moto accepts like any, and keeps each call's role
//! and the claims of the token the caller showed, so that a test can check
//! which identity a pod used.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// One `AssumeRoleWithWebIdentity` call.
#[derive(Debug, Clone, PartialEq)]
pub struct WebIdentityCall {
    /// `RoleArn`.
    pub role_arn: String,
    /// The token's `sub` claim (`system:serviceaccount:NS:NAME`).
    pub subject: String,
    /// The token's `aud` claim.
    pub audiences: Vec<String>,
}

/// The stand-in, serving until dropped.
pub struct WebIdentitySts {
    addr: SocketAddr,
    calls: Arc<Mutex<Vec<WebIdentityCall>>>,
    task: JoinHandle<()>,
}

impl Drop for WebIdentitySts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebIdentitySts {
    /// Listens on a free loopback port with a self-signed certificate.
    pub async fn start() -> Self {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])
            .expect("a self-signed certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .expect("TLS config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("STS binds");
        let addr = listener.local_addr().expect("STS address");
        let calls: Arc<Mutex<Vec<WebIdentityCall>>> = Arc::default();
        let seen = Arc::clone(&calls);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), Arc::clone(&seen));
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        answer(tls, &seen).await;
                    }
                });
            }
        });
        WebIdentitySts { addr, calls, task }
    }

    /// Its address, for `aws_endpoint_url_sts` (with
    /// `aws_allow_invalid_certificates`: the certificate is its own).
    pub fn endpoint(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<WebIdentityCall> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Reads one request (its head: the call is in the query string) and
/// answers it.
async fn answer<S>(mut stream: S, seen: &Mutex<Vec<WebIdentityCall>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split_whitespace().nth(1).unwrap_or_default();
    let url = url::Url::parse(&format!("https://sts{target}")).ok();
    let param = |name: &str| {
        url.as_ref()
            .and_then(|u| u.query_pairs().find(|(k, _)| k == name))
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let (status, body) = match claims(&param("WebIdentityToken")) {
        Some(claims) if param("Action") == "AssumeRoleWithWebIdentity" => {
            seen.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(WebIdentityCall {
                    role_arn: param("RoleArn"),
                    subject: claims["sub"].as_str().unwrap_or_default().to_string(),
                    audiences: audiences(&claims["aud"]),
                });
            ("200 OK", CREDENTIALS.to_string())
        }
        _ => (
            "400 Bad Request",
            "<Error><Code>InvalidIdentityToken</Code></Error>".to_string(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Temporary credentials as STS returns them, valid for a long while.
const CREDENTIALS: &str = r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials>
<AccessKeyId>ASIASTANDIN0000000000</AccessKeyId>
<SecretAccessKey>stand-in-secret-access-key</SecretAccessKey>
<SessionToken>stand-in-session-token</SessionToken>
<Expiration>2099-01-01T00:00:00Z</Expiration>
</Credentials></AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"#;

/// The claims of a JWT (not verified: the stand-in records who asked).
fn claims(token: &str) -> Option<serde_json::Value> {
    let payload = token.trim().split('.').nth(1)?;
    serde_json::from_slice(&base64url(payload)?).ok()
}

fn audiences(aud: &serde_json::Value) -> Vec<String> {
    match aud {
        serde_json::Value::String(one) => vec![one.clone()],
        serde_json::Value::Array(many) => many
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Unpadded base64url, as JWTs use it.
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    Some(out)
}

#[test]
fn reads_jwt_claims() {
    // {"aud":["sts.amazonaws.com"],"sub":"system:serviceaccount:ns:sa"}
    let payload =
        "eyJhdWQiOlsic3RzLmFtYXpvbmF3cy5jb20iXSwic3ViIjoic3lzdGVtOnNlcnZpY2VhY2NvdW50Om5zOnNhIn0";
    let claims = claims(&format!("h.{payload}.s")).expect("claims");
    assert_eq!(claims["sub"], "system:serviceaccount:ns:sa");
    assert_eq!(audiences(&claims["aud"]), ["sts.amazonaws.com"]);
}
