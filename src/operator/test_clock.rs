//! A clock the tests can move for an operator that runs in its own pod
//! (builds with the `failpoints` feature only). The operator judges ages
//! (Live, the headroom countdown) at "now"; a test moves the test API
//! server's fake clock to make time pass, but a process in a pod reads the
//! wall clock. With `MSSQL_CDC_TEST_CLOCK=NAMESPACE/NAME` the operator
//! judges conditions at the wall clock plus the whole seconds in the key
//! `offsetSeconds` of that ConfigMap, which it watches; the tests write it
//! whenever they move the server's clock. A real cluster never sets it,
//! and a release build does not know it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::Utc;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use super::controller::Clock;

/// The test-only switch naming the clock's ConfigMap as `NAMESPACE/NAME`.
pub const TEST_CLOCK: &str = "MSSQL_CDC_TEST_CLOCK";
/// The ConfigMap key holding the seconds (an integer) added to the wall clock.
pub const OFFSET_KEY: &str = "offsetSeconds";

/// Why [`TEST_CLOCK`] cannot be followed: the operator refuses to start
/// rather than judge on a clock the test did not mean.
#[derive(Debug, thiserror::Error)]
pub enum TestClockError {
    /// The value is not `NAMESPACE/NAME`.
    #[error("{TEST_CLOCK} must be NAMESPACE/NAME of a ConfigMap, not {0:?}")]
    Malformed(String),
}

/// The ConfigMap's namespace and name from the switch's value.
fn parse_reference(value: &str) -> Result<(&str, &str), TestClockError> {
    value
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| TestClockError::Malformed(value.to_string()))
}

/// The clock [`TEST_CLOCK`] names, followed by a task on `client`;
/// `None` when the variable is not set. Until the ConfigMap is read the
/// offset is zero (the wall clock).
pub fn from_env(client: &Client) -> Result<Option<Clock>, TestClockError> {
    let Ok(value) = std::env::var(TEST_CLOCK) else {
        return Ok(None);
    };
    let (namespace, name) = parse_reference(&value)?;
    tracing::warn!(
        "{TEST_CLOCK} is set: conditions are judged on the clock of ConfigMap {value} (tests only)"
    );
    let offset = Arc::new(AtomicI64::new(0));
    tokio::spawn(follow(
        Api::namespaced(client.clone(), namespace),
        name.to_string(),
        Arc::clone(&offset),
    ));
    Ok(Some(Arc::new(move || {
        Utc::now() + chrono::Duration::seconds(offset.load(Ordering::Relaxed))
    })))
}

/// Keeps `offset` equal to the ConfigMap's [`OFFSET_KEY`], for as long as
/// the process runs (the watch retries with its backoff).
async fn follow(api: Api<ConfigMap>, name: String, offset: Arc<AtomicI64>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut changes = watcher(api, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(change) = changes.next().await {
        match change.map(|map| offset_of(&map)) {
            Ok(Some(seconds)) => offset.store(seconds, Ordering::Relaxed),
            Ok(None) => tracing::warn!("ConfigMap {name} has no integer {OFFSET_KEY}"),
            Err(error) => tracing::warn!(%error, "cannot watch the test clock's ConfigMap {name}"),
        }
    }
}

/// The ConfigMap's offset in seconds, when it holds an integer.
fn offset_of(map: &ConfigMap) -> Option<i64> {
    map.data.as_ref()?.get(OFFSET_KEY)?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_names_one_config_map() {
        assert_eq!(parse_reference("ns/clock").ok(), Some(("ns", "clock")));
        for bad in ["clock", "/clock", "ns/", "a/b/c", ""] {
            assert!(parse_reference(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_offset_is_an_integer_of_its_key() {
        let map = |value: &str| ConfigMap {
            data: Some([(OFFSET_KEY.to_string(), value.to_string())].into()),
            ..Default::default()
        };
        assert_eq!(offset_of(&map("600")), Some(600));
        assert_eq!(offset_of(&map(" 60\n")), Some(60));
        assert_eq!(offset_of(&map("ten")), None);
        assert_eq!(offset_of(&ConfigMap::default()), None);
    }
}
