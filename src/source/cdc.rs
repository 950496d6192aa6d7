//! The CDC queries the engine runs: discovery of the capture instance, the
//! LSN watermarks and their commit times, batch planning and change reads.
//!
//! Every query is plain documented T-SQL (`cdc.change_tables`,
//! `cdc.captured_columns`, `cdc.index_columns`, `cdc.lsn_time_mapping`,
//! `sys.fn_cdc_*`, `cdc.fn_cdc_get_all_changes_<instance>`), so it runs the
//! same against SQL Server and the sandbox.

use chrono::{DateTime, NaiveDateTime, Utc};
use deltalake::arrow::datatypes::Field;
use tiberius::{ColumnData, Row};

use super::SourceError;
use super::arrow_rows::naive_utc;
use super::connection::SqlClient;
use super::time_zone::{CommitClock, SQL_SERVER_2022, windows_zone};
use super::types::{SqlColumn, ValueLimit, quote_literal, quote_table};
use crate::domain::TableName;
use crate::domain::{CaptureInstance, Lsn};

/// What the engine knows about the capture instance it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureInfo {
    /// The instance.
    pub instance: CaptureInstance,
    /// `cdc.change_tables.object_id` of its change table.
    pub change_table_id: i32,
    /// The columns read, in capture order.
    pub columns: Vec<SqlColumn>,
    /// The columns identifying a row (the instance's index columns, or the
    /// table's primary key), in key order; empty when the table has none.
    pub key_columns: Vec<String>,
}

impl CaptureInfo {
    /// An instance `cdc.change_tables` no longer lists: it was disabled,
    /// its change table and captured columns went with it, so nothing of
    /// it can be read or described. The stream only moves on from it.
    pub fn gone(instance: CaptureInstance) -> Self {
        CaptureInfo {
            instance,
            change_table_id: 0,
            columns: Vec::new(),
            key_columns: Vec::new(),
        }
    }

    /// The Arrow fields of the columns read, in capture order.
    pub fn arrow_fields(&self) -> Result<Vec<Field>, SourceError> {
        self.columns.iter().map(SqlColumn::field).collect()
    }

    /// The same fields, nullable only where the source column is: what
    /// silver needs to know to match a nullable key column null-safely
    /// (bronze's fields are all nullable, whatever the source declares).
    pub fn declared_fields(&self) -> Result<Vec<Field>, SourceError> {
        self.columns
            .iter()
            .map(|c| Ok(c.field()?.with_nullable(c.nullable)))
            .collect()
    }
}

/// Minutes the server's local clock is ahead of UTC (CDC commit times are
/// server-local `datetime` values).
pub async fn utc_offset_minutes(client: &mut SqlClient) -> Result<i64, SourceError> {
    let row = single_row(
        client,
        "SELECT DATEDIFF(minute, SYSUTCDATETIME(), SYSDATETIME())",
        &[],
        "the server's UTC offset",
    )
    .await?;
    let minutes: Option<i32> = row
        .try_get(0)
        .map_err(SourceError::sql("the server's UTC offset"))?;
    Ok(i64::from(minutes.unwrap_or(0)))
}

/// How this server's commit times become UTC: `configured` (the
/// manifest's `sourceTimeZone`), else the server's own zone's rules
/// (SQL Server 2022 and later), else its current offset.
pub async fn commit_clock(
    client: &mut SqlClient,
    configured: Option<chrono_tz::Tz>,
) -> Result<CommitClock, SourceError> {
    if let Some(zone) = configured {
        return Ok(CommitClock::Zone(zone));
    }
    let major = product_major_version(client).await?;
    if let Some(Ok(zone)) = server_zone(client, major).await? {
        return Ok(CommitClock::Zone(zone));
    }
    Ok(CommitClock::Fixed(utc_offset_minutes(client).await?))
}

