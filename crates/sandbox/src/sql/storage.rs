//! Row storage: a table's rows ordered by clustered key (the primary key),
//! or by insertion sequence for heaps.
//!
//! Keys are normalised into [`KeyPart`]s whose `Ord` agrees with
//! `expr::compare` for values of one column type: strings compare
//! case-insensitively with trailing spaces ignored (the default CI_AS
//! collation), numbers by value, NULL first. The same normalisation gives
//! GROUP BY and DISTINCT their equality.

use std::collections::BTreeMap;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use uuid::Uuid;

use super::collation::{Collation, Rule, fold};
use super::types::Value;

/// One stored row: the column values in column order.
pub type Row = Box<[Value]>;

/// One value normalised for ordering and equality.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyPart {
    Null,
    Int(i64),
    /// Decimal value at its column's scale (values of one column share it).
    Dec(i128),
    /// f64 bits mapped to a total order.
    Float(u64),
    Str(String),
    Bytes(Vec<u8>),
    Date(NaiveDate),
    Time(NaiveTime),
    DateTime(NaiveDateTime),
    Guid(Uuid),
}

impl KeyPart {
    /// Normalises one value.
    /// [`Self::from_value`] for a value of collation `collation`: strings
    /// of a case-sensitive or binary collation keep their case.
    pub fn from_collated(v: &Value, collation: Option<Collation>) -> Self {
        match (v, collation) {
            (Value::String(s), Some(c)) if c.rule != Rule::CaseInsensitive => {
                KeyPart::Str(c.key(s))
            }
            _ => Self::from_value(v),
        }
    }

    pub fn from_value(v: &Value) -> Self {
        match v {
            Value::Null => KeyPart::Null,
            Value::Bit(b) => KeyPart::Int(i64::from(*b)),
            Value::TinyInt(x) => KeyPart::Int(i64::from(*x)),
            Value::SmallInt(x) => KeyPart::Int(i64::from(*x)),
            Value::Int(x) => KeyPart::Int(i64::from(*x)),
            Value::BigInt(x) => KeyPart::Int(*x),
            Value::Money(x) => KeyPart::Int(*x),
            Value::Decimal(d) => KeyPart::Dec(d.value),
            Value::Real(f) => KeyPart::Float(float_key(f64::from(*f))),
            Value::Float(f) => KeyPart::Float(float_key(*f)),
            // Upper-cased per character, as `expr::compare` folds, so that
            // key order is comparison order.
            Value::String(s) => KeyPart::Str(s.trim_end_matches(' ').chars().map(fold).collect()),
            Value::Binary(b) => KeyPart::Bytes(b.clone()),
            Value::Date(d) => KeyPart::Date(*d),
            Value::Time(t) => KeyPart::Time(*t),
            Value::DateTime(d) => KeyPart::DateTime(*d),
            Value::DateTimeOffset(d) => KeyPart::DateTime(d.naive_utc()),
            Value::Guid(g) => KeyPart::Guid(*g),
        }
    }
}

fn float_key(f: f64) -> u64 {
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// The clustered key of a row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowKey {
    /// A heap row: insertion sequence.
    Seq(u64),
    /// A single-column primary key.
    One(KeyPart),
    /// A composite primary key.
    Many(Box<[KeyPart]>),
}

impl RowKey {
    /// The key of `row` for primary-key columns `pk` of a table whose
    /// columns have collations `collations` (by position; missing ones are
    /// the default): a key column of a case-sensitive or binary collation
    /// keeps its case, so `'a'` and `'A'` are two keys.
    pub fn for_columns_in(row: &[Value], pk: &[usize], collations: &[Option<Collation>]) -> Self {
        let part = |i: &usize| {
            row.get(*i).map_or(KeyPart::Null, |v| {
                KeyPart::from_collated(v, collations.get(*i).copied().flatten())
            })
        };
        match pk {
            [one] => RowKey::One(part(one)),
            _ => RowKey::Many(pk.iter().map(part).collect()),
        }
    }
}

/// A table's rows in clustered-key order.
#[derive(Debug, Clone, Default)]
pub struct TableData {
    rows: BTreeMap<RowKey, Row>,
    next_seq: u64,
}

impl TableData {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Rows in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&RowKey, &Row)> {
        self.rows.iter()
    }

    pub fn get(&self, key: &RowKey) -> Option<&Row> {
        self.rows.get(key)
    }

    pub fn contains(&self, key: &RowKey) -> bool {
        self.rows.contains_key(key)
    }

    /// A fresh heap key.
    pub fn next_heap_key(&mut self) -> RowKey {
        self.next_seq += 1;
        RowKey::Seq(self.next_seq)
    }

    /// Inserts; false (and nothing changed) when the key exists.
    pub fn insert(&mut self, key: RowKey, row: Row) -> bool {
        if self.rows.contains_key(&key) {
            return false;
        }
        self.rows.insert(key, row);
        true
    }

    pub fn remove(&mut self, key: &RowKey) -> Option<Row> {
        self.rows.remove(key)
    }

    /// Replaces every row (ALTER TABLE rewrites).
    pub fn replace_all(&mut self, rows: BTreeMap<RowKey, Row>) {
        self.rows = rows;
    }

    /// Takes every row out, leaving the table empty.
    pub fn take_all(&mut self) -> BTreeMap<RowKey, Row> {
        std::mem::take(&mut self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_compare_case_insensitively_ignoring_trailing_spaces() {
        let a = KeyPart::from_value(&Value::String("Abc  ".into()));
        let b = KeyPart::from_value(&Value::String("aBC".into()));
        assert_eq!(a, b);
    }

    #[test]
    fn floats_order_by_value() {
        let mut v: Vec<KeyPart> = [3.5, -1.0, 0.0, -7.25, 2.0]
            .iter()
            .map(|f| KeyPart::from_value(&Value::Float(*f)))
            .collect();
        v.sort();
        let want: Vec<KeyPart> = [-7.25, -1.0, 0.0, 2.0, 3.5]
            .iter()
            .map(|f| KeyPart::from_value(&Value::Float(*f)))
            .collect();
        assert_eq!(v, want);
        assert!(KeyPart::Null < KeyPart::Int(i64::MIN));
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let mut t = TableData::default();
        let row: Row = vec![Value::Int(1)].into();
        let k = RowKey::for_columns_in(&row, &[0], &[]);
        assert!(t.insert(k.clone(), row.clone()));
        assert!(!t.insert(k, row));
        assert_eq!(t.len(), 1);
    }
}
