//! Who may run what: the operator creates pods with its own rights, so a
//! stream may only ask for what its administrator allowed: images and
//! ServiceAccounts (`--worker-images`, `--worker-service-accounts`), volume
//! types (`--worker-volume-types`), environment variables (`--worker-env`,
//! `--worker-env-from`) and Secrets carrying a label
//! (`--worker-secret-label`). Without this, anyone allowed to create a
//! CdcStream could run any image as any ServiceAccount of the namespace,
//! mount the node, or read any Secret of the namespace through the worker
//! (a confused deputy).
//!
//! The volume and environment checks are in `pod_policy`, the Secrets a
//! stream names in `secret_refs`; this module holds the policy and its
//! refusals.

use std::fmt;

use super::secret_refs::SecretLabel;

/// The volume types a stream may use when the operator is not told
/// otherwise: storage for a lake or checkpoint, configuration, CA bundles,
/// CSI drivers. Never `hostPath`. Comma separated, as the flag takes it.
pub const DEFAULT_VOLUME_TYPES: &str = "persistentVolumeClaim,emptyDir,configMap,secret,csi";

/// What workers may run with, besides the operator's own defaults (its
/// image and its worker ServiceAccount), which are always allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerPolicy {
    /// Image prefixes: `registry.example.com/team/` allows every image
    /// below that path, `registry.example.com/team/cdc` that repository
    /// with any tag or digest (never `.../cdc-other`).
    pub images: Vec<String>,
    /// ServiceAccount names (in the stream's namespace).
    pub service_accounts: Vec<String>,
    /// Volume types (core/v1 Volume field names, e.g. `configMap`) of
    /// `spec.worker.volumes`.
    pub volume_types: Vec<String>,
    /// Names of the variables `spec.worker.env` may set; `PREFIX*` allows
    /// every name that starts with `PREFIX`.
    pub env: Vec<String>,
    /// Whether `spec.worker.envFrom` is allowed at all: it imports keys
    /// whose names the policy cannot see.
    pub env_from: bool,
    /// The label every Secret a stream names must carry; `None` lets a
    /// stream name any Secret of its namespace.
    pub secret_label: Option<SecretLabel>,
}

impl Default for WorkerPolicy {
    /// Nothing beyond the operator's own image and account, the
    /// [`DEFAULT_VOLUME_TYPES`], no variables, and only Secrets labelled
    /// [`SecretLabel::default`].
    fn default() -> Self {
        WorkerPolicy {
            images: Vec::new(),
            service_accounts: Vec::new(),
            volume_types: DEFAULT_VOLUME_TYPES.split(',').map(String::from).collect(),
            env: Vec::new(),
            env_from: false,
            secret_label: Some(SecretLabel::default()),
        }
    }
}

