//! The read metrics a micro-batch's reader session measures on itself:
//! a round trip before the read, and the session's ASYNC_NETWORK_IO wait
//! before and after it. A login that may not read its waits gets NULL and
//! one warning per run in the facts `detail`.

use std::time::Duration;

use super::EngineError;
use super::stream::StreamRun;
use crate::source::session_stats::{self, NetworkWait};

/// Whether this run may read its session's waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum WaitAccess {
    /// Not tried yet.
    #[default]
    Unknown,
    /// Readable.
    Granted,
    /// Refused; the warning was recorded, the run stops asking.
    Denied,
}

/// What was measured before the read.
pub(super) struct ReadProbe {
    round_trip: Duration,
    wait_before_ms: Option<i64>,
}

/// The session metrics of one batch, for its facts row.
pub(super) struct SessionMetrics {
    /// `source_rtt_ms`.
    pub source_rtt_ms: f64,
    /// `network_wait_ms`: NULL without permission.
    pub network_wait_ms: Option<i64>,
}

impl StreamRun {
    /// Measures a round trip and reads the wait counter before a read.
    pub(super) async fn probe_before_read(&mut self) -> Result<ReadProbe, EngineError> {
        let round_trip = session_stats::round_trip(self.client()?).await?;
        let wait_before_ms = self.read_network_wait().await?;
        Ok(ReadProbe {
            round_trip,
            wait_before_ms,
        })
    }

    /// Reads the wait counter again after the read: the difference is what
    /// the server waited for this client during the batch.
    pub(super) async fn probe_after_read(
        &mut self,
        probe: ReadProbe,
    ) -> Result<SessionMetrics, EngineError> {
        let network_wait_ms = match probe.wait_before_ms {
            Some(before) => self
                .read_network_wait()
                .await?
                // Counters only grow within a session; never report less than 0.
                .map(|after| (after - before).max(0)),
            None => None,
        };
        Ok(SessionMetrics {
            source_rtt_ms: probe.round_trip.as_secs_f64() * 1000.0,
            network_wait_ms,
        })
    }

    async fn read_network_wait(&mut self) -> Result<Option<i64>, EngineError> {
        if self.wait_access == WaitAccess::Denied {
            return Ok(None);
        }
        match session_stats::network_wait(self.client()?).await? {
            NetworkWait::Millis(ms) => {
                self.wait_access = WaitAccess::Granted;
                Ok(Some(ms))
            }
            NetworkWait::Denied(message) => {
                self.wait_access = WaitAccess::Denied;
                let warning = format!(
                    "network_wait_ms is NULL: login {} may not read sys.dm_exec_session_wait_stats \
                     (grant VIEW SERVER PERFORMANCE STATE on SQL Server 2022 and later, VIEW SERVER \
                     STATE before); SQL Server said: {message}",
                    self.config.source.username
                );
                self.warn(warning);
                Ok(None)
            }
        }
    }
}
