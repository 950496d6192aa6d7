//! SQL Server's log sequence number as a value type.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Number of bytes in a SQL Server LSN (`binary(10)`).
const LEN: usize = 10;

/// A SQL Server log sequence number: the `binary(10)` that orders every change
/// CDC captured. Ordering is the numeric (big-endian) order SQL Server uses, so
/// ranges and comparisons are done on this type, never on raw bytes. Displayed
/// and serialized as `0x` followed by 20 upper-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn([u8; LEN]);

/// Why some input is not an LSN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LsnError {
    /// The byte form must be exactly 10 bytes long.
    #[error("an LSN is 10 bytes, got {0}")]
    Length(usize),
    /// The text form must be `0x` and 20 hex digits.
    #[error("expected 0x and 20 hex digits for an LSN, got {0:?}")]
    Text(String),
}

impl Lsn {
    /// The smallest LSN (all zero bytes).
    pub const ZERO: Lsn = Lsn([0; LEN]);
    /// The largest LSN (all 0xFF bytes).
    pub const MAX: Lsn = Lsn([0xFF; LEN]);

    /// Wraps the 10 bytes SQL Server returns.
    pub const fn from_bytes(bytes: [u8; LEN]) -> Self {
        Lsn(bytes)
    }

    /// The LSN whose last byte is `n` and every other byte zero: the small,
    /// ordered LSNs tests write their cases with.
    #[cfg(test)]
    pub const fn from_low_byte(n: u8) -> Self {
        let mut bytes = [0u8; LEN];
        bytes[LEN - 1] = n;
        Lsn::from_bytes(bytes)
    }

    /// The 10 bytes, as SQL Server expects them back as a parameter.
    pub const fn to_bytes(self) -> [u8; LEN] {
        self.0
    }

    /// The next LSN, as `sys.fn_cdc_increment_lsn` computes it: the 80-bit
    /// value plus one. Used to turn an inclusive end into the next start.
    /// `None` for [`Lsn::MAX`], which has no successor.
    pub fn checked_next(self) -> Option<Lsn> {
        let mut bytes = self.0;
        for byte in bytes.iter_mut().rev() {
            let (value, carry) = byte.overflowing_add(1);
            *byte = value;
            if !carry {
                return Some(Lsn(bytes));
            }
        }
        None
    }

    /// The previous LSN (the 80-bit value minus one), `None` for [`Lsn::ZERO`].
    pub fn checked_prev(self) -> Option<Lsn> {
        let mut bytes = self.0;
        for byte in bytes.iter_mut().rev() {
            let (value, borrow) = byte.overflowing_sub(1);
            *byte = value;
            if !borrow {
                return Some(Lsn(bytes));
            }
        }
        None
    }
}

impl TryFrom<&[u8]> for Lsn {
    type Error = LsnError;

    fn try_from(bytes: &[u8]) -> Result<Self, Self::Error> {
        <[u8; LEN]>::try_from(bytes)
            .map(Lsn)
            .map_err(|_| LsnError::Length(bytes.len()))
    }
}

impl FromStr for Lsn {
    type Err = LsnError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || LsnError::Text(text.to_string());
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .ok_or_else(bad)?;
        if digits.len() != 2 * LEN || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut bytes = [0u8; LEN];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Lsn(bytes))
    }
}

/// An LSN's text (`0x` and 20 upper-case hex digits) on the stack: every
/// change row carries two, so the reader writes them without a formatter
/// or an allocation.
#[derive(Clone, Copy)]
pub struct LsnText([u8; 2 + 2 * LEN]);

impl LsnText {
    /// The text.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written into it.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl Lsn {
    /// The LSN as text, as `Display` writes it.
    pub fn text(&self) -> LsnText {
        const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
        let mut out = [0u8; 2 + 2 * LEN];
        out[0] = b'0';
        out[1] = b'x';
        for (i, byte) in self.0.iter().enumerate() {
            out[2 + 2 * i] = DIGITS[usize::from(byte >> 4)];
            out[3 + 2 * i] = DIGITS[usize::from(byte & 0x0F)];
        }
        LsnText(out)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text().as_str())
    }
}

impl fmt::Debug for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lsn({self})")
    }
}

impl Serialize for Lsn {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Lsn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(text: &str) -> Lsn {
        text.parse().unwrap()
    }

    #[test]
    fn parses_and_displays_text_form() {
        let cases = [
            ("0x0000002A000001F40003", "0x0000002A000001F40003"),
            ("0x0000002a000001f40003", "0x0000002A000001F40003"),
            ("0X00000000000000000000", "0x00000000000000000000"),
            ("0xFFFFFFFFFFFFFFFFFFFF", "0xFFFFFFFFFFFFFFFFFFFF"),
        ];
        for (input, shown) in cases {
            assert_eq!(lsn(input).to_string(), shown, "{input}");
        }
    }

    #[test]
    fn rejects_malformed_text() {
        let cases = [
            "",
            "0x",
            "0000002A000001F40003",
            "0x0000002A000001F4000",
            "0x0000002A000001F4000300",
            "0x0000002A000001F4000G",
            "0x+000002A000001F40003",
        ];
        for input in cases {
            assert_eq!(
                input.parse::<Lsn>(),
                Err(LsnError::Text(input.to_string())),
                "{input:?}"
            );
        }
    }

    #[test]
    fn converts_from_ten_bytes_only() {
        let bytes = [0, 0, 0, 0x2A, 0, 0, 0x01, 0xF4, 0, 3];
        assert_eq!(Lsn::try_from(&bytes[..]), Ok(lsn("0x0000002A000001F40003")));
        for len in [0usize, 9, 11, 16] {
            let input = vec![0u8; len];
            assert_eq!(Lsn::try_from(&input[..]), Err(LsnError::Length(len)));
        }
        assert_eq!(lsn("0x0000002A000001F40003").to_bytes(), bytes);
    }

    #[test]
    fn orders_numerically() {
        let ordered = [
            "0x00000000000000000000",
            "0x00000000000000000001",
            "0x000000000000000000FF",
            "0x00000000000000000100",
            "0x0000002A000001F40003",
            "0x0000002B000000000000",
            "0xFFFFFFFFFFFFFFFFFFFF",
        ];
        for pair in ordered.windows(2) {
            assert!(lsn(pair[0]) < lsn(pair[1]), "{} < {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn increments_like_fn_cdc_increment_lsn() {
        let cases = [
            ("0x00000000000000000000", Some("0x00000000000000000001")),
            ("0x0000002A000001F40003", Some("0x0000002A000001F40004")),
            ("0x0000002A000001F4FFFF", Some("0x0000002A000001F50000")),
            ("0x0000002AFFFFFFFFFFFF", Some("0x0000002B000000000000")),
            ("0xFFFFFFFFFFFFFFFFFFFF", None),
        ];
        for (input, next) in cases {
            assert_eq!(lsn(input).checked_next(), next.map(lsn), "{input}");
        }
    }

    #[test]
    fn serializes_as_its_text_form() {
        let value = lsn("0x0000002A000001F40003");
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, "\"0x0000002A000001F40003\"");
        assert_eq!(serde_json::from_str::<Lsn>(&json).unwrap(), value);
        assert!(serde_json::from_str::<Lsn>("\"0x12\"").is_err());
    }
}
