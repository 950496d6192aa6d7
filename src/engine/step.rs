//! One step of a run: replay a batch an earlier run left pending, or find
//! where the stream stands (taking a snapshot first when one is due), plan
//! the next batch and run it.

use super::batch::{Read, run_batch};
use super::change_source::ChangeSource;
use super::column_types;
use super::context::Run;
use super::error::{DataLossError, EngineError};
use super::facts_row::position_measures;
use super::marks;
use super::observer::SourceCheck;
use super::plan::{self, AfterBatch, Draft, Next, Position};
use super::sink::Sink;
use super::snapshot;
use super::source_changes::{
    SwitchedFrom, adopt_instance, planned_columns, schema_change_event, switch_event,
    switch_failpoint,
};
use crate::domain::Lsn;
use crate::domain::facts::EventDetail;
use crate::failpoint;
use crate::lake::checkpoint::{PlannedBatch, PlannedColumn};
use crate::lake::records::LsnRange;
use crate::source::cdc::CaptureInfo;
use crate::source::changed_tables::ChangeWindow;
use crate::source::lsn_parts;
use crate::source::round_marks::QuietWindow;

/// The outcome of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Work was done; go on at once.
    Progress,
    /// Nothing new; wait for the trigger.
    Idle,
    /// `--once`: caught up.
    Done,
}

/// Runs one step.
pub async fn step<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
) -> Result<Step, EngineError> {
    sink.fence()?;
    // The round's answer is for the window the last step left; it is
    // used only when the stream still stands there.
    let quiet = run.quiet.take();
    let state = sink.checkpoint.state().await?;
    if let Some(pending) = state.pending().cloned() {
        tracing::info!(batch_id = %pending.batch_id, "replaying a batch planned by an earlier run");
        refuse_disabled(session, &pending).await?;
        session.use_instance(&pending.capture_instance).await?;
        column_types::follow(run, session, sink, None).await?;
        let marks = marks::watermarks(session).await?;
        run_batch(run, session, sink, &pending, &marks, Read::Source).await?;
        return Ok(Step::Progress);
    }
    let latest_snapshot = match sink.checkpoint.latest_snapshot().await? {
        Some(n) => sink.checkpoint.planned_snapshot(n).await?,
        None => None,
    };
    let start = plan::start(
        state.latest_planned.as_ref(),
        latest_snapshot.as_ref(),
        run.config.snapshot_mode,
    );
    let position = snapshot::position(run, session, sink, start).await?;
    session.use_instance(&position.instance).await?;
    let quiet = quiet.filter(|window| answers(window, &position, session.info(), run.once()));
    if quiet.is_none() {
        session.refresh_clock(&mut run.warnings).await?;
    }
    if run.once() && run.once_target.is_none() {
        run.once_target = Some(session.max_lsn().await?);
    }
    let options = run.plan_options();
    let (marks, read) = match &quiet {
        Some(window) => (
            marks::quiet(window, session.retention_minutes()),
            Read::KnownEmpty {
                round_trip: window.round_trip,
            },
        ),
        None => (
            marks::marks(session, &position, &options).await?,
            Read::Source,
        ),
    };
    // What the last plan knew of its instance's columns, for a switch away
    // from an instance disabled before this run read it.
    let recorded = state
        .latest_planned
        .as_ref()
        .filter(|p| p.capture_instance == position.instance)
        .map(|p| p.columns.clone())
        .or_else(|| {
            latest_snapshot
                .as_ref()
                .filter(|s| s.capture_instance == position.instance)
                .map(|s| s.columns.clone())
        })
        .unwrap_or_default();
    if let Some(old) = session.take_replaced() {
        follow_reenabled(run, session, sink, &old).await?;
    }
    let watermarks = &marks.watermarks;
    run.observer().source_checked(&SourceCheck {
        observed_at: watermarks.observed_at,
        max_lsn: watermarks.max_lsn,
        max_commit_ts: watermarks.max_commit_ts,
        position: position.lsn,
        measures: position_measures(position.commit_ts, watermarks),
    });
    let batch_id = state
        .next_batch_id()
        .map_err(|source| EngineError::BatchIdExhausted {
            checkpoint: run.config.checkpoint.to_string(),
            source,
        })?;
    match plan::plan_next(&position, batch_id, &marks, &options)? {
        Next::Idle => {
            run.caught_up = Some(ChangeWindow {
                instance: position.instance.clone(),
                after: position.lsn,
            });
            Ok(Step::Idle)
        }
        Next::Done => Ok(Step::Done),
        Next::Resnapshot {
            instance,
            lost_from_ts,
            lost_to_ts,
        } => {
            // A move to a newer instance has no batch to record it in: the
            // new snapshot's facts row carries it.
            let mut switched = None;
            if instance != session.info().instance {
                let keys = manifest_keys(run);
                let old = adopt_instance(session, sink, &instance, keys, &mut run.warnings).await?;
                let from = SwitchedFrom {
                    info: &old,
                    recorded: &recorded,
                    disabled: marks.read.gone,
                };
                let start = marks.newer.as_ref().map_or(Lsn::ZERO, |n| n.start_lsn);
                let switch = switch_event(&from, session.info(), start, None);
                if marks.read.gone {
                    run.warnings.raise(format!(
                        "capture instance {} was disabled; the new snapshot reads {}: {}",
                        old.instance,
                        instance,
                        switch.detail.to_text()
                    ));
                }
                if let EventDetail::Switched(detail) = switch.detail {
                    switched = Some(detail);
                }
            }
            tracing::warn!(
                capture_instance = %instance,
                "CDC cleanup purged changes the stream had not read; taking a new snapshot (spec.onDataLoss: resnapshot)"
            );
            snapshot::resnapshot(run, session, sink, (lost_from_ts, lost_to_ts), switched).await?;
            Ok(Step::Progress)
        }
        Next::Batch(draft) => {
            let caught_up = draft.caught_up;
            let ddl_ahead = marks.read.ddl.iter().map(|d| d.lsn).max();
            column_types::follow(run, session, sink, ddl_ahead).await?;
            let from = Moved {
                recorded: &recorded,
                disabled: marks.read.gone,
            };
            let plan = complete(run, session, sink, *draft, &from, &read).await?;
            sink.plan(&plan).await?;
            failpoint::hit("after_offsets");
            switch_failpoint(&plan, "after_offsets");
            run_batch(run, session, sink, &plan, &marks.watermarks, read).await?;
            Ok(
                match plan::after_batch(caught_up, run.once_target.is_some()) {
                    AfterBatch::Continue => Step::Progress,
                    AfterBatch::Wait => {
                        run.caught_up = Some(ChangeWindow {
                            instance: plan.capture_instance.clone(),
                            after: plan.end_lsn,
                        });
                        Step::Idle
                    }
                    AfterBatch::Done => Step::Done,
                },
            )
        }
    }
}

