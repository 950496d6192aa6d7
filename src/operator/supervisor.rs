//! What happens around every reconcile, whatever it does: its outcome and
//! duration go into the operator's metrics, and a failing stream is retried
//! with a growing delay ([`super::backoff`]) that a success resets.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use crate::spec::CdcStream;

use super::backoff::FailureCounts;
use super::controller::ReconcileError;
use super::metrics::OperatorMetrics;

/// Shared by every reconcile of one controller run.
pub struct Supervisor {
    metrics: Arc<OperatorMetrics>,
    failures: FailureCounts,
}

impl Supervisor {
    /// A supervisor reporting into `metrics`.
    pub fn new(metrics: Arc<OperatorMetrics>) -> Self {
        Supervisor {
            metrics,
            failures: FailureCounts::default(),
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
}
