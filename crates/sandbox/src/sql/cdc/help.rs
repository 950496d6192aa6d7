//! sys.sp_cdc_help_change_data_capture: the capture instances of a
//! database (or of one table), with their columns and LSN range.
//! <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-help-change-data-capture-transact-sql>

use super::enable::not_enabled;
use super::params::Args;
use crate::sql::catalog::same_name;
use crate::sql::error::SqlResult;
use crate::sql::procedures::ProcResult;
use crate::sql::request::{CancelToken, Column, Output, Param};
use crate::sql::session::Session;
use crate::sql::types::{DataType, Length, Value};

fn bin(v: Option<super::Lsn>) -> Value {
    v.map(|l| Value::Binary(l.to_bytes()))
        .unwrap_or(Value::Null)
}

pub(super) fn sp_cdc_help(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind(
        "sp_cdc_help_change_data_capture",
        &["@source_schema", "@source_name"],
        params,
    )?;
    let schema = a.text("@source_schema");
    let table = a.text("@source_name");
    let rows = s.with_read(cancel, |ctx| {
        let db = ctx.current_db()?;
        if !db.is_cdc_enabled {
            return Err(not_enabled(db));
        }
        let mut rows = Vec::new();
        for ci in &db.cdc.instances {
            let Some(src) = db.tables.get(&ci.source_object_id) else {
                continue;
            };
            let sname = db.schema_name(src.meta.schema_id).unwrap_or("dbo");
            if schema.as_deref().is_some_and(|x| !same_name(x, sname))
                || table
                    .as_deref()
                    .is_some_and(|x| !same_name(x, &src.meta.name))
            {
                continue;
            }
            let s = |v: &str| Value::String(v.to_string());
            let opt = |v: &Option<String>| v.as_deref().map(s).unwrap_or(Value::Null);
            let list = |v: Vec<&str>| {
                s(&v.iter()
                    .map(|c| format!("[{c}]"))
                    .collect::<Vec<_>>()
                    .join(", "))
            };
            rows.push(vec![
                s(sname),
                s(&src.meta.name),
                s(&ci.name),
                Value::Int(ci.object_id),
                Value::Int(ci.source_object_id),
                bin(Some(ci.start_lsn)),
                Value::Null,
                Value::Bit(ci.supports_net_changes),
                Value::Bit(false),
                opt(&ci.role_name),
                opt(&ci.index_name),
                opt(&ci.filegroup_name),
                Value::DateTime(ci.create_date),
                if ci.index_columns.is_empty() {
                    Value::Null
                } else {
                    list(ci.index_columns.iter().map(|(n, _)| n.as_str()).collect())
                },
                list(ci.captured.iter().map(|c| c.name.as_str()).collect()),
            ]);
        }
        Ok(rows)
    })?;
    let col = |n: &str, ty: DataType, nullable: bool| Column::new(n, ty, nullable);
    let sysname = DataType::SYSNAME;
    out.push(Output::ResultSet {
        columns: vec![
            col("source_schema", sysname, false),
            col("source_table", sysname, false),
            col("capture_instance", sysname, false),
            col("object_id", DataType::Int, false),
            col("source_object_id", DataType::Int, false),
            col("start_lsn", DataType::Binary(10), true),
            col("end_lsn", DataType::Binary(10), true),
            col("supports_net_changes", DataType::Bit, true),
            col("has_drop_pending", DataType::Bit, true),
            col("role_name", sysname, true),
            col("index_name", sysname, true),
            col("filegroup_name", sysname, true),
            col("create_date", DataType::DateTime, true),
            col("index_column_list", DataType::NVarChar(Length::Max), true),
            col(
                "captured_column_list",
                DataType::NVarChar(Length::Max),
                true,
            ),
        ],
        rows,
    });
    Ok(ProcResult::default())
}
