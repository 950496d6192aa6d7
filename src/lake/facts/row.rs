//! A facts row as a Rust value, and its Arrow encoding.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    ArrayRef, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::record_batch::RecordBatch;

use super::schema::{COLUMNS, ColumnKind, arrow_schema};
use crate::source::{BatchId, CaptureInstance, Lsn};

/// What a non-batch facts row records (`event`; a micro-batch row has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FactEvent {
    /// The first snapshot of the table.
    Bootstrap,
    /// A new snapshot after changes were lost.
    Resnapshot,
    /// DDL on the source table.
    SchemaChange,
    /// The stream moved to a newer capture instance.
    CaptureInstanceSwitched,
    /// Purged changes were skipped.
    DataSkipped,
}

impl FactEvent {
    /// The value of the `event` column.
    pub fn as_str(self) -> &'static str {
        match self {
            FactEvent::Bootstrap => "bootstrap",
            FactEvent::Resnapshot => "resnapshot",
            FactEvent::SchemaChange => "schema_change",
            FactEvent::CaptureInstanceSwitched => "capture_instance_switched",
            FactEvent::DataSkipped => "data_skipped",
        }
    }

    /// Parses an `event` value.
    pub fn parse(text: &str) -> Option<Self> {
        [
            FactEvent::Bootstrap,
            FactEvent::Resnapshot,
            FactEvent::SchemaChange,
            FactEvent::CaptureInstanceSwitched,
            FactEvent::DataSkipped,
        ]
        .into_iter()
        .find(|e| e.as_str() == text)
    }

    /// Snapshot events have no batch id.
    pub fn is_snapshot(self) -> bool {
        matches!(self, FactEvent::Bootstrap | FactEvent::Resnapshot)
    }
}

impl fmt::Display for FactEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One facts row. Times are UTC by type and stored as TIMESTAMP_NTZ.
/// See `docs/facts.md` for what each field means.
#[derive(Debug, Clone, PartialEq)]
pub struct FactRow {
    pub target: String,
    pub app_id: String,
    pub batch_id: Option<BatchId>,
    pub event: Option<FactEvent>,
    pub rows: Option<u64>,
    pub capture_instance: Option<CaptureInstance>,
    pub min_lsn: Option<Lsn>,
    pub max_lsn: Option<Lsn>,
    pub end_lsn: Option<Lsn>,
    pub min_commit_ts: Option<DateTime<Utc>>,
    pub max_commit_ts: Option<DateTime<Utc>>,
    pub end_commit_ts: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub written_at: DateTime<Utc>,
    pub read_seconds: Option<f64>,
    pub read_mb: Option<f64>,
    pub source_rtt_ms: Option<f64>,
    pub network_wait_ms: Option<i64>,
    pub retention_headroom_hours: Option<f64>,
    pub ingestion_lag_seconds: Option<f64>,
    pub capture_lag_seconds: Option<f64>,
    pub detail: Option<String>,
    pub lost_from_ts: Option<DateTime<Utc>>,
    pub lost_to_ts: Option<DateTime<Utc>>,
}

impl FactRow {
    /// A row with only its identity and `written_at` set; callers fill the rest.
    pub fn new(
        target: impl Into<String>,
        app_id: impl Into<String>,
        batch_id: Option<BatchId>,
        event: Option<FactEvent>,
        written_at: DateTime<Utc>,
    ) -> Self {
        FactRow {
            target: target.into(),
            app_id: app_id.into(),
            batch_id,
            event,
            rows: None,
            capture_instance: None,
            min_lsn: None,
            max_lsn: None,
            end_lsn: None,
            min_commit_ts: None,
            max_commit_ts: None,
            end_commit_ts: None,
            started_at: None,
            duration_ms: None,
            written_at,
            read_seconds: None,
            read_mb: None,
            source_rtt_ms: None,
            network_wait_ms: None,
            retention_headroom_hours: None,
            ingestion_lag_seconds: None,
            capture_lag_seconds: None,
            detail: None,
            lost_from_ts: None,
            lost_to_ts: None,
        }
    }

