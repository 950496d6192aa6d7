//! Identifiers a stream uses across the source and the lake.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The number of one micro-batch of a stream, starting at 0 and increasing by
/// one per planned batch. It names the checkpoint files and is the Delta
/// `txn.version` of the bronze commit, so it is kept within `i64`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct BatchId(u64);

/// Why a value is not a batch id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchIdError {
    /// Delta stores transaction versions as signed 64-bit integers.
    #[error("a batch id is at most {max}, got {0}", max = i64::MAX)]
    TooLarge(u64),
    /// The text form is plain decimal digits.
    #[error("expected a batch id (decimal digits), got {0:?}")]
    Text(String),
    /// Delta transaction versions below zero are not batch ids.
    #[error("a batch id is not negative, got {0}")]
    Negative(i64),
}

impl BatchId {
    /// The first micro-batch of a new checkpoint. Batch 0 is reserved: it is
    /// the `_batch_id` of rows a snapshot wrote.
    pub const FIRST: BatchId = BatchId(1);

    /// `_batch_id` of snapshot rows in bronze.
    pub const SNAPSHOT: BatchId = BatchId(0);

    /// Checks that `value` fits a Delta transaction version.
    pub fn new(value: u64) -> Result<Self, BatchIdError> {
        if value > i64::MAX as u64 {
            return Err(BatchIdError::TooLarge(value));
        }
        Ok(BatchId(value))
    }

    /// The plain number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The batch after this one.
    pub fn next(self) -> Result<Self, BatchIdError> {
        BatchId::new(self.0.saturating_add(1))
    }

    /// The value of a Delta `txn.version` (always fits: see [`BatchId::new`]).
    pub fn txn_version(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// Reads back a Delta `txn.version`.
    pub fn from_txn_version(version: i64) -> Result<Self, BatchIdError> {
        u64::try_from(version)
            .map(BatchId)
            .map_err(|_| BatchIdError::Negative(version))
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for BatchId {
    type Err = BatchIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BatchIdError::Text(text.to_string()));
        }
        let value: u64 = text
            .parse()
            .map_err(|_| BatchIdError::Text(text.to_string()))?;
        BatchId::new(value)
    }
}

impl Serialize for BatchId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for BatchId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BatchId::new(u64::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// The name of a CDC capture instance (`cdc.<name>_CT`), e.g. `dbo_orders`.
/// A table has at most two at a time; the stream reads exactly one.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct CaptureInstance(String);

/// Why a name is not a capture instance name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureInstanceError {
    /// SQL Server limits capture instance names to 100 characters and forbids
    /// empty ones; control characters cannot be part of an identifier.
    #[error("expected a capture instance name (1 to 100 printable characters), got {0:?}")]
    Invalid(String),
}

impl CaptureInstance {
    /// Longest name `sys.sp_cdc_enable_table` accepts.
    const MAX_CHARS: usize = 100;

    /// Checks the name's shape (not whether it exists).
    pub fn new(name: impl Into<String>) -> Result<Self, CaptureInstanceError> {
        let name = name.into();
        let chars = name.chars().count();
        if chars == 0
            || chars > Self::MAX_CHARS
            || name.trim() != name
            || name.chars().any(char::is_control)
        {
            return Err(CaptureInstanceError::Invalid(name));
        }
        Ok(CaptureInstance(name))
    }

    /// The name as SQL Server spells it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CaptureInstance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for CaptureInstance {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CaptureInstance {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        CaptureInstance::new(String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_id_parses_decimal_names() {
        let cases: [(&str, Result<u64, BatchIdError>); 7] = [
            ("0", Ok(0)),
            ("42", Ok(42)),
            ("9223372036854775807", Ok(i64::MAX as u64)),
            ("9223372036854775808", Err(BatchIdError::TooLarge(1 << 63))),
            ("", Err(BatchIdError::Text(String::new()))),
            ("+1", Err(BatchIdError::Text("+1".into()))),
            ("1.tmp", Err(BatchIdError::Text("1.tmp".into()))),
        ];
        for (input, expected) in cases {
            assert_eq!(
                input.parse::<BatchId>().map(BatchId::get),
                expected,
                "{input:?}"
            );
        }
    }

    #[test]
    fn batch_id_round_trips_through_txn_version() {
        for value in [0u64, 1, 7, i64::MAX as u64] {
            let id = BatchId::new(value).unwrap();
            assert_eq!(BatchId::from_txn_version(id.txn_version()), Ok(id));
        }
        assert_eq!(
            BatchId::from_txn_version(-1),
            Err(BatchIdError::Negative(-1))
        );
        let last = BatchId::new(i64::MAX as u64).unwrap();
        assert!(last.next().is_err());
        assert_eq!(BatchId::FIRST.next().map(BatchId::get), Ok(2));
    }

    #[test]
    fn capture_instance_checks_shape() {
        let long = "x".repeat(101);
        let cases = [
            ("dbo_orders", true),
            ("sales_Order Lines_v2", true),
            (&"x".repeat(100)[..], true),
            ("", false),
            (" dbo_orders", false),
            ("dbo\norders", false),
            (&long[..], false),
        ];
        for (input, ok) in cases {
            assert_eq!(CaptureInstance::new(input).is_ok(), ok, "{input:?}");
        }
    }
}
