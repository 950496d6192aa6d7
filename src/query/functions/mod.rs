//! Spark SQL functions DataFusion lacks or defines differently, registered
//! under Spark's names so Spark queries keep their meaning.
//!
//! `time`: localtimestamp, current_timestamp, convert_timezone,
//! timestampdiff, all reading one [`QueryClock`]. `math`: try_divide,
//! Spark's `/` (through an expression planner) and Spark's HALF_UP round.
//! `max_by`: max_by and min_by. `from_json`: from_json with a DDL schema.

mod from_json;
mod math;
mod max_by;
mod time;

use std::sync::Arc;

use deltalake::datafusion::error::Result;
use deltalake::datafusion::execution::FunctionRegistry;
use deltalake::datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use deltalake::datafusion::prelude::SessionContext;

pub use time::{QueryClock, Zone};

/// Registers every Spark function, and Spark's division, on `ctx`.
pub(crate) fn register(ctx: &mut SessionContext, clock: QueryClock) -> Result<()> {
    for udf in time::functions(clock) {
        ctx.register_udf(Arc::new(udf))?;
    }
    let try_divide = Arc::new(ScalarUDF::new_from_impl(math::TryDivide::new()));
    ctx.register_udf(try_divide.clone())?;
    ctx.register_udf(Arc::new(ScalarUDF::new_from_impl(math::SparkRound::new())))?;
    ctx.register_udf(Arc::new(ScalarUDF::new_from_impl(
        from_json::FromJson::new(),
    )))?;
    ctx.register_udaf(Arc::new(AggregateUDF::new_from_impl(
        max_by::MaxBy::largest(),
    )))?;
    ctx.register_udaf(Arc::new(AggregateUDF::new_from_impl(
        max_by::MaxBy::smallest(),
    )))?;
    ctx.register_expr_planner(Arc::new(math::SparkDivision::new(try_divide)))?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Runs one SQL expression through a Spark session with a fixed clock.

    use deltalake::arrow::util::display::array_value_to_string;

    use crate::query::SparkSession;

    /// Evaluates `SELECT {exprs}` and returns the first row as strings,
    /// plus the column types.
    pub(crate) async fn eval(exprs: &str) -> (Vec<String>, Vec<String>) {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z")
            .unwrap()
            .to_utc();
        let session = SparkSession::new(super::QueryClock::new(
            now,
            "America/Los_Angeles".parse().unwrap(),
        ))
        .unwrap();
        let batches = session.sql(&format!("SELECT {exprs}")).await.unwrap();
        let batch = &batches[0];
        let values = batch
            .columns()
            .iter()
            .map(|c| array_value_to_string(c, 0).unwrap())
            .collect();
        let types = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().to_string())
            .collect();
        (values, types)
    }
}
