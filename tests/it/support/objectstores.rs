//! Object stores to test the lake layer on: moto (S3) and Azurite (Azure
//! Blob Storage), each started on a free loopback port for one test, plus a
//! local directory behind the same [`TestStore`] interface.
//!
//! A server is killed when its handle is dropped. Each gets a bucket or
//! container with a unique name; tables and checkpoints live under its
//! `lake/` prefix.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mssql_cdc::lake::{StorageLocation, StorageOptions};
use tempfile::TempDir;

use super::http::free_port;
use super::tools;

/// How long a server may take to listen.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long creating a bucket or container may take.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// The pause between two readiness polls (each wait has a deadline).
const POLL: Duration = Duration::from_millis(50);

/// Tries with a new port when a server exits before listening (another
/// process may have taken the port between picking and binding it).
const START_ATTEMPTS: usize = 3;

/// Azurite's well-known development account and key (public, documented
/// by Microsoft for the emulator).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

const CREATE_BUCKET_PY: &str = include_str!("py/create_bucket.py");

/// A place to put tables and checkpoints, as a stream's manifest names it.
pub trait TestStore {
    /// The base URI (`s3://bucket/lake`, `abfss://...`, a local path).
    fn base_uri(&self) -> String;

    /// The manifest's `storageOptions` for this store.
    fn options(&self) -> BTreeMap<String, String>;

    /// `name` under the base URI, parsed, with its storage options (the
    /// process environment is left out so tests do not depend on it).
    fn location(&self, name: &str) -> (StorageLocation, StorageOptions) {
        let uri = format!("{}/{name}", self.base_uri().trim_end_matches('/'));
        let location = StorageLocation::parse(&uri)
            .unwrap_or_else(|e| panic!("test location {uri} parses: {e}"));
        let options = location.options(&self.options(), std::iter::empty());
        (location, options)
    }
}

/// A local directory, removed on drop.
pub struct LocalStore {
    dir: TempDir,
}

