//! Prometheus metrics of running streams, fed by the engine's
//! [`Observer`](crate::engine::Observer) events, and the small HTTP server
//! that exposes them (`/metrics`) with a liveness probe (`/healthz`).
//!
//! `registry` holds the series and turns engine events into them; `server`
//! serves them. `run` uses both for one stream; a worker running several
//! streams registers one observer per stream on the same [`Metrics`].

mod registry;
mod server;

pub use registry::{Metrics, StreamObserver};
pub use server::{Exposition, MetricsServer, ServeError};
