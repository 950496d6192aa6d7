//! What a bronze row is: the captured columns of one change, followed by
//! the CDC columns laid out here. The reader fills them in this order and
//! the bronze writer declares them, so the layout is stated once.

use super::columns::ColumnKind::{Long, String as Str, TimestampNtz as Ts};
use super::columns::{Column, col};

/// Commit LSN of the change (`0x` + 20 hex digits, so text order is LSN order).
pub const LSN: &str = "_lsn";
/// Order of the change within its transaction (`__$seqval`, same text form).
pub const SEQVAL: &str = "_seqval";
/// What the row is: see [`Operation`].
pub const OPERATION: &str = "_operation";
/// Commit time of `_lsn`, UTC, TIMESTAMP_NTZ.
pub const COMMIT_TS: &str = "_commit_ts";
/// The micro-batch that wrote the row.
pub const BATCH_ID: &str = "_batch_id";

/// The CDC columns appended after the captured columns, in bronze order.
pub const CDC_COLUMNS: [Column; 5] = [
    col(LSN, Str, false, "Commit LSN of the change."),
    col(
        SEQVAL,
        Str,
        false,
        "Order of the change within its transaction.",
    ),
    col(
        OPERATION,
        Str,
        false,
        "insert, delete, update_before, update_after or snapshot.",
    ),
    col(COMMIT_TS, Ts, true, "Commit time of _lsn (UTC)."),
    col(BATCH_ID, Long, false, "The micro-batch that wrote the row."),
];

/// The kind of a bronze row (`_operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A row inserted on the source.
    Insert,
    /// A row deleted on the source (its last values).
    Delete,
    /// An updated row's values before the update.
    UpdateBefore,
    /// An updated row's values after the update.
    UpdateAfter,
    /// A row copied by a snapshot.
    Snapshot,
}

impl Operation {
    /// The `_operation` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Insert => "insert",
            Operation::Delete => "delete",
            Operation::UpdateBefore => "update_before",
            Operation::UpdateAfter => "update_after",
            Operation::Snapshot => "snapshot",
        }
    }

    /// Maps CDC's `__$operation` code (1 delete, 2 insert, 3 and 4 the two
    /// images of an update).
    pub fn from_cdc_code(code: i32) -> Option<Self> {
        match code {
            1 => Some(Operation::Delete),
            2 => Some(Operation::Insert),
            3 => Some(Operation::UpdateBefore),
            4 => Some(Operation::UpdateAfter),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdc_codes_map_to_operations() {
        let cases = [
            (1, Some("delete")),
            (2, Some("insert")),
            (3, Some("update_before")),
            (4, Some("update_after")),
            (5, None),
            (0, None),
        ];
        for (code, name) in cases {
            assert_eq!(Operation::from_cdc_code(code).map(Operation::as_str), name);
        }
    }
}