/// Whether the round's quiet window is the one this step plans from: the
/// stream still stands at its start, on the same instance and change
/// table. A run that stops once caught up plans on its own (its target is
/// its own max LSN).
fn answers(window: &QuietWindow, position: &Position, info: &CaptureInfo, once: bool) -> bool {
    !once
        && window.window.after == position.lsn
        && window.window.instance == position.instance
        && window.window.instance == info.instance
        && window.change_table_id == info.change_table_id
}

/// A batch planned on an instance that was disabled since cannot be
/// replayed: its changes went with the change table, and a plan is read as
/// planned or not at all (docs/adr/0013-renamed-columns.md).
async fn refuse_disabled<S: ChangeSource>(
    session: &mut S,
    pending: &PlannedBatch,
) -> Result<(), EngineError> {
    if session.pinned() {
        return Ok(());
    }
    let instance = &pending.capture_instance;
    let instances = session.capture_instances().await?;
    if instances.iter().any(|entry| &entry.name == instance) {
        return Ok(());
    }
    let loss = DataLossError::new(
        instance.clone(),
        pending.start_lsn,
        pending.end_lsn,
        None,
        pending.end_commit_ts,
    );
    Err(EngineError::DataLoss(loss.disabled(instance.clone())))
}

/// What a switch knows of the instance it leaves besides the session: the
/// columns the last plan recorded, and whether it was disabled.
struct Moved<'a> {
    recorded: &'a [PlannedColumn],
    disabled: bool,
}

