//! One stream's main loop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use deltalake::arrow::datatypes::Schema;
use deltalake::arrow::record_batch::RecordBatch;
use secrecy::SecretString;
use tiberius::ColumnData;
use tokio_util::sync::CancellationToken;

use super::EngineError;
use super::data_loss::Purged;
use super::heartbeat::Heartbeat;
use super::observer::Observer;
use super::read_metrics::WaitAccess;
use super::retry::Backoff;
use super::source_changes;
use super::warnings::Warnings;
use crate::failpoint;
use crate::lake::StorageOptions;
use crate::lake::bronze::{self, BronzeOutcome, BronzeTable, StagedFiles};
use crate::lake::checkpoint::{Checkpoint, CommittedBatch, PlannedBatch, PlannedEvent};
use crate::lake::facts::{AppendOutcome, FactRow, FactSequence, FactsKey, FactsTable};
use crate::lake::finalization::FinalizationTable;
use crate::lake::lease::{CheckpointLease, DEFAULT_LEASE_TTL};
use crate::source::reader::{ReadRequest, ReadStats, RowShape, spawn_read};
use crate::source::{CaptureInfo, CaptureInstance, Lsn, SourceError, SqlClient, cdc};
use crate::spec::{StreamConfig, Trigger, resolve_password};

/// How to run a stream.
pub struct RunOptions {
    /// Read up to the max LSN seen at start, then return (`--once`), whatever
    /// the manifest's trigger says.
    pub once: bool,
    /// Cancelled to stop after the current batch.
    pub stop: CancellationToken,
    /// Receives progress.
    pub observer: Arc<dyn Observer>,
    /// Warnings about the manifest (unknown fields), recorded in the `detail`
    /// of the first facts row this run writes.
    pub warnings: Vec<String>,
    /// Validity of a remote checkpoint lease.
    pub lease_ttl: Duration,
    /// Retry policy for transient errors.
    pub backoff: Backoff,
    /// Environment the password and storage options are read from.
    pub env: BTreeMap<String, String>,
}

