//! Field tables for the Kubernetes protobuf messages we decode, taken from
//! the field numbers in k8s.io/api's `generated.proto` files. JSON names
//! are the API's field names.

/// How a field's payload maps to JSON.
#[derive(Debug)]
pub enum Ty {
    Str,
    /// `bytes`, shown as base64 (Secret data, ConfigMap binaryData).
    Bytes,
    Int,
    Bool,
    Msg(Msg),
    /// An embedded struct whose fields JSON inlines into the parent
    /// (`LocalObjectReference` in key selectors).
    Inline(Msg),
    /// `map<string, V>`: repeated entries with key 1 and value 2.
    Map(&'static Ty),
    /// `metav1.Time` {seconds, nanos} as RFC 3339.
    Time,
    /// `intstr.IntOrString` {type, intVal, strVal}.
    IntOrString,
    /// `resource.Quantity` {string}.
    Quantity,
}

/// One message field.
#[derive(Debug)]
pub struct F {
    pub num: u64,
    pub name: &'static str,
    pub ty: Ty,
    pub repeated: bool,
    /// Pointer fields, where zero/false/"" is a value rather than "unset".
    pub keep_zero: bool,
}

pub type Msg = &'static [F];

const fn f(num: u64, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        repeated: false,
        keep_zero: false,
    }
}

/// A repeated field.
const fn r(num: u64, name: &'static str, ty: Ty) -> F {
    F {
        repeated: true,
        ..f(num, name, ty)
    }
}

/// A pointer field (explicit zero values are kept).
const fn p(num: u64, name: &'static str, ty: Ty) -> F {
    F {
        keep_zero: true,
        ..f(num, name, ty)
    }
}

const STR_MAP: Ty = Ty::Map(&Ty::Str);

const OWNER_REFERENCE: Msg = &[
    f(1, "kind", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
    f(5, "apiVersion", Ty::Str),
    p(6, "controller", Ty::Bool),
    p(7, "blockOwnerDeletion", Ty::Bool),
];

pub const OBJECT_META: Msg = &[
    f(1, "name", Ty::Str),
    f(2, "generateName", Ty::Str),
    f(3, "namespace", Ty::Str),
    f(4, "selfLink", Ty::Str),
    f(5, "uid", Ty::Str),
    f(6, "resourceVersion", Ty::Str),
    f(7, "generation", Ty::Int),
    f(8, "creationTimestamp", Ty::Time),
    f(9, "deletionTimestamp", Ty::Time),
    p(10, "deletionGracePeriodSeconds", Ty::Int),
    f(11, "labels", STR_MAP),
    f(12, "annotations", STR_MAP),
    r(13, "ownerReferences", Ty::Msg(OWNER_REFERENCE)),
    r(14, "finalizers", Ty::Str),
];

const LOCAL_OBJECT_REFERENCE: Msg = &[f(1, "name", Ty::Str)];

const LABEL_SELECTOR_REQUIREMENT: Msg = &[
    f(1, "key", Ty::Str),
    f(2, "operator", Ty::Str),
    r(3, "values", Ty::Str),
];

const LABEL_SELECTOR: Msg = &[
    f(1, "matchLabels", STR_MAP),
    r(2, "matchExpressions", Ty::Msg(LABEL_SELECTOR_REQUIREMENT)),
];

const CONTAINER_PORT: Msg = &[
    f(1, "name", Ty::Str),
    f(2, "hostPort", Ty::Int),
    f(3, "containerPort", Ty::Int),
    f(4, "protocol", Ty::Str),
    f(5, "hostIP", Ty::Str),
];

const OBJECT_FIELD_SELECTOR: Msg = &[f(1, "apiVersion", Ty::Str), f(2, "fieldPath", Ty::Str)];

const KEY_SELECTOR: Msg = &[
    f(1, "", Ty::Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "key", Ty::Str),
    p(3, "optional", Ty::Bool),
];

const ENV_VAR_SOURCE: Msg = &[
    f(1, "fieldRef", Ty::Msg(OBJECT_FIELD_SELECTOR)),
    f(3, "configMapKeyRef", Ty::Msg(KEY_SELECTOR)),
    f(4, "secretKeyRef", Ty::Msg(KEY_SELECTOR)),
];

const ENV_VAR: Msg = &[
    f(1, "name", Ty::Str),
    f(2, "value", Ty::Str),
    f(3, "valueFrom", Ty::Msg(ENV_VAR_SOURCE)),
];

const ENV_SOURCE_REF: Msg = &[
    f(1, "", Ty::Inline(LOCAL_OBJECT_REFERENCE)),
    p(2, "optional", Ty::Bool),
];

const ENV_FROM_SOURCE: Msg = &[
    f(1, "prefix", Ty::Str),
    f(2, "configMapRef", Ty::Msg(ENV_SOURCE_REF)),
    f(3, "secretRef", Ty::Msg(ENV_SOURCE_REF)),
];

const RESOURCE_REQUIREMENTS: Msg = &[
    f(1, "limits", Ty::Map(&Ty::Quantity)),
    f(2, "requests", Ty::Map(&Ty::Quantity)),
];

const VOLUME_MOUNT: Msg = &[
    f(1, "name", Ty::Str),
    p(2, "readOnly", Ty::Bool),
    f(3, "mountPath", Ty::Str),
    f(4, "subPath", Ty::Str),
    f(5, "mountPropagation", Ty::Str),
    f(6, "subPathExpr", Ty::Str),
];

const CONTAINER: Msg = &[
    p(1, "name", Ty::Str),
    f(2, "image", Ty::Str),
    r(3, "command", Ty::Str),
    r(4, "args", Ty::Str),
    f(5, "workingDir", Ty::Str),
    r(6, "ports", Ty::Msg(CONTAINER_PORT)),
    r(7, "env", Ty::Msg(ENV_VAR)),
    f(8, "resources", Ty::Msg(RESOURCE_REQUIREMENTS)),
    r(9, "volumeMounts", Ty::Msg(VOLUME_MOUNT)),
    f(13, "terminationMessagePath", Ty::Str),
    f(14, "imagePullPolicy", Ty::Str),
    f(16, "stdin", Ty::Bool),
    f(17, "stdinOnce", Ty::Bool),
    f(18, "tty", Ty::Bool),
    r(19, "envFrom", Ty::Msg(ENV_FROM_SOURCE)),
    f(20, "terminationMessagePolicy", Ty::Str),
    f(24, "restartPolicy", Ty::Str),
];

const POD_SPEC: Msg = &[
    r(2, "containers", Ty::Msg(CONTAINER)),
    f(3, "restartPolicy", Ty::Str),
    p(4, "terminationGracePeriodSeconds", Ty::Int),
    p(5, "activeDeadlineSeconds", Ty::Int),
    f(6, "dnsPolicy", Ty::Str),
    f(7, "nodeSelector", STR_MAP),
    f(8, "serviceAccountName", Ty::Str),
    f(9, "serviceAccount", Ty::Str),
    f(10, "nodeName", Ty::Str),
    f(11, "hostNetwork", Ty::Bool),
    f(12, "hostPID", Ty::Bool),
    f(13, "hostIPC", Ty::Bool),
    r(15, "imagePullSecrets", Ty::Msg(LOCAL_OBJECT_REFERENCE)),
    f(16, "hostname", Ty::Str),
    f(17, "subdomain", Ty::Str),
    f(19, "schedulerName", Ty::Str),
    r(20, "initContainers", Ty::Msg(CONTAINER)),
    p(21, "automountServiceAccountToken", Ty::Bool),
    f(24, "priorityClassName", Ty::Str),
    p(25, "priority", Ty::Int),
    p(30, "enableServiceLinks", Ty::Bool),
];

const POD_TEMPLATE_SPEC: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(POD_SPEC)),
];

