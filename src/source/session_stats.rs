//! Per-batch measurements of the reading session itself: one round trip to
//! the server, and how long the server waited for this client to take
//! result rows (the session's `ASYNC_NETWORK_IO` wait).

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use tiberius::ColumnData;

use super::SourceError;
use super::connection::SqlClient;

/// The session's cumulative `ASYNC_NETWORK_IO` wait, or why it cannot be
/// read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkWait {
    /// Milliseconds waited since the session opened.
    Millis(i64),
    /// The login may not read `sys.dm_exec_session_wait_stats` (VIEW SERVER
    /// STATE, or VIEW SERVER PERFORMANCE STATE from SQL Server 2022); the
    /// server's message.
    Denied(String),
}

/// SQL Server errors meaning "not allowed": 297 (no permission to perform
/// the action), 300 (a server permission denied), 229 (SELECT denied).
const PERMISSION_ERRORS: [u32; 3] = [297, 300, 229];

const NETWORK_WAIT_SQL: &str = "SELECT CAST(ISNULL(SUM(wait_time_ms), 0) AS bigint) \
     FROM sys.dm_exec_session_wait_stats \
     WHERE session_id = @@SPID AND wait_type = N'ASYNC_NETWORK_IO'";

/// Times one trivial query: the round trip to the server, with almost no
/// work on either side.
pub async fn round_trip(client: &mut SqlClient) -> Result<Duration, SourceError> {
    let started = Instant::now();
    client
        .simple_query("SELECT 1")
        .await
        .map_err(SourceError::sql("measuring a round trip"))?
        .into_results()
        .await
        .map_err(SourceError::sql("measuring a round trip"))?;
    Ok(started.elapsed())
}

/// Reads the session's `ASYNC_NETWORK_IO` total. Counters start at zero
/// when the session opens, so callers take the difference over a batch.
pub async fn network_wait(client: &mut SqlClient) -> Result<NetworkWait, SourceError> {
    let context = "reading sys.dm_exec_session_wait_stats";
    let result = async {
        client
            .simple_query(NETWORK_WAIT_SQL)
            .await?
            .into_row_stream()
            .try_collect::<Vec<_>>()
            .await
    }
    .await;
    let rows = match result {
        Ok(rows) => rows,
        Err(tiberius::error::Error::Server(token)) if PERMISSION_ERRORS.contains(&token.code()) => {
            return Ok(NetworkWait::Denied(token.message().to_string()));
        }
        Err(source) => {
            return Err(SourceError::Sql {
                context: context.into(),
                source,
            });
        }
    };
    let value = rows
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next());
    match value {
        Some(ColumnData::I64(Some(ms))) => Ok(NetworkWait::Millis(ms)),
        Some(ColumnData::I32(Some(ms))) => Ok(NetworkWait::Millis(i64::from(ms))),
        Some(other) => Err(SourceError::UnexpectedValue {
            column: "wait_time_ms".into(),
            sql_type: "bigint".into(),
            found: super::arrow_rows::wire_type(&other).to_string(),
            row: "the query's one row".into(),
        }),
        None => Err(SourceError::Missing(context.into())),
    }
}
