//! The Delta and Arrow types of the lake's own columns
//! ([`crate::domain::columns`]): facts, the finalization control table and
//! bronze's CDC columns are declared through these, so a kind maps to one
//! type everywhere.

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::kernel::{DataType, StructField};

use crate::domain::columns::{Column, ColumnKind};

/// The Delta type of a column kind.
pub fn delta_type(kind: ColumnKind) -> DataType {
    match kind {
        ColumnKind::String => DataType::STRING,
        ColumnKind::Long => DataType::LONG,
        ColumnKind::Double => DataType::DOUBLE,
        ColumnKind::TimestampNtz => DataType::TIMESTAMP_NTZ,
    }
}

/// The Arrow type of a column kind.
pub fn arrow_type(kind: ColumnKind) -> ArrowType {
    match kind {
        ColumnKind::String => ArrowType::Utf8,
        ColumnKind::Long => ArrowType::Int64,
        ColumnKind::Double => ArrowType::Float64,
        ColumnKind::TimestampNtz => ArrowType::Timestamp(TimeUnit::Microsecond, None),
    }
}

/// One column as an Arrow field.
pub fn arrow_field(column: &Column) -> Field {
    Field::new(column.name, arrow_type(column.kind), column.nullable)
}

/// The Delta schema fields of `columns`, each with its `comment` metadata.
pub fn delta_fields(columns: &[Column]) -> Vec<StructField> {
    columns
        .iter()
        .map(|c| {
            StructField::new(c.name, delta_type(c.kind), c.nullable)
                .with_metadata([("comment", c.comment.to_string())])
        })
        .collect()
}

/// The Arrow schema of `columns`, in their order.
pub fn arrow_schema(columns: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        columns.iter().map(arrow_field).collect::<Vec<_>>(),
    ))
}
