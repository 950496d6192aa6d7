//! Fencing: at most one process works on a checkpoint.
//!
//! On a local disk the lock is an OS file lock (`<checkpoint>/lock`), which
//! the kernel releases when the holder dies, so a crashed worker restarts at
//! once. On object stores it is a lease object (`<checkpoint>/lease`) that
//! the holder renews with conditional puts; a second process fails fast while
//! the lease is fresh and takes it over once it has expired.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    self, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
};
use serde::{Deserialize, Serialize};

use super::storage::{StorageError, StorageKind, StorageLocation, StorageOptions};

/// How long a remote lease stays valid without renewal.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// Who holds a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Random id of the holding process.
    pub owner: String,
    /// Host name of the holder.
    pub host: String,
    /// Process id of the holder.
    pub pid: u32,
    /// When the holder last renewed (UTC).
    pub heartbeat_at: DateTime<Utc>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on {} (last heartbeat {})",
            self.pid,
            self.host,
            self.heartbeat_at.format("%Y-%m-%d %H:%M:%S UTC")
        )
    }
}

/// Why the checkpoint could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another process holds it.
    #[error(
        "checkpoint {location} is in use by another mssql-cdc process ({holder}); only one \
         process may run a stream: stop the other one{hint}"
    )]
    Held {
        /// The checkpoint.
        location: String,
        /// Who holds it, as far as known.
        holder: String,
        /// When it can be taken over, for remote leases.
        hint: String,
    },
    /// The lock file or lease object could not be written.
    #[error("checkpoint {location}: cannot lock: {reason}")]
    Io {
        /// The checkpoint.
        location: String,
        /// The underlying error.
        reason: String,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Open(#[from] StorageError),
}

/// A held checkpoint; dropping it releases the lock (remote leases simply
/// stop being renewed and expire).
#[derive(Debug)]
pub struct CheckpointLease {
    _file: Option<File>,
    lost: Arc<AtomicBool>,
    renewal: Option<tokio::task::JoinHandle<()>>,
    remote: Option<(Arc<dyn ObjectStore>, Path)>,
}

impl CheckpointLease {
    /// Takes the checkpoint or fails fast naming the holder.
    pub async fn acquire(
        location: &StorageLocation,
        options: &StorageOptions,
        ttl: Duration,
    ) -> Result<Self, LeaseError> {
        let me = Holder {
            owner: uuid::Uuid::new_v4().to_string(),
            host: host_name(),
            pid: std::process::id(),
            heartbeat_at: Utc::now(),
        };
        match location.kind() {
            StorageKind::Local => lock_local(location, &me),
            _ => lease_remote(location, options, me, ttl).await,
        }
    }

    /// Gives the checkpoint up at a clean stop, so the next run need not
    /// wait for a remote lease to expire. (A crash leaves it to expire.)
    pub async fn release(mut self) {
        if let Some(task) = self.renewal.take() {
            task.abort();
        }
        if let Some((store, path)) = self.remote.take()
            && !self.is_lost()
            && let Err(e) = store.delete(&path).await
        {
            tracing::warn!(error = %e, "could not release the checkpoint lease; it expires by itself");
        }
    }

    /// Whether a remote lease was lost (another process took it over); the
    /// engine stops before planning another batch when it was.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for CheckpointLease {
    fn drop(&mut self) {
        if let Some(task) = self.renewal.take() {
            task.abort();
        }
    }
}

fn lock_local(location: &StorageLocation, me: &Holder) -> Result<CheckpointLease, LeaseError> {
    let io = |reason: String| LeaseError::Io {
        location: location.to_string(),
        reason,
    };
    let dir = location
        .url()
        .to_file_path()
        .map_err(|()| io("not a local path".into()))?;
    std::fs::create_dir_all(&dir).map_err(|e| io(format!("{}: {e}", dir.display())))?;
    let path = dir.join("lock");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io(format!("{}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| serde_json::from_str::<Holder>(&text).ok())
                .map_or_else(|| "unknown holder".to_string(), |h| h.to_string());
            return Err(LeaseError::Held {
                location: location.to_string(),
                holder,
                hint: String::new(),
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(format!("{}: {e}", path.display()))),
    }
    let body = serde_json::to_vec(me).map_err(|e| io(e.to_string()))?;
    file.set_len(0)
        .and_then(|()| file.write_all(&body))
        .and_then(|()| file.flush())
        .map_err(|e| io(format!("{}: {e}", path.display())))?;
    Ok(CheckpointLease {
        _file: Some(file),
        lost: Arc::new(AtomicBool::new(false)),
        renewal: None,
        remote: None,
    })
}

async fn lease_remote(
    location: &StorageLocation,
    options: &StorageOptions,
    me: Holder,
    ttl: Duration,
) -> Result<CheckpointLease, LeaseError> {
    let store = location.object_store(options)?;
    let path = Path::from("lease");
    let io = |e: object_store::Error| LeaseError::Io {
        location: location.to_string(),
        reason: e.to_string(),
    };
    let held = |holder: &Holder| {
        let expires = holder.heartbeat_at + chrono::Duration::from_std(ttl).unwrap_or_default();
        LeaseError::Held {
            location: location.to_string(),
            holder: holder.to_string(),
            hint: format!(
                " (if it is gone, its lease expires at {})",
                expires.format("%Y-%m-%d %H:%M:%S UTC")
            ),
        }
    };
    let version = match store.get(&path).await {
        Err(object_store::Error::NotFound { .. }) => {
            match put(&store, &path, &me, PutMode::Create).await {
                Ok(version) => version,
                Err(object_store::Error::AlreadyExists { .. }) => {
                    let current = read_holder(&store, &path).await.map_err(io)?;
                    return Err(held(&current.0));
                }
                Err(e) => return Err(io(e)),
            }
        }
        Err(e) => return Err(io(e)),
        Ok(found) => {
            let version = UpdateVersion {
                e_tag: found.meta.e_tag.clone(),
                version: found.meta.version.clone(),
            };
            let bytes = found.bytes().await.map_err(io)?;
            if let Ok(holder) = serde_json::from_slice::<Holder>(&bytes) {
                let age = Utc::now() - holder.heartbeat_at;
                if age.to_std().is_ok_and(|age| age < ttl) || age < chrono::Duration::zero() {
                    return Err(held(&holder));
                }
                tracing::warn!(
                    checkpoint = %location,
                    previous = %holder,
                    "taking over an expired checkpoint lease"
                );
            }
            match put(&store, &path, &me, PutMode::Update(version)).await {
                Ok(version) => version,
                Err(object_store::Error::Precondition { .. }) => {
                    let current = read_holder(&store, &path).await.map_err(io)?;
                    return Err(held(&current.0));
                }
                Err(e) => return Err(io(e)),
            }
        }
    };
    let lost = Arc::new(AtomicBool::new(false));
    let remote = Some((store.clone(), path.clone()));
    let renewal = tokio::spawn(renew(
        store,
        path,
        me,
        version,
        ttl,
        lost.clone(),
        location.to_string(),
    ));
    Ok(CheckpointLease {
        _file: None,
        lost,
        renewal: Some(renewal),
        remote,
    })
}

async fn renew(
    store: Arc<dyn ObjectStore>,
    path: Path,
    mut me: Holder,
    mut version: UpdateVersion,
    ttl: Duration,
    lost: Arc<AtomicBool>,
    location: String,
) {
    let mut ticker = tokio::time::interval(ttl / 3);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        me.heartbeat_at = Utc::now();
        match put(&store, &path, &me, PutMode::Update(version.clone())).await {
            Ok(next) => version = next,
            Err(object_store::Error::Precondition { .. }) => {
                tracing::error!(checkpoint = %location, "checkpoint lease was taken over by another process");
                lost.store(true, Ordering::SeqCst);
                return;
            }
            Err(e) => {
                tracing::warn!(checkpoint = %location, error = %e, "renewing the checkpoint lease failed; retrying");
            }
        }
    }
}

async fn put(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    holder: &Holder,
    mode: PutMode,
) -> Result<UpdateVersion, object_store::Error> {
    let body = serde_json::to_vec(holder).unwrap_or_default();
    let result = store
        .put_opts(path, PutPayload::from(body), PutOptions::from(mode))
        .await?;
    Ok(UpdateVersion {
        e_tag: result.e_tag,
        version: result.version,
    })
}

async fn read_holder(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
) -> Result<(Holder, UpdateVersion), object_store::Error> {
    let found = store.get(path).await?;
    let version = UpdateVersion {
        e_tag: found.meta.e_tag.clone(),
        version: found.meta.version.clone(),
    };
    let bytes = found.bytes().await?;
    let holder = serde_json::from_slice(&bytes).unwrap_or(Holder {
        owner: "unknown".into(),
        host: "unknown".into(),
        pid: 0,
        heartbeat_at: Utc::now(),
    });
    Ok((holder, version))
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "unknown-host".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_local_holder_fails_fast_and_the_first_release_frees_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let location =
            StorageLocation::parse(dir.path().to_str().expect("utf-8 path")).expect("location");
        let options = StorageOptions::default();
        let first = CheckpointLease::acquire(&location, &options, DEFAULT_LEASE_TTL)
            .await
            .expect("first lock");
        let second = CheckpointLease::acquire(&location, &options, DEFAULT_LEASE_TTL).await;
        let message = second.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("in use by another mssql-cdc process")
                && message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        drop(first);
        CheckpointLease::acquire(&location, &options, DEFAULT_LEASE_TTL)
            .await
            .expect("lock after release");
    }
}
