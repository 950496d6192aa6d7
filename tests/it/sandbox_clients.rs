//! Third-party TDS clients against the sandbox's TDS server: FreeTDS's
//! `tsql` in each of its encryption modes.
//!
//! These always run against the built-in sandbox, also when
//! `MSSQL_CDC_TEST_URL` names a real server: they check our server's
//! protocol layer, not the T-SQL the other modules share with SQL Server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mssql_cdc_sandbox::{Sandbox, SandboxOptions};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

const PASSWORD: &str = "Clients-Sandbox-Pa55!";
/// One `tsql` run: connect, login, a couple of batches, exit.
const TSQL_TIMEOUT: Duration = Duration::from_secs(60);

/// The `tsql` executable on PATH, or a failure that says how to get it:
/// a missing client must not turn into a passing test.
fn tsql() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("tsql"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "FreeTDS `tsql` is not on PATH. scripts/test installs it \
                 (apt-get install freetds-bin); install it and run again."
            )
        })
}

async fn start_sandbox() -> Sandbox {
    let options = SandboxOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        sa_password: PASSWORD.to_string(),
        ..SandboxOptions::default()
    };
    Sandbox::start(options).await.expect("sandbox starts")
}

/// A directory of its own under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "mssql-cdc-freetds-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&dir).expect("temp dir");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `script` through `tsql` with a freetds.conf naming the server
/// `sandbox` and the given `encryption` setting (off, request, require);
/// returns stdout, panicking with both streams if `tsql` failed.
async fn run_tsql(tsql: &Path, addr: SocketAddr, encryption: &str, script: &str) -> String {
    let dir = TempDir::new();
    let conf = dir.path().join("freetds.conf");
    std::fs::write(
        &conf,
        format!(
            "[sandbox]\n\thost = {}\n\tport = {}\n\ttds version = 7.4\n\tencryption = {encryption}\n",
            addr.ip(),
            addr.port()
        ),
    )
    .expect("freetds.conf written");

    let mut child = Command::new(tsql)
        .args(["-S", "sandbox", "-U", "sa", "-P", PASSWORD])
        .env("FREETDSCONF", &conf)
        .env_remove("FREETDS")
        .env_remove("TDSVER")
        .env_remove("TDSDUMP")
        .env_remove("TDSHOST")
        .env_remove("TDSPORT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("tsql starts");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let script = format!("{script}\nexit\n");
    let output = tokio::time::timeout(TSQL_TIMEOUT, async move {
        stdin
            .write_all(script.as_bytes())
            .await
            .expect("script written to tsql");
        drop(stdin);
        child.wait_with_output().await.expect("tsql runs")
    })
    .await
    .unwrap_or_else(|_| panic!("tsql with encryption = {encryption} did not finish in time"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stderr.contains("Error"),
        "tsql with encryption = {encryption} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    stdout
}

/// FreeTDS's three encryption settings, each mapped onto its PRELOGIN
/// ENCRYPTION value (MS-TDS 2.2.6.5): `off` sends ENCRYPT_NOT_SUP (no TLS),
/// `request` ENCRYPT_OFF (TLS around LOGIN7 only), `require` ENCRYPT_ON
/// (TLS for the session). Both TLS modes do the handshake inside PRELOGIN
/// packets (MS-TDS 3.3.5.2), which broke when the server chose TLS 1.3.
#[tokio::test]
async fn freetds_tsql_logs_in_and_queries_in_every_encryption_mode() {
    let tsql = tsql();
    let sandbox = start_sandbox().await;
    let addr = sandbox.local_addr();
    // The session's own view of its encryption, and a value long enough to
    // take several TDS packets (and TLS records) on the way back.
    let script = "SELECT 'freetds' + '_ok' AS probe, c.encrypt_option \
                  FROM sys.dm_exec_connections AS c WHERE c.session_id = @@SPID\n\
                  go\n\
                  SELECT LEN(REPLICATE(CAST('ab' AS varchar(max)), 6000)) AS n, \
                  REPLICATE(CAST('ab' AS varchar(max)), 6000) AS big\n\
                  go";
    let big = "ab".repeat(6000);
    for (encryption, encrypted) in [("off", "FALSE"), ("request", "FALSE"), ("require", "TRUE")] {
        let stdout = run_tsql(&tsql, addr, encryption, script).await;
        assert!(
            stdout.contains(&format!("freetds_ok\t{encrypted}")),
            "encryption = {encryption}: expected the probe row with encrypt_option {encrypted}:\n{stdout}"
        );
        assert!(
            stdout.contains(&format!("12000\t{big}")),
            "encryption = {encryption}: the 12000-character value did not come back whole:\n{stdout}"
        );
    }
}