    /// The row's values in [`COLUMNS`] order.
    fn cells(&self) -> [Cell; COLUMNS.len()] {
        let text = |v: Option<String>| Cell::Text(v);
        let lsn = |v: Option<Lsn>| Cell::Text(v.map(|l| l.to_string()));
        let ts = |v: Option<DateTime<Utc>>| Cell::Micros(v.map(|t| t.timestamp_micros()));
        [
            text(Some(self.target.clone())),
            text(Some(self.app_id.clone())),
            Cell::Long(self.batch_id.map(BatchId::txn_version)),
            text(self.event.map(|e| e.as_str().to_string())),
            Cell::Long(self.rows.map(|r| i64::try_from(r).unwrap_or(i64::MAX))),
            text(self.capture_instance.as_ref().map(ToString::to_string)),
            lsn(self.min_lsn),
            lsn(self.max_lsn),
            lsn(self.end_lsn),
            ts(self.min_commit_ts),
            ts(self.max_commit_ts),
            ts(self.end_commit_ts),
            ts(self.started_at),
            Cell::Long(self.duration_ms),
            ts(Some(self.written_at)),
            Cell::Double(self.read_seconds),
            Cell::Double(self.read_mb),
            Cell::Double(self.source_rtt_ms),
            Cell::Long(self.network_wait_ms),
            Cell::Double(self.retention_headroom_hours),
            Cell::Double(self.ingestion_lag_seconds),
            Cell::Double(self.capture_lag_seconds),
            text(self.detail.clone()),
            ts(self.lost_from_ts),
            ts(self.lost_to_ts),
        ]
    }

    /// The row as JSON (column name → value), for a bronze commit's commitInfo.
    pub fn to_json(&self) -> serde_json::Value {
        let cells = self.cells();
        let map = COLUMNS
            .iter()
            .zip(cells)
            .map(|(column, cell)| (column.name.to_string(), cell.to_json()))
            .collect();
        serde_json::Value::Object(map)
    }

    /// The row back from [`FactRow::to_json`] (a bronze commit's
    /// commitInfo), so a batch whose bronze commit survived a crash gets
    /// the very facts row it was committed with. `None` if it is not one.
    pub fn from_json(value: &serde_json::Value) -> Option<FactRow> {
        use serde_json::Value;
        let field = |name: &str| value.get(name).filter(|v| !v.is_null());
        let text = |name: &str| field(name).and_then(Value::as_str).map(str::to_string);
        let long = |name: &str| field(name).and_then(Value::as_i64);
        let double = |name: &str| field(name).and_then(Value::as_f64);
        let lsn = |name: &str| {
            field(name)
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<Lsn>().ok())
        };
        let ts = |name: &str| {
            field(name)
                .and_then(Value::as_str)
                .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f").ok())
                .map(|t| t.and_utc())
        };
        let mut row = FactRow::new(
            text("target")?,
            text("app_id")?,
            long("batch_id").and_then(|v| BatchId::from_txn_version(v).ok()),
            text("event").as_deref().and_then(FactEvent::parse),
            ts("written_at")?,
        );
        row.rows = long("rows").and_then(|v| u64::try_from(v).ok());
        row.capture_instance = text("capture_instance").and_then(|v| CaptureInstance::new(v).ok());
        row.min_lsn = lsn("min_lsn");
        row.max_lsn = lsn("max_lsn");
        row.end_lsn = lsn("end_lsn");
        row.min_commit_ts = ts("min_commit_ts");
        row.max_commit_ts = ts("max_commit_ts");
        row.end_commit_ts = ts("end_commit_ts");
        row.started_at = ts("started_at");
        row.duration_ms = long("duration_ms");
        row.read_seconds = double("read_seconds");
        row.read_mb = double("read_mb");
        row.source_rtt_ms = double("source_rtt_ms");
        row.network_wait_ms = long("network_wait_ms");
        row.retention_headroom_hours = double("retention_headroom_hours");
        row.ingestion_lag_seconds = double("ingestion_lag_seconds");
        row.capture_lag_seconds = double("capture_lag_seconds");
        row.detail = text("detail");
        row.lost_from_ts = ts("lost_from_ts");
        row.lost_to_ts = ts("lost_to_ts");
        Some(row)
    }
}

/// One value, tagged with the column kind it encodes to.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Text(Option<String>),
    Long(Option<i64>),
    Double(Option<f64>),
    Micros(Option<i64>),
}

impl Cell {
    fn kind(&self) -> ColumnKind {
        match self {
            Cell::Text(_) => ColumnKind::String,
            Cell::Long(_) => ColumnKind::Long,
            Cell::Double(_) => ColumnKind::Double,
            Cell::Micros(_) => ColumnKind::TimestampNtz,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Cell::Text(v) => v.clone().map_or(Value::Null, Value::String),
            Cell::Long(v) => v.map_or(Value::Null, Value::from),
            Cell::Double(v) => v.map_or(Value::Null, Value::from),
            Cell::Micros(v) => v
                .and_then(DateTime::<Utc>::from_timestamp_micros)
                .map_or(Value::Null, |t| {
                    Value::String(t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string())
                }),
        }
    }
}

