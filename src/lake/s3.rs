//! S3 for deltalake from object_store alone. deltalake's own S3 support
//! brings the AWS SDK (its credential chain, STS, SSO and a second TLS
//! stack), a third of a cold build, for what object_store already does:
//! signing, retries, conditional puts, and credentials from the
//! environment, IRSA web identity, EKS Pod Identity / ECS container
//! credentials and the instance metadata service. Commits go through
//! deltalake's default log store, which needs create-only puts (see
//! docs/adr/0002-exactly-once.md); the copy-then-delete commit of
//! `AWS_S3_ALLOW_UNSAFE_RENAME` does not exist here at all.

use std::str::FromStr;
use std::sync::Arc;

use deltalake::logstore::object_store::client::SpawnedReqwestConnector;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    ObjectStoreScheme, aws::AmazonS3Builder, aws::AmazonS3ConfigKey,
};
use deltalake::logstore::{
    LogStore, LogStoreFactory, ObjectStoreFactory, ObjectStoreRef, StorageConfig,
    client_options_from_certificate, default_logstore, logstore_factories, object_store_factories,
};
use deltalake::{DeltaResult, DeltaTableError};
use url::Url;

/// The URL schemes served.
const SCHEMES: [&str; 2] = ["s3", "s3a"];

/// Registers S3 for deltalake (call once per process).
pub(super) fn register() {
    let stores = Arc::new(S3Stores);
    let logs = Arc::new(S3Logs);
    for scheme in SCHEMES {
        if let Ok(url) = Url::parse(&format!("{scheme}://")) {
            object_store_factories().insert(url.clone(), stores.clone());
            logstore_factories().insert(url, logs.clone());
        }
    }
}

/// Builds an S3 store from a location and its options.
struct S3Stores;

impl ObjectStoreFactory for S3Stores {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        // The process environment's AWS_* settings first, then the
        // options (which already hold the stream's environment and its
        // storageOptions), so an option wins.
        let mut builder = AmazonS3Builder::from_env()
            .with_url(url.to_string())
            .with_retry(config.retry.clone());
        if let Some(runtime) = &config.runtime {
            builder =
                builder.with_http_connector(SpawnedReqwestConnector::new(runtime.get_handle()));
        }
        if let Some(path) = config
            .certificate
            .as_ref()
            .and_then(|c| c.certificate_path.as_deref())
        {
            builder = builder.with_client_options(client_options_from_certificate(path)?);
        }
        for (key, value) in &config.raw {
            if let Ok(key) = AmazonS3ConfigKey::from_str(&key.to_ascii_lowercase()) {
                builder = builder.with_config(key, value.clone());
            }
        }
        let store = builder.build()?;
        let (_, path) =
            ObjectStoreScheme::parse(url).map_err(|e| DeltaTableError::GenericError {
                source: Box::new(e),
            })?;
        Ok((Arc::new(store), Path::parse(path)?))
    }
}

/// deltalake's default log store over an S3 store.
struct S3Logs;

impl LogStoreFactory for S3Logs {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}
