//! The server's own certificate authority: it signs the serving certificate
//! (SANs for every name a pod or a client dials), the admin's client
//! certificate written into the kubeconfig, and backs the `ca.crt` pods
//! get. Client certificates signed by it authenticate as their subject
//! (CN the user, O the groups), as on a real API server.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use std::sync::Arc;

/// Names the serving certificate is valid for: what kubectl dials
/// (`127.0.0.1`, `localhost`) and what in-cluster clients may dial.
pub const SERVING_NAMES: &[&str] = &[
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "10.96.0.1",
];

/// A client certificate and its key, PEM-encoded.
#[derive(Debug, Clone)]
pub struct ClientCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The CA, the serving configuration and the admin's credentials.
pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate (PEM), what `ca.crt` and the kubeconfig carry.
    pub ca_pem: String,
    /// rustls configuration of the listener: our serving certificate, and
    /// client certificates of our CA accepted but not required (tokens
    /// authenticate the other requests).
    pub server_config: Arc<rustls::ServerConfig>,
    /// The admin identity of the kubeconfig (`kubernetes-admin`, group
    /// `system:masters`).
    pub admin: ClientCert,
}

/// Failure to build the PKI (never expected: everything is generated).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the test CA: {0}")]
pub struct PkiError(String);

fn err(e: impl std::fmt::Display) -> PkiError {
    PkiError(e.to_string())
}

impl Pki {
    /// A fresh CA with its serving and admin certificates.
    pub fn generate() -> Result<Self, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "test-apiserver-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca =
            CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(err)?).map_err(err)?;
        let ca_pem = ca.pem();
        let serving = sign(
            &ca,
            "kube-apiserver",
            &[],
            SERVING_NAMES,
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let admin = sign(
            &ca,
            "kubernetes-admin",
            &["system:masters"],
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).map_err(err)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(err)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            pem_der(&serving.key_pem).ok_or_else(|| err("serving key"))?,
        ));
        let cert = CertificateDer::from(pem_der(&serving.cert_pem).ok_or_else(|| err("cert"))?);
        let mut server_config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![cert, ca.der().clone()], key)
            .map_err(err)?;
        server_config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            ca,
            ca_pem,
            server_config: Arc::new(server_config),
            admin,
        })
    }

    /// A client certificate for `user` in `groups`, signed by the CA.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<ClientCert, PkiError> {
        sign(
            &self.ca,
            user,
            groups,
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }
}

fn sign(
    ca: &CertifiedIssuer<'static, KeyPair>,
    common_name: &str,
    organizations: &[&str],
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<ClientCert, PkiError> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).map_err(err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    for o in organizations {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.signed_by(&key, ca).map_err(err)?;
    Ok(ClientCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The DER payload of the first PEM block.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

/// The user (CN) and groups (O) of a verified client certificate.
pub fn subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let cn = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(String::from))
        .collect();
    Some((cn, groups))
}
