//! Capped exponential backoff with full jitter for transient SQL Server and
//! storage errors: each wait is drawn between zero and the cap of its
//! attempt, so a thousand workers that lost the same failed-over server do
//! not come back to it in lockstep.

use std::time::Duration;

/// The delays between attempts: up to 1 s, 2 s, 4 s... up to `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starts at `first` and never waits longer than `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            attempt: 0,
        }
    }

    /// The attempt number of the next retry (1-based) and how long to wait:
    /// a random share of the attempt's cap.
    pub fn next_delay(&mut self) -> (u32, Duration) {
        let cap = self.cap(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        let millis = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX);
        (
            self.attempt,
            Duration::from_millis(fastrand::u64(0..=millis)),
        )
    }

    /// The longest wait before retry `attempt` (0-based): `first` doubled
    /// per attempt, capped at `max`.
    fn cap(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(20));
        self.first.saturating_mul(factor).min(self.max)
    }

    /// Forgets past failures after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_secs(1), Duration::from_secs(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_double_up_to_the_maximum() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let caps: Vec<u64> = (0..5).map(|n| backoff.cap(n).as_secs()).collect();
        assert_eq!(caps, vec![1, 2, 4, 5, 5]);
    }

    #[test]
    fn waits_are_drawn_below_each_cap_and_spread() {
        let mut waits = Vec::new();
        for _ in 0..50 {
            let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
            for n in 0..6u32 {
                let (attempt, wait) = backoff.next_delay();
                assert_eq!(attempt, n + 1);
                assert!(
                    wait <= Duration::from_secs(1 << n),
                    "{wait:?} at attempt {attempt}"
                );
                if n == 5 {
                    waits.push(wait);
                }
            }
            backoff.reset();
            assert_eq!(backoff.next_delay().0, 1);
        }
        waits.sort();
        waits.dedup();
        assert!(waits.len() > 10, "jitter spreads the waits: {waits:?}");
    }
}
