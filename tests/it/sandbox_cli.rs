//! `mssql-cdc sandbox` as a person runs it: start with a script, connect,
//! stop with Ctrl-C.

use std::process::Stdio;
use std::time::Duration;

use tiberius::{AuthMethod, Config, EncryptionLevel};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::support::{TestServer, scalar};

const PASSWORD: &str = "Cli-Sandbox-Pa55!";

#[tokio::test]
async fn sandbox_runs_a_script_serves_clients_and_stops_on_ctrl_c() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sandbox/shop.sql");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["sandbox", "--listen", "127.0.0.1:0", "--script", script])
        .env("MSSQL_CDC_SANDBOX_SA_PASSWORD", PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");

    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("stdout readable") {
            if let Some(rest) = line.split("listening on ").nth(1) {
                return rest.split_whitespace().next().map(str::to_string);
            }
        }
        None
    })
    .await
    .expect("the sandbox reports its address in time")
    .expect("a 'listening on' line");
    let addr: std::net::SocketAddr = addr.parse().expect("an address");

    let server = TestServer::start().await; // installs the TLS provider; unused otherwise
    let mut config = Config::new();
    config.host(addr.ip());
    config.port(addr.port());
    config.authentication(AuthMethod::sql_server("sa", PASSWORD));
    config.encryption(EncryptionLevel::Required);
    config.trust_cert();
    config.database("shop");
    let mut client = server.connect_with(config).await.expect("a client logs in");
    let customers: Option<i32> = scalar(&mut client, "SELECT COUNT(*) FROM dbo.customers").await;
    assert!(customers.unwrap_or(0) > 0, "the script's rows are there");
    drop(client);

    let pid = child.id().expect("still running").to_string();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the sandbox stops after Ctrl-C")
        .expect("exit status");
    assert!(exit.success(), "clean exit, got {exit:?}");
}
