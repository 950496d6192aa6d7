//! TLS for TDS 7.x: the server certificate, and the framing that carries
//! the TLS handshake inside PRELOGIN (0x12) packets (MS-TDS 2.2.6.5, 3.3.5.2).
//!
//! During the handshake every TLS record travels as the payload of a
//! PRELOGIN packet; once it completes, TLS records flow directly on the
//! socket and the TDS packets travel inside them.
//!
//! That in-PRELOGIN handshake is TLS 1.2 at most. SQL Server only
//! negotiates TLS 1.3 under TDS 8.0 ("SQL Server supports TLS 1.3 when
//! TDS 8.0 is used", learn.microsoft.com .../networking/tls-1-3), and
//! TDS 7.x clients are written against that: in TLS 1.3 the client's
//! Finished is the last handshake flight and no server reply follows it,
//! so a client that only flushes its PRELOGIN-wrapped handshake bytes
//! when it next reads (FreeTDS does) leaves Finished in its output buffer
//! and sends it later, glued in front of LOGIN7 inside an application-data
//! record the server cannot decrypt. In TLS 1.2 the server's
//! ChangeCipherSpec/Finished come after the client's Finished, so every
//! client flight is followed by a read. TDS 8.0 strict connections (TLS
//! straight on the socket, MS-TDS 3.3.5.1) keep TLS 1.2 and 1.3.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::error::TdsError;
use super::packet::{HEADER_LEN, Header, encode_header, kind, status};

/// The server side TLS configuration (certificate and key).
#[derive(Clone)]
pub struct TlsSettings {
    /// TDS 7.x: handshake inside PRELOGIN packets, TLS 1.2 only.
    prelogin: Arc<rustls::ServerConfig>,
    /// TDS 8.0 strict: handshake on the socket, TLS 1.2 or 1.3.
    direct: Arc<rustls::ServerConfig>,
    chain: Vec<CertificateDer<'static>>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("certificates", &self.chain.len())
            .finish()
    }
}

impl TlsSettings {
    /// A fresh self-signed certificate for `localhost` (SAN localhost and
    /// 127.0.0.1), so the sandbox can offer TLS with no files around.
    pub fn self_signed() -> Result<Self, TdsError> {
        let cert_err = |e: rcgen::Error| TdsError::Certificate(e.to_string());
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .map_err(cert_err)?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        let key = rcgen::KeyPair::generate().map_err(cert_err)?;
        let cert = params.self_signed(&key).map_err(cert_err)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Self::from_der(vec![cert.der().clone()], key)
    }

    /// A certificate chain and private key from PEM files.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self, TdsError> {
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| TdsError::Certificate(format!("{}: {e}", cert.display())))?;
        if chain.is_empty() {
            return Err(TdsError::Certificate(format!(
                "{}: no certificate found",
                cert.display()
            )));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| TdsError::Certificate(format!("{}: {e}", key.display())))?;
        Self::from_der(chain, key)
    }

    /// A certificate chain and key already in DER form.
    pub fn from_der(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Self, TdsError> {
        let prelogin = server_config(&chain, &key, &[&rustls::version::TLS12])?;
        let direct = server_config(&chain, &key, rustls::DEFAULT_VERSIONS)?;
        Ok(Self {
            prelogin: Arc::new(prelogin),
            direct: Arc::new(direct),
            chain,
        })
    }

    /// The certificate chain the server presents (DER), e.g. for a client
    /// to trust.
    pub fn certificate_chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// TLS handshake carried in PRELOGIN packets (TDS 7.x).
    pub(crate) async fn accept_in_prelogin<S>(
        &self,
        stream: S,
    ) -> Result<TlsStream<PreloginFramed<S>>, TdsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        self.accept(&self.prelogin, PreloginFramed::new(stream, true))
            .await
    }

    /// TLS handshake directly on the socket (TDS 8.0 strict encryption).
    pub(crate) async fn accept_direct<S>(
        &self,
        stream: S,
    ) -> Result<TlsStream<PreloginFramed<S>>, TdsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        self.accept(&self.direct, PreloginFramed::new(stream, false))
            .await
    }

    async fn accept<S>(
        &self,
        config: &Arc<rustls::ServerConfig>,
        io: PreloginFramed<S>,
    ) -> Result<TlsStream<PreloginFramed<S>>, TdsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut tls = TlsAcceptor::from(config.clone())
            .accept(io)
            .await
            .map_err(|e| TdsError::Tls(e.to_string()))?;
        tls.get_mut().0.end_handshake();
        Ok(tls)
    }
}