/// The server's time zone (`CURRENT_TIMEZONE_ID()`, SQL Server 2022 and
/// later) as IANA rules, or its Windows name when CLDR's table lacks it;
/// `None` on older servers, which do not name their zone.
pub async fn server_zone(
    client: &mut SqlClient,
    major_version: u32,
) -> Result<Option<Result<chrono_tz::Tz, String>>, SourceError> {
    if major_version < SQL_SERVER_2022 {
        return Ok(None);
    }
    let context = "the server's time zone";
    let row = single_row(client, "SELECT CURRENT_TIMEZONE_ID()", &[], context).await?;
    let name: Option<&str> = row.try_get(0).map_err(SourceError::sql(context))?;
    let name = name.ok_or_else(|| SourceError::Missing(context.into()))?;
    Ok(Some(windows_zone(name).ok_or_else(|| name.to_string())))
}

/// The server's major version (15 = SQL Server 2019, 16 = 2022).
pub async fn product_major_version(client: &mut SqlClient) -> Result<u32, SourceError> {
    let context = "the server's product version";
    let row = single_row(
        client,
        "SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS nvarchar(128))",
        &[],
        context,
    )
    .await?;
    let text: Option<&str> = row.try_get(0).map_err(SourceError::sql(context))?;
    text.and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| SourceError::Missing(context.into()))
}

/// Finds the capture instance of `table` (the named one, or the newest) and
/// its captured columns, restricted to `wanted` when given.
pub async fn discover(
    client: &mut SqlClient,
    table: &TableName,
    named: Option<&CaptureInstance>,
    wanted: Option<&[String]>,
) -> Result<CaptureInfo, SourceError> {
    let instances = capture_instances(client, table).await?;
    let (name, change_table_id) = match named {
        Some(want) => instances
            .iter()
            .find(|i| i.name.as_str().eq_ignore_ascii_case(want.as_str()))
            .map(|i| (i.name.to_string(), i.change_table_id))
            .ok_or_else(|| {
                SourceError::NotCaptured(format!(
                    "spec.source.captureInstance: {want} is not a capture instance of {}.{} (it has: {})",
                    table.schema,
                    table.table,
                    list_or_none(instances.iter().map(|i| i.name.as_str()))
                ))
            })?,
        None => instances
            .first()
            .map(|i| (i.name.to_string(), i.change_table_id))
            .ok_or_else(|| {
                SourceError::NotCaptured(format!(
                    "spec.source.table: {}.{} has no CDC capture instance; enable it with \
                     sys.sp_cdc_enable_table (and the database with sys.sp_cdc_enable_db)",
                    table.schema, table.table
                ))
            })?,
    };
    let instance = CaptureInstance::new(name.clone())
        .map_err(|e| SourceError::NotCaptured(format!("capture instance {name}: {e}")))?;

    let captured = captured_columns(client, &name, change_table_id).await?;
    if captured.is_empty() {
        return Err(SourceError::NotCaptured(format!(
            "capture instance {name} lists no captured columns"
        )));
    }
    let columns = match wanted {
        None => captured,
        Some(wanted) => {
            let mut picked = Vec::new();
            for want in wanted {
                let found = captured
                    .iter()
                    .find(|c| c.name.eq_ignore_ascii_case(want))
                    .ok_or_else(|| SourceError::UnknownColumn {
                        column: want.clone(),
                        capture_instance: name.clone(),
                        captured: captured
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })?;
                picked.push(found.clone());
            }
            picked
        }
    };
    for column in &columns {
        column.kind()?;
    }

    let context = format!("index columns of {name}");
    let rows = all_rows(
        client,
        "SELECT column_name FROM cdc.index_columns WHERE object_id = @P1 ORDER BY index_ordinal",
        &[&change_table_id],
        &context,
    )
    .await?;
    let key_columns = rows
        .iter()
        .filter_map(|row| row.try_get::<&str, _>(0).ok().flatten().map(str::to_string))
        .collect();
    Ok(CaptureInfo {
        instance,
        change_table_id,
        columns,
        key_columns,
    })
}

