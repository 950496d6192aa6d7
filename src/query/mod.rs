//! Spark-flavoured SQL over Delta tables, on DataFusion.
//!
//! The monitoring queries users already run in Spark must run here
//! unchanged and give Spark's answers (docs/adr/0004-spark-sql-on-datafusion.md). `dialect` parses Spark SQL
//! and rewrites the one construct DataFusion reads differently; `functions`
//! holds the Spark functions and Spark's division; `session` registers Delta
//! tables under dotted names and runs a query with a fixed clock; `render`
//! prints results; `monitoring` reads the facts and control tables into the
//! `health` module's types.

mod dialect;
mod functions;
pub mod monitoring;
pub mod render;
mod session;

pub use functions::{QueryClock, Zone};
pub use session::{QueryError, SparkSession, TableRef};
