//! Decoding client requests into engine `Request`s: SQLBatch (MS-TDS
//! 2.2.6.7), RPC (2.2.6.6) and Transaction Manager requests (2.2.6.9).

use super::codec::decode::decode_value;
use super::codec::type_info::TypeInfo;
use super::error::TdsError;
use super::wire::{Reader, from_ucs2};
use crate::sql::{Param, Request};

/// RPC parameter status flags (MS-TDS 2.2.6.6).
const F_BY_REF_VALUE: u8 = 0x01;
const F_ENCRYPTED: u8 = 0x08;
/// Separators between RPCs batched in one message (TDS 7.2+).
const BATCH_FLAG: u8 = 0xFF;
const NO_EXEC_FLAG: u8 = 0xFE;

/// Skips ALL_HEADERS (MS-TDS 2.2.5.3): a total length that includes itself,
/// then query notification / transaction descriptor / trace headers.
fn skip_all_headers(r: &mut Reader<'_>) -> Result<(), TdsError> {
    let total = r.u32_le()? as usize;
    if total < 4 {
        return Err(TdsError::protocol(format!(
            "ALL_HEADERS length {total} is too small"
        )));
    }
    r.skip(total - 4)
}

/// SQLBatch: ALL_HEADERS then UCS-2 text.
pub(crate) fn parse_batch(payload: &[u8]) -> Result<Request, TdsError> {
    let mut r = Reader::new(payload);
    skip_all_headers(&mut r)?;
    let text = r.bytes(r.remaining())?;
    if !text.len().is_multiple_of(2) {
        return Err(TdsError::protocol("SQLBatch text has an odd byte length"));
    }
    Ok(Request::Batch {
        sql: from_ucs2(text),
    })
}

/// Well-known procedures by ProcID (MS-TDS 2.2.6.6).
pub(crate) fn proc_name(id: u16) -> Option<&'static str> {
    Some(match id {
        1 => "sp_cursor",
        2 => "sp_cursoropen",
        3 => "sp_cursorprepare",
        4 => "sp_cursorexecute",
        5 => "sp_cursorprepexec",
        6 => "sp_cursorunprepare",
        7 => "sp_cursorfetch",
        8 => "sp_cursoroption",
        9 => "sp_cursorclose",
        10 => "sp_executesql",
        11 => "sp_prepare",
        12 => "sp_execute",
        13 => "sp_prepexec",
        14 => "sp_prepexecrpc",
        15 => "sp_unprepare",
        _ => return None,
    })
}

/// RPC: ALL_HEADERS then one or more RPCReqBatch separated by BatchFlag
/// (or NoExecFlag); each becomes one `Request::Rpc`, in order.
pub(crate) fn parse_rpc(payload: &[u8]) -> Result<Vec<Request>, TdsError> {
    let mut r = Reader::new(payload);
    skip_all_headers(&mut r)?;
    let mut requests = Vec::new();
    loop {
        requests.push(parse_one_rpc(&mut r)?);
        match r.peek_u8() {
            None => break,
            Some(BATCH_FLAG | NO_EXEC_FLAG) => {
                r.skip(1)?;
                if r.is_empty() {
                    break;
                }
            }
            Some(other) => {
                return Err(TdsError::protocol(format!(
                    "unexpected byte {other:#04x} after an RPC"
                )));
            }
        }
    }
    Ok(requests)
}

fn parse_one_rpc(r: &mut Reader<'_>) -> Result<Request, TdsError> {
    let name_len = r.u16_le()?;
    let procedure = if name_len == 0xFFFF {
        let id = r.u16_le()?;
        proc_name(id)
            .map(str::to_string)
            .ok_or_else(|| TdsError::protocol(format!("unknown ProcID {id}")))?
    } else {
        r.ucs2(name_len as usize)?
    };
    let _option_flags = r.u16_le()?;
    let mut params = Vec::new();
    while let Some(b) = r.peek_u8() {
        if b == BATCH_FLAG || b == NO_EXEC_FLAG {
            break;
        }
        let position = params.len() + 1;
        let param = parse_param(r).map_err(|e| match e {
            TdsError::Protocol(detail) => {
                TdsError::Protocol(format!("parameter {position}: {detail}"))
            }
            other => other,
        })?;
        params.push(param);
    }
    Ok(Request::Rpc { procedure, params })
}

