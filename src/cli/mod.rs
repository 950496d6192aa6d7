//! The binary's commands: running streams (and how they print progress)
//! and querying the lake (`sql`, `health`, `freshness`).

pub mod bench;
pub mod console;
pub mod demo;
pub mod freshness;
pub mod health;
pub mod lake_query;
pub mod run;
pub mod sql;

/// Ctrl-C, or SIGTERM as Kubernetes sends it.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
