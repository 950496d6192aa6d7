//! What the source says when a batch is planned or replayed, composed from
//! the single questions of the `ChangeSource` seam: the database's
//! watermarks, the instance read's window of commits and DDL, and a newer
//! capture instance to move to.

use chrono::Utc;

use super::change_source::ChangeSource;
use super::error::EngineError;
use super::plan::{
    self, InstanceMarks, NewerInstance, PlanOptions, Position, SourceMarks, Watermarks,
};
use crate::domain::{CaptureInstance, Lsn};
use crate::source::SourceError;
use crate::source::cdc::{CaptureInfo, Commit, InstanceEntry};
use crate::source::round_marks::QuietWindow;

/// The watermarks of the instance read, for a batch's facts row.
pub async fn watermarks<S: ChangeSource>(source: &mut S) -> Result<Watermarks, EngineError> {
    let instance = source.info().instance.clone();
    let max_lsn = source.max_lsn().await?;
    let min = source.min_lsn(&instance).await?;
    Ok(Watermarks {
        observed_at: Utc::now(),
        max_commit_ts: source.lsn_time(max_lsn).await?,
        min_commit_ts: source.time_from(min).await?,
        max_lsn,
        retention_minutes: source.retention_minutes(),
    })
}

/// What planning the idle batch of a window the source's round found
/// quiet needs, from the round's answers alone: the window ends at the
/// round's max LSN as one batch (its commits are other tables', so
/// `maxCommitsPerBatch` has nothing to bound), nothing was purged, no DDL
/// and no newer instance follow (`source::round_marks`). No commit when
/// the database has not moved past the window's start.
pub fn quiet(window: &QuietWindow, retention_minutes: Option<i64>) -> SourceMarks {
    let commits = if window.max_lsn > window.window.after {
        vec![Commit {
            lsn: window.max_lsn,
            commit_ts: window.max_commit_ts,
        }]
    } else {
        Vec::new()
    };
    SourceMarks {
        watermarks: Watermarks {
            max_lsn: window.max_lsn,
            max_commit_ts: window.max_commit_ts,
            min_commit_ts: window.min_commit_ts,
            observed_at: window.observed_at,
            retention_minutes,
        },
        read: InstanceMarks {
            instance: window.window.instance.clone(),
            min_lsn: window.min_lsn,
            min_commit_ts: window.min_commit_ts,
            commits,
            ddl: Vec::new(),
            gone: false,
        },
        newer: None,
    }
}

/// Everything planning the batch after `position` needs to know.
pub async fn marks<S: ChangeSource>(
    source: &mut S,
    position: &Position,
    options: &PlanOptions,
) -> Result<SourceMarks, EngineError> {
    let max_lsn = source.max_lsn().await?;
    let observed_at = Utc::now();
    let max_commit_ts = source.lsn_time(max_lsn).await?;
    let next = position
        .lsn
        .checked_next()
        .ok_or(SourceError::LsnOverflow(position.lsn))?;
    let upper = plan::upper(max_lsn, options);
    // Unless the manifest pins the instance, the table's instances are
    // asked for a newer one anyway; the one read missing among them was
    // disabled.
    let instances = if source.pinned() {
        None
    } else {
        Some(source.capture_instances().await?)
    };
    let reading = source.info().instance.clone();
    let gone = instances
        .as_ref()
        .is_some_and(|list| !list.iter().any(|i| i.name == reading));
    let read = if gone {
        InstanceMarks {
            instance: reading.clone(),
            min_lsn: next,
            min_commit_ts: None,
            commits: Vec::new(),
            ddl: Vec::new(),
            gone: true,
        }
    } else {
        let mut min = pinned_min_lsn(source, &reading).await?;
        // An instance's low end passing the position is cleanup, or the
        // instance was disabled and enabled again: only then is it asked.
        if min > next && source.enabled_again().await? {
            min = source.min_lsn(&source.info().instance.clone()).await?;
        }
        let read = source.info().clone();
        instance_marks(source, &read, min, next, None, (upper, max_lsn), options).await?
    };
    let newer = match instances {
        None => None,
        Some(list) => newer_instance(source, list, next, (upper, max_lsn), options).await?,
    };
    if gone && newer.is_none() {
        return Err(EngineError::InstanceDisabled {
            capture_instance: reading,
        });
    }
    Ok(SourceMarks {
        watermarks: Watermarks {
            max_lsn,
            max_commit_ts,
            min_commit_ts: read.min_commit_ts,
            observed_at,
            retention_minutes: source.retention_minutes(),
        },
        read,
        newer,
    })
}