impl RunOptions {
    /// Defaults: continuous, silent, the process environment.
    pub fn new(observer: Arc<dyn Observer>) -> Self {
        RunOptions {
            once: false,
            stop: CancellationToken::new(),
            observer,
            warnings: Vec::new(),
            lease_ttl: DEFAULT_LEASE_TTL,
            backoff: Backoff::default(),
            env: std::env::vars().collect(),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSummary {
    /// Micro-batches completed (replays included).
    pub batches: u64,
    /// Change rows written to bronze by those batches.
    pub rows: u64,
    /// Rows copied by a snapshot in this run.
    pub snapshot_rows: u64,
    /// The last facts row written.
    pub last: Option<FactRow>,
}

/// commitInfo key of a batch's event rows (next to its facts row).
const COMMIT_INFO_EVENTS: &str = "mssql_cdc.events";

/// Runs the stream until it is caught up (`once` / availableNow), stopped,
/// or fails with an error that retrying cannot fix.
pub async fn run(config: StreamConfig, options: RunOptions) -> Result<RunSummary, EngineError> {
    let password = resolve_password(&config.source.password, |name: &str| {
        options.env.get(name).cloned()
    })?;
    let env = || options.env.clone().into_iter();
    let checkpoint_options = config.checkpoint.options(&config.storage_options, env());
    let lease =
        CheckpointLease::acquire(&config.checkpoint, &checkpoint_options, options.lease_ttl)
            .await?;
    let checkpoint = Checkpoint::open(&config.checkpoint, &checkpoint_options)?;
    let _heartbeat = config.heartbeat.clone().map(|heartbeat| {
        Heartbeat::start(
            config.source.clone(),
            password.clone(),
            heartbeat,
            config.app_id.clone(),
        )
    });
    let mut stream = StreamRun {
        target_options: config
            .target
            .location
            .options(&config.storage_options, env()),
        facts_options: config
            .facts
            .location
            .options(&config.storage_options, env()),
        finalization_options: config
            .finalization
            .as_ref()
            .map(|f| f.table.location.options(&config.storage_options, env()))
            .unwrap_or_default(),
        finalization: None,
        wait_access: WaitAccess::default(),
        config,
        password,
        checkpoint,
        lease,
        tables: None,
        client: None,
        info: None,
        utc_offset: None,
        server_major_version: None,
        warnings: Warnings::new(&options.warnings),
        summary: RunSummary::default(),
        once_target: None,
    };
    let result = run_loop(&mut stream, &options).await;
    if let Err(error) = &result {
        options.observer.failed(error);
    }
    let StreamRun { lease, summary, .. } = stream;
    lease.release().await;
    result.map(|()| summary)
}

async fn run_loop(stream: &mut StreamRun, options: &RunOptions) -> Result<(), EngineError> {
    let mut backoff = options.backoff.clone();
    loop {
        match stream.advance(options).await {
            Ok(Step::Done) => return Ok(()),
            Ok(Step::Progress) => backoff.reset(),
            Ok(Step::Idle) => {
                backoff.reset();
                let wait = match stream.config.trigger {
                    Trigger::ProcessingTime(interval) => interval,
                    Trigger::AvailableNow => Duration::ZERO,
                };
                tokio::select! {
                    () = options.stop.cancelled() => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                }
            }
            Err(error) if error.is_transient() => {
                stream.client = None;
                let (attempt, delay) = backoff.next_delay();
                tracing::warn!(%error, attempt, delay_s = delay.as_secs_f64(), "transient error; retrying");
                options.observer.retrying(&error, attempt, delay);
                tokio::select! {
                    () = options.stop.cancelled() => return Ok(()),
                    () = tokio::time::sleep(delay) => {}
                }
            }
            Err(error) => return Err(error),
        }
        if options.stop.is_cancelled() {
            return Ok(());
        }
    }
}

/// The outcome of one step of the loop.
pub(super) enum Step {
    /// Work was done; go on at once.
    Progress,
    /// Nothing new; wait for the trigger.
    Idle,
    /// `once`: caught up.
    Done,
}

pub(super) struct Tables {
    pub bronze: BronzeTable,
    pub facts: FactsTable,
}

/// Where the stream stands: the last LSN it read up to, its commit time,
/// and the capture instance it read (`None`: the discovered one).
pub(super) struct Position {
    pub lsn: Lsn,
    pub commit_ts: Option<DateTime<Utc>>,
    pub instance: Option<CaptureInstance>,
}

/// The source's watermarks when a batch was planned.
pub(super) struct Watermarks {
    pub max_lsn: Lsn,
    pub max_time: Option<DateTime<Utc>>,
    /// When the watermarks were read (UTC, local clock).
    pub observed_at: DateTime<Utc>,
    pub min_time: Option<DateTime<Utc>>,
}

pub(super) struct StreamRun {
    pub config: StreamConfig,
    pub password: SecretString,
    pub checkpoint: Checkpoint,
    pub lease: CheckpointLease,
    pub target_options: StorageOptions,
    pub facts_options: StorageOptions,
    pub finalization_options: StorageOptions,
    pub finalization: Option<FinalizationTable>,
    pub wait_access: WaitAccess,
    pub tables: Option<Tables>,
    pub client: Option<SqlClient>,
    pub info: Option<CaptureInfo>,
    pub utc_offset: Option<i64>,
    pub server_major_version: Option<u32>,
    pub warnings: Warnings,
    pub summary: RunSummary,
    pub once_target: Option<Lsn>,
}

impl StreamRun {
    /// One step: connect if needed, bootstrap if needed, then replay a
    /// pending batch or plan and run the next one.
    async fn advance(&mut self, options: &RunOptions) -> Result<Step, EngineError> {
        if self.lease.is_lost() {
            return Err(EngineError::LeaseLost(self.config.checkpoint.to_string()));
        }
        self.prepare().await?;
        let state = self.checkpoint.state().await?;
        if let Some(pending) = state.pending().cloned() {
            tracing::info!(batch_id = %pending.batch_id, "replaying a batch planned by an earlier run");
            self.use_instance(&pending.capture_instance).await?;
            let marks = self.watermarks().await?;
            self.run_batch(&pending, &marks, options).await?;
            return Ok(Step::Progress);
        }
        let position = self.position(&state, options).await?;
        if let Some(instance) = &position.instance {
            self.use_instance(instance).await?;
        }
        self.refresh_utc_offset().await?;
        let marks = self.watermarks().await?;
        if options.once || self.config.trigger == Trigger::AvailableNow {
            self.once_target.get_or_insert(marks.max_lsn);
        }
        let upper = self
            .once_target
            .map_or(marks.max_lsn, |target| target.min(marks.max_lsn));
        let next = position
            .lsn
            .checked_next()
            .ok_or(SourceError::LsnOverflow(position.lsn))?;
        let step = self.follow_instances(next, upper).await?;
        let mut events: Vec<PlannedEvent> = step.switched.into_iter().collect();
        let mut start = step.start;
        match self.check_purged(&position, start, step.upper).await? {
            Purged::No => {}
            Purged::Skipped { resume, event } => {
                events.insert(0, event);
                start = resume;
            }
            Purged::Resnapshot {
                lost_from_ts,
                lost_to_ts,
            } => {
                self.resnapshot(lost_from_ts, lost_to_ts, options).await?;
                return Ok(Step::Progress);
            }
        }
        let (batch_upper, ddl) = self.schema_changes(start, step.upper).await?;
        let max_commits = self.config.max_commits_per_batch.get();
        let end = cdc::plan_end(self.client()?, start, batch_upper, max_commits).await?;
        let end = match end {
            Some(end) => end,
            // A switch or a skip is recorded even when nothing follows it yet.
            None if !events.is_empty() => batch_upper.max(start),
            None => {
                return Ok(if self.once_target.is_some() {
                    Step::Done
                } else {
                    Step::Idle
                });
            }
        };
        for statement in ddl.iter().filter(|d| d.lsn <= end) {
            events.push(self.schema_change_event(statement)?);
        }
        let plan = PlannedBatch {
            batch_id: state.next_batch_id().map_err(|e| {
                EngineError::Inconsistent(format!("checkpoint {}: {e}", self.config.checkpoint))
            })?,
            start_lsn: start,
            end_lsn: end,
            capture_instance: self.info()?.instance.clone(),
            end_commit_ts: self.lsn_time(end).await?,
            planned_at: Utc::now(),
            events,
        };
        self.checkpoint.plan(&plan).await?;
        failpoint::hit("after_offsets");
        source_changes::switch_failpoint(&plan, "after_offsets");
        self.run_batch(&plan, &marks, options).await?;
        let caught_up = end >= upper;
        Ok(match (self.once_target, caught_up) {
            (Some(_), true) => Step::Done,
            (None, true) => Step::Idle,
            (_, false) => Step::Progress,
        })
    }

    /// Connects, discovers the capture instance and opens the tables, once.
    async fn prepare(&mut self) -> Result<(), EngineError> {
        if self.client.is_none() {
            let mut client = crate::source::connect(&self.config.source, &self.password).await?;
            // After a reconnect, the instance the stream was reading.
            let named = self
                .config
                .source
                .capture_instance
                .as_ref()
                .or(self.info.as_ref().map(|info| &info.instance));
            let info = cdc::discover(
                &mut client,
                &self.config.source.table,
                named,
                self.config.source.columns.as_deref(),
            )
            .await?;
            if let Some(known) = &self.info
                && known != &info
            {
                tracing::warn!(
                    capture_instance = %info.instance,
                    "the capture instance or its columns changed while the stream ran; continuing with the columns it started with"
                );
            } else {
                self.info = Some(info);
            }
            self.client = Some(client);
            self.refresh_utc_offset().await?;
            self.check_columns().await?;
            self.check_heartbeat().await?;
        }
        if self.tables.is_none() {
            let info = self.info()?;
            let fields = info
                .columns
                .iter()
                .map(|c| c.field())
                .collect::<Result<Vec<_>, _>>()?;
            let schema = bronze::bronze_schema(&Schema::new(fields))?;
            let bronze = BronzeTable::open_or_create(
                &self.config.target.location,
                &self.target_options,
                &schema,
                self.config.app_id.clone(),
            )
            .await?;
            let facts =
                FactsTable::open_or_create(&self.config.facts.location, &self.facts_options)
                    .await?;
            self.tables = Some(Tables { bronze, facts });
        }
        Ok(())
    }

    pub(super) fn info(&self) -> Result<&CaptureInfo, EngineError> {
        self.info
            .as_ref()
            .ok_or_else(|| EngineError::Inconsistent("capture instance not discovered".into()))
    }

    pub(super) fn client(&mut self) -> Result<&mut SqlClient, EngineError> {
        self.client
            .as_mut()
            .ok_or_else(|| EngineError::Inconsistent("not connected".into()))
    }

    pub(super) fn tables(&mut self) -> Result<&mut Tables, EngineError> {
        self.tables
            .as_mut()
            .ok_or_else(|| EngineError::Inconsistent("tables not open".into()))
    }

    pub(super) async fn lsn_time(
        &mut self,
        lsn: Lsn,
    ) -> Result<Option<DateTime<Utc>>, EngineError> {
        let offset = self.utc_offset_minutes();
        Ok(cdc::lsn_time(self.client()?, lsn, offset).await?)
    }

    async fn watermarks(&mut self) -> Result<Watermarks, EngineError> {
        let instance = self.info()?.instance.clone();
        let max_lsn = cdc::max_lsn(self.client()?).await?;
        let min_lsn = cdc::min_lsn(self.client()?, &instance).await?;
        let offset = self.utc_offset_minutes();
        let min_time = cdc::first_time_from(self.client()?, min_lsn, offset).await?;
        Ok(Watermarks {
            observed_at: Utc::now(),
            max_time: self.lsn_time(max_lsn).await?,
            min_time,
            max_lsn,
        })
    }

    /// Runs `request` on the session's read task while bronze stages what it
    /// yields; the session comes back when both are done. A read error wins
    /// over the writer's (which only says the stream broke).
    pub(super) async fn read_into_bronze(
        &mut self,
        request: ReadRequest,
    ) -> Result<(StagedFiles, ReadStats), EngineError> {
        let client = self
            .client
            .take()
            .ok_or_else(|| EngineError::Inconsistent("not connected".into()))?;
        let (batches, task) = spawn_read(client, request);
        let staged = self.tables()?.bronze.stage(batches).await;
        let (client, stats) = task
            .await
            .map_err(|e| EngineError::Inconsistent(format!("the read task failed: {e}")))?;
        let stats = stats?;
        let staged = staged?;
        self.client = Some(client);
        Ok((staged, stats))
    }

    /// Runs (or replays) one planned batch to its commit marker.
    async fn run_batch(
        &mut self,
        plan: &PlannedBatch,
        marks: &Watermarks,
        options: &RunOptions,
    ) -> Result<(), EngineError> {
        let started_at = Utc::now();
        let clock = Instant::now();
        let app_id = self.config.app_id.clone();
        let key = FactsKey {
            target: self.config.target.name.clone(),
            app_id: app_id.clone(),
            sequence: FactSequence::Batch(plan.batch_id),
        };

        let committed = self.tables()?.bronze.committed_batch().await?;
        if committed.is_some_and(|c| c >= plan.batch_id) {
            // Bronze holds the batch: a crash came after its commit. Its
            // facts rows travelled in the commit; finish the bookkeeping.
            let rows = self.recover_fact_rows(plan).await?;
            self.tables()?.facts.append(&key, &rows).await?;
            options
                .observer
                .events_recorded(rows.get(1..).unwrap_or_default());
            let row = rows.into_iter().next().ok_or_else(|| {
                EngineError::Inconsistent(format!("batch {} has no facts row", plan.batch_id))
            })?;
            self.finish_batch(plan, None, row, options).await?;
            return Ok(());
        }

        self.use_instance(&plan.capture_instance).await?;
        let mut events = plan.events.clone();
        let read_from = match self
            .purged_past(&plan.capture_instance, plan.start_lsn)
            .await?
        {
            Some(min) => {
                self.purged_while_reading(plan, min, &mut events).await?;
                min
            }
            None => plan.start_lsn,
        };
        let probe = self.probe_before_read().await?;
        let (staged, stats) = if read_from <= plan.end_lsn {
            let info = self.info()?.clone();
            let observer = options.observer.clone();
            let batch_id = plan.batch_id;
            let request = ReadRequest {
                sql: cdc::changes_query(&info),
                params: vec![
                    ColumnData::Binary(Some(read_from.to_bytes().to_vec().into())),
                    ColumnData::Binary(Some(plan.end_lsn.to_bytes().to_vec().into())),
                ],
                columns: info.columns.clone(),
                schema: self.read_schema()?,
                shape: RowShape::Changes {
                    utc_offset_minutes: self.utc_offset_minutes(),
                },
                batch_id: plan.batch_id.txn_version(),
                on_batch: Some(Box::new(move |rows| {
                    failpoint::hit("mid_read");
                    observer.batch_reading(batch_id, rows);
                })),
            };
            self.read_into_bronze(request).await?
        } else {
            let nothing = futures::stream::empty::<Result<RecordBatch, SourceError>>();
            let staged = self.tables()?.bronze.stage(nothing).await?;
            (staged, ReadStats::default())
        };
        let session = self.probe_after_read(probe).await?;
        if let Some(min) = self.purged_past(&plan.capture_instance, read_from).await? {
            self.purged_while_reading(plan, min, &mut events).await?;
        }

        let end_commit_ts = match plan.end_commit_ts {
            Some(ts) => Some(ts),
            None => self.lsn_time(plan.end_lsn).await?,
        };
        let mut row = FactRow::new(
            key.target.clone(),
            app_id.clone(),
            Some(plan.batch_id),
            None,
            Utc::now(),
        );
        row.rows = Some(stats.rows);
        row.capture_instance = Some(plan.capture_instance.clone());
        row.min_lsn = stats.min_lsn;
        row.max_lsn = stats.max_lsn;
        row.end_lsn = Some(plan.end_lsn);
        row.min_commit_ts = stats.min_commit_ts;
        row.max_commit_ts = stats.max_commit_ts;
        row.end_commit_ts = end_commit_ts;
        row.started_at = Some(started_at);
        row.duration_ms = Some(i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX));
        row.read_seconds = Some(stats.read_time.as_secs_f64());
        row.read_mb = Some(stats.bytes as f64 / 1_000_000.0);
        row.source_rtt_ms = Some(session.source_rtt_ms);
        row.network_wait_ms = session.network_wait_ms;
        row.retention_headroom_hours = hours_between(marks.min_time, end_commit_ts);
        row.ingestion_lag_seconds = seconds_between(end_commit_ts, marks.max_time);
        row.capture_lag_seconds = seconds_between(marks.max_time, Some(marks.observed_at));
        row.detail = self.warnings.detail();
        let mut rows = vec![row];
        rows.extend(source_changes::event_rows(
            plan,
            &events,
            &key.target,
            &app_id,
        )?);
        let events_json: Vec<serde_json::Value> = rows[1..].iter().map(FactRow::to_json).collect();

        let outcome = self
            .tables()?
            .bronze
            .commit(
                staged,
                &app_id,
                plan.batch_id.txn_version(),
                vec![
                    (bronze::COMMIT_INFO_FACTS.to_string(), rows[0].to_json()),
                    (COMMIT_INFO_EVENTS.to_string(), events_json.into()),
                ],
            )
            .await?;
        failpoint::hit("after_bronze_commit");
        source_changes::switch_failpoint(plan, "after_bronze_commit");
        let version = match outcome {
            BronzeOutcome::Committed { version, .. } => {
                self.warnings.recorded(rows[0].detail.as_deref());
                Some(version)
            }
            _ => None,
        };
        let appended = self.tables()?.facts.append(&key, &rows).await?;
        if matches!(appended, AppendOutcome::Written { .. }) {
            self.warnings.recorded(rows[0].detail.as_deref());
        }
        options
            .observer
            .events_recorded(rows.get(1..).unwrap_or_default());
        let row = rows.swap_remove(0);
        self.finish_batch(plan, version, row, options).await
    }

    async fn finish_batch(
        &mut self,
        plan: &PlannedBatch,
        bronze_version: Option<i64>,
        row: FactRow,
        options: &RunOptions,
    ) -> Result<(), EngineError> {
        failpoint::hit("after_facts");
        self.advance_verdict(row.end_commit_ts, options.observer.as_ref())
            .await?;
        self.checkpoint
            .commit(&CommittedBatch {
                batch_id: plan.batch_id,
                bronze_version,
                committed_at: Utc::now(),
            })
            .await?;
        tracing::debug!(
            batch_id = %plan.batch_id,
            rows = row.rows.unwrap_or(0),
            start_lsn = %plan.start_lsn,
            end_lsn = %plan.end_lsn,
            ingestion_lag_s = row.ingestion_lag_seconds,
            retention_headroom_h = row.retention_headroom_hours,
            "batch committed"
        );
        self.summary.batches += 1;
        self.summary.rows += row.rows.unwrap_or(0);
        options.observer.batch_done(&row);
        self.summary.last = Some(row);
        Ok(())
    }

    /// The facts rows a batch's bronze commit carried: its row, then its
    /// event rows.
    async fn recover_fact_rows(
        &mut self,
        plan: &PlannedBatch,
    ) -> Result<Vec<FactRow>, EngineError> {
        let app_id = self.config.app_id.clone();
        let metadata = self
            .tables()?
            .bronze
            .commit_metadata(&app_id, plan.batch_id.txn_version())
            .await?;
        let events = metadata
            .as_ref()
            .and_then(|m| m.get(COMMIT_INFO_EVENTS))
            .and_then(serde_json::Value::as_array)
            .map(|rows| {
                rows.iter()
                    .filter_map(FactRow::from_json)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        metadata
            .as_ref()
            .and_then(|m| m.get(bronze::COMMIT_INFO_FACTS))
            .and_then(FactRow::from_json)
            .map(|row| std::iter::once(row).chain(events).collect())
            .ok_or_else(|| {
                EngineError::Inconsistent(format!(
                    "bronze table {} holds batch {} but its commit carries no facts row \
                     (was it written by another tool with appId {app_id}?)",
                    self.config.target.location, plan.batch_id
                ))
            })
    }
}

pub(super) fn hours_between(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> Option<f64> {
    seconds_between(from, to).map(|s| s / 3600.0)
}

pub(super) fn seconds_between(
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
) -> Option<f64> {
    Some((to? - from?).num_milliseconds() as f64 / 1000.0)
}
