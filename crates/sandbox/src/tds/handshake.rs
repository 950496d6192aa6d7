//! Connection setup: PRELOGIN, the TLS decision and handshake, LOGIN7
//! (MS-TDS 3.3.5.1 - 3.3.5.4).
//!
//! Encryption follows the client's PRELOGIN ENCRYPTION option:
//! ENCRYPT_NOT_SUP gets no TLS; ENCRYPT_OFF gets TLS for the LOGIN7
//! message only - the client drops TLS right after sending LOGIN7, so the
//! login response is already clear text; ENCRYPT_ON/REQ get TLS for the
//! whole session. A connection whose first byte is a TLS record (0x16)
//! is TDS 8.0 "strict": TLS first, then PRELOGIN inside it.
//!
//! The TLS handshake carried in PRELOGIN packets (MS-TDS 3.3.5.2) is
//! TLS 1.2, as with SQL Server, which offers TLS 1.3 only under TDS 8.0;
//! see `tls.rs` for why TDS 7.x clients (FreeTDS) break under 1.3.

use tokio::io::AsyncWriteExt;

use super::TdsConfig;
use super::error::TdsError;
use super::login::Login7;
use super::packet::{PacketWriter, kind, read_message};
use super::prelogin::{ClientPrelogin, Encryption, build_response};
use super::stream::{Metered, Transport};
use super::tls::TlsSettings;

/// First byte of a TLS handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// PRELOGIN and LOGIN7 are small; refuse anything bigger.
const MAX_LOGIN_MESSAGE: usize = 128 * 1024;

/// A connection ready for the login decision.
pub(crate) struct Handshake {
    pub transport: Transport,
    pub login: Login7,
}

fn closed() -> TdsError {
    TdsError::Io(std::io::ErrorKind::UnexpectedEof.into())
}

pub(crate) async fn handshake(
    stream: Metered,
    tls: &TlsSettings,
    config: &TdsConfig,
) -> Result<Handshake, TdsError> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Err(closed());
    }
    let strict = first[0] == TLS_HANDSHAKE_RECORD;
    let mut transport = if strict {
        Transport::Tls(Box::new(tls.accept_direct(stream).await?))
    } else {
        Transport::Plain(stream)
    };

    let msg = read_message(&mut transport, MAX_LOGIN_MESSAGE)
        .await?
        .ok_or_else(closed)?;
    if msg.ty != kind::PRELOGIN {
        return Err(TdsError::UnexpectedPacket {
            expected: "PRELOGIN",
            actual: msg.ty,
        });
    }
    let client = ClientPrelogin::parse(&msg.payload)?;
    let (mut mode, answer) = Encryption::negotiate(client.encryption);
    if strict {
        mode = Encryption::Full;
    }
    let (major, minor, build) = config.version;
    let build = build.to_be_bytes();
    let mut writer = PacketWriter::new(kind::TABULAR_RESULT, 0, 4096);
    writer.buf().extend(build_response(
        &client,
        [major, minor, build[0], build[1]],
        0,
        answer,
    ));
    writer.finish(&mut transport).await?;
    tracing::debug!(?mode, strict, client_encryption = ?client.encryption, "PRELOGIN answered");

    if !strict && mode != Encryption::None {
        transport = match transport {
            Transport::Plain(stream) => {
                Transport::Tls(Box::new(tls.accept_in_prelogin(stream).await?))
            }
            tls => tls,
        };
    }

    let msg = read_message(&mut transport, MAX_LOGIN_MESSAGE)
        .await?
        .ok_or_else(closed)?;
    if msg.ty != kind::LOGIN7 {
        return Err(TdsError::UnexpectedPacket {
            expected: "LOGIN7",
            actual: msg.ty,
        });
    }
    let login = Login7::parse(&msg.payload)?;

    if !strict && mode == Encryption::LoginOnly {
        transport = match transport {
            Transport::Tls(mut stream) => {
                // Nothing may stay buffered inside TLS at the switch.
                stream.flush().await?;
                let (framed, _session) = stream.into_inner();
                Transport::Plain(framed.into_inner())
            }
            plain => plain,
        };
    }
    Ok(Handshake { transport, login })
}
