//! Encoders for the server's tokens (MS-TDS 2.2.7): LOGINACK, ENVCHANGE,
//! INFO/ERROR, DONE family, COLMETADATA, ROW/NBCROW, RETURNVALUE,
//! RETURNSTATUS, FEATUREEXTACK.

use bytes::BufMut;

use super::codec::EncodeError;
use super::codec::encode::encode_value;
use super::codec::type_info::TypeInfo;
use super::wire::{put_b_varchar, put_us_varchar, truncate_units};
use crate::sql::{Column, Param, SqlError, Value};

/// Token type bytes (MS-TDS 2.2.7).
pub(crate) mod tok {
    pub const COLMETADATA: u8 = 0x81;
    pub const ERROR: u8 = 0xAA;
    pub const INFO: u8 = 0xAB;
    pub const RETURNVALUE: u8 = 0xAC;
    pub const LOGINACK: u8 = 0xAD;
    pub const FEATUREEXTACK: u8 = 0xAE;
    pub const RETURNSTATUS: u8 = 0x79;
    pub const ROW: u8 = 0xD1;
    pub const NBCROW: u8 = 0xD2;
    pub const ENVCHANGE: u8 = 0xE3;
    pub const DONE: u8 = 0xFD;
    pub const DONEPROC: u8 = 0xFE;
    pub const DONEINPROC: u8 = 0xFF;
}

/// DONE status bits (MS-TDS 2.2.7.6).
pub(crate) mod done {
    pub const FINAL: u16 = 0x0000;
    pub const MORE: u16 = 0x0001;
    pub const ERROR: u16 = 0x0002;
    pub const COUNT: u16 = 0x0010;
    pub const ATTN: u16 = 0x0020;
}

/// ENVCHANGE types (MS-TDS 2.2.7.9).
pub(crate) mod env {
    pub const DATABASE: u8 = 1;
    pub const LANGUAGE: u8 = 2;
    pub const PACKET_SIZE: u8 = 4;
    pub const COLLATION: u8 = 7;
    pub const BEGIN_TRAN: u8 = 8;
    pub const COMMIT_TRAN: u8 = 9;
    pub const ROLLBACK_TRAN: u8 = 10;
    pub const ROUTING: u8 = 20;
}

/// Writes a token whose body follows a two-byte length.
fn with_u16_len(buf: &mut Vec<u8>, token: u8, body: impl FnOnce(&mut Vec<u8>)) {
    buf.put_u8(token);
    let at = buf.len();
    buf.put_u16_le(0);
    body(buf);
    let len = (buf.len() - at - 2).min(u16::MAX as usize) as u16;
    buf[at..at + 2].copy_from_slice(&len.to_le_bytes());
}

/// ENVCHANGE with B_VARCHAR new and old values.
pub(crate) fn env_change_text(buf: &mut Vec<u8>, ty: u8, new: &str, old: &str) {
    with_u16_len(buf, tok::ENVCHANGE, |b| {
        b.put_u8(ty);
        put_b_varchar(b, new);
        put_b_varchar(b, old);
    });
}

/// ENVCHANGE with B_VARBYTE new and old values (collation, transactions).
pub(crate) fn env_change_bytes(buf: &mut Vec<u8>, ty: u8, new: &[u8], old: &[u8]) {
    with_u16_len(buf, tok::ENVCHANGE, |b| {
        b.put_u8(ty);
        b.put_u8(new.len() as u8);
        b.extend_from_slice(new);
        b.put_u8(old.len() as u8);
        b.extend_from_slice(old);
    });
}

/// ENVCHANGE routing (MS-TDS 2.2.7.9, type 20): the new value is its
/// length, the protocol (0, TCP), the port and the alternate server as
/// US_VARCHAR; the old value is empty (a zero USHORT).
pub(crate) fn env_change_routing(buf: &mut Vec<u8>, server: &str, port: u16) {
    with_u16_len(buf, tok::ENVCHANGE, |b| {
        b.put_u8(env::ROUTING);
        let units = server.encode_utf16().count().min(u16::MAX as usize / 2 - 8);
        b.put_u16_le((1 + 2 + 2 + units * 2) as u16);
        b.put_u8(0);
        b.put_u16_le(port);
        b.put_u16_le(units as u16);
        for unit in server.encode_utf16().take(units) {
            b.put_u16_le(unit);
        }
        b.put_u16_le(0);
    });
}

/// INFO (class <= 10) or ERROR token (MS-TDS 2.2.7.10 / 2.2.7.13).
pub(crate) fn message(buf: &mut Vec<u8>, err: &SqlError, server_name: &str) {
    let token = if err.class <= 10 {
        tok::INFO
    } else {
        tok::ERROR
    };
    with_u16_len(buf, token, |b| {
        b.put_i32_le(err.number);
        b.put_u8(err.state);
        b.put_u8(err.class);
        // Keep the whole token under 64 KiB.
        put_us_varchar(b, truncate_units(&err.message, 30_000));
        put_b_varchar(b, server_name);
        put_b_varchar(b, err.procedure.as_deref().unwrap_or(""));
        b.put_u32_le(err.line);
    });
}

