//! A SQL Server to test against: the sandbox, started in-process on a free
//! loopback port, or the real server named by `MSSQL_CDC_TEST_URL`.

use std::net::SocketAddr;

use mssql_cdc_sandbox::{Sandbox, SandboxOptions};
use tiberius::{AuthMethod, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

pub type Client = tiberius::Client<Compat<TcpStream>>;

/// The environment variable that points the tests at a real SQL Server.
pub const TEST_URL_VAR: &str = "MSSQL_CDC_TEST_URL";

const SANDBOX_SA_PASSWORD: &str = "It-Sandbox-Pa55word!";

/// A server address and SQL login, for manifests.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
}

impl Endpoint {
    /// Reads `Server=tcp:host,port;User Id=...;Password=...` (ADO.NET).
    fn from_ado(url: &str) -> Self {
        let mut endpoint = Endpoint {
            host: "127.0.0.1".into(),
            port: 1433,
            user: String::new(),
            password: String::new(),
        };
        for part in url.split(';') {
            let Some((key, value)) = part.split_once('=') else {
                continue;
            };
            let value = value.trim();
            match key.trim().to_ascii_lowercase().as_str() {
                "server" | "data source" | "address" => {
                    let server = value.trim_start_matches("tcp:");
                    let (host, port) = server.split_once(',').unwrap_or((server, "1433"));
                    endpoint.host = host.to_string();
                    endpoint.port = port.trim().parse().expect("MSSQL_CDC_TEST_URL port");
                }
                "user id" | "uid" | "user" => endpoint.user = value.to_string(),
                "password" | "pwd" => endpoint.password = value.to_string(),
                _ => {}
            }
        }
        endpoint
    }
}

pub struct TestServer {
    target: Target,
}

enum Target {
    Sandbox(Sandbox),
    Real(String),
    /// A sandbox in another process (a pod), by connection string.
    RemoteSandbox(String),
}

impl TestServer {
    /// Starts a sandbox, or picks up the real server from the environment.
    pub async fn start() -> Self {
        install_crypto_provider();
        let target = match std::env::var(TEST_URL_VAR) {
            Ok(url) if !url.trim().is_empty() => Target::Real(url),
            _ => {
                let options = SandboxOptions {
                    listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                    sa_password: SANDBOX_SA_PASSWORD.to_string(),
                    ..SandboxOptions::default()
                };
                Target::Sandbox(Sandbox::start(options).await.expect("sandbox starts"))
            }
        };
        Self { target }
    }

