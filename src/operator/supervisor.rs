//! What happens around every reconcile, whatever it does: its outcome and
//! duration go into the operator's metrics, and a failing stream is retried
//! with a growing, jittered delay ([`RETRY`]) that a success resets. A
//! stream deleted while failing is forgotten, so the counts hold only
//! streams that exist.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::retry::{FailureCounts, Jitter, Policy};
use crate::spec::CdcStream;

use super::controller::ReconcileError;
use super::metrics::OperatorMetrics;

/// The delay before a failing stream's next reconcile: 5 s after the first
/// failure, doubling with each further one up to 5 minutes, each drawn
/// from the upper half so streams that failed together spread out. A
/// stream that keeps failing (an API server refusing its worker, say) then
/// costs a request every few minutes instead of every few seconds.
pub const RETRY: Policy = Policy::new(
    Duration::from_secs(5),
    Duration::from_secs(300),
    Jitter::Equal,
);

/// Shared by every reconcile of one controller run.
pub struct Supervisor {
    metrics: Arc<OperatorMetrics>,
    failures: FailureCounts<ObjectRef<CdcStream>>,
    /// The controllers' caches: a stream in none of them was deleted.
    streams: Vec<Store<CdcStream>>,
}

impl Supervisor {
    /// A supervisor reporting into `metrics`, judging deletions by the
    /// controllers' `streams` caches.
    pub fn new(metrics: Arc<OperatorMetrics>, streams: Vec<Store<CdcStream>>) -> Self {
        Supervisor {
            metrics,
            failures: FailureCounts::new(RETRY),
            streams,
        }
    }

    /// Runs `reconcile` of `stream`, counting and timing it.
    pub async fn observe(
        &self,
        stream: &CdcStream,
        reconcile: impl Future<Output = Result<Action, ReconcileError>>,
    ) -> Result<Action, ReconcileError> {
        let started = Instant::now();
        let outcome = reconcile.await;
        let error = outcome.as_ref().err().map(ReconcileError::kind);
        self.metrics.reconciled(started.elapsed(), error);
        if outcome.is_ok() {
            self.failures.succeeded(&ObjectRef::from_obj(stream));
        }
        self.forget_deleted();
        outcome
    }

    /// When to retry `stream` after `error`: later with each failure in a row.
    pub fn retry(&self, stream: &CdcStream, error: &ReconcileError) -> Action {
        let delay = self.failures.failed(ObjectRef::from_obj(stream));
        tracing::warn!(
            stream = %stream.name_any(),
            namespace = stream.namespace().unwrap_or_default(),
            "{error}; retrying in {delay:?}"
        );
        Action::requeue(delay)
    }

    /// `stream` is gone (the controller found it no more): its failures
    /// are forgotten, so one made again under its name starts afresh.
    pub fn forget(&self, stream: &ObjectRef<CdcStream>) {
        self.failures.succeeded(stream);
    }

    /// Forgets the failures of every stream no cache holds any more.
    fn forget_deleted(&self) {
        self.failures
            .retain(|stream| self.streams.iter().any(|s| s.get(stream).is_some()));
    }

    /// How many streams have failures counted.
    pub fn failing(&self) -> usize {
        self.failures.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::test_fixtures::stream;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    #[tokio::test]
    async fn a_deleted_stream_s_failures_are_forgotten() {
        let mut cache = Writer::<CdcStream>::default();
        let orders = stream(serde_json::json!({}));
        let mut customers = orders.clone();
        customers.metadata.name = Some("customers".into());
        for s in [&orders, &customers] {
            cache.apply_watcher_event(&Event::Apply(s.clone()));
        }
        let supervisor = Supervisor::new(Arc::default(), vec![cache.as_reader()]);
        let failed = || async { Err(ReconcileError::NoNamespace("x".into())) };
        for s in [&orders, &customers] {
            let error = supervisor.observe(s, failed()).await.unwrap_err();
            let _ = supervisor.retry(s, &error);
        }
        assert_eq!(supervisor.failing(), 2);

        cache.apply_watcher_event(&Event::Delete(customers.clone()));
        let _ = supervisor.observe(&orders, failed()).await;
        assert_eq!(supervisor.failing(), 1, "customers was deleted");

        supervisor.forget(&ObjectRef::from_obj(&orders));
        assert_eq!(supervisor.failing(), 0);
    }
}