impl LocalStore {
    pub fn new() -> Self {
        LocalStore {
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    /// The directory of `name` (for readers that take a path).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl TestStore for LocalStore {
    fn base_uri(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn options(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
}

/// moto's S3 server with one fresh bucket.
pub struct Moto {
    server: Server,
    bucket: String,
    lake: std::sync::Mutex<String>,
}

impl Moto {
    /// Starts moto and creates a bucket. `None` when moto is missing and
    /// missing tools are allowed (see [`tools::ALLOW_MISSING_VAR`]).
    pub async fn start() -> Option<Self> {
        Self::with_bucket(&unique_name()).await
    }

    /// Starts moto with the bucket `bucket` (an example's own).
    pub async fn with_bucket(bucket: &str) -> Option<Self> {
        let program = tools::MOTO.find()?;
        let python = tools::PYTHON.find()?;
        // Buckets in the path only: pods reach moto by a host name
        // (host.harness.internal), whose first label it would otherwise
        // take for a bucket.
        let env = [("S3_IGNORE_SUBDOMAIN_BUCKETNAME", "true")];
        let server = Server::start("moto", &program, &env, |port| {
            vec![
                "-H".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string(),
            ]
        })
        .await;
        create(&python, &server, &["s3", &server.port.to_string(), bucket]).await;
        Some(Moto {
            server,
            bucket: bucket.to_string(),
            lake: std::sync::Mutex::new("lake".into()),
        })
    }

    /// Points [`TestStore::base_uri`] at a new, empty folder of the bucket.
    #[cfg(feature = "failpoints")]
    pub fn fresh_prefix(&self) {
        *self.lake.lock().expect("lock") = unique_name();
    }

    /// moto's address.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.server.port)
    }
}

impl TestStore for Moto {
    fn base_uri(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.lake.lock().expect("lock"))
    }

    fn options(&self) -> BTreeMap<String, String> {
        let endpoint = format!("http://127.0.0.1:{}", self.server.port);
        [
            ("aws_endpoint_url", endpoint.as_str()),
            ("aws_allow_http", "true"),
            ("aws_region", "us-east-1"),
            ("aws_access_key_id", "moto-test-key"),
            ("aws_secret_access_key", "moto-test-secret"),
            // Create-only puts (`If-None-Match: *`): what fences Delta
            // commits and checkpoint plans on S3.
            ("aws_conditional_put", "etag"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// Azurite's Blob service with one fresh container.
pub struct Azurite {
    server: Server,
    container: String,
    account: String,
    lake: std::sync::Mutex<String>,
}

impl Azurite {
    /// Starts Azurite and creates a container. `None` when Azurite is
    /// missing and missing tools are allowed.
    pub async fn start() -> Option<Self> {
        Self::with_account(AZURITE_ACCOUNT, AZURITE_KEY, &unique_name()).await
    }

    /// Starts Azurite serving only the storage account `account` with
    /// `key` (an example's own), with the container `container`.
    pub async fn with_account(account: &str, key: &str, container: &str) -> Option<Self> {
        let program = tools::AZURITE.find()?;
        let python = tools::PYTHON.find()?;
        let accounts = format!("{account}:{key}");
        // In memory, so nothing lands on disk (Azurite refuses --location
        // with it; its working directory is the server's temporary one).
        // Without --disableTelemetry Azurite tries to reach the internet.
        // The account is always the path's first segment: pods reach
        // Azurite by a host name (host.harness.internal), whose first label
        // it would otherwise take for the account.
        let env = [("AZURITE_ACCOUNTS", accounts.as_str())];
        let server = Server::start("azurite", &program, &env, |port| {
            [
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                &port.to_string(),
                "--inMemoryPersistence",
                "--disableTelemetry",
                "--skipApiVersionCheck",
                "--loose",
                "--disableProductStyleUrl",
            ]
            .map(String::from)
            .to_vec()
        })
        .await;
        let port = server.port.to_string();
        let args = ["azure", &port, container, account, key];
        create(&python, &server, &args).await;
        Some(Azurite {
            server,
            container: container.to_string(),
            account: account.to_string(),
            lake: std::sync::Mutex::new("lake".into()),
        })
    }

    /// Points [`TestStore::base_uri`] at a new, empty folder of the container.
    #[cfg(feature = "failpoints")]
    pub fn fresh_prefix(&self) {
        *self.lake.lock().expect("lock") = unique_name();
    }

    /// The Blob endpoint of the account, as `azure_storage_endpoint` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{}", self.server.port, self.account)
    }
}

impl TestStore for Azurite {
    /// The ADLS Gen2 form users write; the account in the host is the
    /// emulator's, and `azure_storage_endpoint` sends requests to Azurite.
    fn base_uri(&self) -> String {
        format!(
            "abfss://{}@{AZURITE_ACCOUNT}.dfs.core.windows.net/{}",
            self.container,
            self.lake.lock().expect("lock")
        )
    }

    fn options(&self) -> BTreeMap<String, String> {
        let endpoint = format!("http://127.0.0.1:{}/{AZURITE_ACCOUNT}", self.server.port);
        [
            ("azure_storage_account_name", AZURITE_ACCOUNT),
            ("azure_storage_account_key", AZURITE_KEY),
            ("azure_storage_endpoint", endpoint.as_str()),
            ("azure_allow_http", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// A bucket or container name: lower-case letters, digits and dashes, unique.
fn unique_name() -> String {
    format!("it-{}", uuid::Uuid::new_v4().simple())
}

/// Runs create_bucket.py with `args`; fails the test with its message.
async fn create(python: &Path, server: &Server, args: &[&str]) {
    let output = tools::run_python(python, CREATE_BUCKET_PY, args, CREATE_TIMEOUT).await;
    assert!(
        output.status.success(),
        "creating {args:?} failed: {}\n{} log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.name,
        server.log()
    );
}

/// A server process listening on a loopback port; killed on drop.
struct Server {
    name: &'static str,
    child: Child,
    port: u16,
    /// Working directory and log file; removed after the process is gone.
    dir: TempDir,
}

impl Server {
    /// Starts `program` with the arguments `args(port)` gives, in a
    /// temporary working directory, and waits until it accepts connections
    /// on the port.
    async fn start(
        name: &'static str,
        program: &Path,
        env: &[(&str, &str)],
        args: impl Fn(u16) -> Vec<String>,
    ) -> Self {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::tempdir().expect("temporary directory");
            let port = free_port();
            let log = File::create(dir.path().join("server.log")).expect("server log file");
            let child = Command::new(program)
                .args(args(port))
                .envs(env.iter().copied())
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file handle"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("{name} ({}) starts: {e}", program.display()));
            let mut server = Server {
                name,
                child,
                port,
                dir,
            };
            match server.wait_listening().await {
                Ok(()) => return server,
                Err(reason) => failures.push(format!("port {port}: {reason}\n{}", server.log())),
            }
        }
        panic!(
            "{name} did not start after {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n")
        );
    }

    async fn wait_listening(&mut self) -> Result<(), String> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Err(format!("exited with {status} before listening"));
            }
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("not listening after {START_TIMEOUT:?}"));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Already exited is fine; either way reap it so no zombie remains.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