fn parse_param(r: &mut Reader<'_>) -> Result<Param, TdsError> {
    let name = r.b_varchar()?;
    let status = r.u8()?;
    if status & F_ENCRYPTED != 0 {
        return Err(TdsError::protocol(
            "encrypted parameters (Always Encrypted) are not supported",
        ));
    }
    let info = TypeInfo::decode(r)?;
    // fDefaultValue parameters carry a NULL of their type: the engine sees
    // NULL, as the contract has no "default" marker.
    let value = decode_value(r, &info)?;
    Ok(Param {
        name,
        ty: info.data_type(),
        value,
        output: status & F_BY_REF_VALUE != 0,
    })
}

/// Transaction Manager request types (MS-TDS 2.2.6.9).
const TM_GET_DTC_ADDRESS: u16 = 0;
const TM_BEGIN_XACT: u16 = 5;
const TM_COMMIT_XACT: u16 = 7;
const TM_ROLLBACK_XACT: u16 = 8;
const TM_SAVE_XACT: u16 = 9;

/// Isolation levels of TM_BEGIN_XACT, as T-SQL names them.
fn isolation(level: u8) -> Option<&'static str> {
    Some(match level {
        1 => "READ UNCOMMITTED",
        2 => "READ COMMITTED",
        3 => "REPEATABLE READ",
        4 => "SERIALIZABLE",
        5 => "SNAPSHOT",
        _ => return None,
    })
}

fn quote_name(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

/// A transaction's name in a TM request: B_VARBYTE, a one-byte count of
/// bytes (not characters) then UCS-2 (MS-TDS 2.2.6.9), as Microsoft's
/// drivers and tedious send it.
fn transaction_name(r: &mut Reader<'_>) -> Result<String, TdsError> {
    let n = usize::from(r.u8()?);
    Ok(from_ucs2(r.bytes(n)?))
}

/// A TM request as the equivalent T-SQL batch. TM_GET_DTC_ADDRESS and
/// distributed transactions are not supported.
pub(crate) fn parse_transaction_manager(payload: &[u8]) -> Result<Request, TdsError> {
    let mut r = Reader::new(payload);
    skip_all_headers(&mut r)?;
    let request_type = r.u16_le()?;
    let sql = match request_type {
        TM_BEGIN_XACT => {
            let level = r.u8()?;
            let name = transaction_name(&mut r)?;
            let begin = if name.is_empty() {
                "BEGIN TRANSACTION".to_string()
            } else {
                format!("BEGIN TRANSACTION {}", quote_name(&name))
            };
            match isolation(level) {
                Some(level) => format!("SET TRANSACTION ISOLATION LEVEL {level}; {begin}"),
                None => begin,
            }
        }
        TM_COMMIT_XACT | TM_ROLLBACK_XACT => {
            let name = transaction_name(&mut r)?;
            let verb = if request_type == TM_COMMIT_XACT {
                "COMMIT"
            } else {
                "ROLLBACK"
            };
            let mut sql = if name.is_empty() {
                verb.to_string()
            } else {
                format!("{verb} TRANSACTION {}", quote_name(&name))
            };
            // fBeginXact: start a new transaction right away.
            if r.remaining() > 0 && r.u8()? & 0x01 != 0 {
                let level = r.u8()?;
                let new_name = transaction_name(&mut r)?;
                if let Some(level) = isolation(level) {
                    sql.push_str(&format!("; SET TRANSACTION ISOLATION LEVEL {level}"));
                }
                sql.push_str("; BEGIN TRANSACTION");
                if !new_name.is_empty() {
                    sql.push(' ');
                    sql.push_str(&quote_name(&new_name));
                }
            }
            sql
        }
        TM_SAVE_XACT => format!(
            "SAVE TRANSACTION {}",
            quote_name(&transaction_name(&mut r)?)
        ),
        TM_GET_DTC_ADDRESS => {
            return Err(TdsError::protocol(
                "distributed transactions (TM_GET_DTC_ADDRESS) are not supported",
            ));
        }
        other => {
            return Err(TdsError::protocol(format!(
                "transaction manager request {other} is not supported"
            )));
        }
    };
    Ok(Request::Batch { sql })
}
