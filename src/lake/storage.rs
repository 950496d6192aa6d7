//! Where tables and checkpoints live: URIs, storage options and object stores.
//!
//! Every location of a stream (bronze, facts, checkpoint) is parsed here once,
//! so the rest of the crate handles a [`StorageLocation`] rather than strings.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};

use deltalake::logstore::object_store::ObjectStore;
use url::Url;

/// What kind of store a location is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// A local directory (a plain path or `file://`).
    Local,
    /// Amazon S3 or an S3-compatible store (`s3://`, `s3a://`).
    S3,
    /// Azure Blob Storage / ADLS Gen2 (`abfss://`, `abfs://`, `az://`, `azure://`).
    Azure,
}

/// A parsed table or checkpoint location: always an absolute URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageLocation {
    url: Url,
    kind: StorageKind,
}

/// Why a location or its store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The text is neither a local path nor a supported URI.
    #[error("unsupported location {location:?}: {reason}")]
    Location {
        /// The location as written.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The object store could not be built (bad options, unknown keys).
    #[error("cannot open the store for {url}: {source}")]
    Store {
        /// The location's URL.
        url: Url,
        /// deltalake's error (never carries option values).
        source: Box<deltalake::DeltaTableError>,
    },
}

impl StorageLocation {
    /// Parses a manifest location. A plain path is local and resolved against
    /// the working directory; it need not exist yet.
    pub fn parse(text: &str) -> Result<Self, StorageError> {
        let fail = |reason: &str| StorageError::Location {
            location: text.to_string(),
            reason: reason.to_string(),
        };
        if text.trim().is_empty() {
            return Err(fail("empty"));
        }
        if !text.contains("://") {
            return Self::local(Path::new(text)).ok_or_else(|| fail("not a usable local path"));
        }
        let url = Url::parse(text).map_err(|e| fail(&e.to_string()))?;
        let kind = match url.scheme() {
            "file" => {
                let path = url
                    .to_file_path()
                    .map_err(|_| fail("file:// needs an absolute local path"))?;
                return Self::local(&path).ok_or_else(|| fail("not a usable local path"));
            }
            "s3" | "s3a" => StorageKind::S3,
            "abfss" | "abfs" | "az" | "azure" => StorageKind::Azure,
            other => {
                return Err(fail(&format!(
                    "scheme {other}:// is not supported (use a path, file://, s3://, abfss:// or az://)"
                )));
            }
        };
        if url.host_str().unwrap_or_default().is_empty() {
            return Err(fail("the bucket or container is missing"));
        }
        Ok(StorageLocation {
            url: with_trailing_slash(url),
            kind,
        })
    }

    fn local(path: &Path) -> Option<Self> {
        let absolute: PathBuf = std::path::absolute(path).ok()?;
        let url = Url::from_directory_path(absolute).ok()?;
        Some(StorageLocation {
            url,
            kind: StorageKind::Local,
        })
    }

    /// The location as a directory URL (ends with `/`).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Whether this location lies inside `table`'s directory at a path a
    /// full vacuum of that table would delete: anywhere but below a folder
    /// whose name starts with `_` or `.` (as `_delta_log` does).
    pub fn exposed_inside(&self, table: &StorageLocation) -> bool {
        let (inner, outer) = (self.url.as_str(), table.url.as_str());
        inner
            .strip_prefix(outer)
            .filter(|rest| !rest.is_empty())
            .is_some_and(|rest| !rest.starts_with('_') && !rest.starts_with('.'))
    }

    /// Whether this location is `prefix` or lies below it, on the same
    /// store: directory by directory, so `s3://lake/shop/` holds
    /// `s3://lake/shop/orders/` but not `s3://lake/shop-other/`. A local
    /// path keeps its `..` segments (the file system, not the text, says
    /// where they lead, through symlinks too), so one with `..` lies under
    /// no prefix.
    pub fn lies_under(&self, prefix: &StorageLocation) -> bool {
        let climbs = self
            .url
            .path_segments()
            .is_some_and(|mut segments| segments.any(|s| s == ".." || s == "."));
        !climbs && self.url.as_str().starts_with(prefix.url.as_str())
    }

    /// Which store the location is on.
    pub fn kind(&self) -> StorageKind {
        self.kind
    }

