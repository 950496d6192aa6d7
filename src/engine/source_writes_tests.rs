use std::time::Duration;

use chrono::Utc;

use super::*;
use crate::domain::{BatchId, Granularity};
use crate::lake::txn::FactSequence;

/// Long enough that a test passing by the deadline, not by the rule it
/// is about, would be seen hanging (each wait is bounded by `BOUND`).
const GATHER: Duration = Duration::from_secs(600);
const BOUND: Duration = Duration::from_secs(60);

fn key(target: &str, batch: u64) -> FactsKey {
    FactsKey {
        target: target.into(),
        app_id: format!("{target}-v1"),
        sequence: FactSequence::Batch(BatchId::new(batch).unwrap()),
    }
}

fn rows(target: &str, batch: u64) -> Vec<FactRow> {
    vec![FactRow::new(
        target,
        format!("{target}-v1"),
        BatchId::new(batch).ok(),
        None,
        Utc::now(),
    )]
}

fn location(dir: &tempfile::TempDir, name: &str) -> StorageLocation {
    StorageLocation::parse(dir.path().join(name).to_str().unwrap()).unwrap()
}

/// The source's writer of the facts table `name` in `dir`.
async fn facts_at(writes: &SourceWrites, dir: &tempfile::TempDir, name: &str) -> SharedFacts {
    let options = StorageOptions::default();
    writes.facts(&location(dir, name), &options).await.unwrap()
}

/// A source's writes waiting `gather` at most, and its facts writer.
async fn facts_of_source(dir: &tempfile::TempDir, gather: Duration) -> (SourceWrites, SharedFacts) {
    let writes = SourceWrites::new(gather);
    let facts = facts_at(&writes, dir, "facts").await;
    (writes, facts)
}

async fn append(facts: &SharedFacts, target: &str, batch: u64) -> FactsReply {
    let (key, rows) = (key(target, batch), rows(target, batch));
    let reply = facts.append(&key, &rows, "cp");
    tokio::time::timeout(BOUND, reply)
        .await
        .expect("the group commit was not made")
}

/// `table`'s verdict upserted on a task of its own.
fn verdict_meanwhile(
    control: &SharedFinalization,
    table: &'static str,
) -> tokio::task::JoinHandle<Result<(), FinalizationError>> {
    let control = control.clone();
    tokio::spawn(async move {
        let update = VerdictUpdate {
            table_name: table.into(),
            app_id: format!("{table}-v1"),
            granularity: Granularity::Hour,
            finalized_until: None,
            updated_at: Utc::now(),
            open_snapshot_lsn: None,
            applied_lsn: None,
        };
        tokio::time::timeout(BOUND, control.upsert(vec![update]))
            .await
            .unwrap()
    })
}

/// `target`'s batch 1 appended on a task of its own.
fn append_meanwhile(
    facts: &SharedFacts,
    target: &'static str,
) -> tokio::task::JoinHandle<FactsReply> {
    let facts = facts.clone();
    tokio::spawn(async move { append(&facts, target, 1).await })
}

#[tokio::test]
async fn tables_in_a_step_together_make_one_facts_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (writes, facts) = facts_of_source(&dir, GATHER).await;
    let (a, b) = (writes.step(), writes.step());
    // a's rows wait for b, which is still in its step.
    let first = append_meanwhile(&facts, "bronze.a");
    let second = append(&facts, "bronze.b", 1).await.unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first, AppendOutcome::Written { version: 1 });
    assert_eq!(second, first);
    drop((a, b));
}

#[tokio::test]
async fn a_table_ending_its_step_without_a_write_releases_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let (writes, facts) = facts_of_source(&dir, GATHER).await;
    let (a, b) = (writes.step(), writes.step());
    let first = append_meanwhile(&facts, "bronze.a");
    // b's step ends (an idle step, or an error) without facts.
    let mut steps = writes.inner.steps.subscribe();
    steps.wait_for(|s| s.waiting == 1).await.unwrap();
    drop(b);
    let written = first.await.unwrap().unwrap();
    assert_eq!(written, AppendOutcome::Written { version: 1 });
    drop(a);
}

#[tokio::test]
async fn a_write_outside_any_step_is_committed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_writes, facts) = facts_of_source(&dir, GATHER).await;
    let written = append(&facts, "bronze.a", 1).await.unwrap();
    assert_eq!(written, AppendOutcome::Written { version: 1 });
}

#[tokio::test]
async fn a_group_waits_no_longer_than_its_limit_for_a_table_still_working() {
    let dir = tempfile::tempdir().unwrap();
    let (writes, facts) = facts_of_source(&dir, Duration::from_millis(200)).await;
    let (_a, _still_reading) = (writes.step(), writes.step());
    let written = append(&facts, "bronze.a", 1).await.unwrap();
    assert_eq!(written, AppendOutcome::Written { version: 1 });
}

