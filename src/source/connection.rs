//! Opening a tiberius session with the manifest's TLS policy.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tiberius::{AuthMethod, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use super::SourceError;
use crate::spec::{Encrypt, SourceConfig};

/// A connected SQL Server session.
pub type SqlClient = tiberius::Client<Compat<TcpStream>>;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a query may go without sending its next part. A large batch's
/// change query sorts before its first row arrives, so tiberius' default of
/// 30 s is too short; a server silent for this long is treated as gone.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// The tiberius configuration for `source`. `Encrypt::Off` sends no TLS at
/// all (tiberius' `NotSupported`). `Optional` asks for TLS on the whole
/// session (tiberius' `On`), so a server that offers TLS encrypts
/// everything; tiberius' `Off` would encrypt the login only and send the
/// rows in plain text. A server that offers no TLS is refused, as with
/// `Required`: the login is never sent in the clear unless the manifest
/// says `off`.
pub fn client_config(source: &SourceConfig, password: &SecretString) -> Config {
    let mut config = Config::new();
    config.host(&source.host);
    config.port(source.port);
    config.database(&source.database);
    config.application_name("mssql-cdc");
    config.authentication(AuthMethod::sql_server(
        &source.username,
        password.expose_secret(),
    ));
    config.encryption(match source.encrypt {
        Encrypt::Required => EncryptionLevel::Required,
        Encrypt::Optional => EncryptionLevel::On,
        Encrypt::Off => EncryptionLevel::NotSupported,
    });
    if source.trust_server_certificate {
        config.trust_cert();
    }
    config.command_timeout(Some(COMMAND_TIMEOUT));
    config
}

/// How many redirects a login follows: Azure SQL's redirect policy sends a
/// client once from the gateway to the node; more is a loop.
const MAX_REDIRECTS: usize = 3;

/// Connects to the source (each attempt bounded by a timeout), following
/// the server's redirects (`ENVCHANGE` routing, as Azure SQL's redirect
/// connection policy and Always On read-only routing send).
pub async fn connect(
    source: &SourceConfig,
    password: &SecretString,
) -> Result<SqlClient, SourceError> {
    let mut config = client_config(source, password);
    let mut address = format!("{}:{}", source.host, source.port);
    for _ in 0..MAX_REDIRECTS {
        match login(&config, &address).await {
            Err(SourceError::Sql {
                source: tiberius::error::Error::Routing { host, port },
                ..
            }) => {
                tracing::info!(from = %address, to = %format!("{host}:{port}"), "SQL Server redirected the login");
                config.host(&host);
                config.port(port);
                address = format!("{host}:{port}");
            }
            other => return other,
        }
    }
    login(&config, &address).await
}

/// One login at `address`.
async fn login(config: &Config, address: &str) -> Result<SqlClient, SourceError> {
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| SourceError::ConnectTimeout {
            address: address.to_string(),
            seconds: CONNECT_TIMEOUT.as_secs(),
        })?
        .map_err(|source| SourceError::Connect {
            address: address.to_string(),
            source,
        })?;
    tcp.set_nodelay(true)
        .map_err(|source| SourceError::Connect {
            address: address.to_string(),
            source,
        })?;
    let connecting = tiberius::Client::connect(config.clone(), tcp.compat_write());
    tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| SourceError::ConnectTimeout {
            address: address.to_string(),
            seconds: CONNECT_TIMEOUT.as_secs(),
        })?
        .map_err(SourceError::sql(format!("login to {address}")))
}
