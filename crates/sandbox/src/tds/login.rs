//! LOGIN7 (MS-TDS 2.2.6.4) and the login response (MS-TDS 3.3.5.5 / 4.2).

use super::error::TdsError;
use super::packet::{MAX_PACKET_SIZE, MIN_PACKET_SIZE};
use super::token::{self, env};
use super::wire::Reader;
use crate::sql::LoginRequest;

/// Size of the fixed part of LOGIN7 up to and including cbSSPILong.
const FIXED_LEN: usize = 94;
/// OptionFlags3 fExtension: ibExtension points at the feature extension.
const F_EXTENSION: u8 = 0x10;

/// TDS 7.4, as LOGINACK reports it.
pub(crate) const TDS_7_4: u32 = 0x7400_0004;

/// What LOGIN7 carried. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Login7 {
    pub tds_version: u32,
    pub packet_size: u32,
    pub request: LoginRequest,
    pub server_name: String,
    pub library: String,
    pub language: String,
    /// The client sent a feature extension block (FEATUREEXT).
    pub feature_ids: Option<Vec<u8>>,
}

impl std::fmt::Debug for Login7 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login7")
            .field("tds_version", &format_args!("{:#010x}", self.tds_version))
            .field("packet_size", &self.packet_size)
            .field("user", &self.request.user)
            .field("database", &self.request.database)
            .field("app_name", &self.request.app_name)
            .field("host_name", &self.request.host_name)
            .field("library", &self.library)
            .finish_non_exhaustive()
    }
}

/// Reverses the password obfuscation: XOR 0xA5, then swap the nibbles
/// (MS-TDS 2.2.6.4, the client swaps then XORs).
fn deobfuscate(bytes: &[u8]) -> Vec<u8> {
    bytes.iter().map(|b| (b ^ 0xA5).rotate_left(4)).collect()
}

/// A string field: a byte offset from the start of LOGIN7 and a length in
/// characters.
fn field(payload: &[u8], offset: u16, chars: u16, what: &str) -> Result<Vec<u8>, TdsError> {
    let start = offset as usize;
    let end = start + chars as usize * 2;
    if chars == 0 {
        return Ok(Vec::new());
    }
    payload
        .get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| TdsError::protocol(format!("LOGIN7 {what} lies outside the message")))
}

impl Login7 {
    pub(crate) fn parse(payload: &[u8]) -> Result<Self, TdsError> {
        if payload.len() < FIXED_LEN {
            return Err(TdsError::protocol("LOGIN7 shorter than its fixed part"));
        }
        let mut r = Reader::new(payload);
        let _length = r.u32_le()?;
        let tds_version = r.u32_le()?;
        let packet_size = r.u32_le()?;
        let _client_prog_ver = r.u32_le()?;
        let _client_pid = r.u32_le()?;
        let _connection_id = r.u32_le()?;
        let _flags1 = r.u8()?;
        let _flags2 = r.u8()?;
        let _type_flags = r.u8()?;
        let flags3 = r.u8()?;
        let _time_zone = r.i32_le()?;
        let _lcid = r.u32_le()?;
        let mut pairs = [(0u16, 0u16); 9];
        for pair in pairs.iter_mut() {
            *pair = (r.u16_le()?, r.u16_le()?);
        }
        let text = |i: usize, what: &str| -> Result<String, TdsError> {
            let (off, len) = pairs[i];
            Ok(super::wire::from_ucs2(&field(payload, off, len, what)?))
        };
        let host_name = text(0, "host name")?;
        let user = text(1, "user name")?;
        let (pw_off, pw_len) = pairs[2];
        let password =
            super::wire::from_ucs2(&deobfuscate(&field(payload, pw_off, pw_len, "password")?));
        let app_name = text(3, "application name")?;
        let server_name = text(4, "server name")?;
        let library = text(6, "library name")?;
        let language = text(7, "language")?;
        let database = text(8, "database")?;

        let feature_ids = if flags3 & F_EXTENSION != 0 {
            let (ext_off, ext_len) = pairs[5];
            Some(feature_ids(payload, ext_off, ext_len)?)
        } else {
            None
        };

        Ok(Login7 {
            tds_version,
            packet_size,
            request: LoginRequest {
                user,
                password,
                database: (!database.is_empty()).then_some(database),
                app_name,
                host_name,
                encrypted: false,
                client_addr: None,
            },
            server_name,
            library,
            language,
            feature_ids,
        })
    }

    /// The packet size the server agrees to: the client's (0 means the
    /// server default), clamped to 512..=32767.
    pub(crate) fn negotiated_packet_size(&self, default: u32) -> u32 {
        let asked = if self.packet_size == 0 {
            default
        } else {
            self.packet_size
        };
        asked.clamp(MIN_PACKET_SIZE, MAX_PACKET_SIZE)
    }

    /// The TDS version to acknowledge: the client's if older than 7.4.
    pub(crate) fn negotiated_version(&self) -> u32 {
        // LOGIN7 carries the version little-endian with the major byte
        // last; versions before 7.4 are 7.x with x in the high byte.
        match self.tds_version {
            v if v >= TDS_7_4 => TDS_7_4,
            v if v >= 0x7000_0000 => v,
            _ => TDS_7_4,
        }
    }
}

