//! Changes of the source table the stream reads past: DDL recorded in
//! `cdc.ddl_history` (`schema_change` rows) and a newer capture instance
//! (`capture_instance_switched`, see
//! docs/adr/0003-capture-instance-switch-and-data-loss.md).
//!
//! Both are decided while a batch is planned and stored in its plan, so a
//! replay after a crash records the same event rows and reads the same
//! instance. Moving to an instance adds the columns it brings to bronze
//! first.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};

use super::change_source::ChangeSource;
use super::error::EngineError;
use super::sink::Sink;
use super::warnings::Warnings;
use crate::domain::facts::EventDetail;
use crate::domain::facts::detail::{DdlColumn, RenamedColumn, SchemaChangeDetail, SwitchDetail};
use crate::domain::{CaptureInstance, FactEvent, Lsn};
use crate::lake::bronze::bronze_schema;
use crate::lake::checkpoint::{PlannedBatch, PlannedColumn, PlannedEvent};
use crate::source::cdc::{CaptureInfo, DdlEvent};

/// Makes `to` the instance read: bronze and silver gain the columns it
/// adds, the columns `spec.source.columns` leaves out are warned about, and
/// the instance read before is returned. A silver table keyed by the
/// instance's index (not `manifest_keys`) refuses an instance with other
/// keys.
pub async fn adopt_instance<S: ChangeSource>(
    session: &mut S,
    sink: &mut Sink,
    to: &CaptureInstance,
    manifest_keys: bool,
    warnings: &mut Warnings,
) -> Result<CaptureInfo, EngineError> {
    let new = session.discover(to).await?;
    session.warn_left_out_columns(&new, warnings).await?;
    let fields = new.arrow_fields()?;
    sink.add_columns(&fields).await?;
    sink.silver_follows(&new, manifest_keys).await?;
    let old = session.info().clone();
    tracing::info!(from = %old.instance, to = %new.instance, "moving to the newer capture instance");
    session.read_instance(new);
    Ok(old)
}

/// The instance a switch moves from, as far as it is known.
pub struct SwitchedFrom<'a> {
    /// The instance read before (`CaptureInfo::gone` when this run found
    /// it disabled and never read it).
    pub info: &'a CaptureInfo,
    /// Its columns as the last plan recorded them: what is known of a
    /// disabled instance this run never read.
    pub recorded: &'a [PlannedColumn],
    /// Whether it was disabled (`cdc.change_tables` no longer lists it).
    pub disabled: bool,
}

/// The columns of `info` the plan records: name and source `column_id`.
pub fn planned_columns(info: &CaptureInfo) -> Vec<PlannedColumn> {
    info.columns
        .iter()
        .filter_map(|c| {
            Some(PlannedColumn {
                name: c.name.clone(),
                column_id: c.column_id?,
            })
        })
        .collect()
}

/// The `capture_instance_switched` event of a move from `old` to `new` at
/// `at` (the new instance's start). A column the new instance captures
/// under another name than the old one, with the same source `column_id`,
/// was renamed in between (`sp_rename` keeps the id).
pub fn switch_event(
    old: &SwitchedFrom<'_>,
    new: &CaptureInfo,
    at: Lsn,
    commit_ts: Option<DateTime<Utc>>,
) -> PlannedEvent {
    let from: Vec<(String, Option<i32>)> = if old.info.columns.is_empty() {
        old.recorded
            .iter()
            .map(|c| (c.name.clone(), Some(c.column_id)))
            .collect()
    } else {
        old.info
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.column_id))
            .collect()
    };
    let renamed_columns = new
        .columns
        .iter()
        .filter_map(|c| {
            let id = c.column_id?;
            let (was, _) = from.iter().find(|(name, old_id)| {
                *old_id == Some(id) && !name.eq_ignore_ascii_case(&c.name)
            })?;
            Some(RenamedColumn {
                from: was.clone(),
                to: c.name.clone(),
                column_id: id,
            })
        })
        .collect();
    PlannedEvent {
        event: FactEvent::CaptureInstanceSwitched,
        lsn: at,
        commit_ts,
        capture_instance: new.instance.clone(),
        detail: EventDetail::Switched(SwitchDetail {
            from_capture_instance: old.info.instance.to_string(),
            to_capture_instance: new.instance.to_string(),
            from_columns: from.into_iter().map(|(name, _)| name).collect(),
            to_columns: new.columns.iter().map(|c| c.name.clone()).collect(),
            start_lsn: at,
            renamed_columns,
            from_disabled: old.disabled,
        }),
        lost_from_ts: None,
        lost_to_ts: None,
    }
}