    /// The options that reach the object store for this location: variables of
    /// the store's own environment prefix (`AWS_`, `AZURE_`), lower-cased as
    /// object_store expects, overridden by the manifest's `storageOptions`.
    pub fn options<F>(&self, manifest: &BTreeMap<String, String>, env: F) -> StorageOptions
    where
        F: IntoIterator<Item = (String, String)>,
    {
        let prefix = match self.kind {
            StorageKind::Local => None,
            StorageKind::S3 => Some("AWS_"),
            StorageKind::Azure => Some("AZURE_"),
        };
        let mut options: HashMap<String, String> = HashMap::new();
        if let Some(prefix) = prefix {
            options.extend(
                env.into_iter()
                    .filter(|(key, _)| key.starts_with(prefix))
                    .map(|(key, value)| (key.to_ascii_lowercase(), value)),
            );
        }
        options.extend(manifest.iter().map(|(k, v)| (k.clone(), v.clone())));
        StorageOptions(options)
    }

    /// An object store rooted at this location (paths are relative to it).
    pub fn object_store(
        &self,
        options: &StorageOptions,
    ) -> Result<Arc<dyn ObjectStore>, StorageError> {
        register_handlers();
        deltalake::logstore::store_for(&self.url, options.0.clone()).map_err(|source| {
            StorageError::Store {
                url: self.url.clone(),
                source: Box::new(source),
            }
        })
    }
}

impl fmt::Display for StorageLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())
    }
}

fn with_trailing_slash(mut url: Url) -> Url {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url
}

/// Options for object_store / deltalake. They often hold credentials, so
/// `Debug` shows the keys only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StorageOptions(HashMap<String, String>);

impl StorageOptions {
    /// The map deltalake's builders take.
    pub fn to_map(&self) -> HashMap<String, String> {
        self.0.clone()
    }

    /// The value of one option, for checks such as `aws_conditional_put`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }
}

impl fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut keys: Vec<&String> = self.0.keys().collect();
        keys.sort();
        f.debug_struct("StorageOptions")
            .field("keys", &keys)
            .finish_non_exhaustive()
    }
}

/// The setting that makes deltalake commit to S3 by copy-then-delete,
/// which two writers can both pass: read by deltalake from the process
/// environment, or given as a storage option.
pub const UNSAFE_RENAME: &str = "AWS_S3_ALLOW_UNSAFE_RENAME";

/// Where [`UNSAFE_RENAME`] is switched on, if anywhere: `"environment"` or
/// `"storageOptions"`. A value of `false`, `0`, `no` or `off` leaves it off.
pub fn unsafe_rename_source(
    manifest: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
) -> Option<&'static str> {
    let on = |value: &String| {
        !matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "" | "false" | "0" | "no" | "off"
        )
    };
    let set_in = |options: &BTreeMap<String, String>| {
        options
            .iter()
            .any(|(key, value)| key.eq_ignore_ascii_case(UNSAFE_RENAME) && on(value))
    };
    if set_in(env) {
        Some("environment")
    } else if set_in(manifest) {
        Some("storageOptions")
    } else {
        None
    }
}

