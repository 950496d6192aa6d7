//! The worker's side of the status: an engine [`Observer`] that keeps the
//! latest progress, and a task that applies it to `status.progress` with
//! server-side apply under the worker's own field manager.

use std::sync::Arc;

use kube::Api;
use kube::api::{Patch, PatchParams};
use tokio::sync::watch;

use crate::engine::Observer;
use crate::lake::facts::FactRow;
use crate::spec::{API_VERSION, CdcStream, KIND, Progress};

use super::progress::progress_of;

/// The field manager of everything the worker writes.
pub const WORKER_FIELD_MANAGER: &str = "mssql-cdc-worker";

/// Why the worker could not report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The API server refused or could not be reached.
    #[error("cannot patch the status of CdcStream {name}: {source}")]
    Patch {
        /// The stream.
        name: String,
        /// What the client said.
        source: kube::Error,
    },
}

/// Hands each batch's progress to [`publish_progress`]; only the latest
/// counts, so a slow API server never holds the engine back.
#[derive(Debug, Clone)]
pub struct ProgressObserver {
    latest: Arc<watch::Sender<Option<Progress>>>,
}

impl ProgressObserver {
    /// An observer and the receiver [`publish_progress`] reads from.
    pub fn new() -> (Self, watch::Receiver<Option<Progress>>) {
        let (sender, receiver) = watch::channel(None);
        (
            ProgressObserver {
                latest: Arc::new(sender),
            },
            receiver,
        )
    }
}

impl Observer for ProgressObserver {
    fn snapshot_done(&self, row: &FactRow) {
        self.batch_done(row);
    }

    fn batch_done(&self, row: &FactRow) {
        if let Some(progress) = progress_of(row) {
            self.latest.send_replace(Some(progress));
        }
    }
}

/// The server-side apply body that sets `status.progress`.
pub fn progress_patch(name: &str, progress: &Progress) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "status": {"progress": progress},
    })
}

/// Applies every new progress until the observer is dropped, then the last
/// one. A failed patch is logged and retried with the next progress.
pub async fn publish_progress(
    api: Api<CdcStream>,
    name: String,
    mut latest: watch::Receiver<Option<Progress>>,
) {
    loop {
        let closed = latest.changed().await.is_err();
        let progress = latest.borrow_and_update().clone();
        if let Some(progress) = progress
            && let Err(error) = apply_progress(&api, &name, &progress).await
        {
            tracing::warn!("{error}");
        }
        if closed {
            return;
        }
    }
}

/// One server-side apply of `status.progress`.
pub async fn apply_progress(
    api: &Api<CdcStream>,
    name: &str,
    progress: &Progress,
) -> Result<(), ReportError> {
    let params = PatchParams::apply(WORKER_FIELD_MANAGER);
    api.patch_status(name, &params, &Patch::Apply(progress_patch(name, progress)))
        .await
        .map(|_| ())
        .map_err(|source| ReportError::Patch {
            name: name.to_string(),
            source,
        })
}
