//! `spec.onDataLoss`: what the stream does when CDC cleanup purged changes
//! it had not read. Checked when each batch is planned (is the next LSN
//! still kept?) and around each read (did cleanup move past the batch's
//! start while it read?), always against the capture instance read.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::stream::{Position, StreamRun};
use super::{DataLossError, EngineError};
use crate::lake::checkpoint::{PlannedBatch, PlannedEvent};
use crate::lake::facts::FactEvent;
use crate::source::{CaptureInstance, Lsn, cdc};
use crate::spec::OnDataLoss;

/// What planning found about purged changes.
pub(super) enum Purged {
    /// Every change from the position on is still kept.
    No,
    /// The policy is `skip`: read from `resume`, recording `event`.
    Skipped {
        /// The first LSN still kept.
        resume: Lsn,
        /// The `data_skipped` event of the batch.
        event: PlannedEvent,
    },
    /// The policy is `resnapshot`: take a new snapshot.
    Resnapshot {
        /// Commit time of the last change read.
        lost_from_ts: Option<DateTime<Utc>>,
        /// Commit time of the oldest change kept.
        lost_to_ts: Option<DateTime<Utc>>,
    },
}

/// Key of the `certain` flag in a `data_skipped` event's detail.
const CERTAIN: &str = "certain";

impl StreamRun {
    /// Whether the changes a batch starting at `start` needs were purged,
    /// and what the policy makes of it. `fail` returns the error.
    pub(super) async fn check_purged(
        &mut self,
        position: &Position,
        start: Lsn,
        upper: Lsn,
    ) -> Result<Purged, EngineError> {
        let instance = self.info()?.instance.clone();
        let min = cdc::min_lsn(self.client()?, &instance).await?;
        if start > upper || start >= min {
            return Ok(Purged::No);
        }
        let offset = self.utc_offset_minutes();
        let min_time = cdc::first_time_from(self.client()?, min, offset).await?;
        match self.config.on_data_loss {
            OnDataLoss::Fail => {
                Err(DataLossError::new(instance, start, min, position.commit_ts, min_time).into())
            }
            OnDataLoss::Resnapshot => {
                tracing::warn!(
                    capture_instance = %instance,
                    from_lsn = %start,
                    to_lsn = %min,
                    "CDC cleanup purged changes the stream had not read; taking a new snapshot (spec.onDataLoss: resnapshot)"
                );
                Ok(Purged::Resnapshot {
                    lost_from_ts: position.commit_ts,
                    lost_to_ts: min_time,
                })
            }
            OnDataLoss::Skip => {
                tracing::warn!(
                    capture_instance = %instance,
                    from_lsn = %start,
                    to_lsn = %min,
                    "CDC cleanup purged changes the stream had not read; skipping them (spec.onDataLoss: skip)"
                );
                Ok(Purged::Skipped {
                    resume: min,
                    event: skipped_event(instance, start, min, position.commit_ts, min_time, true),
                })
            }
        }
    }

    /// The lowest LSN `instance` still holds, when cleanup has moved it
    /// past `from` (it ran after the batch was planned, or while it read).
    pub(super) async fn purged_past(
        &mut self,
        instance: &CaptureInstance,
        from: Lsn,
    ) -> Result<Option<Lsn>, EngineError> {
        let min = cdc::min_lsn(self.client()?, instance).await?;
        Ok((min > from).then_some(min))
    }

    /// Applies the policy to changes of a planned batch purged before it
    /// finished reading them (`min` is the new low-water mark): `fail` and
    /// `resnapshot` stop with the error (nothing of the batch is written;
    /// a re-snapshot cannot stand in for part of a planned batch), `skip`
    /// records that changes may be missing, with `certain: false`.
    pub(super) async fn purged_while_reading(
        &mut self,
        plan: &PlannedBatch,
        min: Lsn,
        events: &mut Vec<PlannedEvent>,
    ) -> Result<(), EngineError> {
        let offset = self.utc_offset_minutes();
        let min_time = cdc::first_time_from(self.client()?, min, offset).await?;
        let from_ts = match plan.start_lsn.checked_prev() {
            Some(before) => self.lsn_time(before).await?,
            None => None,
        };
        if self.config.on_data_loss != OnDataLoss::Skip {
            return Err(DataLossError::new(
                plan.capture_instance.clone(),
                plan.start_lsn,
                min,
                from_ts,
                min_time,
            )
            .into());
        }
        tracing::warn!(
            batch_id = %plan.batch_id,
            capture_instance = %plan.capture_instance,
            min_lsn = %min,
            "CDC cleanup ran while the batch read; changes may be missing"
        );
        let skipped = FactEvent::DataSkipped.as_str();
        match events.iter_mut().find(|e| e.event == skipped) {
            Some(event) => {
                event.detail[CERTAIN] = json!(false);
            }
            None => events.push(skipped_event(
                plan.capture_instance.clone(),
                plan.start_lsn,
                min,
                from_ts,
                min_time,
                false,
            )),
        }
        Ok(())
    }
}

/// A `data_skipped` event: the LSNs `[from, resume)` were purged unread;
/// reading goes on at `resume`.
fn skipped_event(
    capture_instance: CaptureInstance,
    from: Lsn,
    resume: Lsn,
    lost_from_ts: Option<DateTime<Utc>>,
    lost_to_ts: Option<DateTime<Utc>>,
    certain: bool,
) -> PlannedEvent {
    let last_skipped = resume.checked_prev().unwrap_or(from);
    PlannedEvent {
        event: FactEvent::DataSkipped.as_str().to_string(),
        lsn: resume,
        commit_ts: lost_to_ts,
        capture_instance,
        detail: json!({
            "skipped_from_lsn": from.to_string(),
            "skipped_to_lsn": last_skipped.to_string(),
            "resumed_at_lsn": resume.to_string(),
            CERTAIN: certain,
        }),
        lost_from_ts,
        lost_to_ts,
    }
}
