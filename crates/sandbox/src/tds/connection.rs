//! One client connection from accept to close: handshake, login through
//! the backend (or a redirect elsewhere), then the request loop of
//! [`super::session`] until the client leaves or the session is killed.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::Instrument;

use super::error::TdsError;
use super::handshake::{Handshake, handshake};
use super::login::{LoginAck, routing_tokens, success_tokens};
use super::packet::{PacketWriter, kind};
use super::session::Session;
use super::stream::{Metered, WaitMeter};
use super::tls::TlsSettings;
use super::token::{self, done, tok};
use super::{Backend, BackendSession, TdsConfig};
use crate::sql::KillSignal;

/// Runs one connection to completion; failures are logged, never raised.
pub(crate) async fn serve_connection<B: Backend>(
    tcp: TcpStream,
    backend: Arc<B>,
    tls: Arc<TlsSettings>,
    config: Arc<TdsConfig>,
    shutdown: watch::Receiver<bool>,
) {
    let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let span = tracing::info_span!("tds", %peer);
    if let Err(e) = run(tcp, backend, tls, config, shutdown)
        .instrument(span)
        .await
    {
        match e {
            TdsError::Io(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                tracing::debug!(%peer, "client disconnected")
            }
            other => tracing::warn!(%peer, error = %other, "connection closed on error"),
        }
    }
}

async fn run<B: Backend>(
    tcp: TcpStream,
    backend: Arc<B>,
    tls: Arc<TlsSettings>,
    config: Arc<TdsConfig>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), TdsError> {
    let _ = tcp.set_nodelay(true);
    let client_addr = tcp.peer_addr().ok();
    let meter = WaitMeter::default();
    let stream = Metered::new(tcp, meter.clone());
    let Handshake {
        mut transport,
        login,
    } = tokio::time::timeout(config.handshake_timeout, handshake(stream, &tls, &config))
        .await
        .map_err(|_| TdsError::HandshakeTimeout)??;
    tracing::debug!(?login, "LOGIN7 received");

    let mut request = login.request.clone();
    request.encrypted = matches!(transport, super::stream::Transport::Tls(_));
    request.client_addr = client_addr;
    let admitting = backend.clone();
    let admitted = tokio::task::spawn_blocking(move || admitting.login(&request))
        .await
        .map_err(|e| TdsError::Backend(e.to_string()))?;
    let mut session = match admitted {
        Ok(session) => session,
        Err(mut err) => {
            tracing::info!(user = %login.request.user, number = err.number, "login refused");
            if err.class <= 10 {
                err.class = 14;
            }
            let mut writer = PacketWriter::new(kind::TABULAR_RESULT, 0, 4096);
            token::message(writer.buf(), &err, &config.server_name);
            token::done(writer.buf(), tok::DONE, done::ERROR, 0, 0);
            writer.finish(&mut transport).await?;
            let _ = tokio::time::timeout(Duration::from_secs(1), transport.shutdown()).await;
            return Ok(());
        }
    };

    let packet_size = login.negotiated_packet_size(config.default_packet_size);
    let (major, minor, build) = config.version;
    let build = build.to_be_bytes();
    let database = session.database();
    let mut writer = PacketWriter::new(kind::TABULAR_RESULT, session.session_id(), 4096);
    let ack = LoginAck {
        database: &database,
        language: &config.language,
        packet_size,
        tds_version: login.negotiated_version(),
        program: &config.program_name,
        version: [major, minor, build[0], build[1]],
        server_name: &config.server_name,
        feature_ext: login.feature_ids.is_some(),
    };
    if let Some((server, port)) = backend.route_login() {
        tracing::info!(user = %login.request.user, %server, port, "login routed elsewhere");
        routing_tokens(writer.buf(), &ack, &server, port);
        let sent = writer.finish(&mut transport).await;
        let _ = tokio::task::spawn_blocking(move || session.close()).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), transport.shutdown()).await;
        return sent;
    }
    success_tokens(writer.buf(), &ack);
    if let Err(e) = writer.finish(&mut transport).await {
        let _ = tokio::task::spawn_blocking(move || session.close()).await;
        return Err(e);
    }
    writer.set_packet_size(packet_size);
    meter.take();
    tracing::info!(user = %login.request.user, database = %database, packet_size, "login succeeded");

    let kill = session.kill_signal();
    let (read_half, write_half) = tokio::io::split(transport);
    let mut conn = Session::start(
        session,
        read_half,
        write_half,
        writer,
        meter,
        config.clone(),
    );
    let served = {
        let serving = conn.run(shutdown);
        tokio::pin!(serving);
        tokio::select! {
            outcome = &mut serving => Some(outcome),
            () = killed(kill.as_ref()) => None,
        }
    };
    let outcome = served.unwrap_or_else(|| {
        // KILL: whatever was being sent stops here, mid-packet or not; the
        // running request is cancelled and the connection closed.
        tracing::info!("session killed; closing its connection");
        conn.cancel_request();
        Ok(())
    });
    conn.close().await;
    outcome
}

/// Resolves when the session is killed; never for a session that cannot be.
async fn killed(kill: Option<&KillSignal>) {
    match kill {
        Some(kill) => kill.killed().await,
        None => std::future::pending().await,
    }
}