const ROLLING_UPDATE_DEPLOYMENT: Msg = &[
    f(1, "maxUnavailable", Ty::IntOrString),
    f(2, "maxSurge", Ty::IntOrString),
];

const DEPLOYMENT_STRATEGY: Msg = &[
    f(1, "type", Ty::Str),
    f(2, "rollingUpdate", Ty::Msg(ROLLING_UPDATE_DEPLOYMENT)),
];

const DEPLOYMENT_SPEC: Msg = &[
    p(1, "replicas", Ty::Int),
    f(2, "selector", Ty::Msg(LABEL_SELECTOR)),
    f(3, "template", Ty::Msg(POD_TEMPLATE_SPEC)),
    f(4, "strategy", Ty::Msg(DEPLOYMENT_STRATEGY)),
    f(5, "minReadySeconds", Ty::Int),
    p(6, "revisionHistoryLimit", Ty::Int),
    f(7, "paused", Ty::Bool),
    p(9, "progressDeadlineSeconds", Ty::Int),
];

/// Status as clients send it on create: counters only (all zero from
/// kubectl); conditions are the server's business.
const DEPLOYMENT_STATUS: Msg = &[
    f(1, "observedGeneration", Ty::Int),
    f(2, "replicas", Ty::Int),
    f(3, "updatedReplicas", Ty::Int),
    f(4, "availableReplicas", Ty::Int),
    f(5, "unavailableReplicas", Ty::Int),
    f(7, "readyReplicas", Ty::Int),
    p(8, "collisionCount", Ty::Int),
];

pub const DEPLOYMENT: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(DEPLOYMENT_SPEC)),
    f(3, "status", Ty::Msg(DEPLOYMENT_STATUS)),
];

pub const SECRET: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::Map(&Ty::Bytes)),
    f(3, "type", Ty::Str),
    f(4, "stringData", STR_MAP),
    p(5, "immutable", Ty::Bool),
];

pub const CONFIG_MAP: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", STR_MAP),
    f(3, "binaryData", Ty::Map(&Ty::Bytes)),
    p(4, "immutable", Ty::Bool),
];

const NAMESPACE_SPEC: Msg = &[r(1, "finalizers", Ty::Str)];

