//! Intermediate results: columns with the names they can be referenced
//! by, and materialised rows.

use crate::sql::collation::Collation;
use crate::sql::expr::Typed;
use crate::sql::request::Column;
use crate::sql::types::{DataType, Value};

/// A column of an intermediate relation.
#[derive(Debug, Clone, PartialEq)]
pub struct ColMeta {
    /// Table alias or name (`t` in `t.col`).
    pub qualifier: Option<String>,
    pub schema: Option<String>,
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    /// Internal (row locators); invisible to `*` and name lookup.
    pub hidden: bool,
    /// A character column's collation (a table column's, or a SELECT
    /// item's that has one); `None` for the database default.
    pub collation: Option<Collation>,
}

impl ColMeta {
    pub fn new(name: impl Into<String>, ty: DataType, nullable: bool) -> Self {
        Self {
            qualifier: None,
            schema: None,
            name: name.into(),
            ty,
            nullable,
            hidden: false,
            collation: None,
        }
    }

    /// With a collation (kept only for character types).
    pub fn collated(mut self, collation: Option<Collation>) -> Self {
        self.collation = collation.filter(|_| self.ty.is_string());
        self
    }

    /// A value of this column, with its collation.
    pub fn typed(&self, value: Value) -> Typed {
        Typed::new(value, self.ty).with_column_collation(self.collation)
    }

    pub fn qualified(mut self, qualifier: Option<&str>, schema: Option<&str>) -> Self {
        self.qualifier = qualifier.map(str::to_string);
        self.schema = schema.map(str::to_string);
        self
    }

    /// As a result-set column.
    pub fn to_column(&self) -> Column {
        Column::new(self.name.clone(), self.ty, self.nullable).collated(self.collation)
    }
}

/// Columns and rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Relation {
    pub cols: Vec<ColMeta>,
    pub rows: Vec<Vec<Value>>,
    /// Columns the rows are known to be in ascending order of (as ORDER BY
    /// compares, NULLs first), most significant first; empty when unknown.
    /// Lets ORDER BY skip a sort its input already satisfies.
    pub ordered_by: Vec<usize>,
}

impl Relation {
    /// The relation of a FROM-less SELECT: one row, no columns.
    pub fn unit() -> Self {
        Self {
            cols: Vec::new(),
            rows: vec![Vec::new()],
            ordered_by: Vec::new(),
        }
    }

    pub fn columns(&self) -> Vec<Column> {
        self.cols
            .iter()
            .filter(|c| !c.hidden)
            .map(ColMeta::to_column)
            .collect()
    }
}
