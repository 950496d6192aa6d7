//! A controllable clock: tests advance "now" instead of sleeping, and the
//! harness controllers (CronJob) wake up when it moves.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Shared fake clock. `now()` is wall-clock time plus an offset tests can advance.
#[derive(Clone)]
pub struct Clock {
    offset: Arc<Mutex<Duration>>,
    tick: watch::Sender<u64>,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock that starts at wall-clock time.
    pub fn new() -> Self {
        Self {
            offset: Arc::new(Mutex::new(Duration::zero())),
            tick: watch::channel(0).0,
        }
    }

    /// The server's notion of now.
    pub fn now(&self) -> DateTime<Utc> {
        let off = *self.offset.lock().unwrap_or_else(|e| e.into_inner());
        Utc::now() + off
    }

    /// Now as an RFC 3339 timestamp with second precision (the `metav1.Time` format).
    pub fn now_rfc3339(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// Move time forward and wake everything waiting on [`Clock::changed`].
    pub fn advance(&self, by: std::time::Duration) {
        let by = Duration::from_std(by).unwrap_or(Duration::zero());
        *self.offset.lock().unwrap_or_else(|e| e.into_inner()) += by;
        self.tick.send_modify(|t| *t += 1);
    }

    /// A receiver notified whenever the clock is advanced.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.tick.subscribe()
    }
}

/// Formats a time as `metav1.Time`.
pub fn fmt_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Parses a `metav1.Time`.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