/// What a stream asked for that the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `spec.worker.image` is not the operator's image nor under an
    /// allowed prefix.
    #[error(
        "spec.worker.image {image:?} is not allowed: the operator runs {allowed}; use one of them, or ask the operator's administrator to add it to --worker-images (chart value workerImages)"
    )]
    Image {
        /// The image asked for.
        image: String,
        /// The allowed images, for the message.
        allowed: Allowed,
    },
    /// `spec.worker.serviceAccountName` is not an allowed account.
    #[error(
        "spec.worker.serviceAccountName {account:?} is not allowed: workers run as {allowed}; use one of them, or ask the operator's administrator to add it to --worker-service-accounts (chart value workerServiceAccounts)"
    )]
    ServiceAccount {
        /// The account asked for.
        account: String,
        /// The allowed accounts, for the message.
        allowed: Allowed,
    },
    /// A volume of a type the operator does not allow (`hostPath`...).
    #[error(
        "{field}: volumes of type {kind} are not allowed: streams may use {allowed}; use one of them, or ask the operator's administrator to add {kind} to --worker-volume-types (chart value workerVolumeTypes)"
    )]
    VolumeType {
        /// The field, e.g. `spec.worker.volumes[1].hostPath`.
        field: String,
        /// The volume type asked for.
        kind: String,
        /// The allowed types, for the message.
        allowed: Allowed,
    },
    /// A variable `spec.worker.env` may not set.
    #[error(
        "{field}: the variable {name:?} is not allowed: streams may set {allowed}; remove it, or ask the operator's administrator to add it to --worker-env (chart value workerEnv)"
    )]
    Env {
        /// The field, e.g. `spec.worker.env[0].name`.
        field: String,
        /// The variable's name.
        name: String,
        /// The allowed names, for the message.
        allowed: Allowed,
    },
    /// `spec.worker.envFrom` while the operator does not allow it.
    #[error(
        "{field}: envFrom is not allowed (it imports variables the operator cannot check); set the variables one by one in spec.worker.env, or ask the operator's administrator for --worker-env-from (chart value workerEnvFrom)"
    )]
    EnvFrom {
        /// The field, e.g. `spec.worker.envFrom[0]`.
        field: String,
    },
    /// A Secret the stream names lacks the label the operator requires.
    #[error(
        "{field}: Secret {secret:?} does not carry the label {label}: the operator only hands a stream Secrets labelled for it; label it (kubectl label secret {secret} {label}) if this stream may read it, or name another Secret"
    )]
    SecretNotLabelled {
        /// The field naming the Secret.
        field: String,
        /// The Secret's name.
        secret: String,
        /// The label required, `KEY=VALUE`.
        label: SecretLabel,
    },
    /// A Secret the stream names does not exist (so its label is unknown).
    #[error(
        "{field}: Secret {secret:?} does not exist in the stream's namespace; create it with the label {label} (the operator looks again within its resync interval)"
    )]
    SecretNotFound {
        /// The field naming the Secret.
        field: String,
        /// The Secret's name.
        secret: String,
        /// The label required, `KEY=VALUE`.
        label: SecretLabel,
    },
}

impl Refusal {
    /// The reason of the stream's Event and Ready condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Image { .. } => "ImageNotAllowed",
            Refusal::ServiceAccount { .. } => "ServiceAccountNotAllowed",
            Refusal::VolumeType { .. } => "VolumeTypeNotAllowed",
            Refusal::Env { .. } => "EnvNotAllowed",
            Refusal::EnvFrom { .. } => "EnvFromNotAllowed",
            Refusal::SecretNotLabelled { .. } => "SecretNotLabelled",
            Refusal::SecretNotFound { .. } => "SecretNotFound",
        }
    }
}

/// A list of allowed values, shown in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    what: &'static str,
    values: Vec<String>,
}

impl Allowed {
    /// `values` of `what` (a word such as "image"), for a message.
    pub(super) fn new(what: &'static str, values: Vec<String>) -> Self {
        Allowed { what, values }
    }
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self.values.iter().map(|v| format!("{v:?}")).collect();
        match quoted.as_slice() {
            [] if matches!(self.what, "image" | "ServiceAccount") => {
                write!(f, "the default {} only", self.what)
            }
            [] => write!(f, "no {}s", self.what),
            [one] => write!(f, "only {} {one}", self.what),
            many => write!(f, "only the {}s {}", self.what, many.join(", ")),
        }
    }
}

impl WorkerPolicy {
    /// Whether a worker may run `image` (the one it will run: the stream's
    /// or `own`, the operator's image).
    pub fn admit_image(&self, image: &str, own: &str) -> Result<(), Refusal> {
        if image == own || self.images.iter().any(|p| under_prefix(image, p)) {
            return Ok(());
        }
        let mut values = vec![own.to_string()];
        values.extend(self.images.iter().map(|p| format!("{p}*")));
        Err(Refusal::Image {
            image: image.to_string(),
            allowed: Allowed {
                what: "image",
                values,
            },
        })
    }

    /// Whether a worker may run as `asked` (the stream's
    /// `serviceAccountName`), given the operator's default worker account.
    /// A stream that names none runs as the default, which is always
    /// allowed.
    pub fn admit_service_account(
        &self,
        asked: Option<&str>,
        default: Option<&str>,
    ) -> Result<(), Refusal> {
        let Some(account) = asked else {
            return Ok(());
        };
        let allowed = || {
            default
                .into_iter()
                .chain(self.service_accounts.iter().map(String::as_str))
        };
        if allowed().any(|a| a == account) {
            return Ok(());
        }
        Err(Refusal::ServiceAccount {
            account: account.to_string(),
            allowed: Allowed {
                what: "ServiceAccount",
                values: allowed().map(str::to_string).collect(),
            },
        })
    }
}

