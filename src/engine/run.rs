//! A run of one stream: takes the checkpoint's lease, connects, opens the
//! tables, then steps until caught up (`--once`), stopped, or failed on an
//! error that retrying cannot fix. A transient error (a cut connection, a
//! store that answers 503) waits with backoff and reconnects.

use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;

use super::context::Run;
use super::error::EngineError;
use super::heartbeat::Heartbeat;
use super::options::{RunOptions, RunSummary};
use super::sink::{CommitRetry, Sink};
use super::source_writes::SourceWrites;
use super::step::{Step, step};
use super::{silver_fill, silver_keys};
use crate::lake::checkpoint::Checkpoint;
use crate::lake::lease::{CheckpointLease, LeaseGuard};
use crate::lake::local_access::check_writable;
use crate::lake::storage::{StorageLocation, UNSAFE_RENAME, unsafe_rename_source};
use crate::retry::Backoff;
use crate::source::SourceSession;
use crate::source::session::Raised;
use crate::spec::{StreamConfig, Trigger, resolve_password};

/// Runs the stream until it is caught up (`once` / availableNow), stopped,
/// or fails with an error that retrying cannot fix.
///
/// Whatever stops it, before its first batch or after, is told to the
/// run's observer: a table of a source says why in its own status.
pub async fn run(config: StreamConfig, options: RunOptions) -> Result<RunSummary, EngineError> {
    let observer = Arc::clone(&options.observer);
    let result = run_stream(config, options).await;
    if let Err(error) = &result {
        observer.failed(error);
    }
    result
}

async fn run_stream(config: StreamConfig, options: RunOptions) -> Result<RunSummary, EngineError> {
    if let Some(found_in) = unsafe_rename_source(&config.storage_options, &options.env) {
        return Err(EngineError::UnsafeStorage {
            setting: UNSAFE_RENAME,
            found_in,
        });
    }
    check_writable(written_locations(&config)).map_err(EngineError::NotWritable)?;
    let password = resolve_password(&config.source.password, |name: &str| {
        options.env.get(name).cloned()
    })?;
    let monitoring = config.source.monitoring.as_ref().and_then(|login| {
        resolve_password(&login.password, |name: &str| options.env.get(name).cloned())
            .map_err(|error| tracing::warn!("spec.source.monitoring: {error}; going on without it"))
            .ok()
    });
    let mut run = Run::new(&config, &options);
    let result = match claim_checkpoint(&mut run).await {
        Ok(Some((checkpoint, lease))) => {
            // A source's tables share one heartbeat, the source's.
            let own_heartbeat = config.heartbeat.clone().filter(|_| options.pace.is_none());
            let _heartbeat = own_heartbeat.map(|heartbeat| {
                Heartbeat::start(
                    config.source.clone(),
                    password.clone(),
                    heartbeat,
                    config.app_id.clone(),
                )
            });
            let result = drive(
                &mut run,
                &password,
                monitoring.as_ref(),
                lease.guard(),
                checkpoint,
            )
            .await;
            lease.release().await;
            result
        }
        // Stopped while waiting.
        Ok(None) => Ok(()),
        Err(error) => Err(error),
    };
    result.map(|()| run.summary)
}

/// Every location the stream writes: the checkpoint and its tables.
fn written_locations(config: &StreamConfig) -> impl Iterator<Item = &StorageLocation> {
    [
        &config.checkpoint,
        &config.target.location,
        &config.facts.location,
    ]
    .into_iter()
    .chain(config.finalization.iter().map(|f| &f.table.location))
    .chain(config.silver.iter().map(|s| &s.table.location))
}

/// Opens the checkpoint, checks its store fences writers, and takes its
/// lease, retrying what may pass (a store that answers 503, a lease an
/// earlier process left to expire). `None`: stopped meanwhile.
async fn claim_checkpoint(
    run: &mut Run<'_>,
) -> Result<Option<(Checkpoint, CheckpointLease)>, EngineError> {
    let config = run.config;
    let options = config
        .checkpoint
        .options(&config.storage_options, run.options.env.clone());
    let mut backoff = run.options.backoff.clone();
    loop {
        let attempt = async {
            let checkpoint = Checkpoint::open(&config.checkpoint, &options)?;
            checkpoint.probe_create_only().await?;
            let lease = take_lease(config, run.options, &options).await?;
            Ok::<_, EngineError>((checkpoint, lease))
        };
        match attempt.await {
            Ok(claimed) => return Ok(Some(claimed)),
            Err(error) => pause(run, &mut backoff, error).await?,
        }
        if run.options.stop.is_cancelled() {
            return Ok(None);
        }
    }
}

