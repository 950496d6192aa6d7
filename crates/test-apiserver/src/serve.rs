//! The HTTPS listener: TLS with the server's certificate, the verified
//! client certificate's subject handed to the router as a request
//! extension, HTTP/1.1 with upgrades. Stopping drops every connection at
//! once (watches included) and hands the listener back, which is what
//! `TestApiServer::restart` needs: the port stays bound across a restart,
//! so no other socket (another test's ephemeral client port) can take it.

use crate::auth::PeerIdentity;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower_service::Service;

/// Serves `app` on `listener` until `stop` turns true; returns the
/// listener once every connection it accepted is closed.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> TcpListener {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        let Ok((tcp, _)) = accepted else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, app) = (acceptor.clone(), app.clone());
        connections.spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    return;
                }
            };
            let peer = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| crate::tls::subject(c))
                .map(|(user, groups)| PeerIdentity { user, groups });
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    if let Some(p) = &peer {
                        req.extensions_mut().insert(p.clone());
                    }
                    let mut app = app.clone();
                    async move { app.call(req).await }
                },
            );
            let builder = auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "connection ended");
            }
        });
        while connections.try_join_next().is_some() {}
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    listener
}
