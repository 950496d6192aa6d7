//! The facts table: one row per micro-batch of every stream, plus one per
//! snapshot and per change of the source, shared by all streams.
//!
//! `schema` defines the columns once (name, type, nullability, comment);
//! `row` is the typed row and its Arrow encoding; `table` creates the Delta
//! table and appends rows idempotently.

mod row;
mod schema;
mod table;

pub use row::{FactEvent, FactRow, to_record_batch};
pub use schema::{
    COLUMNS, ColumnKind, FactColumn, arrow_schema, arrow_schema_of, col, delta_fields,
    delta_fields_of,
};
pub use table::{AppendOutcome, FactSequence, FactsError, FactsKey, FactsTable};
