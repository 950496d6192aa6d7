//! RBAC as kube-apiserver evaluates it: the rules of every ClusterRole
//! bound by a ClusterRoleBinding, and of every Role or ClusterRole bound by
//! a RoleBinding in the request's namespace, whose subjects name the user,
//! one of its groups or its ServiceAccount. Verbs, API groups, resources
//! with subresources (`x/status`, `*/status`), resourceNames,
//! nonResourceURLs (with a trailing `*`), the `*` wildcards and
//! aggregated ClusterRoles (`aggregationRule`) are honoured.

use super::User;
use crate::error::ApiError;
use crate::selectors::LabelSelector;
use crate::state::State;
use crate::store::Gr;
use serde_json::Value;

const RBAC: &str = "rbac.authorization.k8s.io";

/// What a request asks to do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The path of a non-resource request (`/api`, `/version`...).
    pub path: String,
    pub is_resource: bool,
}

impl Attributes {
    /// A resource request.
    pub fn resource(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            is_resource: true,
            ..Default::default()
        }
    }

    /// A non-resource request.
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }
}

/// The verdict, with the binding that allowed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// One rule that applies to the user, and where it came from.
#[derive(Debug, Clone)]
pub struct BoundRule {
    pub rule: Value,
    pub source: String,
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn strs(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn subject_matches(user: &User, subject: &Value, binding_ns: &str) -> bool {
    let name = s(subject, "/name");
    match s(subject, "/kind") {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = match s(subject, "/namespace") {
                "" => binding_ns,
                ns => ns,
            };
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// The rules of ClusterRole `name`, following `aggregationRule` (the
/// union of the rules of every ClusterRole its selectors match).
fn cluster_role_rules(st: &State, name: &str, depth: u8) -> Vec<Value> {
    let gr = Gr::new(RBAC, "clusterroles");
    let Some(role) = st.store.get(&gr, "", name) else {
        return vec![];
    };
    let own: Vec<Value> = role
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(selectors) = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    else {
        return own;
    };
    if depth > 4 {
        return own;
    }
    let selectors: Vec<LabelSelector> = selectors.iter().map(LabelSelector::from_object).collect();
    let mut rules = own;
    for other in st.store.list(&gr, None).0 {
        let other_name = s(&other, "/metadata/name");
        if other_name != name && selectors.iter().any(|sel| sel.matches(&other)) {
            rules.extend(cluster_role_rules(st, other_name, depth + 1));
        }
    }
    rules
}

/// Every rule granted to `user` in `namespace` (cluster-wide ones only
/// when `namespace` is empty).
pub fn rules_for(st: &State, user: &User, namespace: &str) -> Vec<BoundRule> {
    let mut out = Vec::new();
    for b in st.store.list(&Gr::new(RBAC, "clusterrolebindings"), None).0 {
        let subjects = b
            .get("subjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !subjects.iter().any(|sub| subject_matches(user, sub, ""))
            || s(&b, "/roleRef/kind") != "ClusterRole"
        {
            continue;
        }
        let role = s(&b, "/roleRef/name");
        let source = format!(
            "ClusterRoleBinding \"{}\" of ClusterRole \"{role}\"",
            s(&b, "/metadata/name")
        );
        out.extend(
            cluster_role_rules(st, role, 0)
                .into_iter()
                .map(|rule| BoundRule {
                    rule,
                    source: source.clone(),
                }),
        );
    }
    if namespace.is_empty() {
        return out;
    }
    for b in st
        .store
        .list(&Gr::new(RBAC, "rolebindings"), Some(namespace))
        .0
    {
        let subjects = b
            .get("subjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !subjects
            .iter()
            .any(|sub| subject_matches(user, sub, namespace))
        {
            continue;
        }
        let (kind, role) = (s(&b, "/roleRef/kind"), s(&b, "/roleRef/name"));
        let rules = match kind {
            "ClusterRole" => cluster_role_rules(st, role, 0),
            "Role" => st
                .store
                .get(&Gr::new(RBAC, "roles"), namespace, role)
                .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
                .unwrap_or_default(),
            _ => vec![],
        };
        let source = format!(
            "RoleBinding \"{}/{}\" of {kind} \"{role}\"",
            namespace,
            s(&b, "/metadata/name")
        );
        out.extend(rules.into_iter().map(|rule| BoundRule {
            rule,
            source: source.clone(),
        }));
    }
    out
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

/// Whether one PolicyRule allows `a` (RBAC's `RuleAllows`).
pub fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    if !has(&strs(rule, "verbs"), &a.verb) {
        return false;
    }
    if !a.is_resource {
        return strs(rule, "nonResourceURLs").iter().any(|u| {
            u == "*"
                || *u == a.path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| a.path.starts_with(prefix))
        });
    }
    if !has(&strs(rule, "apiGroups"), &a.group) {
        return false;
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resource_ok = strs(rule, "resources").iter().any(|r| {
        r == "*"
            || *r == combined
            || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
    });
    if !resource_ok {
        return false;
    }
    let names = strs(rule, "resourceNames");
    names.is_empty() || (!a.name.is_empty() && names.contains(&a.name))
}

/// Whether `user` may do `a`.
pub fn authorize(st: &State, user: &User, a: &Attributes) -> Decision {
    if user.is_privileged() {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let ns = if a.is_resource {
        a.namespace.as_str()
    } else {
        ""
    };
    match rules_for(st, user, ns)
        .into_iter()
        .find(|r| rule_allows(&r.rule, a))
    {
        Some(r) => Decision {
            allowed: true,
            reason: format!("RBAC: allowed by {} to User \"{}\"", r.source, user.name),
        },
        None => Decision {
            allowed: false,
            reason: String::new(),
        },
    }
}

/// kube-apiserver's message for a denied request.
pub fn forbidden_message(user: &User, a: &Attributes) -> String {
    if !a.is_resource {
        return format!(
            "User \"{}\" cannot {} path \"{}\"",
            user.name, a.verb, a.path
        );
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    format!(
        "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, a.verb, a.group
    )
}

/// The 403 a denied request gets.
pub fn forbidden(user: &User, a: &Attributes) -> ApiError {
    ApiError::Forbidden {
        group: a.group.clone(),
        resource: a.resource.clone(),
        name: a.name.clone(),
        message: forbidden_message(user, a),
    }
}
