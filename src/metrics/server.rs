//! Serves `/metrics` (OpenMetrics text) and `/healthz` over HTTP/1.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Metrics;

/// What the endpoint serves: the metrics of a stream runner or of the
/// operator, and the health the probes see.
pub trait Exposition: Send + Sync + 'static {
    /// The OpenMetrics text exposition of every series.
    fn encode(&self) -> Result<String, std::fmt::Error>;
    /// What has failed (names for the probe's answer); empty while healthy.
    fn failures(&self) -> Vec<String>;
}

impl Exposition for Metrics {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        Metrics::encode(self)
    }

    fn failures(&self) -> Vec<String> {
        self.failed_streams()
    }
}

/// The metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {address} (metrics and health endpoint): {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running metrics endpoint; stops when dropped.
pub struct MetricsServer {
    local_addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Listens on `address` (port 0 picks a free one) and serves `metrics`.
    pub async fn start<E: Exposition>(
        address: SocketAddr,
        metrics: Arc<E>,
    ) -> Result<Self, ServeError> {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| ServeError::Bind { address, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { address, source })?;
        let router = Router::new()
            .route("/metrics", get(metrics_text::<E>))
            .route("/healthz", get(healthz::<E>))
            .with_state(metrics);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "metrics endpoint stopped");
            }
        });
        tracing::info!(%local_addr, "serving /metrics and /healthz");
        Ok(MetricsServer {
            local_addr,
            stop,
            task,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

async fn metrics_text<E: Exposition>(State(metrics): State<Arc<E>>) -> Response {
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response(),
    }
}

/// 200 while nothing failed (every stream's engine runs); 503 naming what did.
async fn healthz<E: Exposition>(State(metrics): State<Arc<E>>) -> Response {
    let failed = metrics.failures();
    if failed.is_empty() {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("failed: {}\n", failed.join(", ")),
        )
            .into_response()
    }
}