#[tokio::test]
async fn rows_that_do_not_fit_their_key_fail_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (writes, facts) = facts_of_source(&dir, GATHER).await;
    let (a, b) = (writes.step(), writes.step());
    let bad = tokio::spawn({
        let facts = facts.clone();
        // bronze.a's key with bronze.z's rows.
        async move {
            let (key, rows) = (key("bronze.a", 1), rows("bronze.z", 1));
            let reply = facts.append(&key, &rows, "cp");
            tokio::time::timeout(BOUND, reply).await.unwrap()
        }
    });
    let good = append(&facts, "bronze.b", 1).await.unwrap();
    assert_eq!(good, AppendOutcome::Written { version: 1 });
    let bad = bad.await.unwrap();
    assert!(
        matches!(bad, Err(FactsError::KeyMismatch { .. })),
        "{bad:?}"
    );
    drop((a, b));
}

#[tokio::test]
async fn a_table_waiting_on_the_finalization_commit_does_not_hold_the_facts_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (writes, facts) = facts_of_source(&dir, GATHER).await;
    let control = writes
        .finalization(&location(&dir, "control"), &StorageOptions::default())
        .await
        .unwrap();
    let (a, b) = (writes.step(), writes.step());
    // a waits on the finalization commit, b on the facts commit: neither
    // is still working, so both commit without waiting for the limit.
    let verdict = verdict_meanwhile(&control, "bronze.a");
    let written = append(&facts, "bronze.b", 1).await.unwrap();
    assert_eq!(written, AppendOutcome::Written { version: 1 });
    verdict.await.unwrap().unwrap();
    drop((a, b));
}

#[tokio::test]
async fn one_table_is_opened_once_per_source() {
    let dir = tempfile::tempdir().unwrap();
    let (writes, first) = facts_of_source(&dir, GATHER).await;
    let again = facts_at(&writes, &dir, "facts").await;
    let other = facts_at(&writes, &dir, "other").await;
    assert!(first.writer.jobs.same_channel(&again.writer.jobs));
    assert!(!first.writer.jobs.same_channel(&other.writer.jobs));
}

#[test]
fn a_group_waits_half_a_trigger_at_most_a_second() {
    assert_eq!(gather_max(Duration::from_secs(2)), Duration::from_secs(1));
    assert_eq!(
        gather_max(Duration::from_millis(500)),
        Duration::from_millis(250)
    );
    assert_eq!(gather_max(Duration::from_secs(60)), GATHER_MAX);
    assert_eq!(gather_max(Duration::ZERO), GATHER_MAX);
}

#[tokio::test]
async fn a_tables_rows_that_cannot_be_written_fail_that_table_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (writes, facts) = facts_of_source(&dir, GATHER).await;
    let control = writes
        .finalization(&location(&dir, "control"), &StorageOptions::default())
        .await
        .unwrap();
    crate::failpoint::poison(Some("facts_encode@bronze.b"));
    let steps = (writes.step(), writes.step(), writes.step());
    let a = append_meanwhile(&facts, "bronze.a");
    let b = append_meanwhile(&facts, "bronze.b");
    let c = append(&facts, "bronze.c", 1).await;
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert!(matches!(a, Ok(AppendOutcome::Written { .. })), "{a:?}");
    assert!(matches!(c, Ok(AppendOutcome::Written { .. })), "{c:?}");
    assert!(matches!(b, Err(FactsError::Encode(_))), "{b:?}");
    drop(steps);
    let written = crate::lake::test_support::query(
        facts_table_of(&dir).await.delta_table(),
        "SELECT target FROM t ORDER BY target",
    )
    .await;
    assert_eq!(written, [["bronze.a"], ["bronze.c"]]);

    crate::failpoint::poison(Some("finalization_encode@bronze.b"));
    let steps = (writes.step(), writes.step(), writes.step());
    let verdicts: Vec<_> = ["bronze.a", "bronze.b", "bronze.c"]
        .into_iter()
        .map(|table| verdict_meanwhile(&control, table))
        .collect();
    let mut replies = Vec::new();
    for verdict in verdicts {
        replies.push(verdict.await.unwrap());
    }
    crate::failpoint::poison(None);
    drop(steps);
    assert!(replies[0].is_ok() && replies[2].is_ok(), "{replies:?}");
    assert!(
        matches!(replies[1], Err(FinalizationError::Encode { .. })),
        "{replies:?}"
    );
}

/// The facts table in `dir`, read fresh.
async fn facts_table_of(dir: &tempfile::TempDir) -> FactsTable {
    FactsTable::open_or_create(&location(dir, "facts"), &StorageOptions::default())
        .await
        .unwrap()
}