/// The low end of the instance read. A pinned instance is not looked for
/// among the table's instances each trigger, so its low end missing is
/// where its disabling shows: then the error says so, and names the
/// table's instances, instead of a missing LSN.
async fn pinned_min_lsn<S: ChangeSource>(
    source: &mut S,
    reading: &CaptureInstance,
) -> Result<Lsn, EngineError> {
    let min = source.min_lsn(reading).await;
    if !source.pinned() || !matches!(min, Err(EngineError::Source(SourceError::NoLsn(_)))) {
        return min;
    }
    let others: Vec<CaptureInstance> = source
        .capture_instances()
        .await?
        .into_iter()
        .map(|i| i.name)
        .collect();
    if others.contains(reading) {
        return min;
    }
    Err(EngineError::PinnedInstanceDisabled {
        capture_instance: reading.clone(),
        others,
    })
}

async fn instance_marks<S: ChangeSource>(
    source: &mut S,
    info: &CaptureInfo,
    min_lsn: Lsn,
    next: Lsn,
    newer_start: Option<Lsn>,
    (upper, max_lsn): (Lsn, Lsn),
    options: &PlanOptions,
) -> Result<InstanceMarks, EngineError> {
    let from = plan::window_start(next, min_lsn, newer_start);
    let min_commit_ts = source.time_from(min_lsn).await?;
    let commits = source.commits(from, upper, options.max_commits).await?;
    // Up to the max LSN, past the window: SQL Server retypes a change
    // table's column at once, so the window's rows may arrive in a type
    // only a later statement explains (`column_types`). Planning keeps
    // to the window's own statements.
    let ddl = if from > upper {
        Vec::new()
    } else {
        source
            .ddl_events(info.change_table_id, from, max_lsn)
            .await?
    };
    Ok(InstanceMarks {
        instance: info.instance.clone(),
        min_lsn,
        min_commit_ts,
        commits,
        ddl,
        gone: false,
    })
}

/// A capture instance of the table (among `instances`) that starts after
/// the one read, or any, when the one read is not among them (disabled).
async fn newer_instance<S: ChangeSource>(
    source: &mut S,
    instances: Vec<InstanceEntry>,
    next: Lsn,
    (upper, max_lsn): (Lsn, Lsn),
    options: &PlanOptions,
) -> Result<Option<NewerInstance>, EngineError> {
    let current = &source.info().instance;
    let current_start = instances
        .iter()
        .find(|i| &i.name == current)
        .and_then(|i| i.start_lsn);
    let newest = instances
        .into_iter()
        .filter(|i| &i.name != current)
        .filter_map(|i| Some((i.start_lsn?, i)))
        .filter(|(start, _)| current_start.is_none_or(|c| *start > c))
        .max_by_key(|(start, _)| *start);
    let Some((start_lsn, entry)) = newest else {
        return Ok(None);
    };
    // A new instance holds its changes from its start until cleanup
    // first passes it.
    let min = match source.min_lsn(&entry.name).await {
        Err(EngineError::Source(SourceError::NoLsn(_))) => start_lsn,
        other => other?,
    }
    .max(start_lsn);
    let info = CaptureInfo {
        instance: entry.name,
        change_table_id: entry.change_table_id,
        columns: Vec::new(),
        key_columns: Vec::new(),
    };
    let marks = instance_marks(
        source,
        &info,
        min,
        next,
        Some(start_lsn),
        (upper, max_lsn),
        options,
    )
    .await?;
    Ok(Some(NewerInstance { start_lsn, marks }))
}