/// Encodes rows as one Arrow batch with the facts schema.
pub fn to_record_batch(rows: &[FactRow]) -> Result<RecordBatch, ArrowError> {
    let all: Vec<[Cell; COLUMNS.len()]> = rows.iter().map(FactRow::cells).collect();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(COLUMNS.len());
    for (i, column) in COLUMNS.iter().enumerate() {
        let cells = all.iter().map(|row| &row[i]);
        let array: ArrayRef = match column.kind {
            ColumnKind::String => Arc::new(
                cells
                    .map(|c| match c {
                        Cell::Text(v) => Ok(v.clone()),
                        other => Err(mismatch(column.name, other)),
                    })
                    .collect::<Result<StringArray, _>>()?,
            ),
            ColumnKind::Long => Arc::new(
                cells
                    .map(|c| match c {
                        Cell::Long(v) => Ok(*v),
                        other => Err(mismatch(column.name, other)),
                    })
                    .collect::<Result<Int64Array, _>>()?,
            ),
            ColumnKind::Double => Arc::new(
                cells
                    .map(|c| match c {
                        Cell::Double(v) => Ok(*v),
                        other => Err(mismatch(column.name, other)),
                    })
                    .collect::<Result<Float64Array, _>>()?,
            ),
            ColumnKind::TimestampNtz => Arc::new(
                cells
                    .map(|c| match c {
                        Cell::Micros(v) => Ok(*v),
                        other => Err(mismatch(column.name, other)),
                    })
                    .collect::<Result<TimestampMicrosecondArray, _>>()?,
            ),
        };
        arrays.push(array);
    }
    RecordBatch::try_new(arrow_schema(), arrays)
}

fn mismatch(column: &str, cell: &Cell) -> ArrowError {
    ArrowError::SchemaError(format!(
        "facts column {column}: row value is {:?}",
        cell.kind()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sample(batch: u64) -> FactRow {
        let t = |s: i64| {
            Utc.timestamp_opt(1_790_000_000 + s, 123_000)
                .single()
                .unwrap()
        };
        let mut row = FactRow::new(
            "bronze.orders",
            "orders-v1",
            BatchId::new(batch).ok(),
            None,
            t(60),
        );
        row.rows = Some(3);
        row.min_lsn = "0x0000002A000001F40003".parse().ok();
        row.end_commit_ts = Some(t(30));
        row.read_mb = Some(0.25);
        row.detail = Some(r#"{"warnings":["unknown field spec.x (ignored)"]}"#.into());
        row
    }

    #[test]
    fn every_cell_matches_its_column_kind() {
        let row = sample(1);
        for (column, cell) in COLUMNS.iter().zip(row.cells()) {
            assert_eq!(column.kind, cell.kind(), "{}", column.name);
        }
    }

    #[test]
    fn encodes_rows_with_nulls_where_unset() {
        let rows = [
            sample(0),
            FactRow::new(
                "bronze.orders",
                "orders-v1",
                None,
                Some(FactEvent::Bootstrap),
                sample(0).written_at,
            ),
        ];
        let batch = to_record_batch(&rows).unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (2, 25));
        let event = batch.column_by_name("event").unwrap();
        assert_eq!(event.null_count(), 1);
        let batch_id = batch.column_by_name("batch_id").unwrap();
        assert!(batch_id.is_null(1));
    }

    #[test]
    fn json_form_uses_column_names_and_utc_text() {
        let json = sample(7).to_json();
        assert_eq!(json["batch_id"], 7);
        assert_eq!(json["event"], serde_json::Value::Null);
        assert_eq!(json["min_lsn"], "0x0000002A000001F40003");
        assert_eq!(json["end_commit_ts"], "2026-09-21T14:13:50.000123");
        assert_eq!(json.as_object().unwrap().len(), 25);
    }

    #[test]
    fn json_form_reads_back_to_the_same_row() {
        let mut row = sample(7);
        row.event = Some(FactEvent::SchemaChange);
        row.capture_instance = CaptureInstance::new("dbo_orders").ok();
        row.retention_headroom_hours = Some(71.5);
        assert_eq!(FactRow::from_json(&row.to_json()), Some(row));
        assert_eq!(
            FactRow::from_json(&serde_json::json!({"target": "x"})),
            None
        );
    }

    #[test]
    fn event_names_match_the_column_values() {
        let cases = [
            (FactEvent::Bootstrap, "bootstrap", true),
            (FactEvent::Resnapshot, "resnapshot", true),
            (FactEvent::SchemaChange, "schema_change", false),
            (
                FactEvent::CaptureInstanceSwitched,
                "capture_instance_switched",
                false,
            ),
            (FactEvent::DataSkipped, "data_skipped", false),
        ];
        for (event, name, snapshot) in cases {
            assert_eq!((event.as_str(), event.is_snapshot()), (name, snapshot));
            assert_eq!(FactEvent::parse(name), Some(event));
        }
    }
}
