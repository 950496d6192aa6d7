//! The right side of a hash join, indexed by its key column so that each
//! left row finds its matches without a copy of its key: integers, bytes
//! and uniqueidentifiers in maps of their own, with the same equality as
//! [`KeyPart`] (which the planner chose because it is SQL equality for
//! those types).

use std::collections::HashMap;

use uuid::Uuid;

use crate::sql::storage::KeyPart;
use crate::sql::types::Value;

/// Right-side row positions by join key; NULL keys match nothing.
#[derive(Debug, Default)]
pub(super) struct JoinIndex {
    ints: HashMap<i64, Vec<usize>>,
    bytes: HashMap<Vec<u8>, Vec<usize>>,
    guids: HashMap<Uuid, Vec<usize>>,
    /// Values of any other kind, as [`KeyPart`]s.
    other: HashMap<KeyPart, Vec<usize>>,
}

/// A key as [`KeyPart`] sees it, borrowed from the value.
enum Probe<'v> {
    Int(i64),
    Bytes(&'v [u8]),
    Guid(Uuid),
    Other(KeyPart),
}

fn probe(v: &Value) -> Option<Probe<'_>> {
    Some(match v {
        Value::Null => return None,
        Value::Bit(b) => Probe::Int(i64::from(*b)),
        Value::TinyInt(x) => Probe::Int(i64::from(*x)),
        Value::SmallInt(x) => Probe::Int(i64::from(*x)),
        Value::Int(x) => Probe::Int(i64::from(*x)),
        Value::BigInt(x) | Value::Money(x) => Probe::Int(*x),
        Value::Binary(b) => Probe::Bytes(b),
        Value::Guid(g) => Probe::Guid(*g),
        other => Probe::Other(KeyPart::from_value(other)),
    })
}

impl JoinIndex {
    /// Indexes `rows` by column `col`.
    pub(super) fn build(rows: &[Vec<Value>], col: usize) -> Self {
        let mut index = Self::default();
        for (i, row) in rows.iter().enumerate() {
            let Some(key) = row.get(col).and_then(probe) else {
                continue;
            };
            let slot = match key {
                Probe::Int(x) => index.ints.entry(x).or_default(),
                Probe::Bytes(b) => index.bytes.entry(b.to_vec()).or_default(),
                Probe::Guid(g) => index.guids.entry(g).or_default(),
                Probe::Other(k) => index.other.entry(k).or_default(),
            };
            slot.push(i);
        }
        index
    }

    /// The positions of the rows whose key equals `v`.
    pub(super) fn get(&self, v: &Value) -> &[usize] {
        let found = match probe(v) {
            None => None,
            Some(Probe::Int(x)) => self.ints.get(&x),
            Some(Probe::Bytes(b)) => self.bytes.get(b),
            Some(Probe::Guid(g)) => self.guids.get(&g),
            Some(Probe::Other(k)) => self.other.get(&k),
        };
        found.map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_key_part_equality_finds() {
        let rows = vec![
            vec![Value::Int(2)],
            vec![Value::BigInt(2)],
            vec![Value::Null],
            vec![Value::Binary(vec![0, 1])],
            vec![Value::Binary(vec![0, 1, 0])],
            vec![Value::String("Ab ".into())],
        ];
        let index = JoinIndex::build(&rows, 0);
        assert_eq!(index.get(&Value::SmallInt(2)), &[0, 1]);
        assert_eq!(index.get(&Value::Null), &[] as &[usize]);
        assert_eq!(index.get(&Value::Binary(vec![0, 1])), &[3]);
        assert_eq!(index.get(&Value::String("aB".into())), &[5]);
        assert_eq!(index.get(&Value::Int(3)), &[] as &[usize]);
        // Every lookup agrees with comparing KeyParts.
        for probe_row in &rows {
            let want: Vec<usize> = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    !r[0].is_null()
                        && !probe_row[0].is_null()
                        && KeyPart::from_value(&r[0]) == KeyPart::from_value(&probe_row[0])
                })
                .map(|(i, _)| i)
                .collect();
            assert_eq!(index.get(&probe_row[0]), want.as_slice(), "{probe_row:?}");
        }
    }
}
