//! Which spec the worker runs: the generation and spec hash it reports
//! (`status.progress`) against the stream's own. `observedGeneration` then
//! means "the worker runs this spec", and Progressing is True while a
//! rollout to a newer spec is under way.

use super::conditions::{Judged, PROGRESSING, judged};
use super::spec_hash::spec_hash;
use crate::spec::{CdcStream, Phase};

/// The generation the stream's status and conditions stand for: the
/// stream's own when the worker runs what the spec says now (or when no
/// worker is to run it), else the one the worker reports.
pub fn observed_generation(stream: &CdcStream, phase: Phase) -> Option<i64> {
    let current = stream.metadata.generation;
    if matches!(phase, Phase::Suspended | Phase::Failed) {
        return current;
    }
    let progress = stream.status.as_ref().and_then(|s| s.progress.as_ref());
    match progress {
        Some(p) if p.spec_hash.as_deref() == Some(spec_hash(&stream.spec).as_str()) => current,
        Some(p) if p.generation.is_some() => p.generation,
        _ => stream.status.as_ref().and_then(|s| s.observed_generation),
    }
}

/// Progressing: True while a worker of an older spec (or none yet) runs.
pub(super) fn progressing(stream: &CdcStream, phase: Phase) -> Judged {
    let current = stream.metadata.generation.unwrap_or_default();
    if matches!(phase, Phase::Suspended | Phase::Failed) {
        return judged(
            PROGRESSING,
            "False",
            "NoWorker",
            "no worker is to run the spec",
        );
    }
    let progress = stream.status.as_ref().and_then(|s| s.progress.as_ref());
    let runs = progress.and_then(|p| p.generation);
    match progress.and_then(|p| p.spec_hash.as_deref()) {
        Some(hash) if hash == spec_hash(&stream.spec) => judged(
            PROGRESSING,
            "False",
            "WorkerCurrent",
            format!("the worker runs generation {current}'s spec"),
        ),
        Some(_) if stream.spec.trigger.schedule.is_some() => judged(
            PROGRESSING,
            "True",
            "NextRunTakesIt",
            format!(
                "the last run ran generation {}; the next scheduled run takes generation {current}",
                runs.unwrap_or_default()
            ),
        ),
        Some(_) => judged(
            PROGRESSING,
            "True",
            "RollingOut",
            format!(
                "the worker runs generation {}; a worker for generation {current} replaces it",
                runs.unwrap_or_default()
            ),
        ),
        None => judged(
            PROGRESSING,
            "True",
            "WorkerStarting",
            format!("waiting for a worker to report that it runs generation {current}"),
        ),
    }
}