/// One capture instance of a table, as `cdc.change_tables` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceEntry {
    /// The instance.
    pub name: CaptureInstance,
    /// `object_id` of its change table.
    pub change_table_id: i32,
    /// The LSN it captures changes after (`start_lsn`).
    pub start_lsn: Option<Lsn>,
}

/// The capture instances of `table`, newest first (a table has at most two).
pub async fn capture_instances(
    client: &mut SqlClient,
    table: &TableName,
) -> Result<Vec<InstanceEntry>, SourceError> {
    let qualified = quote_table(table);
    let sql = format!(
        "SELECT ct.capture_instance, ct.object_id, ct.start_lsn FROM cdc.change_tables AS ct \
         WHERE ct.source_object_id = OBJECT_ID({}) ORDER BY ct.create_date DESC, ct.object_id DESC",
        quote_literal(&qualified)
    );
    let context = format!("capture instances of {}.{}", table.schema, table.table);
    let rows = all_rows(client, &sql, &[], &context).await?;
    let mut instances = Vec::new();
    for row in rows {
        let mut values = row.into_iter();
        let (Some(name), Some(id), Some(start)) = (values.next(), values.next(), values.next())
        else {
            return Err(SourceError::Missing(context));
        };
        let (ColumnData::String(Some(name)), ColumnData::I32(Some(id))) = (name, id) else {
            continue;
        };
        let name = CaptureInstance::new(name.to_string())
            .map_err(|e| SourceError::NotCaptured(format!("capture instance {name}: {e}")))?;
        instances.push(InstanceEntry {
            name,
            change_table_id: id,
            start_lsn: lsn_of(&start, &context)?,
        });
    }
    Ok(instances)
}

/// Every table of the database with a capture instance, by schema and
/// name: what a source's discovery offers to stream.
pub async fn captured_tables(client: &mut SqlClient) -> Result<Vec<TableName>, SourceError> {
    let sql = "SELECT DISTINCT s.name, t.name FROM cdc.change_tables AS ct \
               JOIN sys.tables AS t ON t.object_id = ct.source_object_id \
               JOIN sys.schemas AS s ON s.schema_id = t.schema_id";
    let context = "the captured tables (cdc.change_tables)";
    let mut tables = Vec::new();
    for row in all_rows(client, sql, &[], context).await? {
        let mut values = row.into_iter();
        if let (Some(ColumnData::String(Some(schema))), Some(ColumnData::String(Some(table)))) =
            (values.next(), values.next())
        {
            tables.push(TableName {
                schema: schema.to_string(),
                table: table.to_string(),
            });
        }
    }
    tables.sort_by(|a, b| (&a.schema, &a.table).cmp(&(&b.schema, &b.table)));
    Ok(tables)
}

/// The columns `cdc.captured_columns` lists for a change table, in capture
/// order, with their source types.
pub async fn captured_columns(
    client: &mut SqlClient,
    name: &str,
    change_table_id: i32,
) -> Result<Vec<SqlColumn>, SourceError> {
    let context = format!("captured columns of {name}");
    let sql = "SELECT cc.column_name, t.name, c.max_length, c.precision, c.scale, c.is_nullable, \
               cc.column_id, c.collation_name FROM cdc.captured_columns AS cc \
               JOIN sys.columns AS c ON c.object_id = cc.object_id AND c.name = cc.column_name \
               JOIN sys.types AS t ON t.user_type_id = c.user_type_id \
               WHERE cc.object_id = @P1 ORDER BY cc.column_ordinal";
    let rows = all_rows(client, sql, &[&change_table_id], &context).await?;
    let mut captured = Vec::new();
    for row in &rows {
        let text = |i: usize| -> Result<String, SourceError> {
            let v: Option<&str> = row.try_get(i).map_err(SourceError::sql(&context))?;
            v.map(str::to_string)
                .ok_or_else(|| SourceError::Missing(context.clone()))
        };
        let max_length: Option<i16> = row.try_get(2).map_err(SourceError::sql(&context))?;
        let precision: Option<u8> = row.try_get(3).map_err(SourceError::sql(&context))?;
        let scale: Option<u8> = row.try_get(4).map_err(SourceError::sql(&context))?;
        let nullable: Option<bool> = row.try_get(5).map_err(SourceError::sql(&context))?;
        let column_id: Option<i32> = row.try_get(6).map_err(SourceError::sql(&context))?;
        let collation: Option<&str> = row.try_get(7).map_err(SourceError::sql(&context))?;
        captured.push(SqlColumn {
            name: text(0)?,
            type_name: text(1)?.to_ascii_lowercase(),
            max_length: max_length.unwrap_or(0),
            precision: precision.unwrap_or(0),
            scale: scale.unwrap_or(0),
            nullable: nullable.unwrap_or(true),
            column_id,
            collation: collation.map(str::to_string),
        });
    }
    Ok(captured)
}

