//! The `detail` of each event row: what happened, as JSON. One struct per
//! event, so the checkpoint (which records planned events) and the facts
//! table (which shows them) agree on the fields.

use serde::{Deserialize, Serialize};

use crate::domain::Lsn;

/// The detail of one event, by kind. Stored without a tag: the kinds have
/// distinct fields, and the event row's `event` column names the kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EventDetail {
    /// `schema_change`.
    SchemaChange(SchemaChangeDetail),
    /// `capture_instance_switched`.
    Switched(SwitchDetail),
    /// `data_skipped`.
    Skipped(SkipDetail),
}

impl EventDetail {
    /// The JSON text stored in the facts `detail` column.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// DDL on the source table, as `cdc.ddl_history` recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaChangeDetail {
    /// The statement.
    pub command: String,
    /// Columns it adds.
    pub columns_added: Vec<DdlColumn>,
    /// Columns it drops.
    pub columns_dropped: Vec<DdlColumn>,
    /// Columns whose type it alters.
    pub columns_altered: Vec<DdlColumn>,
}

/// A column a DDL statement names, and whether the capture instance read
/// captures it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DdlColumn {
    /// The column.
    pub column: String,
    /// Whether the stream reads it.
    pub captured: bool,
    /// An altered column's type in the change table after the statement,
    /// as SQL Server writes it (`bigint`, `nvarchar(100)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_type: Option<String>,
    /// Its Delta type in bronze from then on (`long`, `string`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// The Delta type bronze held before the stream widened it (absent
    /// when the Delta type stayed, as for a longer string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widened_from: Option<String>,
}

/// The stream moved to a newer capture instance of its table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchDetail {
    /// The instance read before.
    pub from_capture_instance: String,
    /// The instance read from `start_lsn` on.
    pub to_capture_instance: String,
    /// Columns of the old instance.
    pub from_columns: Vec<String>,
    /// Columns of the new one.
    pub to_columns: Vec<String>,
    /// Where the new instance starts.
    pub start_lsn: Lsn,
    /// Columns the new instance captures under another name than the old
    /// one did: the same source `column_id`, so `sp_rename` renamed them
    /// between the two. The old name stays in bronze (NULL from the switch
    /// on), the new one is added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renamed_columns: Vec<RenamedColumn>,
    /// The old instance was disabled before the stream moved on: what it
    /// held past the stream's position, and what changed while no
    /// instance captured the table, went through `onDataLoss`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_disabled: bool,
}

/// A captured column renamed between two capture instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenamedColumn {
    /// Its name in the old instance (and bronze's column until the switch).
    pub from: String,
    /// Its name in the new instance (bronze's column from the switch on).
    pub to: String,
    /// The source table's `column_id`, which the rename kept.
    pub column_id: i32,
}

/// Changes purged by CDC cleanup before the stream read them, skipped
/// under `onDataLoss: skip`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipDetail {
    /// The first LSN the stream needed.
    pub skipped_from_lsn: Lsn,
    /// The last LSN lost.
    pub skipped_to_lsn: Lsn,
    /// Where reading went on.
    pub resumed_at_lsn: Lsn,
    /// False when cleanup ran while a batch read, so changes may (not
    /// must) be missing.
    pub certain: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_read_back_as_their_own_kind() {
        let lsn: Lsn = "0x0000002A000001F40003".parse().unwrap();
        let details = [
            EventDetail::SchemaChange(SchemaChangeDetail {
                command: "ALTER TABLE dbo.orders ADD note int".into(),
                columns_added: vec![DdlColumn {
                    column: "note".into(),
                    captured: false,
                    ..Default::default()
                }],
                columns_dropped: vec![],
                columns_altered: vec![],
            }),
            EventDetail::Switched(SwitchDetail {
                from_capture_instance: "dbo_orders".into(),
                to_capture_instance: "dbo_orders_v2".into(),
                from_columns: vec!["id".into()],
                to_columns: vec!["id".into(), "note".into()],
                start_lsn: lsn,
                renamed_columns: vec![RenamedColumn {
                    from: "v".into(),
                    to: "w".into(),
                    column_id: 2,
                }],
                from_disabled: true,
            }),
            EventDetail::Skipped(SkipDetail {
                skipped_from_lsn: lsn,
                skipped_to_lsn: lsn,
                resumed_at_lsn: lsn,
                certain: true,
            }),
        ];
        for detail in details {
            let back: EventDetail = serde_json::from_str(&detail.to_text()).unwrap();
            assert_eq!(back, detail);
        }
    }
}
