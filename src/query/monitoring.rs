//! Reads the facts and finalization control tables into the `health`
//! module's types, through a [`SparkSession`].

use chrono::{DateTime, Utc};
use deltalake::arrow::array::{Array, Float64Array, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, TimeUnit};
use deltalake::arrow::record_batch::RecordBatch;

use super::session::{QueryError, SparkSession};
use crate::domain::{Granularity, GranularityError, Lsn};
use crate::health::{LatestBatch, SourceTable, Verdict};

/// Why monitoring data could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MonitoringError {
    /// The query failed.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A column is missing or has another type than the schema defines.
    #[error("{table}: column {column} is missing or not {expected}")]
    Column {
        /// Which table.
        table: &'static str,
        /// The column.
        column: &'static str,
        /// The type it should have.
        expected: &'static str,
    },
    /// A value breaks the schema (a NULL in a NOT NULL column, an unknown
    /// granularity).
    #[error("{table}: {column} of {row}: {reason}")]
    Value {
        /// Which table.
        table: &'static str,
        /// The column.
        column: &'static str,
        /// The row's table or target name.
        row: String,
        /// What is wrong.
        reason: String,
    },
}

/// The name the facts table must be registered under for [`latest_batches`].
pub const FACTS: &str = "facts";
/// The name the control table must be registered under for [`verdicts`].
pub const CONTROL: &str = "control";

/// Each target's newest micro-batch row, by target name.
pub async fn latest_batches(session: &SparkSession) -> Result<Vec<LatestBatch>, MonitoringError> {
    let batches = session
        .sql(&format!(
            "SELECT target, max(written_at) AS written_at, \
             max_by(end_commit_ts, written_at) AS end_commit_ts, \
             max_by(retention_headroom_hours, written_at) AS retention_headroom_hours, \
             max_by(ingestion_lag_seconds, written_at) AS ingestion_lag_seconds, \
             max_by(capture_lag_seconds, written_at) AS capture_lag_seconds \
             FROM {FACTS} WHERE event IS NULL GROUP BY target ORDER BY target"
        ))
        .await?;
    let mut out = Vec::new();
    for batch in &batches {
        let t = Columns {
            table: "facts",
            batch,
        };
        let target = t.strings("target")?;
        let written_at = t.times("written_at")?;
        let end = t.times("end_commit_ts")?;
        let headroom = t.doubles("retention_headroom_hours")?;
        let ingestion = t.doubles("ingestion_lag_seconds")?;
        let capture = t.doubles("capture_lag_seconds")?;
        for row in 0..batch.num_rows() {
            let name = t.required_string(&target, row, "target", "?")?;
            out.push(LatestBatch {
                written_at: t.required_time(&written_at, row, "written_at", &name)?,
                end_commit_ts: time_at(&end, row),
                retention_headroom_hours: double_at(&headroom, row),
                ingestion_lag_seconds: double_at(&ingestion, row),
                capture_lag_seconds: double_at(&capture, row),
                target: name,
            });
        }
    }
    Ok(out)
}

/// Each target's newest micro-batch row as the source verdict reads it:
/// the source it names, its end LSN and commit time, by target name. A
/// facts table older than the `source` column (no stream has opened it
/// since) has no source in any row.
pub async fn source_tables(session: &SparkSession) -> Result<Vec<SourceTable>, MonitoringError> {
    let source = if session.has_column(FACTS, "source").await? {
        "max_by(source, written_at)"
    } else {
        "CAST(NULL AS STRING)"
    };
    let batches = session
        .sql(&format!(
            "SELECT target, {source} AS source, max_by(end_lsn, written_at) AS end_lsn, \
             max_by(end_commit_ts, written_at) AS end_commit_ts \
             FROM {FACTS} WHERE event IS NULL GROUP BY target ORDER BY target"
        ))
        .await?;
    let mut out = Vec::new();
    for batch in &batches {
        let t = Columns {
            table: "facts",
            batch,
        };
        let target = t.strings("target")?;
        let sources = t.strings("source")?;
        let end_lsn = t.strings("end_lsn")?;
        let end = t.times("end_commit_ts")?;
        for row in 0..batch.num_rows() {
            let name = t.required_string(&target, row, "target", "?")?;
            let end_lsn = string_at(&end_lsn, row)
                .map(|text| {
                    text.parse::<Lsn>().map_err(|e| MonitoringError::Value {
                        table: "facts",
                        column: "end_lsn",
                        row: name.clone(),
                        reason: e.to_string(),
                    })
                })
                .transpose()?;
            out.push(SourceTable {
                source: string_at(&sources, row),
                end_lsn,
                end_commit_ts: time_at(&end, row),
                target: name,
            });
        }
    }
    Ok(out)
}

