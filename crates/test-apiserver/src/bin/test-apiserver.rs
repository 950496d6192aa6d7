//! Standalone test API server, for manual use and for the test that kills
//! the process a server lives in (its pods must not survive it):
//! `cargo run -p mssql-cdc-test-apiserver --bin test-apiserver -- --listen 127.0.0.1:6443 --kubeconfig /tmp/kc [--kubelet-binary PATH]`
//! It prints `test-apiserver serving on URL` once the kubeconfig is written.

use mssql_cdc_test_apiserver::{KubeletOptions, ServerOptions, TestApiServer};
use std::path::PathBuf;

fn usage() -> ! {
    eprintln!(
        "usage: test-apiserver --listen ADDR --kubeconfig FILE [--kubelet-binary PATH] [--log-dir DIR]"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    // Whatever rustls providers the build links, this one serves.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let mut opts = ServerOptions::default();
    let mut kubeconfig = None;
    let mut binary = None;
    let mut log_dir = std::env::temp_dir().join("test-apiserver-logs");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--listen" => opts.listen = val().parse().unwrap_or_else(|_| usage()),
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(val())),
            "--kubelet-binary" => binary = Some(PathBuf::from(val())),
            "--log-dir" => log_dir = PathBuf::from(val()),
            _ => usage(),
        }
    }
    if let Some(binary) = binary {
        let _ = std::fs::create_dir_all(&log_dir);
        opts.kubelet = Some(KubeletOptions::new(binary, log_dir));
    }
    let server = match TestApiServer::start(opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("test-apiserver: {e}");
            std::process::exit(1)
        }
    };
    if let Some(path) = kubeconfig
        && let Err(e) = server.write_kubeconfig(&path)
    {
        eprintln!("test-apiserver: {e}");
        std::process::exit(1)
    }
    println!("test-apiserver serving on {}", server.url());
    let _ = tokio::signal::ctrl_c().await;
    server.shutdown().await;
}
