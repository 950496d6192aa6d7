use chrono::TimeZone;

use super::*;

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + seconds, 0)
        .single()
        .unwrap()
}

fn plan(batch: u64, start: &str, end: &str) -> PlannedBatch {
    PlannedBatch {
        batch_id: BatchId::new(batch).unwrap(),
        start_lsn: start.parse().unwrap(),
        end_lsn: end.parse().unwrap(),
        capture_instance: CaptureInstance::new("dbo_orders").unwrap(),
        end_commit_ts: None,
        planned_at: at(batch as i64),
        events: Vec::new(),
        parts: Vec::new(),
        columns: Vec::new(),
    }
}

fn commit(batch: u64) -> CommittedBatch {
    CommittedBatch {
        batch_id: BatchId::new(batch).unwrap(),
        bronze_version: Some(batch as i64 + 1),
        committed_at: at(batch as i64 + 1),
        bronze_mark: None,
    }
}

fn open(dir: &tempfile::TempDir) -> Checkpoint {
    let location = StorageLocation::parse(dir.path().join("ckpt").to_str().unwrap()).unwrap();
    Checkpoint::open(&location, &StorageOptions::default()).unwrap()
}

const A: &str = "0x0000002A000001F40001";
const B: &str = "0x0000002A000001F40009";
const C: &str = "0x0000002B000000000002";

#[tokio::test]
async fn a_new_checkpoint_starts_at_batch_zero() {
    let dir = tempfile::tempdir().unwrap();
    let state = open(&dir).state().await.unwrap();
    assert_eq!(state, CheckpointState::default());
    assert_eq!(state.next_batch_id().unwrap(), BatchId::FIRST);
    assert_eq!(state.pending(), None);
}

#[tokio::test]
async fn plans_and_commits_are_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = open(&dir);
    ckpt.plan(&plan(0, A, B)).await.unwrap();
    assert!(ckpt.commit(&commit(0)).await.unwrap());
    ckpt.plan(&plan(1, B, C)).await.unwrap();

    assert_eq!(
        ckpt.planned(BatchId::new(0).unwrap()).await.unwrap(),
        Some(plan(0, A, B))
    );
    assert_eq!(
        ckpt.committed(BatchId::new(0).unwrap()).await.unwrap(),
        Some(commit(0))
    );
    let state = ckpt.state().await.unwrap();
    assert_eq!(state.latest_planned, Some(plan(1, B, C)));
    assert_eq!(state.latest_committed, Some(BatchId::new(0).unwrap()));
    assert_eq!(
        state.pending(),
        Some(&plan(1, B, C)),
        "batch 1 must be replayed"
    );
    assert_eq!(state.next_batch_id().unwrap().get(), 2);

    let text = std::fs::read_to_string(dir.path().join("ckpt/offsets/1")).unwrap();
    for needle in [
        B,
        C,
        "\"capture_instance\": \"dbo_orders\"",
        "\"batch_id\": 1",
    ] {
        assert!(text.contains(needle), "{needle} not in {text}");
    }
}

#[tokio::test]
async fn latest_is_numeric_not_lexicographic() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = open(&dir);
    for batch in [0, 2, 9, 10, 11] {
        ckpt.plan(&plan(batch, A, B)).await.unwrap();
        ckpt.commit(&commit(batch)).await.unwrap();
    }
    std::fs::write(dir.path().join("ckpt/offsets/99.tmp"), "junk").unwrap();
    let state = ckpt.state().await.unwrap();
    assert_eq!(
        state.latest_planned.as_ref().map(|p| p.batch_id.get()),
        Some(11)
    );
    assert_eq!(state.latest_committed.map(BatchId::get), Some(11));
    assert_eq!(state.pending(), None);
}

#[tokio::test]
async fn commit_markers_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = open(&dir);
    ckpt.plan(&plan(0, A, B)).await.unwrap();
    assert!(ckpt.commit(&commit(0)).await.unwrap());
    let mut replay = commit(0);
    replay.bronze_version = None;
    assert!(!ckpt.commit(&replay).await.unwrap());
    assert_eq!(
        ckpt.committed(BatchId::new(0).unwrap()).await.unwrap(),
        Some(commit(0))
    );
}

