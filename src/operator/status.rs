//! The operator's part of the status, as pure functions: the phase from
//! the spec, the build outcome and what the worker reported; the Event a
//! phase change deserves; and the server-side apply body. Conditions come
//! from `conditions`, which uses the shared health verdicts (`src/health`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::spec::{API_VERSION, CdcStream, KIND, Phase, SnapshotPhase};

use super::children::BuildError;

/// The field manager of everything the operator writes.
pub const OPERATOR_FIELD_MANAGER: &str = "mssql-cdc-operator";

/// Where the stream stands. The worker's reports decide between Pending,
/// Snapshotting and Streaming: a running snapshot (or an open one in the
/// finalization row) means Snapshotting; a facts row or a look at the
/// source means Streaming.
pub fn phase(stream: &CdcStream, build: Result<(), &BuildError>) -> Phase {
    if build.is_err() {
        return Phase::Failed;
    }
    if stream.spec.suspend {
        return Phase::Suspended;
    }
    let status = stream.status.as_ref();
    let snapshot_running = status
        .and_then(|s| s.snapshot.as_ref())
        .is_some_and(|s| s.phase == SnapshotPhase::Running);
    let snapshot_open = status
        .and_then(|s| s.finalization.as_ref())
        .is_some_and(|f| f.open_snapshot_lsn.is_some());
    let progressed = status
        .and_then(|s| s.progress.as_ref())
        .is_some_and(|p| p.written_at.is_some() || p.latest_offset.is_some());
    if snapshot_running || snapshot_open {
        Phase::Snapshotting
    } else if progressed {
        Phase::Streaming
    } else {
        Phase::Pending
    }
}

/// An Event for a phase change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The Event's reason (CamelCase, as Kubernetes reasons are).
    pub reason: &'static str,
    /// What happened and, for a warning, what to do.
    pub note: String,
    /// A Warning Event rather than a Normal one.
    pub warning: bool,
}

/// The Event for moving from `old` to `new`; `None` when nothing changed.
pub fn transition(
    old: Option<Phase>,
    new: Phase,
    build: Result<(), &BuildError>,
) -> Option<Transition> {
    if old == Some(new) {
        return None;
    }
    let (reason, note, warning) = match (new, build) {
        (Phase::Failed, Err(error)) => (error.reason(), failure_note(error), true),
        (Phase::Failed, Ok(())) => ("Failed", "the worker cannot run".to_string(), true),
        (Phase::Suspended, _) => (
            "Suspended",
            "spec.suspend is set: the worker is stopped, its position kept".to_string(),
            false,
        ),
        (Phase::Pending, _) => (
            "Pending",
            "waiting for the worker's first batch".to_string(),
            false,
        ),
        (Phase::Snapshotting, _) => (
            "Snapshotting",
            "the worker is copying the table's current rows".to_string(),
            false,
        ),
        (Phase::Streaming, _) => (
            "Streaming",
            "the worker is streaming changes".to_string(),
            false,
        ),
    };
    Some(Transition {
        reason,
        note,
        warning,
    })
}

/// What a stream without a worker is told: the problem, then what to do.
pub fn failure_note(error: &BuildError) -> String {
    if error.removes_worker() {
        format!("no worker runs: {error}")
    } else {
        format!("no worker can run: {error}; fix the spec")
    }
}

/// The server-side apply body of the operator's status fields: the
/// phase and the whole list of conditions (a type left out is removed).
pub fn status_patch(
    name: &str,
    generation: Option<i64>,
    phase: Phase,
    conditions: &[Condition],
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "status": {"observedGeneration": generation, "phase": phase, "conditions": conditions},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(status: serde_json::Value) -> CdcStream {
        crate::operator::test_fixtures::stream(serde_json::json!({ "status": status }))
    }

    fn progress() -> serde_json::Value {
        serde_json::json!({"progress": {"batchId": 4, "writtenAt": "2026-11-29T10:00:00Z"}})
    }

    fn snapshot() -> serde_json::Value {
        serde_json::json!({"finalization": {
            "updatedAt": "2026-11-29T10:00:00Z",
            "openSnapshotLsn": "0x00000001000000100001"
        }})
    }

    #[test]
    fn phase_follows_spec_build_and_reports() {
        let invalid = BuildError::PasswordNotFromSecret;
        let cases: Vec<(CdcStream, Result<(), &BuildError>, Phase)> = vec![
            (stream(serde_json::json!({})), Ok(()), Phase::Pending),
            (stream(progress()), Ok(()), Phase::Streaming),
            (stream(snapshot()), Ok(()), Phase::Snapshotting),
            (stream(progress()), Err(&invalid), Phase::Failed),
        ];
        for (s, build, expected) in cases {
            assert_eq!(phase(&s, build), expected, "{:?}", s.status);
        }
        let mut suspended = stream(progress());
        suspended.spec.suspend = true;
        assert_eq!(phase(&suspended, Ok(())), Phase::Suspended);
        assert_eq!(phase(&suspended, Err(&invalid)), Phase::Failed);
    }

    /// Old phase, new phase, build outcome, expected (reason, warning).
    type TransitionCase<'a> = (
        Option<Phase>,
        Phase,
        Result<(), &'a BuildError>,
        Option<(&'static str, bool)>,
    );

    #[test]
    fn only_a_phase_change_makes_an_event() {
        let invalid = BuildError::AvailableNowWithoutSchedule;
        let cases: Vec<TransitionCase> = vec![
            (None, Phase::Pending, Ok(()), Some(("Pending", false))),
            (Some(Phase::Pending), Phase::Pending, Ok(()), None),
            (
                Some(Phase::Pending),
                Phase::Streaming,
                Ok(()),
                Some(("Streaming", false)),
            ),
            (
                Some(Phase::Streaming),
                Phase::Suspended,
                Ok(()),
                Some(("Suspended", false)),
            ),
            (
                Some(Phase::Streaming),
                Phase::Failed,
                Err(&invalid),
                Some(("InvalidSpec", true)),
            ),
        ];
        for (old, new, build, expected) in cases {
            let got = transition(old, new, build);
            assert_eq!(
                got.as_ref().map(|t| (t.reason, t.warning)),
                expected,
                "{old:?} -> {new:?}"
            );
        }
        let note = transition(Some(Phase::Streaming), Phase::Failed, Err(&invalid))
            .map(|t| t.note)
            .unwrap_or_default();
        assert!(
            note.contains("trigger.schedule") && note.contains("fix the spec"),
            "{note}"
        );
    }

    #[test]
    fn status_patch_names_generation_phase_and_conditions_only() {
        let patch = status_patch("orders", Some(3), Phase::Streaming, &[]);
        assert_eq!(
            patch["status"],
            serde_json::json!({"observedGeneration": 3, "phase": "Streaming", "conditions": []})
        );
        assert_eq!(patch["kind"], "CdcStream");
    }
}
