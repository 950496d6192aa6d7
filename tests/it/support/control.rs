//! Writes finalization control-table rows for tests, with the table's fixed
//! schema: rows the engine's writer never produces (a silver table's
//! `applied_lsn`, verdicts stamped in the past), so every stale reason can
//! be set up without waiting.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::DeltaTable;
use deltalake::arrow::array::{ArrayRef, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::protocol::SaveMode;

/// One control-table row.
#[derive(Debug, Clone)]
pub struct ControlRow {
    pub table_name: &'static str,
    pub app_id: &'static str,
    pub granularity: &'static str,
    pub finalized_until: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub open_snapshot_lsn: Option<&'static str>,
    pub applied_lsn: Option<&'static str>,
}

impl ControlRow {
    /// A bronze row (no snapshot open, no applied LSN).
    pub fn bronze(
        table_name: &'static str,
        finalized_until: Option<DateTime<Utc>>,
        updated_at: DateTime<Utc>,
    ) -> Self {
        ControlRow {
            table_name,
            app_id: "it-app",
            granularity: "hour",
            finalized_until,
            updated_at,
            open_snapshot_lsn: None,
            applied_lsn: None,
        }
    }
}

/// Replaces the control table at `dir` (created if needed) with `rows`.
pub async fn write_control(dir: &Path, rows: &[ControlRow]) {
    std::fs::create_dir_all(dir).expect("control table directory");
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    let schema = Arc::new(Schema::new(vec![
        Field::new("table_name", DataType::Utf8, false),
        Field::new("app_id", DataType::Utf8, false),
        Field::new("granularity", DataType::Utf8, false),
        Field::new("finalized_until", ts.clone(), true),
        Field::new("updated_at", ts, false),
        Field::new("open_snapshot_lsn", DataType::Utf8, true),
        Field::new("applied_lsn", DataType::Utf8, true),
    ]));
    let text = |f: fn(&ControlRow) -> Option<&'static str>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let micros = |f: fn(&ControlRow) -> Option<DateTime<Utc>>| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|r| f(r).map(|t| t.timestamp_micros()))
                .collect::<TimestampMicrosecondArray>(),
        )
    };
    let batch = RecordBatch::try_new(
        schema,
        vec![
            text(|r| Some(r.table_name)),
            text(|r| Some(r.app_id)),
            text(|r| Some(r.granularity)),
            micros(|r| r.finalized_until),
            micros(|r| Some(r.updated_at)),
            text(|r| r.open_snapshot_lsn),
            text(|r| r.applied_lsn),
        ],
    )
    .expect("control rows match the schema");
    let url = url::Url::from_directory_path(dir).expect("absolute path");
    DeltaTable::try_from_url(url)
        .await
        .expect("control table location")
        .write(vec![batch])
        .with_save_mode(SaveMode::Overwrite)
        .await
        .expect("control rows written");
}