/// The `schema_change` event of one DDL statement on the instance `info`.
pub fn schema_change_event(info: &CaptureInfo, ddl: &DdlEvent) -> PlannedEvent {
    let parsed = DdlColumns::parse(&ddl.command);
    let list = |names: &[String]| -> Vec<DdlColumn> {
        names
            .iter()
            .map(|name| DdlColumn {
                column: name.clone(),
                captured: info
                    .columns
                    .iter()
                    .any(|c| c.name.eq_ignore_ascii_case(name)),
                ..DdlColumn::default()
            })
            .collect()
    };
    PlannedEvent {
        event: FactEvent::SchemaChange,
        lsn: ddl.lsn,
        commit_ts: ddl.time,
        capture_instance: info.instance.clone(),
        detail: EventDetail::SchemaChange(SchemaChangeDetail {
            command: ddl.command.clone(),
            columns_added: list(&parsed.added),
            columns_dropped: list(&parsed.dropped),
            columns_altered: list(&parsed.altered),
        }),
        lost_from_ts: None,
        lost_to_ts: None,
    }
}

/// The bronze schema a read of `info`'s instance produces: the table's
/// columns in table order, typed as the instance captures them; columns it
/// does not capture stay, NULL.
pub fn read_schema(info: &CaptureInfo, table: &SchemaRef) -> Result<SchemaRef, EngineError> {
    let fields = info.arrow_fields()?;
    let captured = bronze_schema(&Schema::new(fields))?;
    let fields: Vec<Field> = table
        .fields()
        .iter()
        .map(|f| match captured.field_with_name(f.name()) {
            Ok(mine) => mine.clone(),
            Err(_) => f.as_ref().clone().with_nullable(true),
        })
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// Crash points `<name>_of_switch` and `<name>_of_schema_change`, hit only
/// by the batch that moves to a newer capture instance or reads past a DDL
/// statement (crash tests of both).
pub fn switch_failpoint(plan: &PlannedBatch, name: &str) {
    let has = |event: FactEvent| plan.events.iter().any(|e| e.event == event);
    if has(FactEvent::CaptureInstanceSwitched) {
        crate::failpoint::hit(&format!("{name}_of_switch"));
    }
    if has(FactEvent::SchemaChange) {
        crate::failpoint::hit(&format!("{name}_of_schema_change"));
    }
}

/// The columns an `ALTER TABLE` statement adds, drops or alters.
#[derive(Debug, Default, PartialEq)]
struct DdlColumns {
    added: Vec<String>,
    dropped: Vec<String>,
    altered: Vec<String>,
}

impl DdlColumns {
    /// Reads `ALTER TABLE t ADD c type, ...`, `... DROP COLUMN c, ...` and
    /// `... ALTER COLUMN c type`; other statements list no columns.
    fn parse(command: &str) -> Self {
        let mut parsed = DdlColumns::default();
        let upper = command.to_ascii_uppercase();
        let Some(table_end) = upper.find("ALTER TABLE ").map(|i| i + "ALTER TABLE ".len()) else {
            return parsed;
        };
        let rest = &command[table_end..];
        let Some((_, action)) = rest.trim_start().split_once(char::is_whitespace) else {
            return parsed;
        };
        let action = action.trim_start();
        let action_upper = action.to_ascii_uppercase();
        let names = |list: &str, first_word_only: bool| -> Vec<String> {
            list.split(',')
                .filter_map(|part| {
                    let part = part.trim();
                    let name = if first_word_only {
                        part.split_whitespace().next()?
                    } else {
                        part
                    };
                    let name = name.trim_matches(['[', ']', '"']);
                    let keyword = name.to_ascii_uppercase();
                    (!name.is_empty()
                        && !matches!(keyword.as_str(), "PRIMARY" | "CONSTRAINT" | "COLUMN"))
                    .then(|| name.to_string())
                })
                .collect()
        };
        if let Some(list) = strip_keyword(action, &action_upper, "DROP COLUMN ") {
            parsed.dropped = names(list, false);
        } else if let Some(list) = strip_keyword(action, &action_upper, "ALTER COLUMN ") {
            parsed.altered = names(list, true).into_iter().take(1).collect();
        } else if let Some(list) = strip_keyword(action, &action_upper, "ADD ") {
            parsed.added = names(list, true);
        }
        parsed
    }
}

fn strip_keyword<'a>(text: &'a str, upper: &str, keyword: &str) -> Option<&'a str> {
    upper.starts_with(keyword).then(|| &text[keyword.len()..])
}

#[cfg(test)]
mod tests {
    use super::DdlColumns;

    #[test]
    fn alter_table_statements_name_their_columns() {
        let added = DdlColumns::parse("ALTER TABLE dbo.orders ADD note nvarchar(20), qty int");
        assert_eq!(added.added, vec!["note", "qty"]);
        let dropped = DdlColumns::parse("alter table [dbo].[orders] drop column [note], qty");
        assert_eq!(dropped.dropped, vec!["note", "qty"]);
        let altered = DdlColumns::parse("ALTER TABLE dbo.orders ALTER COLUMN qty bigint NULL");
        assert_eq!(altered.altered, vec!["qty"]);
        assert_eq!(
            DdlColumns::parse("CREATE INDEX ix ON dbo.orders (qty)"),
            DdlColumns::default()
        );
    }
}
