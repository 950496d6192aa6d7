//! Capped exponential backoff with jitter: the cap of each wait doubles
//! from `first` up to `max`, and the wait is drawn below it, so a thousand
//! processes that lost the same server do not come back to it in lockstep.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// How a wait is drawn below its attempt's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Anywhere from zero to the cap: retries spread the most (for
    /// failures many processes see at once, a failed-over server).
    Full,
    /// From half the cap to the cap: never much sooner than the cap says
    /// (for waits that are also a rhythm, a reconcile or a lease poll).
    Equal,
}

/// The shape of a backoff: the first cap, the longest, and the jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    first: Duration,
    max: Duration,
    jitter: Jitter,
}

impl Policy {
    /// Caps start at `first`, double per failure and stop at `max`.
    pub const fn new(first: Duration, max: Duration, jitter: Jitter) -> Self {
        Policy { first, max, jitter }
    }

    /// The longest wait after `failures` failures in a row (1 for the
    /// first; 0 counts as 1).
    pub fn cap(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first
            .checked_mul(1 << doublings)
            .map_or(self.max, |cap| cap.min(self.max))
    }

    /// A wait after `failures` failures in a row, drawn below its cap.
    pub fn delay(&self, failures: u32) -> Duration {
        let cap = u64::try_from(self.cap(failures).as_millis()).unwrap_or(u64::MAX);
        let least = match self.jitter {
            Jitter::Full => 0,
            Jitter::Equal => cap / 2,
        };
        Duration::from_millis(fastrand::u64(least..=cap))
    }
}

/// The waits of one sequence of attempts (one connection, one commit).
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: Policy,
    failures: u32,
}

impl Backoff {
    /// Full jitter, caps from `first` up to `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff::with_policy(Policy::new(first, max, Jitter::Full))
    }

    /// Waits shaped by `policy`.
    pub fn with_policy(policy: Policy) -> Self {
        Backoff {
            policy,
            failures: 0,
        }
    }

    /// The attempt number of the next retry (1-based) and how long to wait
    /// before it.
    pub fn next_delay(&mut self) -> (u32, Duration) {
        self.failures = self.failures.saturating_add(1);
        (self.failures, self.policy.delay(self.failures))
    }

    /// Forgets past failures after a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

impl Default for Backoff {
    /// Up to 1 s, 2 s, 4 s... up to a minute.
    fn default() -> Self {
        Backoff::new(Duration::from_secs(1), Duration::from_secs(60))
    }
}

/// Consecutive failures of many keys (streams) since each one's last
/// success, for callers that retry many things under one policy.
#[derive(Debug)]
pub struct FailureCounts<K> {
    policy: Policy,
    counts: Mutex<HashMap<K, u32>>,
}

impl<K: Hash + Eq> FailureCounts<K> {
    /// No failures yet; waits shaped by `policy`.
    pub fn new(policy: Policy) -> Self {
        FailureCounts {
            policy,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one more failure of `key`; the wait before its retry.
    pub fn failed(&self, key: K) -> Duration {
        let mut counts = self.lock();
        let count = counts.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        self.policy.delay(*count)
    }

    /// `key` succeeded: its next failure waits the first delay again.
    pub fn succeeded(&self, key: &K) {
        self.lock().remove(key);
    }

    /// Forgets every key `keep` refuses (deleted streams), so the counts
    /// hold only what still exists.
    pub fn retain(&self, mut keep: impl FnMut(&K) -> bool) {
        self.lock().retain(|key, _| keep(key));
    }

    /// How many keys have failures counted.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no key has failures counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, u32>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn caps_double_from_the_first_up_to_the_maximum() {
        let policy = Policy::new(5 * SECOND, 300 * SECOND, Jitter::Equal);
        let cases = [
            (0, 5),
            (1, 5),
            (2, 10),
            (3, 20),
            (4, 40),
            (5, 80),
            (6, 160),
            (7, 300),
            (8, 300),
            (40, 300),
            (u32::MAX, 300),
        ];
        for (failures, seconds) in cases {
            assert_eq!(policy.cap(failures), seconds * SECOND, "after {failures}");
        }
    }

    #[test]
    fn waits_stay_within_their_jitter_bounds_and_spread() {
        for (jitter, share) in [(Jitter::Full, 0), (Jitter::Equal, 2)] {
            let policy = Policy::new(SECOND, 60 * SECOND, jitter);
            let mut waits = Vec::new();
            for _ in 0..200 {
                for failures in 1..=8 {
                    let cap = policy.cap(failures);
                    let least = if share == 0 { Duration::ZERO } else { cap / 2 };
                    let wait = policy.delay(failures);
                    assert!(
                        least <= wait && wait <= cap,
                        "{jitter:?}: {wait:?} after {failures}"
                    );
                }
                waits.push(policy.delay(8));
            }
            waits.sort();
            waits.dedup();
            assert!(waits.len() > 10, "{jitter:?} spreads the waits: {waits:?}");
        }
    }

    #[test]
    fn a_sequence_counts_its_attempts_and_a_reset_starts_over() {
        let mut backoff = Backoff::new(SECOND, 4 * SECOND);
        for n in 1..=5 {
            let (attempt, wait) = backoff.next_delay();
            assert_eq!(attempt, n);
            assert!(wait <= SECOND * 2u32.pow(n - 1).min(4), "{wait:?}");
        }
        backoff.reset();
        let (attempt, wait) = backoff.next_delay();
        assert_eq!(attempt, 1);
        assert!(wait <= SECOND);
    }

    #[test]
    fn a_success_resets_one_key_and_retain_forgets_the_others() {
        let policy = Policy::new(5 * SECOND, 300 * SECOND, Jitter::Equal);
        let counts = FailureCounts::new(policy);
        let within = |wait: Duration, cap: u32| cap * SECOND / 2 <= wait && wait <= cap * SECOND;
        assert!(within(counts.failed("orders"), 5));
        assert!(within(counts.failed("orders"), 10));
        assert!(within(counts.failed("customers"), 5));
        counts.succeeded(&"orders");
        assert!(within(counts.failed("orders"), 5));
        assert!(within(counts.failed("customers"), 10));
        assert_eq!(counts.len(), 2);
        counts.retain(|key| *key == "orders");
        assert_eq!(counts.len(), 1);
        assert!(within(counts.failed("customers"), 5), "forgotten");
    }
}
