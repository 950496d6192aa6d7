//! The facts table's row: one per micro-batch of every stream, plus one per
//! snapshot and per change of the source. `columns` lists the columns once;
//! `row` is the typed row and its serialised form; `detail` the typed
//! `detail` of each event row.

mod columns;
pub mod detail;
mod row;

pub use columns::COLUMNS;
pub use detail::EventDetail;
pub use row::{FactEvent, FactRow};