/// Connects and opens the tables (retrying transient errors), then steps.
async fn drive(
    run: &mut Run<'_>,
    password: &SecretString,
    monitoring: Option<&SecretString>,
    lease: LeaseGuard,
    checkpoint: Checkpoint,
) -> Result<(), EngineError> {
    let config = run.config;
    let mut backoff = run.options.backoff.clone();
    let heartbeat = config.heartbeat.as_ref();
    // A source's table does not try a source its rounds find down, and
    // connects in one of its read slots.
    if let Some(pace) = run.options.pace.clone() {
        pace.wait_while_source_down(&run.options.stop).await;
    }
    run.read_permit = read_permit(run).await;
    let mut session = loop {
        let opened = open_source(run, password, heartbeat, None).await;
        let opened = match opened {
            Ok(mut session) => {
                let mut raised = Raised::new();
                let read = session.read_retention(monitoring, &mut raised).await;
                raise_all(run, raised);
                match read {
                    Ok(()) => silver_keys::check(config, &session).await.map(|()| session),
                    Err(error) => Err(error.into()),
                }
            }
            Err(error) => Err(error),
        };
        match opened {
            Ok(session) => break session,
            Err(error) => pause(run, &mut backoff, error).await?,
        }
        if run.options.stop.is_cancelled() {
            return Ok(());
        }
    };
    let mut sink = loop {
        let adopt = run.options.adopt_target || config.adopt_target;
        match Sink::open(
            config,
            &run.options.env,
            checkpoint.clone(),
            session.info(),
            adopt,
            lease.clone(),
            run.options.writes.as_ref(),
        )
        .await
        {
            // A silver table new to the stream is filled before any batch.
            Ok(mut sink) => match silver_fill::fill_added_silver(run, &mut sink).await {
                Ok(()) => break sink,
                Err(error) => pause(run, &mut backoff, error).await?,
            },
            Err(error) => pause(run, &mut backoff, error).await?,
        }
        if run.options.stop.is_cancelled() {
            return Ok(());
        }
    };
    sink.retry_commits_with(CommitRetry {
        backoff: run.options.backoff.clone(),
        outage: Some(Arc::clone(&run.store_outage)),
        stop: run.options.stop.clone(),
    });
    run.store_outage.answered();
    run.read_permit = None;
    run.observer().running();
    if !sink.columns_added().is_empty() {
        run.warnings.raise(format!(
            "bronze {} gained the column(s) {} that the stream reads now but did not before \
             (spec.source.columns was widened, or the capture instance was enabled again with \
             more columns); its rows written before hold NULL in them: re-snapshot into a new \
             target (a new spec.appId) to fill them",
            config.target.location,
            sink.columns_added().join(", ")
        ));
    }
    let mut reconnect = false;
    loop {
        run.read_permit = read_permit(run).await;
        // The source's group commits wait for this table while it steps.
        run.in_step = run.options.writes.as_ref().map(SourceWrites::step);
        let result = if reconnect {
            open_source(run, password, heartbeat, Some(&session))
                .await
                .map(|fresh| {
                    session = fresh;
                    Step::Progress
                })
        } else {
            step(run, &mut session, &mut sink).await
        };
        reconnect = false;
        run.read_permit = None;
        run.in_step = None;
        if result.is_ok() {
            run.store_outage.answered();
        }
        match result {
            Ok(Step::Done) => return Ok(()),
            Ok(Step::Progress) => backoff.reset(),
            Ok(Step::Idle) => {
                backoff.reset();
                let caught_up = run.caught_up.take();
                if let (Some(pace), Some(window)) = (run.options.pace.as_ref(), caught_up) {
                    // A source's table waits for the round to find a
                    // change in its window (or its idle commit to be due),
                    // closing its session if the wait is long.
                    run.quiet = pace
                        .wait_for_change(window, &run.options.stop, || session.park())
                        .await;
                    if run.options.stop.is_cancelled() {
                        return Ok(());
                    }
                    continue;
                }
                let wait = match config.trigger {
                    Trigger::ProcessingTime(interval) => interval,
                    Trigger::AvailableNow => Duration::ZERO,
                };
                tokio::select! {
                    () = run.options.stop.cancelled() => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                }
            }
            Err(error) => {
                pause(run, &mut backoff, error).await?;
                reconnect = true;
            }
        }
        if run.options.stop.is_cancelled() {
            return Ok(());
        }
    }
}