/// The highest LSN CDC has mapped (`sys.fn_cdc_get_max_lsn`).
pub async fn max_lsn(client: &mut SqlClient) -> Result<Lsn, SourceError> {
    let lsn = lsn_scalar(
        client,
        "SELECT sys.fn_cdc_get_max_lsn()",
        &[],
        "the max LSN",
    )
    .await?;
    lsn.filter(|l| *l != Lsn::ZERO).ok_or(SourceError::NoMaxLsn)
}

/// The lowest LSN the capture instance still holds (`sys.fn_cdc_get_min_lsn`).
pub async fn min_lsn(
    client: &mut SqlClient,
    instance: &CaptureInstance,
) -> Result<Lsn, SourceError> {
    let context = format!("the min LSN of {instance}");
    let lsn = lsn_scalar(
        client,
        "SELECT sys.fn_cdc_get_min_lsn(@P1)",
        &[&instance.as_str()],
        &context,
    )
    .await?;
    lsn.filter(|l| *l != Lsn::ZERO)
        .ok_or_else(|| SourceError::NoLsn(format!("capture instance {instance}")))
}

/// The commit time (UTC) of `lsn`, or of the nearest mapped LSN before it.
pub async fn lsn_time(
    client: &mut SqlClient,
    lsn: Lsn,
    clock: CommitClock,
) -> Result<Option<DateTime<Utc>>, SourceError> {
    let bytes = lsn.to_bytes();
    let row = single_row(
        client,
        "SELECT sys.fn_cdc_map_lsn_to_time(@P1)",
        &[&&bytes[..]],
        &format!("the commit time of {lsn}"),
    )
    .await?;
    Ok(commit_time(row.into_iter().next(), clock))
}

/// The commit time (UTC) of the first mapped LSN at or after `lsn`: what a
/// low-water mark (which need not be a commit of its own) stands for.
pub async fn first_time_from(
    client: &mut SqlClient,
    lsn: Lsn,
    clock: CommitClock,
) -> Result<Option<DateTime<Utc>>, SourceError> {
    let bytes = lsn.to_bytes();
    let rows = all_rows(
        client,
        "SELECT TOP (1) tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn >= @P1 ORDER BY start_lsn",
        &[&&bytes[..]],
        &format!("the commit time at or after {lsn}"),
    )
    .await?;
    let value = rows
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next());
    Ok(commit_time(value, clock))
}

/// A server-local `datetime` from CDC's time mapping, as UTC: a
/// watermark's reading (the first pass of a repeated hour).
fn commit_time(value: Option<ColumnData<'_>>, clock: CommitClock) -> Option<DateTime<Utc>> {
    value
        .as_ref()
        .and_then(naive_utc)
        .map(|t| clock.watermark(t.naive_utc()))
}