/// Registers the S3 and Azure handlers with deltalake (idempotent, once
/// per process).
pub fn register_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        super::s3::register();
        deltalake::azure::register_handlers(None);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_lies_under_a_prefix_directory_by_directory() {
        let at = |text: &str| StorageLocation::parse(text).unwrap();
        let cases = [
            ("s3://lake/shop/orders", "s3://lake/shop", true),
            ("s3://lake/shop", "s3://lake/shop/", true),
            ("s3://lake/shop-other/orders", "s3://lake/shop", false),
            ("s3://lake/shop/../private", "s3://lake/shop", false),
            ("s3://lake/shop/%2e%2e/private", "s3://lake/shop", false),
            ("s3://other/shop/orders", "s3://lake/shop", false),
            ("s3a://lake/shop/orders", "s3://lake/shop", false),
            ("/lake/shop/orders", "/lake/shop", true),
            ("/lake/shop/../private", "/lake/shop", false),
            ("/lake/shop/./orders", "/lake/shop", true),
            ("file:///lake/shop/orders", "/lake/shop", true),
        ];
        for (location, prefix, under) in cases {
            assert_eq!(
                at(location).lies_under(&at(prefix)),
                under,
                "{location} under {prefix}"
            );
        }
    }

    #[test]
    fn parses_supported_locations() {
        let cwd = std::env::current_dir().unwrap();
        let local = Url::from_directory_path(cwd.join("lake/bronze/orders")).unwrap();
        let cases = [
            ("./lake/bronze/orders", local.as_str(), StorageKind::Local),
            ("lake/bronze/orders", local.as_str(), StorageKind::Local),
            ("/data/x", "file:///data/x/", StorageKind::Local),
            ("file:///data/x/", "file:///data/x/", StorageKind::Local),
            (
                "s3://bucket/lake/orders",
                "s3://bucket/lake/orders/",
                StorageKind::S3,
            ),
            ("s3a://bucket", "s3a://bucket/", StorageKind::S3),
            (
                "abfss://lake@acct.dfs.core.windows.net/bronze",
                "abfss://lake@acct.dfs.core.windows.net/bronze/",
                StorageKind::Azure,
            ),
            ("az://lake/bronze", "az://lake/bronze/", StorageKind::Azure),
        ];
        for (input, url, kind) in cases {
            let location = StorageLocation::parse(input).unwrap();
            assert_eq!(
                (location.url().as_str(), location.kind()),
                (url, kind),
                "{input}"
            );
        }
    }

    #[test]
    fn rejects_unsupported_locations() {
        for input in [
            "",
            "  ",
            "http://example/x",
            "gs://bucket/x",
            "s3://",
            "file://host/x",
        ] {
            let err = StorageLocation::parse(input).unwrap_err();
            assert!(err.to_string().contains(&format!("{input:?}")), "{err}");
        }
    }

    #[test]
    fn manifest_options_override_environment() {
        let env = || {
            [
                ("AWS_REGION", "eu-west-1"),
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
                ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
                ("HOME", "/root"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        };
        let manifest = BTreeMap::from([("aws_region".to_string(), "us-east-1".to_string())]);

        let s3 = StorageLocation::parse("s3://b/t")
            .unwrap()
            .options(&manifest, env());
        assert_eq!(s3.get("aws_region"), Some("us-east-1"));
        assert_eq!(s3.get("aws_endpoint_url"), Some("http://127.0.0.1:5000"));
        assert_eq!(s3.get("azure_storage_account_name"), None);
        assert_eq!(s3.get("home"), None);

        let az = StorageLocation::parse("az://c/t")
            .unwrap()
            .options(&manifest, env());
        assert_eq!(az.get("azure_storage_account_name"), Some("acct"));
        assert_eq!(az.get("aws_endpoint_url"), None);

        let local = StorageLocation::parse("/tmp/t")
            .unwrap()
            .options(&manifest, env());
        assert_eq!(local.to_map().len(), 1);
    }

    #[test]
    fn unsafe_rename_is_found_wherever_it_is_switched_on() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cases = [
            (map(&[]), map(&[]), None),
            (
                map(&[]),
                map(&[("AWS_S3_ALLOW_UNSAFE_RENAME", "true")]),
                Some("environment"),
            ),
            (
                map(&[("aws_s3_allow_unsafe_rename", "1")]),
                map(&[]),
                Some("storageOptions"),
            ),
            (
                map(&[("aws_s3_allow_unsafe_rename", "false")]),
                map(&[]),
                None,
            ),
            (
                map(&[]),
                map(&[("AWS_S3_ALLOW_UNSAFE_RENAME", "off")]),
                None,
            ),
        ];
        for (manifest, env, expected) in cases {
            assert_eq!(
                unsafe_rename_source(&manifest, &env),
                expected,
                "{manifest:?} {env:?}"
            );
        }
    }

    #[test]
    fn option_values_never_show_in_debug() {
        let manifest = BTreeMap::from([(
            "aws_secret_access_key".to_string(),
            "very-secret".to_string(),
        )]);
        let options = StorageLocation::parse("s3://b/t")
            .unwrap()
            .options(&manifest, []);
        let shown = format!("{options:?}");
        assert!(shown.contains("aws_secret_access_key"));
        assert!(!shown.contains("very-secret"));
    }

    #[test]
    fn builds_local_and_s3_stores() {
        let dir = tempfile::tempdir().unwrap();
        let local = StorageLocation::parse(dir.path().to_str().unwrap()).unwrap();
        assert!(local.object_store(&StorageOptions::default()).is_ok());
        let s3 = StorageLocation::parse("s3://bucket/t").unwrap();
        let options = s3.options(
            &BTreeMap::from([
                ("aws_region".to_string(), "us-east-1".to_string()),
                (
                    "aws_endpoint_url".to_string(),
                    "http://127.0.0.1:1".to_string(),
                ),
            ]),
            [],
        );
        assert!(s3.object_store(&options).is_ok());
    }
}