#[tokio::test]
async fn a_second_writer_is_fenced_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (open(&dir), open(&dir));
    for batch in 0..20 {
        let (mine, theirs) = (plan(batch, A, B), plan(batch, B, C));
        let (a, b) = tokio::join!(first.plan(&mine), second.plan(&theirs));
        let winner = match (a, b) {
            (Ok(()), Err(CheckpointError::AlreadyPlanned { batch_id, .. })) => {
                assert_eq!(batch_id.get(), batch);
                mine
            }
            (Err(CheckpointError::AlreadyPlanned { batch_id, .. }), Ok(())) => {
                assert_eq!(batch_id.get(), batch);
                theirs
            }
            other => panic!("batch {batch}: expected exactly one winner, got {other:?}"),
        };
        let stored = first.planned(winner.batch_id).await.unwrap();
        assert_eq!(
            stored,
            Some(winner),
            "the loser must not overwrite the plan"
        );
    }
}

#[tokio::test]
async fn fencing_error_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = open(&dir);
    ckpt.plan(&plan(3, A, B)).await.unwrap();
    let err = ckpt.plan(&plan(3, B, C)).await.unwrap_err().to_string();
    assert!(
        err.contains("batch 3 is already planned by another process"),
        "{err}"
    );
}

#[tokio::test]
async fn corrupt_files_are_reported_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = open(&dir);
    ckpt.plan(&plan(0, A, B)).await.unwrap();
    std::fs::write(dir.path().join("ckpt/offsets/0"), "{\"batch_id\": 0").unwrap();
    let err = ckpt.state().await.unwrap_err();
    assert!(
        matches!(err, CheckpointError::Corrupt { ref file, .. } if file == "offsets/0"),
        "{err}"
    );
}

#[tokio::test]
async fn a_step_reads_the_pointer_and_walks_past_entries_written_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = open(&dir);
    for batch in 1..=3 {
        checkpoint.plan(&plan(batch, A, B)).await.unwrap();
        checkpoint.commit(&commit(batch)).await.unwrap();
    }
    // A crash between a plan and the pointer's update: the plan file is
    // there, the pointer one behind.
    let pointer = dir.path().join("ckpt/latest");
    let behind = std::fs::read_to_string(&pointer).unwrap();
    checkpoint.plan(&plan(4, B, C)).await.unwrap();
    std::fs::write(&pointer, behind).unwrap();
    let state = open(&dir).state().await.unwrap();
    assert_eq!(state.latest_planned.map(|p| p.batch_id.get()), Some(4));
    assert_eq!(state.latest_committed.map(BatchId::get), Some(3));
    // Without a pointer (a checkpoint from before it existed): a listing.
    std::fs::remove_file(&pointer).unwrap();
    let state = open(&dir).state().await.unwrap();
    assert_eq!(state.latest_planned.map(|p| p.batch_id.get()), Some(4));
    assert!(pointer.exists(), "the pointer is written again");
}

#[tokio::test]
async fn old_entries_are_pruned_and_the_newest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = open(&dir);
    let last = 2 * PRUNE_EVERY + KEEP_BATCHES;
    for batch in 1..=last {
        checkpoint.plan(&plan(batch, A, B)).await.unwrap();
        checkpoint.commit(&commit(batch)).await.unwrap();
    }
    let count = |folder: &str| {
        std::fs::read_dir(dir.path().join("ckpt").join(folder))
            .unwrap()
            .count() as u64
    };
    // Pruning runs every PRUNE_EVERY batches and keeps KEEP_BATCHES behind.
    assert!(
        count("offsets") <= KEEP_BATCHES + PRUNE_EVERY + 1,
        "{}",
        count("offsets")
    );
    assert!(count("commits") >= KEEP_BATCHES, "{}", count("commits"));
    let state = open(&dir).state().await.unwrap();
    assert_eq!(state.latest_planned.map(|p| p.batch_id.get()), Some(last));
    // `maintain` prunes everything older, whatever the age.
    let removed = checkpoint.prune(10).await.unwrap();
    assert!(removed > 0);
    assert_eq!(count("offsets"), 10);
    assert_eq!(count("commits"), 10);
}