pub const NAMESPACE: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(NAMESPACE_SPEC)),
    f(3, "status", Ty::Msg(&[f(1, "phase", Ty::Str)])),
];

const OBJECT_REFERENCE: Msg = &[
    f(1, "kind", Ty::Str),
    f(2, "namespace", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
    f(5, "apiVersion", Ty::Str),
    f(6, "resourceVersion", Ty::Str),
    f(7, "fieldPath", Ty::Str),
];

pub const SERVICE_ACCOUNT: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    r(2, "secrets", Ty::Msg(OBJECT_REFERENCE)),
    r(3, "imagePullSecrets", Ty::Msg(LOCAL_OBJECT_REFERENCE)),
    p(4, "automountServiceAccountToken", Ty::Bool),
];

const BOUND_OBJECT_REFERENCE: Msg = &[
    f(1, "kind", Ty::Str),
    f(2, "apiVersion", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
];

const TOKEN_REQUEST_SPEC: Msg = &[
    r(1, "audiences", Ty::Str),
    f(3, "boundObjectRef", Ty::Msg(BOUND_OBJECT_REFERENCE)),
    p(4, "expirationSeconds", Ty::Int),
];

/// `kubectl create token`.
pub const TOKEN_REQUEST: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(TOKEN_REQUEST_SPEC)),
];

const RESOURCE_ATTRIBUTES: Msg = &[
    f(1, "namespace", Ty::Str),
    f(2, "verb", Ty::Str),
    f(3, "group", Ty::Str),
    f(4, "version", Ty::Str),
    f(5, "resource", Ty::Str),
    f(6, "subresource", Ty::Str),
    f(7, "name", Ty::Str),
];

const NON_RESOURCE_ATTRIBUTES: Msg = &[f(1, "path", Ty::Str), f(2, "verb", Ty::Str)];

const SELF_SUBJECT_ACCESS_REVIEW_SPEC: Msg = &[
    f(1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
    f(2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
];

/// `kubectl auth can-i`.
pub const SELF_SUBJECT_ACCESS_REVIEW: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
];

const EXTRA_VALUE: Msg = &[r(1, "items", Ty::Str)];

const SUBJECT_ACCESS_REVIEW_SPEC: Msg = &[
    f(1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
    f(2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
    f(3, "user", Ty::Str),
    r(4, "groups", Ty::Str),
    f(5, "extra", Ty::Map(&Ty::Msg(EXTRA_VALUE))),
    f(6, "uid", Ty::Str),
];

/// SubjectAccessReview and LocalSubjectAccessReview.
pub const SUBJECT_ACCESS_REVIEW: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(SUBJECT_ACCESS_REVIEW_SPEC)),
];

/// `kubectl auth can-i --list`.
pub const SELF_SUBJECT_RULES_REVIEW: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(&[f(1, "namespace", Ty::Str)])),
];

/// `kubectl auth whoami`.
pub const SELF_SUBJECT_REVIEW: Msg = &[f(1, "metadata", Ty::Msg(OBJECT_META))];

const POLICY_RULE: Msg = &[
    r(1, "verbs", Ty::Str),
    r(2, "apiGroups", Ty::Str),
    r(3, "resources", Ty::Str),
    r(4, "resourceNames", Ty::Str),
    r(5, "nonResourceURLs", Ty::Str),
];

/// `kubectl create role`.
pub const ROLE: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    r(2, "rules", Ty::Msg(POLICY_RULE)),
];

const AGGREGATION_RULE: Msg = &[r(1, "clusterRoleSelectors", Ty::Msg(LABEL_SELECTOR))];

/// `kubectl create clusterrole`.
pub const CLUSTER_ROLE: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    r(2, "rules", Ty::Msg(POLICY_RULE)),
    f(3, "aggregationRule", Ty::Msg(AGGREGATION_RULE)),
];

const SUBJECT: Msg = &[
    f(1, "kind", Ty::Str),
    f(2, "apiGroup", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "namespace", Ty::Str),
];

const ROLE_REF: Msg = &[
    f(1, "apiGroup", Ty::Str),
    f(2, "kind", Ty::Str),
    f(3, "name", Ty::Str),
];

/// `kubectl create rolebinding` and `clusterrolebinding`.
pub const ROLE_BINDING: Msg = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    r(2, "subjects", Ty::Msg(SUBJECT)),
    f(3, "roleRef", Ty::Msg(ROLE_REF)),
];

/// The message table for a kind sent as protobuf, by apiVersion and kind.
pub fn for_kind(api_version: &str, kind: &str) -> Option<Msg> {
    Some(match (api_version, kind) {
        ("apps/v1", "Deployment") => DEPLOYMENT,
        ("v1", "Secret") => SECRET,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST,
        ("rbac.authorization.k8s.io/v1", "Role") => ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => ROLE_BINDING,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => SELF_SUBJECT_REVIEW,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "SubjectAccessReview" | "LocalSubjectAccessReview") => {
            SUBJECT_ACCESS_REVIEW
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => SELF_SUBJECT_RULES_REVIEW,
        _ => return None,
    })
}
