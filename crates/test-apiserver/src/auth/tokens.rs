//! ServiceAccount tokens: JWTs signed by the server (HS256 with a key made
//! at start), carrying the claims a real API server puts in them, and
//! checked as it checks them: signature, audience, expiry on the server's
//! clock, and that the ServiceAccount (and the pod a token is bound to)
//! still exists with the same uid.

use super::User;
use crate::state::State;
use crate::store::Gr;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The issuer and default audience of every token.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The signing key.
pub struct Signer {
    key: ring::hmac::Key,
}

impl Signer {
    /// A signer with a fresh random key.
    pub fn generate() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng).unwrap_or_else(|_| {
            ring::hmac::Key::new(ring::hmac::HMAC_SHA256, uuid::Uuid::new_v4().as_bytes())
        });
        Self { key }
    }

    fn sign(&self, claims: &Value) -> String {
        let header =
            URL_SAFE_NO_PAD.encode(json!({ "alg": "HS256", "kid": "test-apiserver" }).to_string());
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let input = format!("{header}.{payload}");
        let sig = ring::hmac::sign(&self.key, input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    fn verify(&self, token: &str) -> Option<Value> {
        let (input, sig) = token.rsplit_once('.')?;
        let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
        ring::hmac::verify(&self.key, input.as_bytes(), &sig).ok()?;
        let (_, payload) = input.split_once('.')?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }
}

/// What a token is issued for.
pub struct TokenSpec<'a> {
    pub namespace: &'a str,
    pub service_account: &'a str,
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    /// The pod the token is bound to (name, uid), for projected tokens.
    pub pod: Option<(&'a str, &'a str)>,
    /// A kubelet-projected token: valid for a year, warning after
    /// `expiration_seconds`, as kube-apiserver's
    /// `--service-account-extend-token-expiration` (on by default) does.
    pub extended: bool,
}

/// An issued token and when it expires (seconds since the epoch).
pub struct Issued {
    pub token: String,
    pub expires: i64,
}

/// Issues a token for an existing ServiceAccount; `None` when it does not exist.
pub fn issue(st: &State, spec: &TokenSpec<'_>) -> Option<Issued> {
    let sa = st.store.get(
        &Gr::new("", "serviceaccounts"),
        spec.namespace,
        spec.service_account,
    )?;
    let sa_uid = sa
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let now = st.clock.now().timestamp();
    let warn_after = now + spec.expiration_seconds;
    let expires = if spec.extended {
        now + 365 * 86_400
    } else {
        warn_after
    };
    let mut k8s = json!({
        "namespace": spec.namespace,
        "serviceaccount": { "name": spec.service_account, "uid": sa_uid },
    });
    if let Some((name, uid)) = spec.pod {
        k8s["pod"] = json!({ "name": name, "uid": uid });
        k8s["node"] = json!({ "name": "localhost", "uid": "localhost" });
    }
    if spec.extended {
        k8s["warnafter"] = json!(warn_after);
    }
    let audiences = if spec.audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        spec.audiences.clone()
    };
    let claims = json!({
        "aud": audiences,
        "exp": expires,
        "iat": now,
        "nbf": now,
        "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(),
        "kubernetes.io": k8s,
        "sub": format!("system:serviceaccount:{}:{}", spec.namespace, spec.service_account),
    });
    Some(Issued {
        token: st.auth.signer.sign(&claims),
        expires,
    })
}

/// The user a token authenticates as, `Err` with why it does not. Only
/// tokens for the API server's own audience authenticate.
pub fn authenticate(st: &State, token: &str) -> Result<User, &'static str> {
    authenticate_for(st, token, &[ISSUER.to_string()])
}

/// Like [`authenticate`], for a token that must carry one of `audiences`.
pub fn authenticate_for(
    st: &State,
    token: &str,
    audiences: &[String],
) -> Result<User, &'static str> {
    let claims = st.auth.signer.verify(token).ok_or("invalid bearer token")?;
    let s = |p: &str| {
        claims
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let aud: Vec<String> = claims
        .get("aud")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if !aud.iter().any(|a| audiences.contains(a)) {
        return Err("token audiences is invalid for the target audience");
    }
    let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or(0);
    if st.clock.now().timestamp() > exp {
        return Err("token has expired");
    }
    let (ns, name, sa_uid) = (
        s("/kubernetes.io/namespace"),
        s("/kubernetes.io/serviceaccount/name"),
        s("/kubernetes.io/serviceaccount/uid"),
    );
    let sa = st
        .store
        .get(&Gr::new("", "serviceaccounts"), &ns, &name)
        .ok_or("service account has been deleted")?;
    if sa.pointer("/metadata/uid").and_then(Value::as_str) != Some(sa_uid.as_str()) {
        return Err("service account UID does not match the token's");
    }
    let mut extra = BTreeMap::new();
    let (pod, pod_uid) = (s("/kubernetes.io/pod/name"), s("/kubernetes.io/pod/uid"));
    if !pod.is_empty() {
        let live = st.store.get(&Gr::new("", "pods"), &ns, &pod).filter(|p| {
            p.pointer("/metadata/uid").and_then(Value::as_str) == Some(pod_uid.as_str())
        });
        if live.is_none() {
            return Err("the pod the token is bound to has been deleted");
        }
        extra.insert(
            "authentication.kubernetes.io/pod-name".to_string(),
            vec![pod],
        );
        extra.insert(
            "authentication.kubernetes.io/pod-uid".to_string(),
            vec![pod_uid],
        );
    }
    extra.insert(
        "authentication.kubernetes.io/credential-id".to_string(),
        vec![format!("JTI={}", s("/jti"))],
    );
    Ok(User {
        name: format!("system:serviceaccount:{ns}:{name}"),
        uid: sa_uid,
        groups: super::service_account_groups(&ns),
        extra,
    })
}
