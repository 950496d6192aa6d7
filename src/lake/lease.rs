//! Fencing: at most one process works on a checkpoint, and a process that
//! may have lost the checkpoint stops writing before another can start.
//!
//! On a local disk the lock is an OS file lock (`<checkpoint>/lock`), which
//! the kernel releases when the holder dies, so a crashed worker restarts at
//! once, and which no one else can take while the holder lives.
//!
//! On object stores it is a lease object (`<checkpoint>/lease`) that the
//! holder renews with conditional puts. Clocks of different hosts are never
//! compared:
//! - The holder keeps a local deadline, the start of its last successful
//!   renewal plus the TTL less a margin, on its own monotonic clock, and
//!   writes nothing once it has passed ([`LeaseGuard::check`], before every
//!   commit).
//! - A taker judges expiry by watching the lease's version stay unchanged
//!   for the TTL on its own clock, so it takes over only after the holder's
//!   deadline has passed. Meanwhile it waits (with jitter), instead of
//!   failing, up to the TTL plus the margin.
//! - A renewal or creation that succeeded but was answered with an error
//!   (and refused on its retry) is recognised by reading the lease back.
//! - Release is itself a conditional put (a released holder), so a process
//!   never removes a successor's lease.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::object_store::{
    self, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::storage::{StorageError, StorageKind, StorageLocation, StorageOptions};
use crate::retry::classify;
use crate::retry::{Jitter, Policy};

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
    /// When the holder last renewed (UTC, the holder's clock: shown to
    /// people, never compared).
    pub heartbeat_at: DateTime<Utc>,
    /// How many times the holder wrote the lease: tells the holder its own
    /// write from a successor's.
    #[serde(default)]
    pub writes: u64,
    /// How long the lease lasts without renewal, in milliseconds.
    #[serde(default)]
    pub ttl_ms: u64,
    /// Given up at a clean stop: a successor takes it at once.
    #[serde(default)]
    pub released: bool,
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

/// Why the checkpoint could not be locked, or is no longer held.
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
        /// What waiting showed, for remote leases.
        hint: String,
    },
    /// The lease could not be renewed in time: another process may hold it
    /// now, so this one writes nothing more.
    #[error(
        "checkpoint {location}: the lease could not be renewed for {seconds} s (last error: \
         {last_error}); another process may have taken the checkpoint, so this one stops writing. \
         Check the store's health; the stream restarts and takes the lease again"
    )]
    Expired {
        /// The checkpoint.
        location: String,
        /// Seconds since the last successful renewal.
        seconds: u64,
        /// Why renewing failed.
        last_error: String,
    },
    /// Another process took the lease over.
    #[error("checkpoint {location}: another process took over the lease; stopping")]
    Lost {
        /// The checkpoint.
        location: String,
    },
    /// The local lock file could not be opened, locked or written.
    #[error("checkpoint {location}: cannot lock: {path}: {source}")]
    Io {
        /// The checkpoint.
        location: String,
        /// The lock file or its directory.
        path: String,
        /// The file system's error.
        source: std::io::Error,
    },
    /// The lease object could not be read or written.
    #[error("checkpoint {location}: cannot lock: {source}")]
    Store {
        /// The checkpoint.
        location: String,
        /// The store's error.
        source: object_store::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Open(#[from] StorageError),
}

impl LeaseError {
    /// Whether waiting and trying again may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            LeaseError::Io { source, .. } => classify::io_transient(source),
            LeaseError::Store { source, .. } => classify::store_transient(source),
            LeaseError::Held { .. }
            | LeaseError::Expired { .. }
            | LeaseError::Lost { .. }
            | LeaseError::Open(_) => false,
        }
    }
}

/// A held checkpoint. Dropping it stops renewals (a remote lease then
/// expires); [`CheckpointLease::release`] gives it up at once.
#[derive(Debug)]
pub struct CheckpointLease {
    guard: LeaseGuard,
    hold: Hold,
}