/// Whether `image` is `prefix` itself or below it: the prefix ends at a
/// path, tag or digest separator, or is followed by one, so that
/// `example.com/cdc` does not allow `example.com/cdc-evil`.
fn under_prefix(image: &str, prefix: &str) -> bool {
    let Some(rest) = image.strip_prefix(prefix) else {
        return false;
    };
    let separators = ['/', ':', '@'];
    !prefix.is_empty()
        && (prefix.ends_with(separators) || rest.is_empty() || rest.starts_with(separators))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "ghcr.io/mssql-cdc/mssql-cdc:0.1.0";

    fn policy(images: &[&str], accounts: &[&str]) -> WorkerPolicy {
        WorkerPolicy {
            images: images.iter().map(|s| s.to_string()).collect(),
            service_accounts: accounts.iter().map(|s| s.to_string()).collect(),
            ..WorkerPolicy::default()
        }
    }

    #[test]
    fn images_are_the_operators_own_or_below_an_allowed_prefix() {
        let cases = [
            (policy(&[], &[]), OWN, true),
            (policy(&[], &[]), "ghcr.io/mssql-cdc/mssql-cdc:0.2.0", false),
            (policy(&[], &[]), "busybox", false),
            (
                policy(&["registry.acme.io/cdc/"], &[]),
                "registry.acme.io/cdc/worker:1",
                true,
            ),
            (
                policy(&["registry.acme.io/cdc"], &[]),
                "registry.acme.io/cdc:1",
                true,
            ),
            (
                policy(&["registry.acme.io/cdc"], &[]),
                "registry.acme.io/cdc@sha256:ab",
                true,
            ),
            (
                policy(&["registry.acme.io/cdc"], &[]),
                "registry.acme.io/cdc/x:1",
                true,
            ),
            (
                policy(&["registry.acme.io/cdc"], &[]),
                "registry.acme.io/cdc-evil:1",
                false,
            ),
            (
                policy(&["registry.acme.io/cdc/"], &[]),
                "registry.acme.io/cdcx/w:1",
                false,
            ),
            (
                policy(&["registry.acme.io/cdc:"], &[]),
                "registry.acme.io/cdc:2",
                true,
            ),
            (policy(&[""], &[]), "anything", false),
        ];
        for (policy, image, allowed) in cases {
            assert_eq!(
                policy.admit_image(image, OWN).is_ok(),
                allowed,
                "{image} under {:?}",
                policy.images
            );
        }
    }

    #[test]
    fn a_refused_image_names_what_is_allowed_and_the_flag() {
        let refusal = policy(&["registry.acme.io/cdc/"], &[])
            .admit_image("evil.io/miner:1", OWN)
            .unwrap_err();
        let message = refusal.to_string();
        for part in [
            "spec.worker.image \"evil.io/miner:1\" is not allowed",
            "\"ghcr.io/mssql-cdc/mssql-cdc:0.1.0\"",
            "\"registry.acme.io/cdc/*\"",
            "--worker-images",
            "workerImages",
        ] {
            assert!(message.contains(part), "{part:?} missing from {message}");
        }
    }

    #[test]
    fn service_accounts_are_the_default_or_listed() {
        let default = Some("cdc-worker");
        let cases = [
            (policy(&[], &[]), None, true),
            (policy(&[], &[]), Some("cdc-worker"), true),
            (policy(&[], &[]), Some("default"), false),
            (policy(&[], &[]), Some("admin"), false),
            (policy(&[], &["s3-writer"]), Some("s3-writer"), true),
            (policy(&[], &["s3-writer"]), Some("admin"), false),
        ];
        for (policy, asked, allowed) in cases {
            assert_eq!(
                policy.admit_service_account(asked, default).is_ok(),
                allowed,
                "{asked:?} with {:?}",
                policy.service_accounts
            );
        }
        let message = policy(&[], &["s3-writer"])
            .admit_service_account(Some("admin"), default)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("\"admin\" is not allowed")
                && message.contains("only the ServiceAccounts \"cdc-worker\", \"s3-writer\"")
                && message.contains("--worker-service-accounts"),
            "{message}"
        );
        // Without a default account only the listed ones (or none) pass.
        assert!(
            policy(&[], &[])
                .admit_service_account(Some("cdc-worker"), None)
                .is_err()
        );
    }
}
