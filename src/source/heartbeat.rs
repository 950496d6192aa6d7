//! The heartbeat table's T-SQL (`spec.heartbeat`): one row per stream,
//! written every interval so the capture job has a commit to map on a
//! quiet database. The table, created by the DBA and enabled for CDC:
//! `CREATE TABLE dbo.mssql_cdc_heartbeat (app_id nvarchar(200) NOT NULL
//! PRIMARY KEY, beat_at datetime2 NOT NULL)`.

use super::SourceError;
use super::connection::SqlClient;
use super::types::{quote_ident, quote_literal};
use crate::domain::TableName;

/// Whether `table` exists and is enabled for CDC: only then do its writes
/// move the max LSN.
pub async fn is_captured(client: &mut SqlClient, table: &TableName) -> Result<bool, SourceError> {
    let qualified = qualified(table);
    let sql = format!(
        "SELECT COUNT(*) FROM sys.tables WHERE object_id = OBJECT_ID({}) AND is_tracked_by_cdc = 1",
        quote_literal(&qualified)
    );
    let context = format!("heartbeat table {table}");
    let rows = client
        .query(sql, &[])
        .await
        .map_err(SourceError::sql(&context))?
        .into_first_result()
        .await
        .map_err(SourceError::sql(&context))?;
    let tracked = rows
        .first()
        .and_then(|row| row.try_get::<i32, _>(0).ok().flatten())
        .unwrap_or(0);
    Ok(tracked > 0)
}

/// One beat: update the stream's row, or insert it the first time.
pub async fn beat(
    client: &mut SqlClient,
    table: &TableName,
    app_id: &str,
) -> Result<(), SourceError> {
    let target = qualified(table);
    let context = format!("heartbeat table {table}");
    let id = quote_literal(app_id);
    let updated = client
        .execute(
            format!("UPDATE {target} SET beat_at = SYSUTCDATETIME() WHERE app_id = {id}"),
            &[],
        )
        .await
        .map_err(SourceError::sql(&context))?
        .total();
    if updated == 0 {
        client
            .execute(
                format!("INSERT INTO {target} (app_id, beat_at) VALUES ({id}, SYSUTCDATETIME())"),
                &[],
            )
            .await
            .map_err(SourceError::sql(&context))?;
    }
    Ok(())
}

fn qualified(table: &TableName) -> String {
    format!(
        "{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.table)
    )
}
