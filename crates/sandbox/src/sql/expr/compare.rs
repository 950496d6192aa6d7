//! Comparisons and grouping keys under SQL Server's rules: mixed types
//! meet at the type of higher precedence; strings compare under the
//! default collation SQL_Latin1_General_CP1_CI_AS (case-insensitive,
//! accent-sensitive, trailing spaces ignored); binary compares bytewise.
//!
//! <https://learn.microsoft.com/sql/t-sql/data-types/data-type-precedence-transact-sql>
//! <https://learn.microsoft.com/sql/t-sql/language-elements/comparison-operators-transact-sql>

use std::borrow::Cow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

use super::super::collation::{Collation, Label};
use super::super::error::SqlResult;
use super::super::types::{DataType, Value};
use super::Typed;
use super::cast::{self, Mode, exact, float_of};
use super::num;
use super::types::{Family, decimal, family, higher};

fn fold(c: char) -> char {
    c.to_uppercase().next().unwrap_or(c)
}

/// Compares strings case-insensitively with trailing spaces ignored.
pub fn cmp_text(a: &str, b: &str) -> Ordering {
    let a = a.trim_end_matches(' ').chars().map(fold);
    let b = b.trim_end_matches(' ').chars().map(fold);
    a.cmp(b)
}

/// uniqueidentifier order: SQL Server compares the last six bytes first,
/// then the groups before them, right to left.
fn guid_order(g: &uuid::Uuid) -> [u8; 16] {
    let b = g.to_bytes_le();
    let order = [10, 11, 12, 13, 14, 15, 8, 9, 6, 7, 4, 5, 0, 1, 2, 3];
    let mut out = [0u8; 16];
    for (i, idx) in order.iter().enumerate() {
        out[i] = b[*idx];
    }
    out
}

fn same_family(a: &Value, b: &Value, coll: Option<Collation>) -> Option<Ordering> {
    if let (Some((x, sx)), Some((y, sy))) = (exact(a), exact(b)) {
        return Some(num::cmp(x, sx, y, sy));
    }
    if let (Some(x), Some(y)) = (float_of(a), float_of(b)) {
        return x.partial_cmp(&y);
    }
    Some(match (a, b) {
        (Value::String(x), Value::String(y)) => match coll {
            Some(c) => c.compare(x, y),
            None => cmp_text(x, y),
        },
        (Value::Binary(x), Value::Binary(y)) => x.cmp(y),
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::Time(x), Value::Time(y)) => x.cmp(y),
        (Value::DateTime(x), Value::DateTime(y)) => x.cmp(y),
        (Value::DateTimeOffset(x), Value::DateTimeOffset(y)) => x.cmp(y),
        (Value::Guid(x), Value::Guid(y)) => guid_order(x).cmp(&guid_order(y)),
        _ => return None,
    })
}

/// The type a string is read as when it meets `other` in a comparison.
fn string_target(s: &Value, other: DataType) -> DataType {
    match (other, s) {
        // A string meeting a decimal keeps its own digits.
        (DataType::Decimal { .. }, Value::String(text)) => match num::Parsed::read(text.trim()) {
            Some(p) => {
                let (prec, scale) = p.shape();
                decimal(prec.max(scale), scale)
            }
            None => other,
        },
        (t, _) => t,
    }
}

/// Brings both sides to the type of higher precedence (206/245/241... on
/// failure), then compares. `None` when either is NULL.
/// Strings compare under the collation of the side that has one (an
/// explicit COLLATE first, then a column's), else the default's rule.
pub fn compare(a: &Typed, b: &Typed) -> SqlResult<Option<Ordering>> {
    compare_in(
        &a.value,
        a.ty,
        &b.value,
        b.ty,
        Label::pick(a.collation, b.collation),
    )
}

/// [`compare`] for values held apart from their types (rows being sorted),
/// copying a value only when it has to be converted.
pub fn compare_parts(
    a: &Value,
    a_ty: DataType,
    b: &Value,
    b_ty: DataType,
) -> SqlResult<Option<Ordering>> {
    compare_in(a, a_ty, b, b_ty, None)
}

/// [`compare_parts`] with strings compared under `coll` (`None`: the
/// default collation's rule).
pub fn compare_in(
    a: &Value,
    a_ty: DataType,
    b: &Value,
    b_ty: DataType,
    coll: Option<Collation>,
) -> SqlResult<Option<Ordering>> {
    if a.is_null() || b.is_null() {
        return Ok(None);
    }
    let (fa, fb) = (family(&a_ty), family(&b_ty));
    let numeric = |f: Family| matches!(f, Family::Exact | Family::Approx);
    if (fa == fb && fa != Family::Temporal || numeric(fa) && numeric(fb))
        && let Some(o) = same_family(a, b, coll)
    {
        return Ok(Some(o));
    }
    let hi = higher(a_ty, b_ty);
    let ca = at_type(a, a_ty, hi)?;
    let cb = at_type(b, b_ty, hi)?;
    Ok(same_family(&ca, &cb, coll))
}

