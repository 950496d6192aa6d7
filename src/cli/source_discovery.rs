//! Discovery in a source's worker, report only: the captured tables of
//! the database that `spec.discovery` matches and no stream of the source
//! covers, counted into `status.discovery`. Asked when the worker starts
//! its tables (at start, and again whenever its streams change) and then
//! every `idleCommitInterval`, never per round: one read of the CdcSource
//! (so an edited `spec.discovery` is taken without restarting the
//! tables), one login and one catalog query (`captured_tables`), and a
//! status apply only when the result differs from what the status shows.

use std::time::Duration;

use anyhow::Context;
use kube::Api;
use mssql_cdc::operator::children::source_worker_connection;
use mssql_cdc::operator::source_discovery::apply_discovery;
use mssql_cdc::source::cdc::captured_tables;
use mssql_cdc::source::connect;
use mssql_cdc::spec::{CdcSource, DiscoveryStatus, TableFilter, resolve_password, uncovered};
use tokio_util::sync::CancellationToken;

/// Reports discovery for the source `name`, whose worker runs the streams
/// of `streamed` (their `spec.source.table`), now and every `every`, until
/// `stop`. A failed check is logged and tried again at the next tick; it
/// never stops the tables.
pub async fn report(
    sources: Api<CdcSource>,
    name: String,
    streamed: Vec<String>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            checked = check(&sources, &name, &streamed) => {
                if let Err(error) = checked {
                    tracing::warn!(source = %name, "discovery: {error:#}; trying again in {every:?}");
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// One check: `status.discovery` applied when it changed, removed when
/// the source has no `spec.discovery` any more.
async fn check(sources: &Api<CdcSource>, name: &str, streamed: &[String]) -> anyhow::Result<()> {
    let source = sources
        .get(name)
        .await
        .with_context(|| format!("cannot read CdcSource {name}"))?;
    let found = match &source.spec.discovery {
        None => None,
        Some(spec) => {
            let filter = TableFilter::of_spec(spec)?;
            let connection = source_worker_connection(&source)?;
            let password = resolve_password(&connection.password, |v| std::env::var(v).ok())?;
            let mut client = connect(&connection, &password).await?;
            let captured = captured_tables(&mut client).await?;
            Some(DiscoveryStatus::of(&uncovered(
                &captured, streamed, &filter,
            )))
        }
    };
    let shown = source.status.as_ref().and_then(|s| s.discovery.as_ref());
    if shown == found.as_ref() {
        return Ok(());
    }
    if let Some(found) = &found {
        tracing::info!(
            source = %name,
            count = found.count,
            "discovery: captured tables without a stream: {}",
            found.tables.join(", ")
        );
    }
    apply_discovery(sources, name, found.as_ref()).await?;
    Ok(())
}
