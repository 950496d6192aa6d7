//! `spec.heartbeat`: on a quiet database CDC's max LSN moves only with the
//! capture job's idle entries (every few minutes), so a current stream
//! looks behind and writes few facts rows. A task of the run writes the
//! stream's row of a small CDC-enabled table every `interval` (the T-SQL
//! is `source::heartbeat`), which the capture job turns into a commit the
//! stream reads past. The login needs INSERT and UPDATE on it (see
//! docs/user-guide.md).

use secrecy::SecretString;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::source::{SqlClient, connect, heartbeat};
use crate::spec::{HeartbeatConfig, SourceConfig};

/// The heartbeat task of a run; stopped when dropped.
pub struct Heartbeat {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Heartbeat {
    /// Starts writing `config.table` every `config.interval` on a session of
    /// its own. Failures are logged and retried at the next beat.
    pub fn start(
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
                    && let Err(error) = heartbeat::beat(session, &config.table, &app_id).await
                {
                    tracing::warn!(%error, table = %config.table, "heartbeat write failed");
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