/// One of the source's read slots, for a table of a source (none is
/// needed by a stream of its own).
async fn read_permit(run: &Run<'_>) -> Option<tokio::sync::OwnedSemaphorePermit> {
    match run.options.pace.as_ref() {
        Some(pace) => pace.read_permit().await,
        None => None,
    }
}

/// Connects to SQL Server (after a reconnect, going on with what
/// `previous` read) and records the warnings the adapter raised.
async fn open_source(
    run: &mut Run<'_>,
    password: &SecretString,
    heartbeat: Option<&crate::spec::HeartbeatConfig>,
    previous: Option<&SourceSession>,
) -> Result<SourceSession, EngineError> {
    let mut raised = Raised::new();
    let opened = SourceSession::open(
        &run.config.source,
        password,
        heartbeat,
        previous,
        &mut raised,
    )
    .await;
    raise_all(run, raised);
    Ok(opened?)
}

fn raise_all(run: &mut Run<'_>, raised: Raised) {
    for warning in raised {
        run.warnings.raise(warning);
    }
}

/// Takes the checkpoint's lease (waiting for a remote one a dead process
/// left behind). Builds with the `failpoints` feature can skip it
/// (`MSSQL_CDC_TEST_BYPASS_LEASE`) to prove the other fences hold alone.
async fn take_lease(
    config: &StreamConfig,
    options: &RunOptions,
    checkpoint_options: &crate::lake::StorageOptions,
) -> Result<CheckpointLease, EngineError> {
    #[cfg(feature = "failpoints")]
    if options.env.contains_key(BYPASS_LEASE) {
        tracing::warn!("{BYPASS_LEASE} is set: running without the checkpoint lease (tests only)");
        return Ok(CheckpointLease::bypassed(&config.checkpoint));
    }
    Ok(CheckpointLease::acquire(&config.checkpoint, checkpoint_options, options.lease_ttl).await?)
}

/// The test-only switch that runs without a lease (failpoints builds).
#[cfg(feature = "failpoints")]
pub const BYPASS_LEASE: &str = "MSSQL_CDC_TEST_BYPASS_LEASE";

/// After a transient error: tells the observer and waits out the backoff
/// (less when the run is stopped meanwhile). Any other error is returned.
/// A table of a source that meets an error of the whole source (its
/// `outage()`) leaves it to the source's rounds: it waits, without its
/// read slot, until they find the source back, then tries again at once;
/// only when they find it answering is the error the table's own.
async fn pause(
    run: &mut Run<'_>,
    backoff: &mut Backoff,
    error: EngineError,
) -> Result<(), EngineError> {
    if let (Some(pace), Some(outage)) = (run.options.pace.clone(), error.outage()) {
        let held = run.read_permit.take().is_some();
        tracing::info!(%error, reason = outage.reason(), "asking the source's rounds whether the source is down");
        let waited = pace.wait_out_source_outage(&run.options.stop).await;
        if held {
            run.read_permit = read_permit(run).await;
        }
        if waited {
            backoff.reset();
            return Ok(());
        }
    }
    if !error.is_transient() {
        return Err(error);
    }
    run.store_outage.failed(&error);
    let (attempt, delay) = backoff.next_delay();
    tracing::warn!(%error, attempt, delay_s = delay.as_secs_f64(), "transient error; retrying");
    run.observer().retrying(&error, attempt, delay);
    tokio::select! {
        () = run.options.stop.cancelled() => {}
        () = tokio::time::sleep(delay) => {}
    }
    Ok(())
}
