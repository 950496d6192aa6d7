//! The binary's commands: running streams (and how they print progress)
//! and querying the lake (`sql`, `health`, `freshness`).

pub mod bench;
pub mod bench_checkpoint;
pub mod bench_measure;
pub mod bench_requests;
pub mod bench_requests_model;
pub mod bench_shape;
pub mod bench_silver;
pub mod bench_source;
pub mod bench_source_tables;
pub mod bench_source_tables_side;
pub mod bench_table_age;
pub mod capture_monitor;
pub mod console;
pub mod demo;
pub mod freshness;
pub mod generate_streams;
pub mod health;
pub mod lake_query;
pub mod maintain;
pub mod operator;
pub mod progress_log;
pub mod run;
pub mod source_discovery;
pub mod source_members;
pub mod source_report;
pub mod sql;
pub mod worker;
pub mod worker_source;

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

/// `KEY=VALUE` (the value may contain `=`). Values often are credentials,
/// so errors never repeat the argument.
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        Some(_) => Err("the KEY before '=' is empty".to_string()),
        None => Err("expected KEY=VALUE: there is no '='".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_key_value;

    #[test]
    fn key_value_splits_at_the_first_equals_and_never_echoes_the_value() {
        assert_eq!(
            parse_key_value("a=b=c").unwrap(),
            ("a".into(), "b=c".into())
        );
        assert!(parse_key_value("=x").is_err());
        let error = parse_key_value("s3cret-token").unwrap_err();
        assert!(!error.contains("s3cret"), "{error}");
    }
}