/// The mapped commits in `(after, upto]` whose local time lies in
/// `[first, end)`, LSN order: what shows where a repeated hour's second
/// pass starts.
pub async fn fold_commits(
    client: &mut SqlClient,
    after: Option<Lsn>,
    upto: Lsn,
    first: NaiveDateTime,
    end: NaiveDateTime,
) -> Result<Vec<(Lsn, NaiveDateTime)>, SourceError> {
    let context = "the commits of the hour a clock change repeats";
    let (after, upto) = (after.unwrap_or(Lsn::ZERO).to_bytes(), upto.to_bytes());
    let rows = all_rows(
        client,
        "SELECT start_lsn, tran_end_time FROM cdc.lsn_time_mapping \
         WHERE start_lsn > @P1 AND start_lsn <= @P2 AND tran_end_time >= @P3 AND tran_end_time < @P4 \
         ORDER BY start_lsn",
        &[&&after[..], &&upto[..], &first, &end],
        context,
    )
    .await?;
    let mut commits = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = row.into_iter();
        let (Some(lsn), Some(time)) = (values.next(), values.next()) else {
            return Err(SourceError::Missing(context.into()));
        };
        let lsn = lsn_of(&lsn, context)?.ok_or_else(|| SourceError::Missing(context.into()))?;
        let time = naive_utc(&time).ok_or_else(|| SourceError::Missing(context.into()))?;
        commits.push((lsn, time.naive_utc()));
    }
    Ok(commits)
}

/// A mapped commit of the database (`cdc.lsn_time_mapping`): a
/// transaction's commit LSN, or an idle entry the capture job wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// The commit LSN.
    pub lsn: Lsn,
    /// Its commit time (UTC).
    pub commit_ts: Option<DateTime<Utc>>,
}

/// The first `limit` mapped commits in `[from, to]`, oldest first: the
/// commits a batch may end at.
pub async fn commits(
    client: &mut SqlClient,
    from: Lsn,
    to: Lsn,
    limit: u64,
    clock: CommitClock,
) -> Result<Vec<Commit>, SourceError> {
    if from > to {
        return Ok(Vec::new());
    }
    let context = "the commits of the next batch";
    let sql = format!(
        "SELECT TOP ({limit}) start_lsn, tran_end_time FROM cdc.lsn_time_mapping \
         WHERE start_lsn >= @P1 AND start_lsn <= @P2 ORDER BY start_lsn"
    );
    let (from, to) = (from.to_bytes(), to.to_bytes());
    let rows = all_rows(client, &sql, &[&&from[..], &&to[..]], context).await?;
    let mut commits = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = row.into_iter();
        let lsn = values
            .next()
            .ok_or_else(|| SourceError::Missing(context.into()))?;
        let lsn = lsn_of(&lsn, context)?.ok_or_else(|| SourceError::Missing(context.into()))?;
        commits.push(Commit {
            lsn,
            commit_ts: commit_time(values.next(), clock),
        });
    }
    Ok(commits)
}

/// One DDL statement on a captured table (`cdc.ddl_history`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdlEvent {
    /// The statement.
    pub command: String,
    /// Its commit LSN.
    pub lsn: Lsn,
    /// Its commit time (UTC).
    pub time: Option<DateTime<Utc>>,
}

/// The DDL `cdc.ddl_history` records for a change table with an LSN in
/// `[from, to]`, oldest first.
pub async fn ddl_events(
    client: &mut SqlClient,
    change_table_id: i32,
    from: Lsn,
    to: Lsn,
    clock: CommitClock,
) -> Result<Vec<DdlEvent>, SourceError> {
    let context = "cdc.ddl_history";
    let (from, to) = (from.to_bytes(), to.to_bytes());
    let rows = all_rows(
        client,
        "SELECT ddl_command, ddl_lsn, ddl_time FROM cdc.ddl_history \
         WHERE object_id = @P1 AND ddl_lsn >= @P2 AND ddl_lsn <= @P3 ORDER BY ddl_lsn",
        &[&change_table_id, &&from[..], &&to[..]],
        context,
    )
    .await?;
    let mut events = Vec::new();
    for row in rows {
        let mut values = row.into_iter();
        let (Some(command), Some(lsn), time) = (values.next(), values.next(), values.next()) else {
            return Err(SourceError::Missing(context.into()));
        };
        let ColumnData::String(Some(command)) = command else {
            return Err(SourceError::Missing(format!("{context}.ddl_command")));
        };
        let lsn = lsn_of(&lsn, context)?.ok_or_else(|| SourceError::Missing(context.into()))?;
        events.push(DdlEvent {
            command: command.to_string(),
            lsn,
            time: commit_time(time, clock),
        });
    }
    Ok(events)
}

