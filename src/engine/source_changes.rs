//! Changes of the source table the stream reads past: DDL recorded in
//! `cdc.ddl_history` (`schema_change` rows) and a newer capture instance
//! (`capture_instance_switched`, see docs/adr/0003-capture-instance-switch.md).
//!
//! Both are decided while a batch is planned and stored in its plan, so a
//! replay after a crash records the same event rows and reads the same
//! instance.

use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use serde_json::{Value, json};

use super::EngineError;
use super::stream::StreamRun;
use crate::lake::bronze;
use crate::lake::checkpoint::{PlannedBatch, PlannedEvent};
use crate::lake::facts::{FactEvent, FactRow};
use crate::source::cdc::{self, DdlEvent, InstanceEntry};
use crate::source::{CaptureInfo, CaptureInstance, Lsn};

/// The range and instance of the next batch once capture instances are
/// accounted for.
pub(super) struct InstanceStep {
    /// First LSN to read.
    pub start: Lsn,
    /// Last LSN the batch may read.
    pub upper: Lsn,
    /// The switch to a newer instance this batch makes, if any.
    pub switched: Option<PlannedEvent>,
}

impl StreamRun {
    /// Makes `instance` the one read (a plan or snapshot names it; after a
    /// restart the stream goes on with the instance it read last).
    pub(super) async fn use_instance(
        &mut self,
        instance: &CaptureInstance,
    ) -> Result<(), EngineError> {
        if &self.info()?.instance == instance {
            return Ok(());
        }
        let info = self.discover(instance).await?;
        self.info = Some(info);
        Ok(())
    }

    async fn discover(&mut self, instance: &CaptureInstance) -> Result<CaptureInfo, EngineError> {
        let table = self.config.source.table.clone();
        let columns = self.config.source.columns.clone();
        Ok(cdc::discover(self.client()?, &table, Some(instance), columns.as_deref()).await?)
    }

    /// The bronze schema a read produces: the table's columns in table
    /// order, typed as the instance read captures them; columns it does not
    /// capture stay, NULL.
    pub(super) fn read_schema(&mut self) -> Result<SchemaRef, EngineError> {
        let fields = self
            .info()?
            .columns
            .iter()
            .map(|c| c.field())
            .collect::<Result<Vec<_>, _>>()?;
        let captured = bronze::bronze_schema(&Schema::new(fields))?;
        let table = self.tables()?.bronze.arrow_schema()?;
        let fields: Vec<Field> = table
            .fields()
            .iter()
            .map(|f| match captured.field_with_name(f.name()) {
                Ok(mine) => mine.clone(),
                Err(_) => f.as_ref().clone().with_nullable(true),
            })
            .collect();
        Ok(std::sync::Arc::new(Schema::new(fields)))
    }

    /// Follows the table's capture instances: the instance read is read up
    /// to the LSN before a newer one's start, and the newer one from its
    /// start. Unless the manifest names the instance, which pins it.
    pub(super) async fn follow_instances(
        &mut self,
        start: Lsn,
        upper: Lsn,
    ) -> Result<InstanceStep, EngineError> {
        let unchanged = InstanceStep {
            start,
            upper,
            switched: None,
        };
        if self.config.source.capture_instance.is_some() {
            return Ok(unchanged);
        }
        let Some((newer, newer_start)) = self.newer_instance().await? else {
            return Ok(unchanged);
        };
        let before = newer_start.checked_prev().unwrap_or(Lsn::ZERO);
        if start <= before {
            let old_upper = upper.min(before);
            let max_commits = self.config.max_commits_per_batch.get();
            let left = cdc::plan_end(self.client()?, start, old_upper, max_commits).await?;
            if left.is_some() || upper < newer_start {
                // Changes of the old instance are left, or capture has not
                // reached the new one's start yet.
                return Ok(InstanceStep {
                    start,
                    upper: old_upper,
                    switched: None,
                });
            }
        }
        let event = self.switch_instance(&newer, newer_start).await?;
        Ok(InstanceStep {
            start: start.max(newer_start),
            upper,
            switched: Some(event),
        })
    }

    /// A capture instance of the table that starts after the one read.
    async fn newer_instance(&mut self) -> Result<Option<(CaptureInstance, Lsn)>, EngineError> {
        let current = self.info()?.instance.clone();
        let table = self.config.source.table.clone();
        let instances = cdc::capture_instances(self.client()?, &table).await?;
        let current_start = instances
            .iter()
            .find(|i| i.name == current)
            .and_then(|i| i.start_lsn);
        Ok(instances
            .into_iter()
            .filter(|i| i.name != current)
            .filter_map(
                |InstanceEntry {
                     name, start_lsn, ..
                 }| Some((name, start_lsn?)),
            )
            .filter(|(_, start)| current_start.is_none_or(|c| *start > c))
            .max_by_key(|(_, start)| *start))
    }

