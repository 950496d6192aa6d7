//! `spec.heartbeat`: on a quiet database CDC's max LSN moves only with the
//! capture job's idle entries (every few minutes), so a current stream
//! looks behind and writes few facts rows. The worker writes one row of a
//! small CDC-enabled table every `interval`, which the capture job turns
//! into a commit the stream reads past.
//!
//! The table, created by the DBA and enabled for CDC:
//! `CREATE TABLE dbo.mssql_cdc_heartbeat (app_id nvarchar(200) NOT NULL
//! PRIMARY KEY, beat_at datetime2 NOT NULL)`. The stream's login needs
//! INSERT and UPDATE on it (see docs/user-guide.md).

use secrecy::SecretString;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::EngineError;
use super::stream::StreamRun;
use crate::source::types::{quote_ident, quote_literal};
use crate::source::{SourceError, SqlClient, connect};
use crate::spec::{HeartbeatConfig, SourceConfig};

/// The heartbeat task of a run; stopped when dropped.
pub(super) struct Heartbeat {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Heartbeat {
    /// Starts writing `config.table` every `config.interval` on a session of
    /// its own. Failures are logged and retried at the next beat.
    pub(super) fn start(
        source: SourceConfig,
        password: SecretString,
        config: HeartbeatConfig,
        app_id: String,
    ) -> Self {
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut client: Option<SqlClient> = None;
            loop {
                if client.is_none() {
                    match connect(&source, &password).await {
                        Ok(c) => client = Some(c),
                        Err(error) => tracing::warn!(%error, "heartbeat: cannot connect"),
                    }
                }
                if let Some(session) = client.as_mut()
                    && let Err(error) = beat(session, &config, &app_id).await
                {
                    tracing::warn!(%error, table = %format!("{}.{}", config.table.schema, config.table.table), "heartbeat write failed");
                    client = None;
                }
                tokio::select! {
                    () = stopped.cancelled() => return,
                    () = tokio::time::sleep(config.interval) => {}
                }
            }
        });
        Heartbeat { stop, task }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

impl StreamRun {
    /// Warns when the heartbeat table is not captured: its writes would not
    /// move the max LSN.
    pub(super) async fn check_heartbeat(&mut self) -> Result<(), EngineError> {
        let Some(heartbeat) = self.config.heartbeat.clone() else {
            return Ok(());
        };
        let name = format!("{}.{}", heartbeat.table.schema, heartbeat.table.table);
        let qualified = format!(
            "{}.{}",
            quote_ident(&heartbeat.table.schema),
            quote_ident(&heartbeat.table.table)
        );
        let sql = format!(
            "SELECT COUNT(*) FROM sys.tables WHERE object_id = OBJECT_ID({}) AND is_tracked_by_cdc = 1",
            quote_literal(&qualified)
        );
        let context = format!("heartbeat table {name}");
        let rows = self
            .client()?
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
        if tracked == 0 {
            self.warn(format!(
                "spec.heartbeat.table: {name} does not exist or is not enabled for CDC; its writes \
                 do not move the max LSN (enable it with sys.sp_cdc_enable_table)"
            ));
        }
        Ok(())
    }
}

/// One write: update the stream's row, or insert it the first time.
async fn beat(
    client: &mut SqlClient,
    config: &HeartbeatConfig,
    app_id: &str,
) -> Result<(), SourceError> {
    let table = format!(
        "{}.{}",
        quote_ident(&config.table.schema),
        quote_ident(&config.table.table)
    );
    let context = format!(
        "heartbeat table {}.{}",
        config.table.schema, config.table.table
    );
    let id = quote_literal(app_id);
    let updated = client
        .execute(
            format!("UPDATE {table} SET beat_at = SYSUTCDATETIME() WHERE app_id = {id}"),
            &[],
        )
        .await
        .map_err(SourceError::sql(&context))?
        .total();
    if updated == 0 {
        client
            .execute(
                format!("INSERT INTO {table} (app_id, beat_at) VALUES ({id}, SYSUTCDATETIME())"),
                &[],
            )
            .await
            .map_err(SourceError::sql(&context))?;
    }
    Ok(())
}
