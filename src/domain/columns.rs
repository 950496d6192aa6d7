//! Describes the columns of the lake's own tables (facts, finalization
//! control, bronze's CDC columns) once: name, kind, nullability and the
//! comment stored with the schema. The Delta and Arrow types of each kind
//! are chosen in `lake`, the only module that writes them.

/// The type of a column of one of our tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Text (Delta STRING).
    String,
    /// 64-bit integer (Delta LONG).
    Long,
    /// 64-bit float (Delta DOUBLE).
    Double,
    /// Microseconds, no zone, always UTC (Delta TIMESTAMP_NTZ).
    TimestampNtz,
}

/// One column of a table we define.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Column name.
    pub name: &'static str,
    /// Column type.
    pub kind: ColumnKind,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// The comment stored in the Delta schema.
    pub comment: &'static str,
}

/// A column, for `const` tables of columns.
pub const fn col(
    name: &'static str,
    kind: ColumnKind,
    nullable: bool,
    comment: &'static str,
) -> Column {
    Column {
        name,
        kind,
        nullable,
        comment,
    }
}