/// `v` (of type `ty`) as a comparison at type `hi` reads it.
fn at_type(v: &Value, ty: DataType, hi: DataType) -> SqlResult<Cow<'_, Value>> {
    if ty == hi {
        return Ok(Cow::Borrowed(v));
    }
    let target = if ty.is_string() {
        string_target(v, hi)
    } else {
        hi
    };
    let typed = Typed::new(v.clone(), ty);
    Ok(Cow::Owned(cast::convert(
        &typed,
        target,
        None,
        Mode::Implicit,
    )?))
}

/// A grouping, DISTINCT and key value: two values of one type have equal
/// keys exactly when [`compare`] says they are equal, and keys order as
/// `compare` does (NULL first). Strings are upper-cased without trailing
/// spaces, numbers normalised (1.50 = 1.5 = 1), datetimeoffsets compared
/// as instants. Values of different types should be converted to a
/// common type first (e.g. with [`super::chart::union`]).
#[derive(Debug, Clone)]
pub enum Key {
    Null,
    /// Any exact numeric as a normalised decimal.
    Number(i128, u8),
    /// real/float, -0 folded into 0.
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
    Date(NaiveDate),
    Time(NaiveTime),
    DateTime(NaiveDateTime),
    /// datetimeoffset as its UTC instant.
    Instant(NaiveDateTime),
    Guid([u8; 16]),
}

impl Key {
    fn rank(&self) -> u8 {
        match self {
            Key::Null => 0,
            Key::Number(..) => 1,
            Key::Float(_) => 2,
            Key::Text(_) => 3,
            Key::Bytes(_) => 4,
            Key::Date(_) => 5,
            Key::Time(_) => 6,
            Key::DateTime(_) => 7,
            Key::Instant(_) => 8,
            Key::Guid(_) => 9,
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Key::Number(a, sa), Key::Number(b, sb)) => num::cmp(*a, *sa, *b, *sb),
            (Key::Float(a), Key::Float(b)) => a.total_cmp(b),
            (Key::Text(a), Key::Text(b)) => a.cmp(b),
            (Key::Bytes(a), Key::Bytes(b)) => a.cmp(b),
            (Key::Date(a), Key::Date(b)) => a.cmp(b),
            (Key::Time(a), Key::Time(b)) => a.cmp(b),
            (Key::DateTime(a), Key::DateTime(b)) | (Key::Instant(a), Key::Instant(b)) => a.cmp(b),
            (Key::Guid(a), Key::Guid(b)) => a.cmp(b),
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Key::Null => {}
            // Numbers are normalised on construction, so equal numbers
            // hash alike.
            Key::Number(v, s) => (v, s).hash(state),
            Key::Float(f) => f.to_bits().hash(state),
            Key::Text(t) => t.hash(state),
            Key::Bytes(b) => b.hash(state),
            Key::Date(d) => d.hash(state),
            Key::Time(t) => t.hash(state),
            Key::DateTime(d) | Key::Instant(d) => d.hash(state),
            Key::Guid(g) => g.hash(state),
        }
    }
}

/// The key of a value (see [`Key`]).
pub fn key(value: &Typed) -> Key {
    let v = &value.value;
    if let Some((x, s)) = exact(v) {
        let (x, s) = num::normalize(x, s);
        return Key::Number(x, s);
    }
    match v {
        Value::Null => Key::Null,
        Value::Real(_) | Value::Float(_) => {
            let f = float_of(v).unwrap_or(0.0);
            Key::Float(if f == 0.0 { 0.0 } else { f })
        }
        Value::String(s) => Key::Text(match value.collation {
            Some(l) => l.collation.key(s),
            None => s.trim_end_matches(' ').chars().map(fold).collect(),
        }),
        Value::Binary(b) => Key::Bytes(b.clone()),
        Value::Date(d) => Key::Date(*d),
        Value::Time(t) => Key::Time(*t),
        Value::DateTime(d) => Key::DateTime(*d),
        Value::DateTimeOffset(d) => Key::Instant(d.naive_utc()),
        Value::Guid(g) => Key::Guid(guid_order(g)),
        // Exact values were handled above.
        _ => Key::Null,
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
