//! Character data: varchar bytes in the collation's code page (Windows-1252
//! for the sandbox's Latin1 collation, UTF-8 for `_UTF8` collations),
//! nvarchar as UCS-2 LE, and PLP streams (MS-TDS 2.2.5.2.3).

use bytes::BufMut;

use super::super::error::TdsError;
use super::super::wire::Reader;
use crate::sql::collation;

/// PLP length for NULL.
pub(crate) const PLP_NULL: u64 = u64::MAX;
/// PLP length when the sender streams chunks without announcing a total.
pub(crate) const PLP_UNKNOWN: u64 = u64::MAX - 1;
/// Chunk size used when the server sends a PLP value.
const PLP_CHUNK: usize = 64 * 1024;

/// Decodes varchar bytes in the code page of `collation` (UTF-8 for a
/// `_UTF8` collation, 1252 when absent or unknown).
pub(crate) fn decode_varchar(bytes: &[u8], collation: Option<[u8; 5]>) -> String {
    collation::decode(collation::encoding_for_tds(collation), bytes)
}

/// Encodes a string for a varchar column in the code page of `collation`;
/// characters the code page lacks become `?`, as SQL Server does.
pub(crate) fn encode_varchar(s: &str, collation: Option<[u8; 5]>) -> Vec<u8> {
    collation::encode(collation::encoding_for_tds(collation), s)
}

/// Decodes nvarchar bytes (UCS-2 LE); an odd length is malformed.
pub(crate) fn decode_nvarchar(bytes: &[u8]) -> Result<String, TdsError> {
    if !bytes.len().is_multiple_of(2) {
        return Err(TdsError::protocol("odd byte length for a UCS-2 value"));
    }
    Ok(super::super::wire::from_ucs2(bytes))
}

pub(crate) fn encode_nvarchar(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 2);
    super::super::wire::put_ucs2(&mut out, s);
    out
}

/// Reads a PLP value: total length (or unknown), chunks, terminator.
pub(crate) fn read_plp(r: &mut Reader<'_>) -> Result<Option<Vec<u8>>, TdsError> {
    let total = r.u64_le()?;
    if total == PLP_NULL {
        return Ok(None);
    }
    let hint = if total == PLP_UNKNOWN {
        0
    } else {
        total.min(r.remaining() as u64) as usize
    };
    let mut out = Vec::with_capacity(hint);
    loop {
        let chunk = r.u32_le()? as usize;
        if chunk == 0 {
            break;
        }
        out.extend_from_slice(r.bytes(chunk)?);
    }
    if total != PLP_UNKNOWN && out.len() as u64 != total {
        return Err(TdsError::protocol(format!(
            "PLP value announced {total} bytes but carried {}",
            out.len()
        )));
    }
    Ok(Some(out))
}

/// Writes a PLP value with its known length.
pub(crate) fn write_plp(buf: &mut Vec<u8>, data: Option<&[u8]>) {
    let Some(data) = data else {
        buf.put_u64_le(PLP_NULL);
        return;
    };
    buf.put_u64_le(data.len() as u64);
    for chunk in data.chunks(PLP_CHUNK) {
        buf.put_u32_le(chunk.len() as u32);
        buf.extend_from_slice(chunk);
    }
    buf.put_u32_le(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_1252_with_replacement() {
        let bytes = encode_varchar("café € 日", None);
        assert_eq!(bytes, b"caf\xe9 \x80 ?");
        assert_eq!(decode_varchar(&bytes, None), "café € ?");
        let utf8 = Some([0x09, 0x04, 0x00, 0x04, 0x00]);
        assert_eq!(decode_varchar(&encode_varchar("日本", utf8), utf8), "日本");
    }

    #[test]
    fn plp_chunks_and_unknown_length() {
        let data = vec![3u8; 150_000];
        let mut buf = Vec::new();
        write_plp(&mut buf, Some(&data));
        write_plp(&mut buf, None);
        write_plp(&mut buf, Some(&[]));
        buf.put_u64_le(PLP_UNKNOWN);
        buf.put_u32_le(2);
        buf.extend_from_slice(b"ab");
        buf.put_u32_le(1);
        buf.extend_from_slice(b"c");
        buf.put_u32_le(0);
        let mut r = Reader::new(&buf);
        assert_eq!(read_plp(&mut r).unwrap(), Some(data));
        assert_eq!(read_plp(&mut r).unwrap(), None);
        assert_eq!(read_plp(&mut r).unwrap(), Some(vec![]));
        assert_eq!(read_plp(&mut r).unwrap(), Some(b"abc".to_vec()));
        assert!(r.is_empty());
        let mut bad = Vec::new();
        bad.put_u64_le(5);
        bad.put_u32_le(2);
        bad.extend_from_slice(b"ab");
        bad.put_u32_le(0);
        assert!(read_plp(&mut Reader::new(&bad)).is_err());
    }
}