#[derive(Debug)]
enum Hold {
    Local {
        _file: File,
    },
    Remote {
        store: Arc<dyn ObjectStore>,
        path: Path,
        me: Holder,
        renewal: Renewal,
    },
    /// No lease at all: the two-writers tests (failpoints builds only).
    #[cfg(any(test, feature = "failpoints"))]
    Bypassed,
}

/// What every write of a run asks first: is the checkpoint still ours?
#[derive(Debug, Clone)]
pub struct LeaseGuard {
    location: String,
    state: Option<Arc<Mutex<Renewed>>>,
}

/// The holder's view of its remote lease.
#[derive(Debug)]
struct Renewed {
    /// Past this instant (this process's monotonic clock) the lease may be
    /// someone else's.
    deadline: Instant,
    /// When the last successful renewal started.
    at: Instant,
    /// The lease's version after our last write.
    version: UpdateVersion,
    /// The lease was seen taken over.
    lost: bool,
    /// The last renewal error, while renewals fail.
    last_error: Option<String>,
}

impl LeaseGuard {
    /// `Ok` while the checkpoint is this process's: always for a local
    /// lock, until the deadline or a takeover for a remote lease.
    pub fn check(&self) -> Result<(), LeaseError> {
        let Some(state) = &self.state else {
            return Ok(());
        };
        let state = lock(state);
        if state.lost {
            return Err(LeaseError::Lost {
                location: self.location.clone(),
            });
        }
        if Instant::now() >= state.deadline {
            return Err(LeaseError::Expired {
                location: self.location.clone(),
                seconds: state.at.elapsed().as_secs(),
                last_error: state.last_error.clone().unwrap_or_else(|| "none".into()),
            });
        }
        Ok(())
    }
}

/// The share of the TTL kept as a margin: the holder stops this much before
/// a taker may start, which also covers clocks that run at slightly
/// different rates and a commit started just before the deadline.
fn margin(ttl: Duration) -> Duration {
    ttl / 5
}

impl CheckpointLease {
    /// Takes the checkpoint. A local lock held by a live process fails at
    /// once; a remote lease held by another process is waited for, up to
    /// its TTL plus a margin, and taken over if its holder stopped renewing.
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
            writes: 0,
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            released: false,
        };
        match location.kind() {
            StorageKind::Local => lock_local(location, &me),
            _ => {
                lease_on(
                    location.object_store(options)?,
                    &location.to_string(),
                    me,
                    ttl,
                )
                .await
            }
        }
    }

    /// No lease: lets tests run two engines on one checkpoint to prove the
    /// other fences hold without it.
    #[cfg(any(test, feature = "failpoints"))]
    pub fn bypassed(location: &StorageLocation) -> Self {
        CheckpointLease {
            guard: LeaseGuard {
                location: location.to_string(),
                state: None,
            },
            hold: Hold::Bypassed,
        }
    }

    /// The handle writes check the lease with.
    pub fn guard(&self) -> LeaseGuard {
        self.guard.clone()
    }

    /// Gives the checkpoint up at a clean stop, so the next run need not
    /// wait for a remote lease to expire. Only our own lease is released:
    /// the put is conditional on the version we last wrote.
    pub async fn release(self) {
        let Hold::Remote {
            store,
            path,
            mut me,
            renewal,
        } = self.hold
        else {
            return;
        };
        drop(renewal);
        let Some(state) = &self.guard.state else {
            return;
        };
        let version = {
            let state = lock(state);
            if state.lost {
                return;
            }
            state.version.clone()
        };
        me.released = true;
        me.writes += 1;
        if let Err(e) = put(&store, &path, &me, PutMode::Update(version)).await {
            tracing::warn!(error = %e, "could not release the checkpoint lease; it expires by itself");
        }
    }

    /// Whether another process took over the lease (or it expired).
    pub fn is_lost(&self) -> bool {
        self.guard.check().is_err()
    }
}