/// FEATUREEXT (MS-TDS 2.2.6.4): ibExtension points at a DWORD offset of
/// the feature blocks; each is FeatureId, DWORD length, data; 0xFF ends.
fn feature_ids(payload: &[u8], ext_off: u16, ext_len: u16) -> Result<Vec<u8>, TdsError> {
    if ext_len < 4 {
        return Ok(Vec::new());
    }
    let mut r = Reader::new(payload);
    r.skip(ext_off as usize)?;
    let start = r.u32_le()? as usize;
    let mut r = Reader::new(payload);
    r.skip(start)?;
    let mut ids = Vec::new();
    loop {
        let id = r.u8()?;
        if id == 0xFF {
            return Ok(ids);
        }
        let len = r.u32_le()? as usize;
        r.skip(len)?;
        ids.push(id);
    }
}

/// Parameters of a successful login response.
pub(crate) struct LoginAck<'a> {
    pub database: &'a str,
    pub language: &'a str,
    pub packet_size: u32,
    pub tds_version: u32,
    pub program: &'a str,
    pub version: [u8; 4],
    pub server_name: &'a str,
    pub feature_ext: bool,
}

/// Tokens of a successful login, in SQL Server's order: database
/// ENVCHANGE + INFO 5701, collation, language + INFO 5703, LOGINACK,
/// packet size, (FEATUREEXTACK), DONE.
pub(crate) fn success_tokens(buf: &mut Vec<u8>, ack: &LoginAck<'_>) {
    token::env_change_text(buf, env::DATABASE, ack.database, "master");
    let changed_db = format!("Changed database context to '{}'.", ack.database);
    token::info_text(buf, 5701, 2, &changed_db, ack.server_name);
    token::env_change_bytes(
        buf,
        env::COLLATION,
        &super::codec::type_info::DEFAULT_COLLATION,
        &[],
    );
    token::env_change_text(buf, env::LANGUAGE, ack.language, "");
    let changed_lang = format!("Changed language setting to {}.", ack.language);
    token::info_text(buf, 5703, 1, &changed_lang, ack.server_name);
    token::login_ack(buf, ack.tds_version, ack.program, ack.version);
    token::env_change_text(buf, env::PACKET_SIZE, &ack.packet_size.to_string(), "4096");
    if ack.feature_ext {
        token::feature_ext_ack_empty(buf);
    }
    token::done(buf, token::tok::DONE, token::done::FINAL, 0, 0);
}

/// The answer to a login sent elsewhere (Azure SQL's redirect policy):
/// LOGINACK, ENVCHANGE routing to `server,port`, DONE. The client is to
/// close this connection and log in there.
pub(crate) fn routing_tokens(buf: &mut Vec<u8>, ack: &LoginAck<'_>, server: &str, port: u16) {
    token::login_ack(buf, ack.tds_version, ack.program, ack.version);
    token::env_change_routing(buf, server, port);
    token::done(buf, token::tok::DONE, token::done::FINAL, 0, 0);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BufMut;

    /// A LOGIN7 as a client builds it (offsets after the fixed part).
    pub(crate) fn build(user: &str, password: &str, database: &str, packet_size: u32) -> Vec<u8> {
        let fields = [
            "host", user, password, "app", "server", "", "lib", "", database,
        ];
        let mut data = Vec::new();
        let mut table = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            let mut bytes = Vec::new();
            super::super::wire::put_ucs2(&mut bytes, f);
            if i == 2 {
                bytes = bytes.iter().map(|b| b.rotate_left(4) ^ 0xA5).collect();
            }
            table.put_u16_le((FIXED_LEN + data.len()) as u16);
            table.put_u16_le(f.encode_utf16().count() as u16);
            data.extend(bytes);
        }
        let mut out = Vec::new();
        out.put_u32_le((FIXED_LEN + data.len()) as u32);
        out.put_u32_le(TDS_7_4);
        out.put_u32_le(packet_size);
        out.extend_from_slice(&[0; 12]);
        out.extend_from_slice(&[0xE0, 0x03, 0, 0]);
        out.extend_from_slice(&[0; 8]);
        out.extend(table);
        out.extend_from_slice(&[0; 6 + 4 + 4 + 4 + 4]);
        assert_eq!(out.len(), FIXED_LEN);
        out.extend(data);
        out
    }

    #[test]
    fn parses_and_deobfuscates() {
        let login = Login7::parse(&build("sa", "p@ss wörd", "sandbox", 8192)).unwrap();
        assert_eq!(login.request.user, "sa");
        assert_eq!(login.request.password, "p@ss wörd");
        assert_eq!(login.request.database.as_deref(), Some("sandbox"));
        assert_eq!(login.request.host_name, "host");
        assert_eq!(login.request.app_name, "app");
        assert_eq!(login.library, "lib");
        assert_eq!(login.negotiated_packet_size(4096), 8192);
        assert_eq!(login.negotiated_version(), TDS_7_4);
        assert!(!format!("{login:?}").contains("p@ss"));
    }

    #[test]
    fn rejects_truncated_and_out_of_range() {
        let good = build("sa", "pw", "", 4096);
        assert!(Login7::parse(&good[..50]).is_err());
        let mut bad = good.clone();
        bad.truncate(good.len() - 2);
        assert!(Login7::parse(&bad).is_err());
        let mut no_db = Login7::parse(&good).unwrap();
        assert_eq!(no_db.request.database, None);
        no_db.packet_size = 100_000;
        assert_eq!(no_db.negotiated_packet_size(4096), 32767);
        no_db.packet_size = 0;
        assert_eq!(no_db.negotiated_packet_size(4096), 4096);
    }
}