/// Every row of the control table, by table name.
pub async fn verdicts(session: &SparkSession) -> Result<Vec<Verdict>, MonitoringError> {
    let batches = session
        .sql(&format!(
            "SELECT table_name, granularity, finalized_until, updated_at, open_snapshot_lsn, \
             applied_lsn FROM {CONTROL} ORDER BY table_name"
        ))
        .await?;
    let mut out = Vec::new();
    for batch in &batches {
        let t = Columns {
            table: "control",
            batch,
        };
        let names = t.strings("table_name")?;
        let granularity = t.strings("granularity")?;
        let until = t.times("finalized_until")?;
        let updated = t.times("updated_at")?;
        let snapshot = t.strings("open_snapshot_lsn")?;
        let applied = t.strings("applied_lsn")?;
        for row in 0..batch.num_rows() {
            let name = t.required_string(&names, row, "table_name", "?")?;
            let granularity_text = t.required_string(&granularity, row, "granularity", &name)?;
            let granularity: Granularity =
                granularity_text
                    .parse()
                    .map_err(|e: GranularityError| MonitoringError::Value {
                        table: "control",
                        column: "granularity",
                        row: name.clone(),
                        reason: e.to_string(),
                    })?;
            out.push(Verdict {
                granularity,
                finalized_until: time_at(&until, row),
                updated_at: t.required_time(&updated, row, "updated_at", &name)?,
                open_snapshot_lsn: string_at(&snapshot, row),
                applied_lsn: string_at(&applied, row),
                table_name: name,
            });
        }
    }
    Ok(out)
}

struct Columns<'a> {
    table: &'static str,
    batch: &'a RecordBatch,
}

impl Columns<'_> {
    /// The column cast to `data_type` (DataFusion may read strings as
    /// views, for example).
    fn column<T: Clone + 'static>(
        &self,
        column: &'static str,
        data_type: &DataType,
        expected: &'static str,
    ) -> Result<T, MonitoringError> {
        let missing = || MonitoringError::Column {
            table: self.table,
            column,
            expected,
        };
        let array = self.batch.column_by_name(column).ok_or_else(missing)?;
        let cast = cast(array, data_type).map_err(|_| missing())?;
        cast.as_any()
            .downcast_ref::<T>()
            .cloned()
            .ok_or_else(missing)
    }

    fn strings(&self, column: &'static str) -> Result<StringArray, MonitoringError> {
        self.column(column, &DataType::Utf8, "STRING")
    }

    fn times(&self, column: &'static str) -> Result<TimestampMicrosecondArray, MonitoringError> {
        self.column(
            column,
            &DataType::Timestamp(TimeUnit::Microsecond, None),
            "TIMESTAMP_NTZ",
        )
    }

    fn doubles(&self, column: &'static str) -> Result<Float64Array, MonitoringError> {
        self.column(column, &DataType::Float64, "DOUBLE")
    }

    fn null_in(&self, column: &'static str, row: &str) -> MonitoringError {
        MonitoringError::Value {
            table: self.table,
            column,
            row: row.to_string(),
            reason: "NULL in a NOT NULL column".into(),
        }
    }

    fn required_string(
        &self,
        array: &StringArray,
        row: usize,
        column: &'static str,
        name: &str,
    ) -> Result<String, MonitoringError> {
        string_at(array, row).ok_or_else(|| self.null_in(column, name))
    }

    fn required_time(
        &self,
        array: &TimestampMicrosecondArray,
        row: usize,
        column: &'static str,
        name: &str,
    ) -> Result<DateTime<Utc>, MonitoringError> {
        time_at(array, row).ok_or_else(|| self.null_in(column, name))
    }
}

fn string_at(array: &StringArray, row: usize) -> Option<String> {
    (!array.is_null(row)).then(|| array.value(row).to_string())
}

fn double_at(array: &Float64Array, row: usize) -> Option<f64> {
    (!array.is_null(row)).then(|| array.value(row))
}

fn time_at(array: &TimestampMicrosecondArray, row: usize) -> Option<DateTime<Utc>> {
    if array.is_null(row) {
        return None;
    }
    DateTime::from_timestamp_micros(array.value(row))
}