/// The renewal task, stopped when the lease is dropped (a killed process
/// stops renewing the same way).
#[derive(Debug)]
struct Renewal(tokio::task::JoinHandle<()>);

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn lock(state: &Mutex<Renewed>) -> std::sync::MutexGuard<'_, Renewed> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lock_local(location: &StorageLocation, me: &Holder) -> Result<CheckpointLease, LeaseError> {
    let io = |path: &std::path::Path, source: std::io::Error| LeaseError::Io {
        location: location.to_string(),
        path: path.display().to_string(),
        source,
    };
    let dir = location.url().to_file_path().map_err(|()| LeaseError::Io {
        location: location.to_string(),
        path: location.url().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a local path"),
    })?;
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let path = dir.join("lock");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io(&path, e))?;
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
        Err(TryLockError::Error(e)) => return Err(io(&path, e)),
    }
    let body = serde_json::to_vec(me).map_err(|e| io(&path, e.into()))?;
    file.set_len(0)
        .and_then(|()| file.write_all(&body))
        .and_then(|()| file.flush())
        .map_err(|e| io(&path, e))?;
    Ok(CheckpointLease {
        guard: LeaseGuard {
            location: location.to_string(),
            state: None,
        },
        hold: Hold::Local { _file: file },
    })
}

/// What a look at the lease object found.
enum Seen {
    /// No lease object.
    Free,
    /// A lease: its holder and version.
    Held(Holder, UpdateVersion),
}

async fn look(store: &Arc<dyn ObjectStore>, path: &Path) -> Result<Seen, object_store::Error> {
    let found = match store.get(path).await {
        Ok(found) => found,
        Err(object_store::Error::NotFound { .. }) => return Ok(Seen::Free),
        Err(e) => return Err(e),
    };
    let version = UpdateVersion {
        e_tag: found.meta.e_tag.clone(),
        version: found.meta.version.clone(),
    };
    let bytes = found.bytes().await?;
    // An unreadable lease is treated as a holder that never renews.
    let holder = serde_json::from_slice(&bytes).unwrap_or(Holder {
        owner: "unknown".into(),
        host: "unknown".into(),
        pid: 0,
        heartbeat_at: DateTime::<Utc>::UNIX_EPOCH,
        writes: 0,
        ttl_ms: 0,
        released: false,
    });
    Ok(Seen::Held(holder, version))
}

/// Takes the lease object of the checkpoint at `location` in `store`.
async fn lease_on(
    store: Arc<dyn ObjectStore>,
    location: &str,
    mut me: Holder,
    ttl: Duration,
) -> Result<CheckpointLease, LeaseError> {
    let path = Path::from("lease");
    let io = |source: object_store::Error| LeaseError::Store {
        location: location.to_string(),
        source,
    };
    // The version seen first, and since when (our clock).
    let mut watched: Option<(UpdateVersion, Instant)> = None;
    let started = Instant::now();
    loop {
        let attempt = Instant::now();
        let seen = look(&store, &path).await.map_err(io)?;
        let taken = match &seen {
            Seen::Free => {
                watched = None;
                Some(PutMode::Create)
            }
            Seen::Held(holder, version) => {
                // The holder's deadline follows its own TTL (a lease written
                // before holders recorded it: ours).
                let holder_ttl = match holder.ttl_ms {
                    0 => ttl,
                    ms => Duration::from_millis(ms),
                };
                let unchanged_for = match &watched {
                    Some((seen_version, since)) if seen_version == version => since.elapsed(),
                    _ => {
                        watched = Some((version.clone(), Instant::now()));
                        Duration::ZERO
                    }
                };
                if holder.released || unchanged_for >= holder_ttl {
                    if !holder.released {
                        tracing::warn!(
                            checkpoint = %location,
                            previous = %holder,
                            "taking over a checkpoint lease nobody renewed for its TTL"
                        );
                    }
                    Some(PutMode::Update(version.clone()))
                } else if started.elapsed() >= holder_ttl + margin(holder_ttl) {
                    return Err(LeaseError::Held {
                        location: location.to_string(),
                        holder: holder.to_string(),
                        hint: format!(
                            " (its holder renewed it while this process waited {} s)",
                            started.elapsed().as_secs()
                        ),
                    });
                } else {
                    None
                }
            }
        };
        if let Some(mode) = taken {
            me.writes += 1;
            me.heartbeat_at = Utc::now();
            match write_ours(&store, &path, &me, mode).await {
                Ok(Some(version)) => {
                    return Ok(start_renewals(
                        location, store, path, me, version, ttl, attempt,
                    ));
                }
                // Someone else was quicker: watch the new lease.
                Ok(None) => {}
                Err(e) => return Err(io(e)),
            }
        }
        tokio::time::sleep(poll(ttl).delay(1)).await;
    }
}

