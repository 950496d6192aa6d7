//! The CDC jobs as SQL Server describes them: the cleanup job's retention
//! (how long changes are kept, for the retention headroom) and whether
//! the capture job runs. What a login may not read is an answer of its
//! own ([`Readable::Denied`]), not an error: a least-privilege reader is
//! expected to be refused.

use chrono::NaiveDateTime;
use futures::TryStreamExt;
use tiberius::Row;

use super::SourceError;
use super::connection::SqlClient;

/// SQL Server errors meaning "this login may not": 229 (SELECT denied),
/// 297 (no permission), 300 (a server or database permission denied),
/// 916 (no access to the database, e.g. msdb), 22904 (a CDC procedure
/// needs db_owner).
const DENIED: [u32; 5] = [229, 297, 300, 916, 22904];

/// A value, or the server's reason the login may not read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readable<T> {
    /// Read.
    Value(T),
    /// Refused; SQL Server's message.
    Denied(String),
}

/// The rows of `sql`, or the refusal when the login may not run it.
pub(super) async fn readable_rows(
    client: &mut SqlClient,
    sql: &str,
    context: &str,
) -> Result<Readable<Vec<Row>>, SourceError> {
    let result = async {
        client
            .simple_query(sql)
            .await?
            .into_row_stream()
            .try_collect::<Vec<_>>()
            .await
    }
    .await;
    match result {
        Ok(rows) => Ok(Readable::Value(rows)),
        Err(tiberius::error::Error::Server(token)) if DENIED.contains(&token.code()) => {
            Ok(Readable::Denied(token.message().to_string()))
        }
        Err(source) => Err(SourceError::Sql {
            context: context.to_string(),
            source,
        }),
    }
}

const HELP_JOBS: &str = "EXEC sys.sp_cdc_help_jobs";
const MSDB_RETENTION: &str = "SELECT retention FROM msdb.dbo.cdc_jobs \
     WHERE database_id = DB_ID() AND job_type = N'cleanup'";

/// The current database's cleanup retention in minutes (`None`: the
/// database has no cleanup job), from sys.sp_cdc_help_jobs (db_owner) or
/// else msdb.dbo.cdc_jobs (SELECT in msdb).
pub async fn cleanup_retention(
    client: &mut SqlClient,
) -> Result<Readable<Option<i64>>, SourceError> {
    let context = "reading the cleanup job's retention";
    let refused = match readable_rows(client, HELP_JOBS, context).await? {
        Readable::Value(rows) => {
            let cleanup = rows
                .iter()
                .find(|row| row.try_get::<&str, _>("job_type").ok().flatten() == Some("cleanup"));
            return Ok(Readable::Value(cleanup.and_then(retention_of)));
        }
        Readable::Denied(message) => message,
    };
    match readable_rows(client, MSDB_RETENTION, context).await? {
        Readable::Value(rows) => Ok(Readable::Value(rows.first().and_then(retention_of))),
        Readable::Denied(message) => Ok(Readable::Denied(format!("{refused}; {message}"))),
    }
}

fn retention_of(row: &Row) -> Option<i64> {
    row.try_get::<i64, _>("retention").ok().flatten()
}

const CAPTURE_JOB_ACTIVITY: &str = "SELECT TOP (1) a.start_execution_date, a.stop_execution_date \
     FROM msdb.dbo.sysjobactivity AS a \
     JOIN msdb.dbo.cdc_jobs AS j ON j.job_id = a.job_id \
     WHERE j.database_id = DB_ID() AND j.job_type = N'capture' \
     ORDER BY a.session_id DESC";

/// Whether the current database's capture job runs (SQL Server Agent's
/// newest activity row has a start and no stop); `None` when Agent has no
/// row for it.
pub async fn capture_job_running(
    client: &mut SqlClient,
) -> Result<Readable<Option<bool>>, SourceError> {
    let context = "reading the capture job's state";
    Ok(
        match readable_rows(client, CAPTURE_JOB_ACTIVITY, context).await? {
            Readable::Value(rows) => Readable::Value(rows.first().map(|row| {
                let date = |i: usize| row.try_get::<NaiveDateTime, _>(i).ok().flatten();
                date(0).is_some() && date(1).is_none()
            })),
            Readable::Denied(message) => Readable::Denied(message),
        },
    )
}
