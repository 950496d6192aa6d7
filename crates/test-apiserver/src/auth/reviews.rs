//! The create-only APIs that answer questions instead of storing objects:
//! SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview
//! and SelfSubjectRulesReview (`kubectl auth can-i`), TokenReview and
//! SelfSubjectReview (`kubectl auth whoami`), and TokenRequest
//! (`kubectl create token`).

use super::User;
use super::rbac::{self, Attributes};
use super::tokens::{self, TokenSpec};
use crate::clock::fmt_time;
use crate::error::{ApiError, ApiResult};
use crate::state::State;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The virtual kinds: (group, plural, kind, namespaced).
pub const KINDS: &[(&str, &str, &str, bool)] = &[
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "tokenreviews",
        "TokenReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
];

fn s(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn attributes(spec: &Value) -> ApiResult<Attributes> {
    if let Some(r) = spec.get("resourceAttributes") {
        let mut a = Attributes::resource(
            &s(r, "/verb"),
            &s(r, "/group"),
            &s(r, "/resource"),
            &s(r, "/namespace"),
            &s(r, "/name"),
        );
        a.subresource = s(r, "/subresource");
        return Ok(a);
    }
    if let Some(n) = spec.get("nonResourceAttributes") {
        return Ok(Attributes::non_resource(&s(n, "/verb"), &s(n, "/path")));
    }
    Err(ApiError::invalid(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "",
        vec![crate::error::Cause::new(
            "FieldValueRequired",
            "spec.resourceAttributes",
            "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
    ))
}

fn access_status(st: &State, user: &User, a: &Attributes) -> Value {
    let d = rbac::authorize(st, user, a);
    let mut status = json!({ "allowed": d.allowed });
    if !d.reason.is_empty() {
        status["reason"] = json!(d.reason);
    }
    status
}

fn user_of_spec(spec: &Value) -> User {
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default();
    User {
        name: s(spec, "/user"),
        uid: s(spec, "/uid"),
        groups: spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|g| {
                g.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        extra,
    }
}

fn user_info(u: &User) -> Value {
    let mut info = json!({ "username": u.name, "groups": u.groups });
    if !u.uid.is_empty() {
        info["uid"] = json!(u.uid);
    }
    if !u.extra.is_empty() {
        info["extra"] = json!(u.extra);
    }
    info
}

/// Answers a POST of a review kind (`plural` of `KINDS`) by `user`.
pub fn review(
    st: &State,
    user: &User,
    plural: &str,
    namespace: &str,
    mut body: Value,
) -> ApiResult<Value> {
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let status = match plural {
        "selfsubjectaccessreviews" => access_status(st, user, &attributes(&spec)?),
        "subjectaccessreviews" => access_status(st, &user_of_spec(&spec), &attributes(&spec)?),
        "localsubjectaccessreviews" => {
            let a = attributes(&spec)?;
            if a.namespace != namespace {
                return Err(ApiError::BadRequest(format!(
                    "spec.resourceAttributes.namespace must match the namespace of the request ({namespace})"
                )));
            }
            access_status(st, &user_of_spec(&spec), &a)
        }
        "selfsubjectrulesreviews" => {
            let ns = s(&spec, "/namespace");
            let (mut resource_rules, mut non_resource_rules) = (vec![], vec![]);
            let all = user.is_privileged();
            if all {
                resource_rules
                    .push(json!({ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"] }));
                non_resource_rules.push(json!({ "verbs": ["*"], "nonResourceURLs": ["*"] }));
            }
            for r in rbac::rules_for(st, user, &ns) {
                let mut rule = r.rule.clone();
                if rule.get("nonResourceURLs").is_some() {
                    if let Some(m) = rule.as_object_mut() {
                        m.retain(|k, _| k == "verbs" || k == "nonResourceURLs");
                    }
                    non_resource_rules.push(rule);
                } else {
                    resource_rules.push(rule);
                }
            }
            json!({ "resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false })
        }
        "tokenreviews" => {
            let audiences: Vec<String> = spec
                .get("audiences")
                .and_then(|a| serde_json::from_value(a.clone()).ok())
                .unwrap_or_else(|| vec![tokens::ISSUER.to_string()]);
            match tokens::authenticate_for(st, &s(&spec, "/token"), &audiences) {
                Ok(u) => {
                    json!({ "authenticated": true, "user": user_info(&u), "audiences": audiences })
                }
                Err(why) => json!({ "authenticated": false, "error": why }),
            }
        }
        "selfsubjectreviews" => json!({ "userInfo": user_info(user) }),
        _ => return Err(ApiError::MethodNotAllowed),
    };
    body["status"] = status;
    if body.get("metadata").is_none() {
        body["metadata"] = json!({});
    }
    Ok(body)
}

/// `POST serviceaccounts/NAME/token`: a token for the ServiceAccount.
pub fn token_request(st: &State, namespace: &str, name: &str, mut body: Value) -> ApiResult<Value> {
    let audiences: Vec<String> = body
        .pointer("/spec/audiences")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default();
    let expiration = body
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    if expiration < 600 {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            name,
            vec![crate::error::Cause::new(
                "FieldValueInvalid",
                "spec.expirationSeconds",
                "Invalid value: may not specify a duration less than 10 minutes",
            )],
        ));
    }
    let bound = body.pointer("/spec/boundObjectRef").cloned();
    let pod = bound
        .as_ref()
        .filter(|b| s(b, "/kind") == "Pod")
        .map(|b| (s(b, "/name"), s(b, "/uid")));
    let spec = TokenSpec {
        namespace,
        service_account: name,
        audiences: audiences.clone(),
        expiration_seconds: expiration,
        pod: pod.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
        extended: false,
    };
    let issued = tokens::issue(st, &spec).ok_or_else(|| ApiError::NotFound {
        resource: "serviceaccounts".into(),
        name: name.into(),
    })?;
    let expires = chrono::DateTime::from_timestamp(issued.expires, 0).unwrap_or_default();
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["kind"] = json!("TokenRequest");
    body["metadata"] = json!({ "name": name, "namespace": namespace, "creationTimestamp": null });
    body["spec"]["audiences"] = json!(if audiences.is_empty() {
        vec![tokens::ISSUER.to_string()]
    } else {
        audiences
    });
    body["spec"]["expirationSeconds"] = json!(expiration);
    body["status"] = json!({ "token": issued.token, "expirationTimestamp": fmt_time(expires) });
    Ok(body)
}
