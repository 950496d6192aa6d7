//! Capped exponential backoff for transient SQL Server and storage errors.

use std::time::Duration;

/// The delays between attempts: 1 s, 2 s, 4 s... up to `max`.
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

    /// The attempt number of the next retry (1-based) and how long to wait.
    pub fn next_delay(&mut self) -> (u32, Duration) {
        let factor = 2u32.saturating_pow(self.attempt.min(20));
        let delay = self.first.saturating_mul(factor).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        (self.attempt, delay)
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
    fn doubles_up_to_the_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let delays: Vec<u64> = (0..5).map(|_| backoff.next_delay().1.as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 5, 5]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), (1, Duration::from_secs(1)));
    }
}
