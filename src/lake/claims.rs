//! Who owns a name in a shared table.
//!
//! The facts and finalization tables are shared by many streams and key
//! their rows by table name: facts rows and their `txn` ids by the target's
//! name (with the appId), the finalization verdicts by the target's and
//! silver's names alone. Two streams writing *different* tables under one
//! name would read each other's rows as their own: the second one's facts
//! come back "already written" and are dropped, and both overwrite one
//! verdict. So the first stream to use a name in a shared table claims it
//! for its table's location, with a create-only object beside the table
//! (`_mssql_cdc_claims/`, which Delta readers and VACUUM skip as hidden),
//! and a stream whose table is elsewhere is refused before it writes.
//!
//! A claim names a table location, not a checkpoint or an appId: a new
//! checkpoint adopting the target, or a new appId re-bootstrapping it, is
//! still the same table and keeps the name.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    self, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};
use serde::{Deserialize, Serialize};

use super::storage::{StorageError, StorageLocation, StorageOptions};
use crate::retry::classify::store_transient;

/// The folder of claims inside a shared table's directory.
pub const CLAIMS_DIR: &str = "_mssql_cdc_claims";

/// A name's owner, as the claim object records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NameClaim {
    /// The name the shared table's rows carry.
    pub name: String,
    /// The table the name stands for (its URL, without query or fragment).
    pub location: String,
    /// The appId of the stream that claimed it (shown to people).
    pub app_id: String,
    /// The checkpoint of the stream that claimed it (shown to people).
    pub checkpoint: String,
    /// When it was claimed (UTC, the claimant's clock; shown to people).
    pub claimed_at: DateTime<Utc>,
}

impl NameClaim {
    /// The claim a stream makes for `name`, standing for the table at
    /// `location`.
    pub fn new(
        name: &str,
        location: &StorageLocation,
        app_id: &str,
        checkpoint: &StorageLocation,
    ) -> Self {
        NameClaim {
            name: name.to_string(),
            location: plain_url(location),
            app_id: app_id.to_string(),
            checkpoint: plain_url(checkpoint),
            claimed_at: Utc::now(),
        }
    }
}

/// Why a name could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another table already goes by this name in the shared table.
    #[error(
        "{shared} already holds rows of {name:?} for the table at {owner} (claimed {claimed_at} \
         by appId {owner_app_id:?}, checkpoint {owner_checkpoint}), and this stream's table of \
         that name is at {ours}; sharing the name would mix the two tables' rows. Nothing was \
         written. Give this stream's table another name, or, if the table moved from {owner} to \
         {ours}, delete {claim} and run again (see docs/runbooks.md, \"NameClaimed\")"
    )]
    Claimed {
        /// The shared table (facts or finalization).
        shared: String,
        /// The name.
        name: String,
        /// The location the name stands for.
        owner: String,
        /// Who claimed it.
        owner_app_id: String,
        /// Which checkpoint claimed it.
        owner_checkpoint: String,
        /// When, rendered.
        claimed_at: String,
        /// This stream's table location.
        ours: String,
        /// The claim object to delete when the table moved.
        claim: String,
    },
    /// The claim object exists but is not a claim this program wrote.
    #[error(
        "{claim} is not a readable name claim ({reason}); nothing was written. Delete it and run \
         again, so the stream claims the name anew"
    )]
    Unreadable {
        /// The claim object.
        claim: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store could not be built.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The store failed.
    #[error("name claims of {shared}: {source}")]
    Store {
        /// The shared table.
        shared: String,
        /// object_store's error.
        source: Box<object_store::Error>,
    },
}

impl ClaimError {
    /// Whether asking again may succeed (a store that answered 503).
    pub fn is_transient(&self) -> bool {
        match self {
            ClaimError::Store { source, .. } => store_transient(source),
            _ => false,
        }
    }
}

/// Makes sure `claim.name` in the shared table at `shared` stands for
/// `claim.location`: claims it when no one has, accepts an earlier claim of
/// the same location, and refuses one of another. One read when the name
/// is already claimed, a create-only write the first time.
pub async fn claim_name(
    shared: &StorageLocation,
    options: &StorageOptions,
    claim: &NameClaim,
) -> Result<(), ClaimError> {
    let store = shared.object_store(options)?;
    claim_in(&store, &shared.to_string(), claim).await
}

