//! Leader election on a `coordination.k8s.io` Lease, so that several
//! operator replicas never reconcile at the same time: each waits for the
//! Lease, only its holder runs the controller, and the holder renews it
//! `grace` seconds before it expires.
//!
//! A holder that cannot renew (the API server refuses or does not answer
//! within the grace) or finds another holder gives the lease up as lost:
//! the operator then stops reconciling and exits non-zero, and Kubernetes
//! restarts it as a candidate. Starting over is simpler to trust than a
//! controller that pauses and resumes with a stale cache. A clean shutdown
//! releases the Lease so that another replica takes over at once.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};

use super::status::OPERATOR_FIELD_MANAGER;
use super::supervisor::RETRY;

/// The shortest Lease: one second of grace must fit before it expires.
const MIN_DURATION_SECONDS: u64 = 2;

/// Which Lease the replicas compete for, and as whom.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Name of the Lease.
    pub name: String,
    /// Its namespace (the operator's own).
    pub namespace: String,
    /// This replica's holder identity (its pod name).
    pub identity: String,
    /// How long the Lease stays valid after its last renewal.
    pub duration_seconds: u64,
}

impl LeaseConfig {
    /// How long before expiry the holder renews; also the longest a renewal
    /// may take before the Lease counts as lost. A third of the duration.
    pub fn grace_seconds(&self) -> Result<u64, LeaderError> {
        renew_grace(self.duration_seconds)
    }
}

/// Leader election could not start, or the Lease was lost.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease duration leaves no room for a renewal.
    #[error("--lease-duration {0}: must be at least {MIN_DURATION_SECONDS} seconds")]
    Duration(u64),
    /// The Lease could not be read or created.
    #[error("Lease {namespace}/{name}: {source}")]
    Lease {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// What the lease manager said.
        source: LeaseManagerError,
    },
    /// This replica led and no longer does.
    #[error("lost the Lease {namespace}/{name}: {reason}")]
    Lost {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// Another holder, or why the renewal failed.
        reason: String,
    },
}

/// The renewal grace of a Lease of `duration_seconds`.
pub fn renew_grace(duration_seconds: u64) -> Result<u64, LeaderError> {
    if duration_seconds < MIN_DURATION_SECONDS {
        return Err(LeaderError::Duration(duration_seconds));
    }
    Ok((duration_seconds / 3).max(1))
}

/// A replica that holds the Lease.
pub struct Leadership {
    manager: LeaseManager,
    config: LeaseConfig,
}

impl Leadership {
    /// Waits until this replica holds the Lease (creating it when missing);
    /// `None` when `shutdown` completes first. `client` should time out
    /// within the grace (see [`LeaseConfig::grace_seconds`]).
    pub async fn acquire(
        client: Client,
        config: LeaseConfig,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<Option<Self>, LeaderError> {
        let grace = config.grace_seconds()?;
        let manager = LeaseManagerBuilder::new(client, &config.name)
            .with_namespace(&config.namespace)
            .with_identity(&config.identity)
            .with_duration(config.duration_seconds)
            .with_grace(grace)
            .with_field_manager(format!("{OPERATOR_FIELD_MANAGER}-{}", config.identity))
            .build()
            .await
            .map_err(|source| lease_error(&config, source))?;
        tracing::info!(
            lease = %config.name,
            namespace = %config.namespace,
            identity = %config.identity,
            "waiting to lead"
        );
        tokio::pin!(shutdown);
        let mut failures = 0;
        loop {
            tokio::select! {
                () = &mut shutdown => return Ok(None),
                changed = manager.changed() => match changed {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(error) => {
                        failures += 1;
                        let delay = RETRY.delay(failures);
                        tracing::warn!(lease = %config.name, "{error}; retrying in {delay:?}");
                        tokio::select! {
                            () = &mut shutdown => return Ok(None),
                            () = tokio::time::sleep(delay) => {}
                        }
                    }
                }
            }
        }
        tracing::info!(lease = %config.name, identity = %config.identity, "leading");
        Ok(Some(Leadership { manager, config }))
    }

    /// Keeps renewing the Lease; completes only once it is lost.
    pub async fn lost(&self) -> LeaderError {
        let reason = loop {
            match self.manager.changed().await {
                Ok(true) => {}
                Ok(false) => break "another replica holds it".to_string(),
                Err(error) => break format!("cannot renew it: {error}"),
            }
        };
        LeaderError::Lost {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            reason,
        }
    }

    /// Gives the Lease up so that another replica need not wait for it to
    /// expire.
    pub async fn release(self) -> Result<(), LeaderError> {
        self.manager
            .release()
            .await
            .map_err(|source| lease_error(&self.config, source))?;
        tracing::info!(lease = %self.config.name, "released the Lease");
        Ok(())
    }
}

fn lease_error(config: &LeaseConfig, source: LeaseManagerError) -> LeaderError {
    LeaderError::Lease {
        namespace: config.namespace.clone(),
        name: config.name.clone(),
        source,
    }
}

/// A client for the Lease whose requests give up within `grace`, so that a
/// hung renewal is noticed before the Lease expires.
pub fn lease_client(mut config: kube::Config, grace_seconds: u64) -> Result<Client, kube::Error> {
    let timeout = Some(Duration::from_secs(grace_seconds));
    config.read_timeout = timeout;
    config.write_timeout = timeout;
    config.connect_timeout = timeout;
    config.reset_reader_on_write = true;
    Client::try_from(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_is_a_third_of_the_lease_and_at_least_one_second() {
        for (duration, grace) in [(2, 1), (3, 1), (6, 2), (15, 5), (16, 5), (60, 20)] {
            assert_eq!(renew_grace(duration).ok(), Some(grace), "{duration}s");
        }
        for duration in [0, 1] {
            assert!(
                matches!(renew_grace(duration), Err(LeaderError::Duration(d)) if d == duration),
                "{duration}s is too short"
            );
        }
    }
}
