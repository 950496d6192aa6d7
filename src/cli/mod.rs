//! The binary's commands that run streams, and how they print progress.

pub mod bench;
pub mod console;
pub mod demo;
pub mod maintain;
pub mod operator;
pub mod run;
pub mod worker;

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

/// `--storage-option KEY=VALUE` for commands that take table URIs instead
/// of a manifest. The store's environment variables (`AWS_*`, `AZURE_*`)
/// apply as in a manifest; these override them.
#[derive(clap::Args, Clone, Default)]
pub struct StorageOptionArgs {
    /// An object_store option (endpoint, region...); repeat for several.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub storage_options: Vec<(String, String)>,
}

impl StorageOptionArgs {
    /// The options for one location.
    pub fn for_location(
        &self,
        location: &mssql_cdc::lake::StorageLocation,
    ) -> mssql_cdc::lake::StorageOptions {
        let given: std::collections::BTreeMap<String, String> =
            self.storage_options.iter().cloned().collect();
        location.options(&given, std::env::vars())
    }
}

/// Values often are credentials, so errors never repeat the argument.
fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        Some(_) => Err("the KEY before '=' is empty".to_string()),
        None => Err("expected KEY=VALUE: there is no '='".to_string()),
    }
}
