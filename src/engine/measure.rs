//! A table of a source that stopped on an error of its own still has a
//! position, and CDC cleanup still moves toward it. While the table waits
//! out its backoff, its position is measured against the source now and
//! then (headroom, lags), so `RetentionHeadroom` fires before cleanup
//! overtakes a table that cannot run, instead of going quiet with it.

use super::error::EngineError;
use super::facts_row::position_measures;
use super::marks;
use super::observer::SourceCheck;
use super::options::RunOptions;
use super::plan::Position;
use crate::lake::checkpoint::Checkpoint;
use crate::source::SourceSession;
use crate::source::session::Raised;
use crate::spec::{StreamConfig, resolve_password};

/// Reads the table's committed position (its newest committed batch or
/// completed snapshot) from its checkpoint (no lease:
/// nothing is written) and the source's watermarks for its capture
/// instance, and reports them to the table's observer as a look at the
/// source. `Ok(false)`: the table has no position to measure yet.
pub async fn measure_position(
    config: &StreamConfig,
    options: &RunOptions,
) -> Result<bool, EngineError> {
    let checkpoint_options = config
        .checkpoint
        .options(&config.storage_options, options.env.clone());
    let checkpoint = Checkpoint::open(&config.checkpoint, &checkpoint_options)?;
    let state = checkpoint.state().await?;
    let committed = match (state.pending(), state.latest_committed) {
        // The newest plan has no commit marker: the position is the batch
        // before it.
        (Some(_), Some(id)) => checkpoint.planned(id).await?,
        (Some(_), None) => None,
        (None, _) => state.latest_planned,
    };
    let batch = committed.map(|plan| Position {
        lsn: plan.end_lsn,
        commit_ts: plan.end_commit_ts,
        instance: plan.capture_instance,
    });
    // A completed snapshot after the newest batch is the position.
    let snapshot = match checkpoint.latest_snapshot().await? {
        Some(n) if checkpoint.completed_snapshot(n).await?.is_some() => {
            checkpoint.planned_snapshot(n).await?.map(|plan| Position {
                lsn: plan.lsn,
                commit_ts: plan.commit_ts,
                instance: plan.capture_instance,
            })
        }
        _ => None,
    };
    let Some(position) = [batch, snapshot]
        .into_iter()
        .flatten()
        .max_by_key(|p| p.lsn)
    else {
        return Ok(false);
    };
    let password = resolve_password(&config.source.password, |name: &str| {
        options.env.get(name).cloned()
    })?;
    let mut raised = Raised::new();
    // Measuring reads no columns: a column list the instance does not
    // capture (one reason a table stops) does not keep it from measuring.
    let mut source = config.source.clone();
    source.columns = None;
    let mut session = SourceSession::open(&source, &password, None, None, &mut raised).await?;
    session.read_retention(None, &mut raised).await?;
    session.use_instance(&position.instance).await?;
    let watermarks = marks::watermarks(&mut session).await?;
    options.observer.source_checked(&SourceCheck {
        observed_at: watermarks.observed_at,
        max_lsn: watermarks.max_lsn,
        max_commit_ts: watermarks.max_commit_ts,
        position: position.lsn,
        measures: position_measures(position.commit_ts, &watermarks),
    });
    Ok(true)
}