/// The computed columns of `table`, which CDC does not capture.
pub async fn computed_columns(
    client: &mut SqlClient,
    table: &TableName,
) -> Result<Vec<String>, SourceError> {
    let qualified = quote_table(table);
    let sql = format!(
        "SELECT name FROM sys.columns WHERE object_id = OBJECT_ID({}) AND is_computed = 1 \
         ORDER BY column_id",
        quote_literal(&qualified)
    );
    let rows = all_rows(client, &sql, &[], "computed columns").await?;
    Ok(rows
        .iter()
        .filter_map(|row| row.try_get::<&str, _>(0).ok().flatten().map(str::to_string))
        .collect())
}

/// The change query of one batch: every change in `[from, to]` in commit
/// order, each with its commit time; values over `limit` are not sent
/// (`ValueLimit`).
pub fn changes_query(info: &CaptureInfo, limit: ValueLimit) -> String {
    let mut columns: Vec<String> = info
        .columns
        .iter()
        .map(|c| c.select_expr(Some("c"), limit))
        .collect();
    columns.extend(limit.guard_columns(&info.columns, Some("c")));
    format!(
        "SELECT c.__$start_lsn, c.__$seqval, c.__$operation, m.tran_end_time, {} \
         FROM cdc.fn_cdc_get_all_changes_{}(@P1, @P2, N'all update old') AS c \
         JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn \
         ORDER BY c.__$start_lsn, c.__$seqval, c.__$operation",
        columns.join(", "),
        info.instance.as_str()
    )
}

/// Reads an LSN from a value.
pub fn lsn_of(value: &ColumnData<'_>, context: &str) -> Result<Option<Lsn>, SourceError> {
    match value {
        ColumnData::Binary(None) => Ok(None),
        ColumnData::Binary(Some(bytes)) => {
            Lsn::try_from(bytes.as_ref())
                .map(Some)
                .map_err(|_| SourceError::BadLsn {
                    context: context.into(),
                })
        }
        _ => Err(SourceError::BadLsn {
            context: context.into(),
        }),
    }
}

async fn lsn_scalar(
    client: &mut SqlClient,
    sql: &str,
    params: &[&dyn tiberius::ToSql],
    context: &str,
) -> Result<Option<Lsn>, SourceError> {
    let row = single_row(client, sql, params, context).await?;
    match row.into_iter().next() {
        Some(value) => lsn_of(&value, context),
        None => Err(SourceError::Missing(context.into())),
    }
}

async fn single_row(
    client: &mut SqlClient,
    sql: &str,
    params: &[&dyn tiberius::ToSql],
    context: &str,
) -> Result<Row, SourceError> {
    all_rows(client, sql, params, context)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| SourceError::Missing(context.into()))
}

/// Every row of the first result of `sql`; failures say `context`.
pub(super) async fn all_rows(
    client: &mut SqlClient,
    sql: &str,
    params: &[&dyn tiberius::ToSql],
    context: &str,
) -> Result<Vec<Row>, SourceError> {
    client
        .query(sql, params)
        .await
        .map_err(SourceError::sql(context))?
        .into_first_result()
        .await
        .map_err(SourceError::sql(context))
}

fn list_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
