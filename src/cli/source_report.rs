//! What a source's worker reports of the source as a whole, besides each
//! table's own status: the rounds' verdict on SQL Server
//! (`status.connection`) and, with `spec.connection.monitoring`, one
//! capture monitor for the source (`status.capture`), both written into
//! the CdcSource's status by `operator::source_report`.

use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use mssql_cdc::engine::{Observer, TableRun};
use mssql_cdc::operator::source_report::{SourceReporter, publish_source_report};
use mssql_cdc::operator::worker::StatusReports;
use mssql_cdc::spec::{CdcSource, Trigger};
use tokio::task::JoinHandle;

use super::capture_monitor::watch_capture;
use super::worker::{FINAL_REPORT_TIMEOUT, monitoring_password};

/// The source's report while its tables run.
pub struct SourceReport {
    /// Hand it to `run_tables`: it hears the rounds' verdict.
    pub observer: Arc<dyn Observer>,
    monitor: Option<JoinHandle<()>>,
    publisher: JoinHandle<()>,
}

impl SourceReport {
    /// Starts reporting into CdcSource `name` through `api`, every
    /// `interval` at most for moving numbers; the source's connection
    /// and login are `tables`' (the same for all of them).
    pub fn start(
        api: Api<CdcSource>,
        name: &str,
        tables: &[TableRun],
        reports: &Arc<StatusReports>,
        interval: Duration,
    ) -> Self {
        let (reporter, latest) = SourceReporter::new();
        let monitor = tables.first().and_then(|first| {
            let password = monitoring_password(&first.config)?;
            let every = match first.config.trigger {
                Trigger::ProcessingTime(every) => every,
                Trigger::AvailableNow => Duration::from_secs(10),
            };
            let reporter = reporter.clone();
            Some(tokio::spawn(watch_capture(
                first.config.source.clone(),
                password,
                every,
                move |capture| reporter.capture_looked(capture),
            )))
        });
        let publisher = tokio::spawn(publish_source_report(
            api,
            name.to_string(),
            latest,
            Arc::clone(reports),
            interval,
        ));
        SourceReport {
            observer: Arc::new(reporter),
            monitor,
            publisher,
        }
    }

    /// Stops the monitor and sends the last report (bounded in time).
    pub async fn finish(self) {
        let SourceReport {
            observer,
            monitor,
            publisher,
        } = self;
        if let Some(monitor) = monitor {
            monitor.abort();
            let _ = monitor.await;
        }
        drop(observer);
        if tokio::time::timeout(FINAL_REPORT_TIMEOUT, publisher)
            .await
            .is_err()
        {
            tracing::error!("the source's last status report did not reach the API server in time");
        }
    }
}