    /// Moves to `to`: evolves bronze with the columns it adds, warns about
    /// captured columns `spec.source.columns` leaves out, and returns the
    /// event the batch records.
    async fn switch_instance(
        &mut self,
        to: &CaptureInstance,
        at: Lsn,
    ) -> Result<PlannedEvent, EngineError> {
        let old = self.info()?.clone();
        let new = self.discover(to).await?;
        self.warn_left_out_columns(&new).await?;
        let fields = new
            .columns
            .iter()
            .map(|c| c.field())
            .collect::<Result<Vec<_>, _>>()?;
        self.tables()?.bronze.add_missing_columns(&fields).await?;
        let names = |info: &CaptureInfo| -> Vec<String> {
            info.columns.iter().map(|c| c.name.clone()).collect()
        };
        let detail = json!({
            "from_capture_instance": old.instance.as_str(),
            "to_capture_instance": new.instance.as_str(),
            "from_columns": names(&old),
            "to_columns": names(&new),
            "start_lsn": at.to_string(),
        });
        tracing::info!(
            from = %old.instance,
            to = %new.instance,
            start_lsn = %at,
            "moving to the newer capture instance"
        );
        let commit_ts = self.lsn_time(at).await?;
        self.info = Some(new.clone());
        Ok(PlannedEvent {
            event: FactEvent::CaptureInstanceSwitched.as_str().to_string(),
            lsn: at,
            commit_ts,
            capture_instance: new.instance,
            detail,
            lost_from_ts: None,
            lost_to_ts: None,
        })
    }

    /// Warns about columns `info`'s instance captures that the manifest's
    /// `columns` leaves out.
    pub(super) async fn warn_left_out_columns(
        &mut self,
        info: &CaptureInfo,
    ) -> Result<(), EngineError> {
        let Some(wanted) = self.config.source.columns.clone() else {
            return Ok(());
        };
        let name = info.instance.to_string();
        let captured = cdc::captured_columns(self.client()?, &name, info.change_table_id).await?;
        let left_out: Vec<&str> = captured
            .iter()
            .map(|c| c.name.as_str())
            .filter(|c| !wanted.iter().any(|w| w.eq_ignore_ascii_case(c)))
            .collect();
        if !left_out.is_empty() {
            self.warn(format!(
                "capture instance {name} captures columns that spec.source.columns leaves out: {}",
                left_out.join(", ")
            ));
        }
        Ok(())
    }

    /// The DDL of the instance read within `[start, upper]`, and the upper
    /// bound that keeps one per batch (a batch has one `schema_change` row).
    pub(super) async fn schema_changes(
        &mut self,
        start: Lsn,
        upper: Lsn,
    ) -> Result<(Lsn, Vec<DdlEvent>), EngineError> {
        if start > upper {
            return Ok((upper, Vec::new()));
        }
        let id = self.info()?.change_table_id;
        let offset = self.utc_offset_minutes();
        let mut events = cdc::ddl_events(self.client()?, id, start, upper, offset).await?;
        let upper = match events.get(1).and_then(|second| second.lsn.checked_prev()) {
            Some(before_second) => before_second.max(start),
            None => upper,
        };
        events.retain(|e| e.lsn <= upper);
        events.truncate(1);
        Ok((upper, events))
    }

    /// The `schema_change` event of one DDL statement.
    pub(super) fn schema_change_event(&self, ddl: &DdlEvent) -> Result<PlannedEvent, EngineError> {
        let info = self.info()?;
        let parsed = DdlColumns::parse(&ddl.command);
        let list = |names: &[String]| -> Value {
            names
                .iter()
                .map(|name| {
                    let captured = info
                        .columns
                        .iter()
                        .any(|c| c.name.eq_ignore_ascii_case(name));
                    json!({ "column": name, "captured": captured })
                })
                .collect()
        };
        tracing::warn!(
            capture_instance = %info.instance,
            lsn = %ddl.lsn,
            command = %ddl.command,
            "the source table's schema changed"
        );
        Ok(PlannedEvent {
            event: FactEvent::SchemaChange.as_str().to_string(),
            lsn: ddl.lsn,
            commit_ts: ddl.time,
            capture_instance: info.instance.clone(),
            detail: json!({
                "command": ddl.command,
                "columns_added": list(&parsed.added),
                "columns_dropped": list(&parsed.dropped),
                "columns_altered": list(&parsed.altered),
            }),
            lost_from_ts: None,
            lost_to_ts: None,
        })
    }
}

/// Crash point `<name>_of_switch`, hit only by the batch that moves to a
/// newer capture instance (crash tests of the switch).
pub(super) fn switch_failpoint(plan: &PlannedBatch, name: &str) {
    let switched = FactEvent::CaptureInstanceSwitched.as_str();
    if plan.events.iter().any(|e| e.event == switched) {
        crate::failpoint::hit(&format!("{name}_of_switch"));
    }
}

/// The event rows a batch records, from its plan.
pub(super) fn event_rows(
    plan: &PlannedBatch,
    events: &[PlannedEvent],
    target: &str,
    app_id: &str,
) -> Result<Vec<FactRow>, EngineError> {
    events
        .iter()
        .map(|planned| {
            let event = FactEvent::parse(&planned.event).ok_or_else(|| {
                EngineError::Inconsistent(format!(
                    "batch {} plans an unknown event {:?}",
                    plan.batch_id, planned.event
                ))
            })?;
            let mut row = FactRow::new(
                target,
                app_id,
                Some(plan.batch_id),
                Some(event),
                chrono::Utc::now(),
            );
            row.rows = Some(0);
            row.capture_instance = Some(planned.capture_instance.clone());
            row.min_lsn = Some(planned.lsn);
            row.max_lsn = Some(planned.lsn);
            row.end_lsn = Some(planned.lsn);
            row.min_commit_ts = planned.commit_ts;
            row.max_commit_ts = planned.commit_ts;
            row.end_commit_ts = planned.commit_ts;
            row.detail = Some(planned.detail.to_string());
            row.lost_from_ts = planned.lost_from_ts;
            row.lost_to_ts = planned.lost_to_ts;
            Ok(row)
        })
        .collect()
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
