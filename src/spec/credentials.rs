//! Resolving the SQL login's password. The secret only ever exists inside a
//! [`SecretString`], whose `Debug` is redacted; errors name where it was
//! looked for, never what was found.

use std::path::PathBuf;

use secrecy::SecretString;

/// Where a validated manifest says the password is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// An environment variable.
    Env(String),
    /// A file; one trailing newline (`\n` or `\r\n`) is not part of the password.
    File(PathBuf),
    /// A key of a Kubernetes Secret; the operator passes it to the worker as
    /// an environment variable, so a process cannot read it directly.
    SecretKeyRef {
        /// Secret name.
        name: String,
        /// Key within the Secret.
        key: String,
    },
}

/// Why the password could not be read. Never contains the password.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The variable is not set (or not UTF-8).
    #[error("spec.source.credentials.passwordFrom.env: variable {0} is not set")]
    EnvMissing(String),
    /// The file cannot be read.
    #[error("spec.source.credentials.passwordFrom.file: cannot read {path}: {kind}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong (the I/O error kind only).
        kind: std::io::ErrorKind,
    },
    /// The source exists but holds an empty password.
    #[error("spec.source.credentials.passwordFrom: the password from {0} is empty")]
    Empty(String),
    /// Secrets are read by the operator, not by a process.
    #[error(
        "spec.source.credentials.passwordFrom.secretKeyRef: Secret {name} key {key} is only readable \
         when running in Kubernetes (the worker gets it as an environment variable); use env or file locally"
    )]
    NeedsKubernetes {
        /// Secret name.
        name: String,
        /// Key within the Secret.
        key: String,
    },
}

/// Reads the password. `env` looks up an environment variable (tests pass a
/// map; the program passes `std::env::var`).
pub fn resolve_password<F>(source: &PasswordSource, env: F) -> Result<SecretString, CredentialError>
where
    F: Fn(&str) -> Option<String>,
{
    let (password, origin) = match source {
        PasswordSource::Env(name) => (
            env(name).ok_or_else(|| CredentialError::EnvMissing(name.clone()))?,
            format!("variable {name}"),
        ),
        PasswordSource::File(path) => {
            let mut text = std::fs::read_to_string(path).map_err(|e| CredentialError::File {
                path: path.clone(),
                kind: e.kind(),
            })?;
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            (text, format!("file {}", path.display()))
        }
        PasswordSource::SecretKeyRef { name, key } => {
            return Err(CredentialError::NeedsKubernetes {
                name: name.clone(),
                key: key.clone(),
            });
        }
    };
    if password.is_empty() {
        return Err(CredentialError::Empty(origin));
    }
    Ok(SecretString::from(password))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use std::collections::HashMap;

    const SECRET: &str = "s3cr3t-P@ss";

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn resolves_each_source_without_showing_it() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        let crlf = dir.path().join("crlf");
        std::fs::write(&plain, format!("{SECRET}\n")).unwrap();
        std::fs::write(&crlf, format!("{SECRET}\r\n")).unwrap();
        let cases = [
            PasswordSource::Env("MSSQL_PASSWORD".into()),
            PasswordSource::File(plain),
            PasswordSource::File(crlf),
        ];
        for source in cases {
            let password = resolve_password(&source, env(&[("MSSQL_PASSWORD", SECRET)])).unwrap();
            assert_eq!(password.expose_secret(), SECRET, "{source:?}");
            assert!(!format!("{password:?}").contains(SECRET));
        }
    }

    #[test]
    fn errors_name_the_source_not_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let missing = dir.path().join("missing");
        let cases = [
            (
                PasswordSource::Env("NOPE".into()),
                "variable NOPE is not set",
            ),
            (
                PasswordSource::Env("BLANK".into()),
                "from variable BLANK is empty",
            ),
            (PasswordSource::File(empty), "is empty"),
            (PasswordSource::File(missing), "cannot read"),
            (
                PasswordSource::SecretKeyRef {
                    name: "db".into(),
                    key: "password".into(),
                },
                "Secret db key password",
            ),
        ];
        for (source, needle) in cases {
            let err = resolve_password(&source, env(&[("BLANK", ""), ("OTHER", SECRET)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{source:?}: {err}");
            assert!(!err.contains(SECRET));
        }
    }
}
