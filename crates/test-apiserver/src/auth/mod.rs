//! Who a request comes from and whether it may do what it asks, as a real
//! API server decides: authentication by client certificate of the server's
//! CA or by ServiceAccount token (anonymous otherwise), impersonation
//! headers, RBAC authorization, and the review and TokenRequest APIs.

pub mod bootstrap;
pub mod rbac;
pub mod reviews;
pub mod tokens;

use crate::error::ApiError;
use crate::state::State;
use axum::http::HeaderMap;
use std::collections::BTreeMap;

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The group whose members RBAC never restricts.
pub const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const ANONYMOUS: &str = "system:anonymous";

impl User {
    /// The user of requests without credentials.
    pub fn anonymous() -> Self {
        User {
            name: ANONYMOUS.into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        }
    }

    /// The in-process controllers and kubelet (never sent over HTTP).
    pub fn privileged() -> Self {
        User {
            name: "system:kube-controller-manager".into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// Whether RBAC is bypassed (`system:masters`, as on a real server).
    pub fn is_privileged(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// `(namespace, name)` when this is a ServiceAccount.
    pub fn service_account(&self) -> Option<(&str, &str)> {
        let rest = self.name.strip_prefix("system:serviceaccount:")?;
        rest.split_once(':')
    }
}

/// The groups every ServiceAccount of `namespace` is in.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        AUTHENTICATED.into(),
    ]
}

/// A verified client certificate's subject: CN and O.
#[derive(Debug, Clone)]
pub struct PeerIdentity {
    pub user: String,
    pub groups: Vec<String>,
}

/// The user of a request: its bearer token, else its client certificate,
/// else anonymous. A token that does not verify is 401.
pub fn authenticate(
    st: &State,
    headers: &HeaderMap,
    peer: Option<&PeerIdentity>,
) -> Result<User, ApiError> {
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    if let Some(token) = bearer {
        return tokens::authenticate(st, token).map_err(|why| {
            tracing::debug!(why, "token rejected");
            ApiError::Unauthorized
        });
    }
    if let Some(p) = peer {
        let mut groups = p.groups.clone();
        groups.push(AUTHENTICATED.into());
        return Ok(User {
            name: p.user.clone(),
            groups,
            ..Default::default()
        });
    }
    Ok(User::anonymous())
}

/// Applies the `Impersonate-*` headers: the requester must be allowed to
/// `impersonate` each user, group, uid and extra it names (403 otherwise),
/// and the request then runs as that user.
pub fn impersonate(st: &State, requester: User, headers: &HeaderMap) -> Result<User, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    let Some(name) = values("impersonate-user").into_iter().next() else {
        let named_other = !values("impersonate-group").is_empty()
            || headers
                .keys()
                .any(|k| k.as_str().starts_with("impersonate-extra-"));
        if named_other {
            return Err(ApiError::BadRequest(
                "requested impersonation of groups or extra without a user".into(),
            ));
        }
        return Ok(requester);
    };
    let mut checks: Vec<rbac::Attributes> = Vec::new();
    let mut user = User {
        name: name.clone(),
        ..Default::default()
    };
    match user
        .service_account()
        .map(|(ns, n)| (ns.to_string(), n.to_string()))
    {
        Some((ns, sa)) => checks.push(rbac::Attributes::resource(
            "impersonate",
            "",
            "serviceaccounts",
            &ns,
            &sa,
        )),
        None => checks.push(rbac::Attributes::resource(
            "impersonate",
            "",
            "users",
            "",
            &name,
        )),
    }
    for g in values("impersonate-group") {
        checks.push(rbac::Attributes::resource(
            "impersonate",
            "",
            "groups",
            "",
            &g,
        ));
        user.groups.push(g);
    }
    if let Some(uid) = values("impersonate-uid").into_iter().next() {
        checks.push(rbac::Attributes::resource(
            "impersonate",
            "authentication.k8s.io",
            "uids",
            "",
            &uid,
        ));
        user.uid = uid;
    }
    for (k, v) in headers.iter() {
        if let Some(key) = k.as_str().strip_prefix("impersonate-extra-") {
            let value = v.to_str().unwrap_or_default().to_string();
            let mut a = rbac::Attributes::resource(
                "impersonate",
                "authentication.k8s.io",
                "userextras",
                "",
                &value,
            );
            a.subresource = key.to_string();
            checks.push(a);
            user.extra.entry(key.to_string()).or_default().push(value);
        }
    }
    for a in &checks {
        if !rbac::authorize(st, &requester, a).allowed {
            return Err(rbac::forbidden(&requester, a));
        }
    }
    if let Some((ns, _)) = user.service_account()
        && user.groups.is_empty()
    {
        user.groups = service_account_groups(ns);
    }
    if user.name != ANONYMOUS && !user.groups.iter().any(|g| g == AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    Ok(user)
}

/// How a request's identity is decided.
pub fn request_user(
    st: &State,
    headers: &HeaderMap,
    peer: Option<&PeerIdentity>,
) -> Result<User, ApiError> {
    let user = authenticate(st, headers, peer)?;
    impersonate(st, user, headers)
}
