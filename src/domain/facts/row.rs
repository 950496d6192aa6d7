//! A facts row as a Rust value. Its serialised form (serde) is the row's
//! one encoding: JSON in a bronze commit's commitInfo, and through Arrow's
//! serde decoder, the Parquet rows of the facts table. Field names and
//! order are the columns of [`super::COLUMNS`] (a test keeps them equal).

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::{BatchId, CaptureInstance, Lsn};

/// What a non-batch facts row records (`event`; a micro-batch row has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
    /// Every event, in the order the docs list them.
    pub const ALL: [FactEvent; 5] = [
        FactEvent::Bootstrap,
        FactEvent::Resnapshot,
        FactEvent::SchemaChange,
        FactEvent::CaptureInstanceSwitched,
        FactEvent::DataSkipped,
    ];

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
        Self::ALL.into_iter().find(|e| e.as_str() == text)
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactRow {
    pub target: String,
    pub app_id: String,
    /// The CdcSource whose worker wrote the row; `None` for a stream of
    /// its own, and absent from (so `None` in) rows recorded before the
    /// column existed.
    #[serde(default)]
    pub source: Option<String>,
    pub batch_id: Option<BatchId>,
    pub event: Option<FactEvent>,
    pub rows: Option<u64>,
    pub capture_instance: Option<CaptureInstance>,
    pub min_lsn: Option<Lsn>,
    pub max_lsn: Option<Lsn>,
    pub end_lsn: Option<Lsn>,
    #[serde(with = "ntz::optional")]
    pub min_commit_ts: Option<DateTime<Utc>>,
    #[serde(with = "ntz::optional")]
    pub max_commit_ts: Option<DateTime<Utc>>,
    #[serde(with = "ntz::optional")]
    pub end_commit_ts: Option<DateTime<Utc>>,
    #[serde(with = "ntz::optional")]
    pub started_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    #[serde(with = "ntz")]
    pub written_at: DateTime<Utc>,
    pub read_seconds: Option<f64>,
    pub read_mb: Option<f64>,
    pub source_rtt_ms: Option<f64>,
    pub network_wait_ms: Option<i64>,
    pub retention_headroom_hours: Option<f64>,
    pub ingestion_lag_seconds: Option<f64>,
    pub capture_lag_seconds: Option<f64>,
    pub detail: Option<String>,
    #[serde(with = "ntz::optional")]
    pub lost_from_ts: Option<DateTime<Utc>>,
    #[serde(with = "ntz::optional")]
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
            source: None,
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

    /// The row as JSON (column name → value), for a bronze commit's commitInfo.
    pub fn to_json(&self) -> serde_json::Value {
        // A struct of strings, numbers and options always serialises.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The row back from [`FactRow::to_json`] (a bronze commit's
    /// commitInfo), so a batch whose bronze commit survived a crash gets
    /// the very facts row it was committed with. `None` if it is not one.
    pub fn from_json(value: &serde_json::Value) -> Option<FactRow> {
        FactRow::deserialize(value).ok()
    }
}

/// UTC instants as TIMESTAMP_NTZ text (`2026-09-21T14:13:50.000123`), the
/// form Delta readers and Arrow's JSON decoder take for a zone-less
/// timestamp.
mod ntz {
    use chrono::{DateTime, NaiveDateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    const FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6f";

    pub fn serialize<S: Serializer>(value: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&value.naive_utc().format(FORMAT))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f")
            .map(|t| t.and_utc())
            .map_err(serde::de::Error::custom)
    }

    pub mod optional {
        use chrono::{DateTime, Utc};
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(
            value: &Option<DateTime<Utc>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match value {
                Some(value) => super::serialize(value, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<DateTime<Utc>>, D::Error> {
            #[derive(Deserialize)]
            struct Wrapped(#[serde(with = "super")] DateTime<Utc>);
            Ok(Option::<Wrapped>::deserialize(d)?.map(|Wrapped(t)| t))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::facts::COLUMNS;
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
    fn serialised_fields_are_the_columns_in_order() {
        let text = serde_json::to_string(&sample(1)).unwrap();
        let positions: Vec<usize> = COLUMNS
            .iter()
            .map(|c| text.find(&format!("\"{}\":", c.name)).unwrap_or(usize::MAX))
            .collect();
        assert!(positions.iter().all(|p| *p != usize::MAX), "{text}");
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert_eq!(
            sample(1).to_json().as_object().unwrap().len(),
            COLUMNS.len()
        );
    }

    #[test]
    fn json_form_uses_column_names_and_utc_text() {
        let json = sample(7).to_json();
        assert_eq!(json["batch_id"], 7);
        assert_eq!(json["event"], serde_json::Value::Null);
        assert_eq!(json["min_lsn"], "0x0000002A000001F40003");
        assert_eq!(json["end_commit_ts"], "2026-09-21T14:13:50.000123");
        assert_eq!(json.as_object().unwrap().len(), 26);
        assert_eq!(json["source"], serde_json::Value::Null);
    }

    #[test]
    fn json_form_reads_back_to_the_same_row() {
        let mut row = sample(7);
        row.event = Some(FactEvent::SchemaChange);
        row.capture_instance = CaptureInstance::new("dbo_orders").ok();
        row.retention_headroom_hours = Some(71.5);
        row.source = Some("sales".into());
        assert_eq!(FactRow::from_json(&row.to_json()), Some(row));
        assert_eq!(
            FactRow::from_json(&serde_json::json!({"target": "x"})),
            None
        );
    }

    #[test]
    fn a_row_recorded_before_the_source_column_reads_back_without_one() {
        let mut old = sample(3).to_json();
        old.as_object_mut().unwrap().remove("source");
        assert_eq!(FactRow::from_json(&old), Some(sample(3)));
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
            assert_eq!(serde_json::to_value(event).unwrap(), name);
        }
    }
}