    /// A sandbox configured by `configure`, for tests of server settings a
    /// real server cannot be switched to; `None` when the tests run against
    /// a real server.
    pub async fn sandbox_with(configure: impl FnOnce(&mut SandboxOptions)) -> Option<Self> {
        install_crypto_provider();
        if std::env::var(TEST_URL_VAR).is_ok_and(|url| !url.trim().is_empty()) {
            return None;
        }
        let mut options = SandboxOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            sa_password: SANDBOX_SA_PASSWORD.to_string(),
            ..SandboxOptions::default()
        };
        configure(&mut options);
        let sandbox = Sandbox::start(options).await.expect("sandbox starts");
        Some(Self {
            target: Target::Sandbox(sandbox),
        })
    }

    /// A sandbox even when the tests run against a real server, for tests
    /// whose databases and logins have fixed names (the Kubernetes
    /// examples'): `script` runs as `sa` before it accepts clients.
    pub async fn sandbox_with_script(script: String) -> Self {
        install_crypto_provider();
        let options = SandboxOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            sa_password: SANDBOX_SA_PASSWORD.to_string(),
            script: Some(script),
            ..SandboxOptions::default()
        };
        let sandbox = Sandbox::start(options).await.expect("sandbox starts");
        Self {
            target: Target::Sandbox(sandbox),
        }
    }

    /// The sandbox that `url` (ADO.NET) reaches, running elsewhere (as a
    /// pod of a real cluster): its clock can still be moved.
    pub fn remote_sandbox(url: String) -> Self {
        install_crypto_provider();
        Self {
            target: Target::RemoteSandbox(url),
        }
    }

    /// True when the tests run against the built-in sandbox (its clock can
    /// be moved with `sandbox.sp_advance_clock`).
    pub fn is_sandbox(&self) -> bool {
        matches!(self.target, Target::Sandbox(_) | Target::RemoteSandbox(_))
    }

    /// An administrator's config with full TLS (the server's certificate
    /// trusted), the mode production readers use.
    pub fn config(&self) -> Config {
        let mut config = match &self.target {
            Target::Sandbox(sandbox) => {
                let mut config = Config::new();
                let addr = sandbox.local_addr();
                config.host(addr.ip());
                config.port(addr.port());
                config.authentication(AuthMethod::sql_server("sa", SANDBOX_SA_PASSWORD));
                config
            }
            Target::Real(url) | Target::RemoteSandbox(url) => {
                Config::from_ado_string(url).expect("the test server's connection string parses")
            }
        };
        config.encryption(EncryptionLevel::Required);
        config.trust_cert();
        config
    }

    /// Where the engine under test connects: host, port, login, password.
    pub fn endpoint(&self) -> Endpoint {
        match &self.target {
            Target::Sandbox(sandbox) => {
                let addr = sandbox.local_addr();
                Endpoint {
                    host: addr.ip().to_string(),
                    port: addr.port(),
                    user: "sa".into(),
                    password: SANDBOX_SA_PASSWORD.into(),
                }
            }
            Target::Real(url) | Target::RemoteSandbox(url) => Endpoint::from_ado(url),
        }
    }

    /// A config for another login, same server and TLS settings.
    pub fn config_as(&self, user: &str, password: &str) -> Config {
        let mut config = self.config();
        config.authentication(AuthMethod::sql_server(user, password));
        config
    }

    pub async fn connect(&self) -> Client {
        self.connect_with(self.config())
            .await
            .expect("connects as administrator")
    }

    /// An administrator's connection whose initial database is `database`.
    pub async fn connect_to(&self, database: &str) -> Client {
        let mut config = self.config();
        config.database(database);
        self.connect_with(config)
            .await
            .expect("connects as administrator")
    }

    pub async fn connect_with(&self, config: Config) -> tiberius::Result<Client> {
        let tcp = TcpStream::connect(config.get_addr()).await?;
        tcp.set_nodelay(true)?;
        tiberius::Client::connect(config, tcp.compat_write()).await
    }

    /// A new database with a unique name, and a client using it. Tests own
    /// their databases, so they run in parallel and against a shared real
    /// server.
    pub async fn scratch_database(&self) -> (Client, String) {
        let name = format!("it_{}", uuid::Uuid::new_v4().simple());
        let mut admin = self.connect().await;
        run(&mut admin, &format!("CREATE DATABASE [{name}]"))
            .await
            .expect("create database");
        drop(admin);
        (self.connect_to(&name).await, name)
    }
}

/// SQL Server's transient errors (issue 15: Always On, a deadlock, Azure
/// SQL's throttling and failovers) with a severity each comes with: the
/// engine must retry every one of them.
pub const TRANSIENT_ERRORS: [(u32, u8); 11] = [
    (976, 14),
    (978, 14),
    (983, 14),
    (1205, 13),
    (10928, 20),
    (10929, 20),
    (40143, 16),
    (40197, 20),
    (40501, 20),
    (40540, 16),
    (40613, 17),
];

/// The SQL Server error a failed call carries: (number, class, state).
pub fn server_error(error: &tiberius::error::Error) -> Option<(u32, u8, u8)> {
    match error {
        tiberius::error::Error::Server(token) => Some((token.code(), token.class(), token.state())),
        _ => None,
    }
}

/// Both ring and aws-lc-rs are linked, so rustls needs a process default.
fn install_crypto_provider() {
    // Another test may have installed it already; either way one is in place.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Runs a batch to the end and returns every result set, or the first error
/// wherever in the response it came.
pub async fn run(client: &mut Client, sql: &str) -> tiberius::Result<Vec<Vec<tiberius::Row>>> {
    client.simple_query(sql).await?.into_results().await
}

/// Runs a parameterised statement (sp_executesql) and returns its first
/// result set.
pub async fn query(
    client: &mut Client,
    sql: &str,
    params: &[&dyn tiberius::ToSql],
) -> tiberius::Result<Vec<tiberius::Row>> {
    client.query(sql, params).await?.into_first_result().await
}

/// The single value of a one-row, one-column batch.
pub async fn scalar<T: tiberius::FromSqlOwned>(client: &mut Client, sql: &str) -> Option<T> {
    let rows = run(client, sql).await.expect("query runs");
    let row = rows.into_iter().flatten().next().expect("a row");
    let cell = row.into_iter().next().expect("a column");
    T::from_sql_owned(cell).expect("value converts")
}