/// A server configuration for the given TLS versions.
fn server_config(
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ServerConfig, TdsError> {
    // Both ring and aws-lc-rs are linked, so the provider is chosen
    // explicitly rather than from the process default.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| TdsError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain.to_vec(), key.clone_key())
        .map_err(|e| TdsError::Certificate(e.to_string()))?;
    // No session resumption: TLS 1.3 tickets would only be sent after the
    // handshake, and the sandbox has no use for resumption either way.
    config.send_tls13_tickets = 0;
    Ok(config)
}

/// Largest PRELOGIN packet the server sends during the handshake: the
/// default packet size, as no size has been negotiated yet.
const HANDSHAKE_PACKET: usize = 4096;

/// Strips PRELOGIN packet headers from what the TLS engine reads and wraps
/// what it writes in PRELOGIN packets, until `end_handshake` or until a
/// bare TLS record arrives where a packet header was expected; from then on
/// it passes bytes through.
pub(crate) struct PreloginFramed<S> {
    inner: S,
    framing: bool,
    header: [u8; HEADER_LEN],
    header_len: usize,
    /// Payload bytes of the current incoming packet not yet handed out.
    remaining: usize,
    /// Handshake bytes written by TLS, framed at the next flush.
    pending: Vec<u8>,
    /// Framed bytes not yet written to the socket.
    out: Vec<u8>,
    out_pos: usize,
}

impl<S> PreloginFramed<S> {
    pub(crate) fn new(inner: S, framing: bool) -> Self {
        Self {
            inner,
            framing,
            header: [0; HEADER_LEN],
            header_len: 0,
            remaining: 0,
            pending: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
        }
    }

    /// The TLS handshake is done: records now go on the socket directly.
    pub(crate) fn end_handshake(&mut self) {
        self.framing = false;
    }

    /// The socket underneath, for login-only encryption.
    pub(crate) fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> PreloginFramed<S> {
    fn poll_drain_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.out_pos < self.out.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.out[self.out_pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out_pos += n;
        }
        self.out.clear();
        self.out_pos = 0;
        Poll::Ready(Ok(()))
    }

    fn frame_pending(&mut self) {
        let cap = HANDSHAKE_PACKET - HEADER_LEN;
        let chunks = self.pending.chunks(cap).count();
        for (i, chunk) in self.pending.chunks(cap).enumerate() {
            let eom = if i + 1 == chunks {
                status::END_OF_MESSAGE
            } else {
                0
            };
            let header = encode_header(
                kind::PRELOGIN,
                eom,
                HEADER_LEN + chunk.len(),
                0,
                (i + 1) as u8,
            );
            self.out.extend_from_slice(&header);
            self.out.extend_from_slice(chunk);
        }
        self.pending.clear();
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PreloginFramed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.framing {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        while this.remaining == 0 {
            while this.header_len < HEADER_LEN {
                // One byte first: it tells a packet header from a TLS record.
                let want = if this.header_len == 0 { 1 } else { HEADER_LEN };
                let mut rb = ReadBuf::new(&mut this.header[this.header_len..want]);
                ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
                let n = rb.filled().len();
                if n == 0 {
                    if this.header_len == 0 {
                        return Poll::Ready(Ok(()));
                    }
                    return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
                }
                if this.header_len == 0 && this.header[0] != kind::PRELOGIN {
                    // A bare TLS record: the client finished its handshake
                    // and already sends application data (LOGIN7) while the
                    // TLS engine still reads. From here on bytes pass through.
                    this.framing = false;
                    if buf.remaining() == 0 {
                        return Poll::Ready(Err(invalid("empty read buffer")));
                    }
                    buf.put_slice(&this.header[..1]);
                    return Poll::Ready(Ok(()));
                }
                this.header_len += n;
            }
            this.header_len = 0;
            let header = Header::parse(&this.header).map_err(|e| invalid(&e.to_string()))?;
            this.remaining = header.payload_len();
        }
        let max = this.remaining.min(buf.remaining());
        let mut rb = ReadBuf::new(buf.initialize_unfilled_to(max));
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
        let n = rb.filled().len();
        if n == 0 && max > 0 {
            return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
        }
        buf.advance(n);
        this.remaining -= n;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PreloginFramed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.framing {
            this.pending.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        ready!(this.poll_drain_out(cx))?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.pending.is_empty() {
            this.frame_pending();
        }
        ready!(this.poll_drain_out(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain_out(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::ProtocolVersion;
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::TlsConnector;

    #[test]
    fn self_signed_certificate_builds() {
        let tls = TlsSettings::self_signed().unwrap();
        assert_eq!(tls.certificate_chain().len(), 1);
    }

    #[test]
    fn missing_pem_files_are_errors() {
        let err = TlsSettings::from_pem_files(
            Path::new("/nonexistent/c.pem"),
            Path::new("/nonexistent/k.pem"),
        );
        assert!(matches!(err, Err(TdsError::Certificate(_))));
    }

    #[tokio::test]
    async fn frames_handshake_bytes_in_prelogin_packets() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut framed = PreloginFramed::new(a, true);
        framed.write_all(&[7u8; 5000]).await.unwrap();
        framed.flush().await.unwrap();
        let mut wire = vec![0u8; 5000 + 2 * HEADER_LEN];
        b.read_exact(&mut wire).await.unwrap();
        assert_eq!(wire[0], kind::PRELOGIN);
        assert_eq!(wire[1], 0);
        assert_eq!(wire[4096], kind::PRELOGIN);
        assert_eq!(wire[4097], status::END_OF_MESSAGE);

        // Reading strips headers; a non-PRELOGIN byte ends the framing.
        let mut echo = encode_header(kind::PRELOGIN, 1, HEADER_LEN + 3, 0, 1).to_vec();
        echo.extend_from_slice(b"xyz");
        echo.extend_from_slice(&encode_header(kind::SQL_BATCH, 1, HEADER_LEN + 1, 0, 1));
        echo.push(0);
        b.write_all(&echo).await.unwrap();
        let mut got = [0u8; 3];
        framed.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"xyz");
        assert_eq!(framed.read_u8().await.unwrap(), kind::SQL_BATCH);
        assert_eq!(framed.read_u8().await.unwrap(), 1);
    }

    /// A client offering TLS 1.3 and 1.2 that trusts the server's
    /// certificate, over a stream framed like the server's.
    async fn negotiated(direct: bool) -> (Option<ProtocolVersion>, Option<ProtocolVersion>) {
        let settings = TlsSettings::self_signed().unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(settings.certificate_chain()[0].clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let (a, b) = tokio::io::duplex(1 << 16);
        let connector = TlsConnector::from(Arc::new(client));
        let name = ServerName::try_from("localhost").unwrap();
        let client = connector.connect(name, PreloginFramed::new(a, !direct));
        let server = async {
            if direct {
                settings.accept_direct(b).await
            } else {
                settings.accept_in_prelogin(b).await
            }
        };
        let (client, server) = tokio::join!(client, server);
        (
            client.unwrap().get_ref().1.protocol_version(),
            server.unwrap().get_ref().1.protocol_version(),
        )
    }

    /// TDS 7.x: the handshake in PRELOGIN packets is TLS 1.2 even when the
    /// client offers 1.3, as with SQL Server (TLS 1.3 needs TDS 8.0).
    #[tokio::test]
    async fn prelogin_handshake_is_tls12() {
        let (client, server) = negotiated(false).await;
        assert_eq!(client, Some(ProtocolVersion::TLSv1_2));
        assert_eq!(server, Some(ProtocolVersion::TLSv1_2));
    }

    /// TDS 8.0 strict: TLS 1.3 when the client offers it.
    #[tokio::test]
    async fn strict_handshake_may_be_tls13() {
        let (client, server) = negotiated(true).await;
        assert_eq!(client, Some(ProtocolVersion::TLSv1_3));
        assert_eq!(server, Some(ProtocolVersion::TLSv1_3));
    }
}
