//! API errors rendered as `meta.k8s.io/v1` `Status` objects, the shape kubectl,
//! Helm and kube-rs parse to report failures.

use serde_json::{Value, json};

/// One field-level cause of an `Invalid` (422) or conflict error.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Machine-readable cause type, e.g. `FieldValueInvalid`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Field path such as `spec.replicas`.
    pub field: String,
}

impl Cause {
    /// A cause with the given reason, field and message.
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Errors returned to API clients; each maps to an HTTP status and a `Status` reason.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 404 NotFound.
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: String, name: String },
    /// 409 AlreadyExists.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists { resource: String, name: String },
    /// 409 Conflict (stale resourceVersion, SSA field conflicts).
    #[error("{message}")]
    Conflict {
        resource: String,
        name: String,
        message: String,
        causes: Vec<Cause>,
    },
    /// 422 Invalid with field causes.
    #[error("{kind} \"{name}\" is invalid: {}", render_causes(.causes))]
    Invalid {
        group: String,
        kind: String,
        name: String,
        causes: Vec<Cause>,
    },
    /// 401 Unauthorized: credentials that do not authenticate.
    #[error("Unauthorized")]
    Unauthorized,
    /// 403 Forbidden: RBAC (or admission) refused the request.
    #[error("{}", forbidden_text(.group, .resource, .name, .message))]
    Forbidden {
        group: String,
        resource: String,
        name: String,
        message: String,
    },
    /// 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// 405 MethodNotAllowed.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 410 Gone (watch from a compacted resourceVersion, expired continue token).
    #[error("{0}")]
    Gone(String),
    /// 415 UnsupportedMediaType.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json ({0})"
    )]
    UnsupportedMediaType(String),
    /// 500 InternalError.
    #[error("Internal error occurred: {0}")]
    Internal(String),
}

fn forbidden_text(group: &str, resource: &str, name: &str, message: &str) -> String {
    let qualified = match (resource, group) {
        ("", _) => String::new(),
        (r, "") => r.to_string(),
        (r, g) => format!("{r}.{g}"),
    };
    match (qualified.as_str(), name) {
        ("", _) => format!("forbidden: {message}"),
        (q, "") => format!("{q} is forbidden: {message}"),
        (q, n) => format!("{q} \"{n}\" is forbidden: {message}"),
    }
}

fn render_causes(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes
        .iter()
        .map(|c| {
            if c.field.is_empty() {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        })
        .collect();
    if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("[{}]", parts.join(", "))
    }
}

impl ApiError {
    /// Convenience constructor for a single-cause 422.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        ApiError::Invalid {
            group: group.into(),
            kind: kind.into(),
            name: name.into(),
            causes,
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden { .. } => 403,
            ApiError::MethodNotAllowed => 405,
            ApiError::Gone(_) => 410,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Internal(_) => 500,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::Gone(_) => "Expired",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Internal(_) => "InternalError",
        }
    }

    /// The `Status` object sent as the response body.
    pub fn status(&self) -> Value {
        let mut st = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            ApiError::NotFound { resource, name } | ApiError::AlreadyExists { resource, name } => {
                Some(details(resource, name, &[]))
            }
            ApiError::Conflict {
                resource,
                name,
                causes,
                ..
            } => Some(details(resource, name, causes)),
            ApiError::Forbidden {
                group,
                resource,
                name,
                ..
            } => {
                let mut d = json!({ "name": name, "kind": resource });
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            ApiError::Invalid {
                group,
                kind,
                name,
                causes,
            } => {
                let mut d = details("", name, causes);
                d["group"] = json!(group);
                d["kind"] = json!(kind);
                if let Some(o) = d.as_object_mut() {
                    o.remove("resource");
                }
                Some(d)
            }
            _ => None,
        };
        if let Some(d) = details {
            st["details"] = d;
        }
        st
    }
}

fn details(resource: &str, name: &str, causes: &[Cause]) -> Value {
    let (res, group) = match resource.split_once('.') {
        Some((r, g)) => (r, g),
        None => (resource, ""),
    };
    let mut d = json!({ "name": name, "kind": res });
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    if !causes.is_empty() {
        d["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
                .collect(),
        );
    }
    d
}

/// Result alias for request handling.
pub type ApiResult<T> = Result<T, ApiError>;
