//! Who may run what: the operator creates pods with its own rights, so a
//! stream may only ask for the images and ServiceAccounts its
//! administrator allowed (`--worker-images`, `--worker-service-accounts`).
//! Without this, anyone allowed to create a CdcStream could run any image
//! as any ServiceAccount of the namespace (a confused deputy).

use std::fmt;

/// The images and ServiceAccounts workers may run with, besides the
/// operator's own defaults (its image and its worker ServiceAccount),
/// which are always allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerPolicy {
    /// Image prefixes: `registry.example.com/team/` allows every image
    /// below that path, `registry.example.com/team/cdc` that repository
    /// with any tag or digest (never `.../cdc-other`).
    pub images: Vec<String>,
    /// ServiceAccount names (in the stream's namespace).
    pub service_accounts: Vec<String>,
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
}

/// A list of allowed values, shown in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    what: &'static str,
    values: Vec<String>,
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self.values.iter().map(|v| format!("{v:?}")).collect();
        match quoted.as_slice() {
            [] => write!(f, "the default {} only", self.what),
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