/// Turns a draft into the plan the checkpoint records: moves to a newer
/// instance when the draft switches (bronze gains its columns first), and
/// writes out the events the batch carries.
async fn complete<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    draft: Draft,
    moved: &Moved<'_>,
    read: &Read,
) -> Result<PlannedBatch, EngineError> {
    let mut events = Vec::new();
    if let Some(skipped) = draft.skipped {
        tracing::warn!(
            capture_instance = %skipped.capture_instance,
            resumed_at_lsn = %skipped.lsn,
            "CDC cleanup purged changes the stream had not read; skipping them (spec.onDataLoss: skip)"
        );
        events.push(skipped);
    }
    if let Some(at) = draft.switched_at {
        let keys = manifest_keys(run);
        let old = adopt_instance(
            session,
            sink,
            &draft.capture_instance,
            keys,
            &mut run.warnings,
        )
        .await?;
        let commit_ts = session.lsn_time(at).await?;
        let from = SwitchedFrom {
            info: &old,
            recorded: moved.recorded,
            disabled: moved.disabled,
        };
        let event = switch_event(&from, session.info(), at, commit_ts);
        if let EventDetail::Switched(detail) = &event.detail {
            for renamed in &detail.renamed_columns {
                tracing::warn!(
                    from = %renamed.from,
                    to = %renamed.to,
                    "a captured column was renamed between the capture instances; bronze gains the new name, the old one stays NULL from here on"
                );
            }
        }
        events.push(event);
    }
    for ddl in &draft.ddl {
        tracing::warn!(
            capture_instance = %session.info().instance,
            lsn = %ddl.lsn,
            command = %ddl.command,
            "the source table's schema changed"
        );
        let mut event = schema_change_event(session.info(), ddl);
        if let EventDetail::SchemaChange(detail) = &mut event.detail {
            for column in &mut detail.columns_altered {
                column_types::describe_altered(run, &session.info().columns, column);
            }
        }
        events.push(event);
    }
    let end_commit_ts = match draft.end_commit_ts {
        Some(ts) => Some(ts),
        None => session.lsn_time(draft.end_lsn).await?,
    };
    let parts = match read {
        Read::Source => parts(run, session, draft.start_lsn, draft.end_lsn).await?,
        Read::KnownEmpty { .. } => Vec::new(),
    };
    Ok(PlannedBatch {
        batch_id: draft.batch_id,
        start_lsn: draft.start_lsn,
        end_lsn: draft.end_lsn,
        capture_instance: draft.capture_instance,
        end_commit_ts,
        planned_at: chrono::Utc::now(),
        events,
        parts,
        columns: planned_columns(session.info()),
    })
}

/// With `spec.source.readers` above 1, the parts a batch over `[start,
/// end]` is read in: cut after commits so each holds about as many
/// changes (`source::lsn_parts`). Recorded in the plan, so a replay reads
/// the same parts. None when cleanup already passed the start: the read
/// then decides what `onDataLoss` makes of it.
async fn parts<S: ChangeSource>(
    run: &Run<'_>,
    session: &mut S,
    start: Lsn,
    end: Lsn,
) -> Result<Vec<LsnRange>, EngineError> {
    let readers = run.config.source.readers;
    if readers < 2 || start >= end {
        return Ok(Vec::new());
    }
    let counts = match session.change_counts(start, end).await {
        Ok(counts) => counts,
        Err(EngineError::Source(error)) if error.is_purged_range() => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    Ok(lsn_parts::split(start, end, &counts, readers))
}

/// The instance read was disabled and enabled again under its name: bronze
/// and silver gain the columns the new one captures, and the run says so
/// in its next facts row. The changes between the position and the new
/// instance's start went through the data-loss policy in the plan.
async fn follow_reenabled<S: ChangeSource>(
    run: &mut Run<'_>,
    session: &mut S,
    sink: &mut Sink,
    old: &CaptureInfo,
) -> Result<(), EngineError> {
    let new = session.info().clone();
    session
        .warn_left_out_columns(&new, &mut run.warnings)
        .await?;
    sink.add_columns(&new.arrow_fields()?).await?;
    sink.silver_follows(&new, manifest_keys(run)).await?;
    let names = |info: &CaptureInfo| -> String {
        info.columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    run.warnings.raise(format!(
        "capture instance {} was disabled and enabled again (change table {} is now {}); \
         changes made while it was off are not in CDC, so spec.onDataLoss decides about the \
         changes before its start; columns before: {}; now: {}",
        new.instance,
        old.change_table_id,
        new.change_table_id,
        names(old),
        names(&new)
    ));
    Ok(())
}

/// Whether the manifest names silver's keys (else they are the capture
/// instance's).
fn manifest_keys(run: &Run<'_>) -> bool {
    run.config
        .silver
        .as_ref()
        .is_some_and(|silver| silver.keys.is_some())
}
