//! How long a failing stream waits before its next reconcile: 5 s after the
//! first failure, doubling with each further one up to 5 minutes, and back
//! to the normal rhythm after a success. A stream that keeps failing (an API
//! server refusing its worker, say) then costs a request every few minutes
//! instead of every few seconds.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;

use crate::spec::CdcStream;

/// Delay after the first failure.
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// Longest delay, however many failures came before.
pub const MAX_RETRY: Duration = Duration::from_secs(300);

/// The delay after `failures` consecutive failures (1 for the first).
pub fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    FIRST_RETRY
        .checked_mul(1 << doublings)
        .map_or(MAX_RETRY, |delay| delay.min(MAX_RETRY))
}

/// Consecutive failures of each stream since its last success.
#[derive(Default)]
pub struct FailureCounts {
    counts: Mutex<HashMap<ObjectRef<CdcStream>, u32>>,
}

impl FailureCounts {
    /// Counts one more failure of `stream`; the delay before its retry.
    pub fn failed(&self, stream: ObjectRef<CdcStream>) -> Duration {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(stream).or_insert(0);
        *count = count.saturating_add(1);
        retry_delay(*count)
    }

    /// `stream` reconciled: its next failure waits the first delay again.
    pub fn succeeded(&self, stream: &ObjectRef<CdcStream>) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.remove(stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_from_five_seconds_up_to_five_minutes() {
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
            assert_eq!(
                retry_delay(failures),
                Duration::from_secs(seconds),
                "after {failures} failures"
            );
        }
    }

    #[test]
    fn a_success_resets_only_that_stream() {
        let counts = FailureCounts::default();
        let orders = ObjectRef::<CdcStream>::new("orders").within("shop");
        let customers = ObjectRef::<CdcStream>::new("customers").within("shop");
        assert_eq!(counts.failed(orders.clone()), Duration::from_secs(5));
        assert_eq!(counts.failed(orders.clone()), Duration::from_secs(10));
        assert_eq!(counts.failed(customers.clone()), Duration::from_secs(5));
        counts.succeeded(&orders);
        assert_eq!(counts.failed(orders), Duration::from_secs(5));
        assert_eq!(counts.failed(customers), Duration::from_secs(10));
    }
}
