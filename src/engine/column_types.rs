//! Captured columns whose type changed (`ALTER TABLE ... ALTER COLUMN`).
//!
//! SQL Server retypes the change table's column at once, so from then on
//! every change row, older ones included, arrives in the new type. Before
//! each batch is read, bronze's and silver's types are compared with the
//! instance's: a widening rewrites the tables in the new type first (see
//! `lake::retype`), anything else stops the stream before a row of the new
//! type is written. The instance's columns are read again when a DDL
//! statement at or after the position shows up in `cdc.ddl_history`, once
//! per statement; a fresh run reads them when it connects.

use super::change_source::ChangeSource;
use super::context::Run;
use super::error::EngineError;
use super::sink::Sink;
use crate::domain::Lsn;
use crate::domain::facts::detail::DdlColumn;
use crate::lake::retype::delta_type_name;
use crate::source::SourceError;
use crate::source::types::SqlColumn;

/// Brings bronze and silver to the instance's column types. `ddl_ahead`:
/// the newest DDL statement the planned window's query saw, if any.
pub async fn follow<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    ddl_ahead: Option<Lsn>,
) -> Result<(), EngineError> {
    if let Some(lsn) = ddl_ahead.filter(|lsn| run.types_read_for.is_none_or(|seen| *lsn > seen)) {
        let instance = session.info().instance.clone();
        let fresh = session.discover(&instance).await?;
        if fresh.change_table_id == session.info().change_table_id {
            session.read_instance(fresh);
        }
        run.types_read_for = Some(lsn);
    }
    let wanted = session
        .info()
        .columns
        .iter()
        .map(|c| Ok((c.name.clone(), c.field()?.data_type().clone(), sql_type(c))))
        .collect::<Result<Vec<_>, SourceError>>()?;
    let table = run.config.source.table.to_string();
    let widened = sink.follow_types(&table, &wanted).await?;
    if !widened.is_empty() {
        crate::failpoint::hit("after_widening");
    }
    for retype in widened {
        run.widened
            .retain(|r| !r.column.eq_ignore_ascii_case(&retype.column));
        run.widened.push(retype);
    }
    Ok(())
}

/// Fills in what an altered column's `schema_change` row says: its type
/// in the change table now, its Delta type now, and the type this run
/// widened it from.
pub fn describe_altered(run: &Run<'_>, info_columns: &[SqlColumn], column: &mut DdlColumn) {
    let Some(sql) = info_columns
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(&column.column))
    else {
        return;
    };
    column.source_type = Some(sql_type(sql));
    column.target_type = sql
        .field()
        .ok()
        .map(|field| delta_type_name(field.data_type()));
    column.widened_from = run
        .widened
        .iter()
        .find(|r| r.column.eq_ignore_ascii_case(&column.column))
        .map(|r| delta_type_name(&r.from));
}

/// A column's type as SQL Server writes it: `bigint`, `nvarchar(100)`,
/// `decimal(18,2)`, `varchar(max)`.
pub fn sql_type(column: &SqlColumn) -> String {
    let name = column.type_name.as_str();
    match name {
        "decimal" | "numeric" => format!("{name}({},{})", column.precision, column.scale),
        "varchar" | "char" | "varbinary" | "binary" => match column.max_length {
            -1 => format!("{name}(max)"),
            n => format!("{name}({n})"),
        },
        "nvarchar" | "nchar" => match column.max_length {
            -1 => format!("{name}(max)"),
            n => format!("{name}({})", n / 2),
        },
        "datetime2" | "time" | "datetimeoffset" => format!("{name}({})", column.scale),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(type_name: &str, max_length: i16, precision: u8, scale: u8) -> SqlColumn {
        SqlColumn {
            name: "c".into(),
            type_name: type_name.into(),
            max_length,
            precision,
            scale,
            nullable: true,
            column_id: None,
            collation: None,
        }
    }

    #[test]
    fn types_read_as_sql_server_writes_them() {
        assert_eq!(sql_type(&column("bigint", 8, 19, 0)), "bigint");
        assert_eq!(sql_type(&column("nvarchar", 200, 0, 0)), "nvarchar(100)");
        assert_eq!(sql_type(&column("varchar", -1, 0, 0)), "varchar(max)");
        assert_eq!(sql_type(&column("decimal", 9, 18, 2)), "decimal(18,2)");
        assert_eq!(sql_type(&column("datetime2", 8, 27, 7)), "datetime2(7)");
    }
}