async fn claim_in(
    store: &Arc<dyn ObjectStore>,
    shared: &str,
    claim: &NameClaim,
) -> Result<(), ClaimError> {
    let path = claim_path(&claim.name);
    let failed = |e: object_store::Error| ClaimError::Store {
        shared: shared.to_string(),
        source: Box::new(e),
    };
    let owner = match read(store, shared, &path).await? {
        Some(owner) => owner,
        None => {
            let body = serde_json::to_vec_pretty(claim).map_err(|e| ClaimError::Unreadable {
                claim: format!("{shared}{path}"),
                reason: e.to_string(),
            })?;
            match store
                .put_opts(
                    &path,
                    PutPayload::from(body),
                    PutOptions::from(PutMode::Create),
                )
                .await
            {
                Ok(_) => {
                    tracing::info!(shared = %shared, name = %claim.name, location = %claim.location, "claimed the name in the shared table");
                    return Ok(());
                }
                // Another stream was quicker (or our own first try succeeded
                // and its answer was lost): judge whatever is there now.
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => read(store, shared, &path).await?.ok_or_else(|| {
                    failed(object_store::Error::Generic {
                        store: "claims",
                        source: "the claim was reported as existing but cannot be read".into(),
                    })
                })?,
                Err(e) => return Err(failed(e)),
            }
        }
    };
    if owner.location == claim.location {
        return Ok(());
    }
    Err(ClaimError::Claimed {
        shared: shared.to_string(),
        name: claim.name.clone(),
        owner: owner.location,
        owner_app_id: owner.app_id,
        owner_checkpoint: owner.checkpoint,
        claimed_at: owner.claimed_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        ours: claim.location.clone(),
        claim: format!("{shared}{path}"),
    })
}

async fn read(
    store: &Arc<dyn ObjectStore>,
    shared: &str,
    path: &Path,
) -> Result<Option<NameClaim>, ClaimError> {
    let failed = |e: object_store::Error| ClaimError::Store {
        shared: shared.to_string(),
        source: Box::new(e),
    };
    let found = match store.get(path).await {
        Ok(found) => found,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(failed(e)),
    };
    let bytes = found.bytes().await.map_err(failed)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| ClaimError::Unreadable {
            claim: format!("{shared}{path}"),
            reason: e.to_string(),
        })
}

/// `_mssql_cdc_claims/<name>.json`; the name is one path segment, escaped
/// by object_store where a store would not take it as it is.
fn claim_path(name: &str) -> Path {
    Path::from(CLAIMS_DIR).join(format!("{name}.json"))
}

/// A location's URL without query or fragment, which could carry a token.
fn plain_url(location: &StorageLocation) -> String {
    let mut url = location.url().clone();
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::memory::InMemory;

    fn location(text: &str) -> StorageLocation {
        StorageLocation::parse(text).unwrap()
    }

    fn claim(name: &str, table: &str, app_id: &str) -> NameClaim {
        NameClaim::new(
            name,
            &location(table),
            app_id,
            &location(&format!("{table}-checkpoint")),
        )
    }

    #[tokio::test]
    async fn the_first_table_keeps_the_name_and_another_location_is_refused() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let first = claim("orders", "s3://lake/bronze/orders", "orders-v1");
        claim_in(&store, "s3://lake/facts/", &first).await.unwrap();
        // The same table again, or under a new appId and checkpoint: fine.
        claim_in(&store, "s3://lake/facts/", &first).await.unwrap();
        let rebuilt = claim("orders", "s3://lake/bronze/orders/", "orders-v2");
        claim_in(&store, "s3://lake/facts/", &rebuilt)
            .await
            .unwrap();

        let other = claim("orders", "s3://lake/eu/bronze/orders", "orders-eu");
        let refused = claim_in(&store, "s3://lake/facts/", &other)
            .await
            .unwrap_err();
        let said = refused.to_string();
        assert!(matches!(refused, ClaimError::Claimed { .. }), "{said}");
        for part in [
            "\"orders\"",
            "s3://lake/bronze/orders/",
            "s3://lake/eu/bronze/orders/",
            "\"orders-v1\"",
            "s3://lake/facts/_mssql_cdc_claims/orders.json",
        ] {
            assert!(said.contains(part), "{part} missing from: {said}");
        }
        // A different name is free.
        let renamed = claim("orders_eu", "s3://lake/eu/bronze/orders", "orders-eu");
        claim_in(&store, "s3://lake/facts/", &renamed)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_name_with_a_slash_is_one_claim_of_its_own() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        claim_in(&store, "mem:/", &claim("a/b", "s3://lake/ab", "x"))
            .await
            .unwrap();
        claim_in(&store, "mem:/", &claim("a", "s3://lake/a", "x"))
            .await
            .unwrap();
        let listed: Vec<_> =
            futures::TryStreamExt::try_collect::<Vec<_>>(store.list(Some(&Path::from(CLAIMS_DIR))))
                .await
                .unwrap();
        assert_eq!(listed.len(), 2, "{listed:?}");
        // Each claim is one object right under the folder, "a/b" escaped.
        assert!(
            listed.iter().all(|meta| meta.location.parts().count() == 2),
            "{listed:?}"
        );
    }

    #[tokio::test]
    async fn an_unreadable_claim_is_named_not_overwritten() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        store
            .put(&claim_path("orders"), PutPayload::from_static(b"not json"))
            .await
            .unwrap();
        let refused = claim_in(&store, "mem:/", &claim("orders", "s3://lake/o", "x"))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, ClaimError::Unreadable { claim, .. } if claim.ends_with("orders.json")),
            "{refused}"
        );
        let kept = store.get(&claim_path("orders")).await.unwrap();
        assert_eq!(kept.bytes().await.unwrap().as_ref(), b"not json");
    }

    #[test]
    fn a_recorded_location_carries_no_query() {
        let with_token = location("s3://lake/t?token=secret");
        assert!(!plain_url(&with_token).contains("secret"));
    }
}
