//! PRELOGIN (MS-TDS 2.2.6.5): the client's options and the server's answer,
//! including the encryption decision.

use bytes::BufMut;

use super::error::TdsError;
use super::wire::Reader;

/// Option tokens of the PRELOGIN option table.
mod option {
    pub const VERSION: u8 = 0x00;
    pub const ENCRYPTION: u8 = 0x01;
    pub const INSTOPT: u8 = 0x02;
    pub const THREADID: u8 = 0x03;
    pub const MARS: u8 = 0x04;
    pub const TRACEID: u8 = 0x05;
    pub const FEDAUTHREQUIRED: u8 = 0x06;
    pub const TERMINATOR: u8 = 0xFF;
}

/// B_FENCRYPTION values (MS-TDS 2.2.6.5).
pub(crate) mod encrypt {
    pub const OFF: u8 = 0x00;
    pub const ON: u8 = 0x01;
    pub const NOT_SUP: u8 = 0x02;
    pub const REQ: u8 = 0x03;
}

/// What the client announced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClientPrelogin {
    pub version: Option<(u32, u16)>,
    pub encryption: Option<u8>,
    pub instance: Option<String>,
    pub thread_id: Option<u32>,
    pub mars: bool,
    pub fed_auth_required: Option<u8>,
}

/// How the connection is protected after PRELOGIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encryption {
    /// No TLS at all (client ENCRYPT_NOT_SUP).
    None,
    /// TLS for LOGIN7 only, clear text afterwards (client ENCRYPT_OFF).
    LoginOnly,
    /// TLS for the whole session (client ENCRYPT_ON / ENCRYPT_REQ).
    Full,
}

impl Encryption {
    /// The server's answer for the client's B_FENCRYPTION, for a server
    /// that has a certificate and does not force encryption.
    pub(crate) fn negotiate(client: Option<u8>) -> (Self, u8) {
        match client {
            Some(encrypt::NOT_SUP) => (Encryption::None, encrypt::NOT_SUP),
            Some(encrypt::ON) | Some(encrypt::REQ) => (Encryption::Full, encrypt::ON),
            // ENCRYPT_OFF, an absent option or an unknown value: protect the
            // login only, as SQL Server does for clients that do not ask.
            _ => (Encryption::LoginOnly, encrypt::OFF),
        }
    }
}

impl ClientPrelogin {
    /// Parses the option table and the data it points into.
    pub(crate) fn parse(payload: &[u8]) -> Result<Self, TdsError> {
        let mut table = Reader::new(payload);
        let mut out = ClientPrelogin::default();
        loop {
            let token = table.u8()?;
            if token == option::TERMINATOR {
                break;
            }
            let offset = table.u16_be()? as usize;
            let length = table.u16_be()? as usize;
            let data = payload
                .get(offset..offset.saturating_add(length))
                .ok_or_else(|| {
                    TdsError::protocol(format!(
                        "PRELOGIN option {token} points outside the message"
                    ))
                })?;
            let mut r = Reader::new(data);
            match token {
                option::VERSION if length >= 6 => out.version = Some((r.u32_be()?, r.u16_be()?)),
                option::ENCRYPTION if length >= 1 => out.encryption = Some(r.u8()?),
                option::INSTOPT => {
                    let name: Vec<u8> = data.iter().copied().take_while(|b| *b != 0).collect();
                    if !name.is_empty() {
                        out.instance = Some(String::from_utf8_lossy(&name).into_owned());
                    }
                }
                option::THREADID if length >= 4 => out.thread_id = Some(r.u32_be()?),
                option::MARS if length >= 1 => out.mars = r.u8()? != 0,
                option::FEDAUTHREQUIRED if length >= 1 => out.fed_auth_required = Some(r.u8()?),
                // TRACEID, NONCEOPT and options from later versions carry
                // nothing the sandbox needs.
                option::TRACEID => {}
                _ => tracing::debug!(token, length, "ignoring PRELOGIN option"),
            }
        }
        Ok(out)
    }
}

/// Builds the server's PRELOGIN answer: VERSION, ENCRYPTION, INSTOPT
/// (valid), THREADID (empty), MARS (off), FEDAUTHREQUIRED if asked.
pub(crate) fn build_response(
    client: &ClientPrelogin,
    version: [u8; 4],
    sub_build: u16,
    encryption: u8,
) -> Vec<u8> {
    let mut options: Vec<(u8, Vec<u8>)> = vec![
        (option::VERSION, {
            let mut v = version.to_vec();
            v.put_u16(sub_build);
            v
        }),
        (option::ENCRYPTION, vec![encryption]),
        (option::INSTOPT, vec![0]),
        (option::THREADID, Vec::new()),
        (option::MARS, vec![0]),
    ];
    if client.fed_auth_required.is_some() {
        options.push((option::FEDAUTHREQUIRED, vec![0]));
    }
    let table_len = options.len() * 5 + 1;
    let mut out = Vec::new();
    let mut offset = table_len;
    for (token, data) in &options {
        out.put_u8(*token);
        out.put_u16(offset as u16);
        out.put_u16(data.len() as u16);
        offset += data.len();
    }
    out.put_u8(option::TERMINATOR);
    for (_, data) in options {
        out.extend_from_slice(&data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_builds() {
        let client = ClientPrelogin {
            fed_auth_required: Some(1),
            ..Default::default()
        };
        let bytes = build_response(&client, [16, 0, 0x03, 0xE8], 6, encrypt::ON);
        let parsed = ClientPrelogin::parse(&bytes).unwrap();
        assert_eq!(parsed.version, Some((0x1000_03E8, 6)));
        assert_eq!(parsed.encryption, Some(encrypt::ON));
        assert_eq!(parsed.instance, None);
        assert_eq!(parsed.thread_id, None);
        assert!(!parsed.mars);
        assert_eq!(parsed.fed_auth_required, Some(0));
    }

    #[test]
    fn rejects_out_of_range_options() {
        assert!(ClientPrelogin::parse(&[0x00, 0x00, 0x40, 0x00, 0x06, 0xFF]).is_err());
        assert!(ClientPrelogin::parse(&[0x00, 0x00]).is_err());
        assert!(ClientPrelogin::parse(&[]).is_err());
    }

    #[test]
    fn encryption_table() {
        assert_eq!(
            Encryption::negotiate(Some(encrypt::NOT_SUP)),
            (Encryption::None, encrypt::NOT_SUP)
        );
        assert_eq!(
            Encryption::negotiate(Some(encrypt::OFF)),
            (Encryption::LoginOnly, encrypt::OFF)
        );
        assert_eq!(
            Encryption::negotiate(Some(encrypt::ON)),
            (Encryption::Full, encrypt::ON)
        );
        assert_eq!(
            Encryption::negotiate(Some(encrypt::REQ)),
            (Encryption::Full, encrypt::ON)
        );
    }
}