/// LOGINACK (MS-TDS 2.2.7.14). The TDS version is big-endian on the wire.
pub(crate) fn login_ack(buf: &mut Vec<u8>, tds_version: u32, program: &str, version: [u8; 4]) {
    with_u16_len(buf, tok::LOGINACK, |b| {
        b.put_u8(1); // SQL_TSQL
        b.put_u32(tds_version);
        put_b_varchar(b, program);
        b.extend_from_slice(&version);
    });
}

/// FEATUREEXTACK acknowledging no feature (only the terminator).
pub(crate) fn feature_ext_ack_empty(buf: &mut Vec<u8>) {
    buf.put_u8(tok::FEATUREEXTACK);
    buf.put_u8(0xFF);
}

/// DONE, DONEPROC or DONEINPROC (MS-TDS 2.2.7.6-8).
pub(crate) fn done(buf: &mut Vec<u8>, token: u8, status: u16, cur_cmd: u16, rows: u64) {
    buf.put_u8(token);
    buf.put_u16_le(status);
    buf.put_u16_le(cur_cmd);
    buf.put_u64_le(rows);
}

pub(crate) fn return_status(buf: &mut Vec<u8>, status: i32) {
    buf.put_u8(tok::RETURNSTATUS);
    buf.put_i32_le(status);
}

/// RETURNVALUE (MS-TDS 2.2.7.18) for an output parameter.
pub(crate) fn return_value(
    buf: &mut Vec<u8>,
    ordinal: u16,
    param: &Param,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_u8(tok::RETURNVALUE);
    buf.put_u16_le(ordinal);
    put_b_varchar(buf, &param.name);
    buf.put_u8(0x01); // output parameter
    buf.put_u32_le(0); // UserType
    buf.put_u16_le(0x0001); // nullable
    let info = TypeInfo::for_type(&param.ty, true);
    info.encode(buf);
    encode_value(buf, &info, &param.value).inspect_err(|_| buf.truncate(start))
}

/// COLMETADATA (MS-TDS 2.2.7.4).
pub(crate) fn col_metadata(buf: &mut Vec<u8>, columns: &[Column]) {
    buf.put_u8(tok::COLMETADATA);
    buf.put_u16_le(columns.len().min(0xFFFE) as u16);
    for col in columns {
        buf.put_u32_le(0); // UserType
        buf.put_u16_le(u16::from(col.nullable)); // fNullable
        TypeInfo::for_type_collated(&col.ty, col.nullable, col.tds_collation()).encode(buf);
        put_b_varchar(buf, &col.name);
    }
}

/// Encodes the ROW tokens of one result set: each column's TYPE_INFO is
/// worked out once, not for every value.
pub(crate) struct RowEncoder {
    infos: Vec<TypeInfo>,
}

impl RowEncoder {
    pub(crate) fn new(columns: &[Column]) -> Self {
        Self {
            infos: columns
                .iter()
                .map(|c| TypeInfo::for_type_collated(&c.ty, c.nullable, c.tds_collation()))
                .collect(),
        }
    }

    /// One ROW, or an NBCROW (null bitmap, MS-TDS 2.2.7.17) when the row
    /// has NULLs - the only way to send NULL in a NOT NULL fixed-size
    /// column. On error nothing is appended.
    pub(crate) fn row(&self, buf: &mut Vec<u8>, values: &[Value]) -> Result<(), EncodeError> {
        let start = buf.len();
        let result = self.write_row(buf, values);
        if result.is_err() {
            buf.truncate(start);
        }
        result
    }

    fn write_row(&self, buf: &mut Vec<u8>, values: &[Value]) -> Result<(), EncodeError> {
        if values.len() != self.infos.len() {
            return Err(EncodeError {
                value: format!("a row of {} values", values.len()),
                ty: format!("{} columns", self.infos.len()),
            });
        }
        let has_null = values.iter().any(Value::is_null);
        if has_null {
            buf.put_u8(tok::NBCROW);
            let at = buf.len();
            buf.resize(at + values.len().div_ceil(8), 0);
            for (i, v) in values.iter().enumerate() {
                if v.is_null() {
                    buf[at + i / 8] |= 1 << (i % 8);
                }
            }
        } else {
            buf.put_u8(tok::ROW);
        }
        for (info, value) in self.infos.iter().zip(values) {
            if has_null && value.is_null() {
                continue;
            }
            encode_value(buf, info, value)?;
        }
        Ok(())
    }
}

/// INFO messages SQL Server sends at login.
pub(crate) fn info_text(buf: &mut Vec<u8>, number: i32, state: u8, text: &str, server_name: &str) {
    let mut info = SqlError::new(number, text).with_class(0).with_state(state);
    info.line = 1;
    message(buf, &info, server_name);
}