/// The pause between looks at a held lease, and between renewals after a
/// failed one: a tenth of the TTL, jittered so waiting processes do not
/// write in step.
fn poll(ttl: Duration) -> Policy {
    Policy::new(ttl / 10, ttl / 10, Jitter::Equal)
}

/// Writes `me` with `mode`. A conditional write refused after an error of
/// our own (the first try succeeded but its answer was lost) is ours when
/// the lease reads back as exactly what we wrote. `None`: another process
/// won.
async fn write_ours(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    me: &Holder,
    mode: PutMode,
) -> Result<Option<UpdateVersion>, object_store::Error> {
    match put(store, path, me, mode).await {
        Ok(version) => Ok(Some(version)),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => match look(store, path).await? {
            Seen::Held(holder, version) if &holder == me => Ok(Some(version)),
            _ => Ok(None),
        },
        Err(e) => Err(e),
    }
}

fn start_renewals(
    location: &str,
    store: Arc<dyn ObjectStore>,
    path: Path,
    me: Holder,
    version: UpdateVersion,
    ttl: Duration,
    attempt: Instant,
) -> CheckpointLease {
    let state = Arc::new(Mutex::new(Renewed {
        deadline: attempt + ttl.saturating_sub(margin(ttl)),
        at: attempt,
        version,
        lost: false,
        last_error: None,
    }));
    let renewal = Renewal(tokio::spawn(renew(
        store.clone(),
        path.clone(),
        me.clone(),
        ttl,
        state.clone(),
        location.to_string(),
    )));
    CheckpointLease {
        guard: LeaseGuard {
            location: location.to_string(),
            state: Some(state),
        },
        hold: Hold::Remote {
            store,
            path,
            me,
            renewal,
        },
    }
}

/// Renews every third of the TTL; after a failure, every tenth, until the
/// deadline passes (the guard then refuses writes) or a successor shows.
async fn renew(
    store: Arc<dyn ObjectStore>,
    path: Path,
    mut me: Holder,
    ttl: Duration,
    state: Arc<Mutex<Renewed>>,
    location: String,
) {
    let mut pause = ttl / 3;
    loop {
        tokio::time::sleep(pause).await;
        let attempt = Instant::now();
        let version = lock(&state).version.clone();
        me.writes += 1;
        me.heartbeat_at = Utc::now();
        match write_ours(&store, &path, &me, PutMode::Update(version)).await {
            Ok(Some(version)) => {
                let mut state = lock(&state);
                state.version = version;
                state.at = attempt;
                state.deadline = attempt + ttl.saturating_sub(margin(ttl));
                state.last_error = None;
                pause = ttl / 3;
            }
            Ok(None) => {
                tracing::error!(checkpoint = %location, "checkpoint lease was taken over by another process");
                lock(&state).lost = true;
                return;
            }
            Err(e) => {
                tracing::warn!(checkpoint = %location, error = %e, "renewing the checkpoint lease failed; retrying");
                lock(&state).last_error = Some(e.to_string());
                pause = poll(ttl).delay(1);
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
#[path = "lease_tests.rs"]
mod tests;
