//! Checked little helpers to read and write the primitive TDS encodings
//! (MS-TDS 2.2.5.1: integers, B_VARCHAR, US_VARCHAR, UCS-2 strings).
//!
//! Every read is bounds-checked and fails with a protocol error, so a
//! malformed message from the network can never panic the server.

use bytes::BufMut;

use super::error::TdsError;

/// A cursor over one reassembled message.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next byte without consuming it.
    pub(crate) fn peek_u8(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], TdsError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| {
                TdsError::protocol(format!(
                    "truncated message: {n} bytes needed at offset {}, {} left",
                    self.pos,
                    self.remaining()
                ))
            })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), TdsError> {
        self.bytes(n).map(|_| ())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TdsError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, TdsError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16_le(&mut self) -> Result<u16, TdsError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub(crate) fn u16_be(&mut self) -> Result<u16, TdsError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32_le(&mut self) -> Result<u32, TdsError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u32_be(&mut self) -> Result<u32, TdsError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64_le(&mut self) -> Result<u64, TdsError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub(crate) fn i16_le(&mut self) -> Result<i16, TdsError> {
        Ok(i16::from_le_bytes(self.array()?))
    }

    pub(crate) fn i32_le(&mut self) -> Result<i32, TdsError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    pub(crate) fn i64_le(&mut self) -> Result<i64, TdsError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    pub(crate) fn f32_le(&mut self) -> Result<f32, TdsError> {
        Ok(f32::from_le_bytes(self.array()?))
    }

    pub(crate) fn f64_le(&mut self) -> Result<f64, TdsError> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// `n` UCS-2 code units.
    pub(crate) fn ucs2(&mut self, chars: usize) -> Result<String, TdsError> {
        let len = chars
            .checked_mul(2)
            .ok_or_else(|| TdsError::protocol("string too long"))?;
        Ok(from_ucs2(self.bytes(len)?))
    }

    /// B_VARCHAR: a one-byte character count, then UCS-2.
    pub(crate) fn b_varchar(&mut self) -> Result<String, TdsError> {
        let n = self.u8()? as usize;
        self.ucs2(n)
    }

    /// US_VARCHAR: a two-byte character count, then UCS-2.
    #[cfg(test)]
    pub(crate) fn us_varchar(&mut self) -> Result<String, TdsError> {
        let n = self.u16_le()? as usize;
        self.ucs2(n)
    }
}

/// Decodes UCS-2 LE. Lone surrogates become U+FFFD, as clients may send
/// any 16-bit units; an odd trailing byte is dropped.
pub(crate) fn from_ucs2(bytes: &[u8]) -> String {
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    String::from_utf16_lossy(&units)
}

/// Appends `s` as UCS-2 LE.
pub(crate) fn put_ucs2(buf: &mut Vec<u8>, s: &str) {
    for unit in s.encode_utf16() {
        buf.put_u16_le(unit);
    }
}

/// Truncates `s` to at most `max` UTF-16 units (never splitting a char).
pub(crate) fn truncate_units(s: &str, max: usize) -> &str {
    let mut units = 0;
    for (idx, ch) in s.char_indices() {
        units += ch.len_utf16();
        if units > max {
            return &s[..idx];
        }
    }
    s
}

/// B_VARCHAR, silently truncated to 255 characters.
pub(crate) fn put_b_varchar(buf: &mut Vec<u8>, s: &str) {
    let s = truncate_units(s, u8::MAX as usize);
    buf.put_u8(s.encode_utf16().count() as u8);
    put_ucs2(buf, s);
}

/// US_VARCHAR, silently truncated to 65535 characters.
pub(crate) fn put_us_varchar(buf: &mut Vec<u8>, s: &str) {
    let s = truncate_units(s, u16::MAX as usize);
    buf.put_u16_le(s.encode_utf16().count() as u16);
    put_ucs2(buf, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16_le().unwrap(), 0x0201);
        assert!(r.u16_le().is_err());
        assert_eq!(r.u8().unwrap(), 3);
        assert!(r.u8().is_err());
        assert!(Reader::new(&[5, 0]).b_varchar().is_err());
    }

    #[test]
    fn varchars_round_trip() {
        let mut buf = Vec::new();
        put_b_varchar(&mut buf, "héllo");
        put_us_varchar(&mut buf, "wörld \u{1F600}");
        let mut r = Reader::new(&buf);
        assert_eq!(r.b_varchar().unwrap(), "héllo");
        assert_eq!(r.us_varchar().unwrap(), "wörld \u{1F600}");
        assert!(r.is_empty());
    }

    #[test]
    fn truncation_respects_surrogates() {
        assert_eq!(truncate_units("a\u{1F600}", 2), "a");
        assert_eq!(truncate_units("abc", 5), "abc");
    }
}
