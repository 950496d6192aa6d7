//! Planning, case by case: each row names a situation the stream meets.

use chrono::TimeZone;

use super::*;

fn lsn(n: u8) -> Lsn {
    Lsn::from_low_byte(n)
}

fn at(n: u8) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + i64::from(n), 0)
        .single()
        .unwrap()
}

fn instance(name: &str) -> CaptureInstance {
    CaptureInstance::new(name).unwrap()
}

fn commits(lsns: &[u8]) -> Vec<Commit> {
    lsns.iter()
        .map(|n| Commit {
            lsn: lsn(*n),
            commit_ts: Some(at(*n)),
        })
        .collect()
}

fn ddl(n: u8) -> DdlEvent {
    DdlEvent {
        command: format!("ALTER TABLE dbo.orders ADD c{n} int"),
        lsn: lsn(n),
        time: Some(at(n)),
    }
}

/// The source: `dbo_orders` keeps changes from `min` on, the database's
/// max LSN is `max`, and the commit window holds `window`.
fn marks(min: u8, max: u8, window: &[u8]) -> SourceMarks {
    SourceMarks {
        watermarks: Watermarks {
            max_lsn: lsn(max),
            max_commit_ts: Some(at(max)),
            min_commit_ts: Some(at(min)),
            observed_at: at(200),
            retention_minutes: None,
        },
        read: InstanceMarks {
            instance: instance("dbo_orders"),
            min_lsn: lsn(min),
            min_commit_ts: Some(at(min)),
            commits: commits(window),
            ddl: Vec::new(),
            gone: false,
        },
        newer: None,
    }
}

/// `marks` plus `dbo_orders_v2`, which starts at `start` and keeps changes
/// from `min` on.
fn with_newer(mut marks: SourceMarks, start: u8, min: u8, window: &[u8]) -> SourceMarks {
    marks.newer = Some(NewerInstance {
        start_lsn: lsn(start),
        marks: InstanceMarks {
            instance: instance("dbo_orders_v2"),
            min_lsn: lsn(min),
            min_commit_ts: Some(at(min)),
            commits: commits(window),
            ddl: Vec::new(),
            gone: false,
        },
    });
    marks
}

/// `marks` whose instance read was disabled: none of it can be read.
fn gone(mut marks: SourceMarks) -> SourceMarks {
    marks.read.gone = true;
    marks.read.commits.clear();
    marks
}

fn at_position(n: u8) -> Position {
    Position {
        lsn: lsn(n),
        commit_ts: Some(at(n)),
        instance: instance("dbo_orders"),
    }
}

fn options(max_commits: u64, on_data_loss: OnDataLoss) -> PlanOptions {
    PlanOptions {
        once_target: None,
        max_commits,
        on_data_loss,
    }
}

fn id(n: u64) -> BatchId {
    BatchId::new(n).unwrap()
}

/// What a plan reads, in short: (instance, start, end, switched_at,
/// skipped, ddl LSNs, caught up).
#[derive(Debug, PartialEq)]
struct Shape {
    instance: &'static str,
    start: u8,
    end: u8,
    switched_at: Option<u8>,
    skipped: bool,
    ddl: Vec<u8>,
    caught_up: bool,
}

fn shape(next: &Next) -> Option<Shape> {
    let Next::Batch(draft) = next else {
        return None;
    };
    let byte = |l: Lsn| l.to_bytes()[9];
    Some(Shape {
        instance: if draft.capture_instance.as_str() == "dbo_orders" {
            "dbo_orders"
        } else {
            "dbo_orders_v2"
        },
        start: byte(draft.start_lsn),
        end: byte(draft.end_lsn),
        switched_at: draft.switched_at.map(byte),
        skipped: draft.skipped.is_some(),
        ddl: draft.ddl.iter().map(|d| byte(d.lsn)).collect(),
        caught_up: draft.caught_up,
    })
}

fn batch(instance: &'static str, start: u8, end: u8, caught_up: bool) -> Shape {
    Shape {
        instance,
        start,
        end,
        switched_at: None,
        skipped: false,
        ddl: Vec::new(),
        caught_up,
    }
}

#[test]
fn the_next_batch_in_each_situation() {
    use OnDataLoss::*;
    let mut ddl_one = marks(1, 40, &[12, 15, 30]);
    ddl_one.read.ddl = vec![ddl(14)];
    let mut ddl_two = marks(1, 40, &[12, 15, 30]);
    ddl_two.read.ddl = vec![ddl(14), ddl(20)];
    let once = PlanOptions {
        once_target: Some(lsn(20)),
        ..options(100, Fail)
    };
    // (situation, position, marks, options, expected shape; None = no batch)
    let cases: Vec<(&str, u8, SourceMarks, PlanOptions, Option<Shape>)> = vec![
        (
            "idle: no commit since the position",
            10,
            marks(1, 10, &[]),
            options(100, Fail),
            None,
        ),
        (
            "three commits: one batch up to the last, caught up",
            10,
            marks(1, 30, &[12, 20, 30]),
            options(100, Fail),
            Some(batch("dbo_orders", 11, 30, true)),
        ),
        (
            "maxCommitsPerBatch 2 ends at the second commit",
            10,
            marks(1, 30, &[12, 20, 30]),
            options(2, Fail),
            Some(batch("dbo_orders", 11, 20, false)),
        ),
        (
            "an idle entry or another table's commit ends the batch like any commit",
            10,
            marks(1, 25, &[25]),
            options(100, Fail),
            Some(batch("dbo_orders", 11, 25, true)),
        ),
        (
            "--once reads up to the max LSN seen at start, not past it",
            10,
            marks(1, 30, &[12, 20, 30]),
            once,
            Some(batch("dbo_orders", 11, 20, true)),
        ),
        (
            "a newer instance waits while the old one has changes left",
            10,
            with_newer(marks(1, 40, &[12, 30]), 20, 20, &[30]),
            options(100, Fail),
            Some(batch("dbo_orders", 11, 12, false)),
        ),
        (
            "the old instance is done: the batch switches at the new start",
            19,
            with_newer(marks(1, 40, &[30]), 20, 20, &[30]),
            options(100, Fail),
            Some(Shape {
                switched_at: Some(20),
                ..batch("dbo_orders_v2", 20, 30, false)
            }),
        ),
        (
            "a switch with no change after it is recorded up to the upper bound",
            19,
            with_newer(marks(1, 25, &[]), 20, 20, &[]),
            options(100, Fail),
            Some(Shape {
                switched_at: Some(20),
                ..batch("dbo_orders_v2", 20, 25, true)
            }),
        ),
        (
            "capture has not reached the new instance's start yet",
            10,
            with_newer(marks(1, 15, &[]), 20, 20, &[]),
            options(100, Fail),
            None,
        ),
        (
            "purged under skip: read on from the oldest change kept",
            3,
            marks(8, 20, &[9, 12]),
            options(100, Skip),
            Some(Shape {
                skipped: true,
                ..batch("dbo_orders", 8, 12, false)
            }),
        ),
        (
            "purged under skip with nothing kept after: the skip alone",
            3,
            marks(8, 10, &[]),
            options(100, Skip),
            Some(Shape {
                skipped: true,
                ..batch("dbo_orders", 8, 10, true)
            }),
        ),
        (
            "the new instance purged past its start under skip",
            19,
            with_newer(marks(1, 40, &[]), 20, 25, &[26]),
            options(100, Skip),
            Some(Shape {
                switched_at: Some(20),
                skipped: true,
                ..batch("dbo_orders_v2", 25, 26, false)
            }),
        ),
        (
            "the instance read was disabled: the gap to the new start is skipped, then read",
            10,
            gone(with_newer(marks(1, 40, &[]), 20, 20, &[30])),
            options(100, Skip),
            Some(Shape {
                switched_at: Some(20),
                skipped: true,
                ..batch("dbo_orders_v2", 20, 30, false)
            }),
        ),
        (
            "the instance read was disabled after the new one started: no gap",
            19,
            gone(with_newer(marks(1, 40, &[]), 20, 20, &[30])),
            options(100, Fail),
            Some(Shape {
                switched_at: Some(20),
                ..batch("dbo_orders_v2", 20, 30, false)
            }),
        ),
        (
            "the instance read was disabled, capture not yet at the new start",
            10,
            gone(with_newer(marks(1, 15, &[]), 20, 20, &[])),
            options(100, Fail),
            None,
        ),
        (
            "one DDL statement rides along",
            10,
            ddl_one,
            options(100, Fail),
            Some(Shape {
                ddl: vec![14],
                ..batch("dbo_orders", 11, 30, false)
            }),
        ),
        (
            "a second DDL statement ends the batch before it",
            10,
            ddl_two,
            options(100, Fail),
            Some(Shape {
                ddl: vec![14],
                ..batch("dbo_orders", 11, 15, false)
            }),
        ),
    ];
    for (situation, position, marks, options, expected) in cases {
        let next = plan_next(&at_position(position), id(5), &marks, &options)
            .unwrap_or_else(|e| panic!("{situation}: {e}"));
        assert_eq!(shape(&next), expected, "{situation}");
        if expected.is_none() {
            assert_eq!(next, Next::Idle, "{situation}");
        }
    }
}

#[test]
fn a_disabled_instance_under_fail_is_data_loss_naming_it() {
    let marks = gone(with_newer(marks(1, 40, &[]), 20, 20, &[30]));
    let error = plan_next(
        &at_position(10),
        id(5),
        &marks,
        &options(100, OnDataLoss::Fail),
    )
    .expect_err("the gap to the new instance's start is data loss");
    let PlanError::DataLoss(loss) = error else {
        panic!("{error}");
    };
    assert_eq!(loss.disabled, Some(instance("dbo_orders")));
    assert_eq!(loss.capture_instance, instance("dbo_orders_v2"));
    assert_eq!((loss.from_lsn, loss.to_lsn), (lsn(11), lsn(20)));
    assert!(loss.to_string().contains("dbo_orders was disabled"));
}

#[test]
fn caught_up_under_once_is_done() {
    let once = PlanOptions {
        once_target: Some(lsn(10)),
        ..options(100, OnDataLoss::Fail)
    };
    let next = plan_next(&at_position(10), id(5), &marks(1, 30, &[20]), &once).unwrap();
    assert_eq!(next, Next::Done);
}

#[test]
fn purged_changes_fail_or_resnapshot_by_policy() {
    let purged = marks(8, 20, &[9]);
    let error = plan_next(
        &at_position(3),
        id(5),
        &purged,
        &options(100, OnDataLoss::Fail),
    )
    .unwrap_err();
    let PlanError::DataLoss(loss) = error else {
        panic!("expected DataLossError, got {error}");
    };
    assert_eq!((loss.from_lsn, loss.to_lsn), (lsn(4), lsn(8)));
    assert_eq!((loss.from_ts, loss.to_ts), (Some(at(3)), Some(at(8))));

    let next = plan_next(
        &at_position(3),
        id(5),
        &purged,
        &options(100, OnDataLoss::Resnapshot),
    )
    .unwrap();
    assert_eq!(
        next,
        Next::Resnapshot {
            instance: instance("dbo_orders"),
            lost_from_ts: Some(at(3)),
            lost_to_ts: Some(at(8)),
        }
    );
}

#[test]
fn a_batch_carries_its_end_commit_time_and_id() {
    let next = plan_next(
        &at_position(10),
        id(9),
        &marks(1, 30, &[12, 20]),
        &options(100, OnDataLoss::Fail),
    )
    .unwrap();
    let Next::Batch(draft) = next else {
        panic!("expected a batch");
    };
    assert_eq!(draft.batch_id, id(9));
    assert_eq!(draft.end_commit_ts, Some(at(20)));
}

#[test]
fn the_highest_lsn_has_no_next_batch() {
    let position = Position {
        lsn: Lsn::MAX,
        ..at_position(0)
    };
    let error = plan_next(
        &position,
        id(1),
        &marks(1, 5, &[]),
        &options(1, OnDataLoss::Fail),
    );
    assert!(matches!(error, Err(PlanError::LsnOverflow(l)) if l == Lsn::MAX));
}

#[test]
fn windows_start_past_purged_changes_and_at_a_newer_start() {
    let cases = [
        ("kept", 5, 3, None, 5),
        ("purged", 5, 8, None, 8),
        ("newer instance starts later", 5, 3, Some(9), 9),
        ("newer instance purged past its start", 5, 12, Some(9), 12),
    ];
    for (name, next, min, newer, expected) in cases {
        assert_eq!(
            window_start(lsn(next), lsn(min), newer.map(lsn)),
            lsn(expected),
            "{name}"
        );
    }
}

fn snapshot(n: u64, at_lsn: u8) -> PlannedSnapshot {
    PlannedSnapshot {
        snapshot: n,
        lsn: lsn(at_lsn),
        capture_instance: instance("dbo_orders"),
        commit_ts: Some(at(at_lsn)),
        started_at: at(0),
        lost_from_ts: None,
        lost_to_ts: None,
        key_bounds: Vec::new(),
        switched: None,
        columns: Vec::new(),
    }
}

fn planned(batch: u64, end: u8) -> PlannedBatch {
    PlannedBatch {
        batch_id: id(batch),
        start_lsn: lsn(1),
        end_lsn: lsn(end),
        capture_instance: instance("dbo_orders"),
        end_commit_ts: Some(at(end)),
        planned_at: at(0),
        events: Vec::new(),
        parts: Vec::new(),
        columns: Vec::new(),
    }
}

#[test]
fn a_run_starts_where_the_checkpoint_says() {
    use SnapshotMode::{Initial, Never};
    let cases = [
        ("new stream, initial", None, None, Initial, Start::Bootstrap),
        ("new stream, never", None, None, Never, Start::OldestKept),
        (
            "batches after the bootstrap",
            Some(planned(3, 30)),
            Some(snapshot(0, 10)),
            Initial,
            Start::After(at_position(30)),
        ),
        (
            "a snapshot no batch passed yet (interrupted or just done)",
            Some(planned(3, 30)),
            Some(snapshot(1, 40)),
            Initial,
            Start::Snapshot(Box::new(snapshot(1, 40))),
        ),
        (
            "batches only (snapshotMode never)",
            Some(planned(2, 20)),
            None,
            Never,
            Start::After(at_position(20)),
        ),
    ];
    for (name, batch, snap, mode, expected) in cases {
        assert_eq!(
            start(batch.as_ref(), snap.as_ref(), mode),
            expected,
            "{name}"
        );
    }
}

fn fact(batch: u64, app_id: &str) -> FactRow {
    FactRow::new("bronze.orders", app_id, Some(id(batch)), None, at(0))
}

fn ours() -> CheckpointIdentity {
    let mut identity = CheckpointIdentity::new(
        crate::lake::checkpoint::StreamIdentity {
            app_id: "orders-v1".into(),
            target_name: "bronze.orders".into(),
            target_location: "file:///lake/orders/".into(),
            facts_location: "file:///lake/facts/".into(),
            source_host: "db".into(),
            source_database: "shop".into(),
            source_table: "dbo.orders".into(),
        },
        false,
    );
    identity.id = "ours".into();
    identity
}

/// Bronze's record of a batch: its facts row, the checkpoint and range.
fn held(row: FactRow, checkpoint: Option<&str>, range: Option<(u8, u8)>) -> BronzeHolds {
    BronzeHolds::Batch(Box::new(BatchRecord {
        facts: row,
        events: Vec::new(),
        checkpoint: checkpoint.map(str::to_string),
        range: range.map(|(start, end)| LsnRange {
            start: lsn(start),
            end: lsn(end),
        }),
    }))
}

#[test]
fn a_replay_resumes_after_each_crash_point() {
    let plan = planned(4, 30);
    let foreign = |why: &str| ResumeError::Foreign {
        batch_id: id(4),
        why: why.into(),
    };
    // (crash point or situation, what bronze holds, expected)
    let cases = [
        ("after_offsets", BronzeHolds::Nothing, Ok(Resume::Read)),
        ("mid_read", BronzeHolds::Nothing, Ok(Resume::Read)),
        (
            "before_bronze_commit",
            BronzeHolds::Nothing,
            Ok(Resume::Read),
        ),
        (
            "after_bronze_commit",
            held(fact(4, "orders-v1"), Some("ours"), Some((1, 30))),
            Ok(Resume::Recover(vec![fact(4, "orders-v1")])),
        ),
        (
            "after_facts (the facts append is then skipped as written)",
            held(fact(4, "orders-v1"), Some("ours"), Some((1, 30))),
            Ok(Resume::Recover(vec![fact(4, "orders-v1")])),
        ),
        (
            "a commit without our record",
            BronzeHolds::BatchWithoutRecord,
            Err(ResumeError::NoRecord {
                batch_id: id(4),
                app_id: "orders-v1".into(),
            }),
        ),
        (
            "a record of another batch",
            held(fact(3, "orders-v1"), Some("ours"), None),
            Err(ResumeError::Mismatch { batch_id: id(4) }),
        ),
        (
            "a record of another stream",
            held(fact(4, "invoices-v1"), Some("ours"), None),
            Err(ResumeError::Mismatch { batch_id: id(4) }),
        ),
        (
            "batch 4 of a replaced checkpoint",
            held(fact(4, "orders-v1"), Some("old"), Some((1, 30))),
            Err(foreign("checkpoint old wrote")),
        ),
        (
            "batch 4 of a restored checkpoint, planned differently",
            held(fact(4, "orders-v1"), Some("ours"), Some((1, 20))),
            Err(foreign(
                "covers 0x00000000000000000001..0x00000000000000000014, not the planned \
                 0x00000000000000000001..0x0000000000000000001E",
            )),
        ),
    ];
    for (crash, holds, expected) in cases {
        assert_eq!(
            resume(&plan, "orders-v1", &ours(), holds),
            expected,
            "{crash}"
        );
    }
}

#[test]
fn after_a_batch_the_loop_continues_waits_or_stops() {
    let cases = [
        (false, false, AfterBatch::Continue),
        (false, true, AfterBatch::Wait),
        (true, false, AfterBatch::Continue),
        (true, true, AfterBatch::Done),
    ];
    for (once, caught_up, expected) in cases {
        assert_eq!(
            after_batch(caught_up, once),
            expected,
            "once {once}, caught up {caught_up}"
        );
    }
}

#[test]
fn ddl_is_kept_to_one_statement_per_batch() {
    let events = [ddl(14), ddl(20), ddl(25)];
    let cases = [
        ("none in range", 1, 13, 13, vec![]),
        ("one", 15, 22, 22, vec![20]),
        (
            "two: the upper bound stops before the second",
            10,
            30,
            19,
            vec![14],
        ),
        (
            "a batch starting on the second statement",
            20,
            30,
            24,
            vec![20],
        ),
        ("empty range", 9, 8, 8, vec![]),
    ];
    for (name, start, upper, expected_upper, expected) in cases {
        let (got_upper, kept) = one_ddl_per_batch(&events, lsn(start), lsn(upper));
        assert_eq!(got_upper, lsn(expected_upper), "{name}");
        let kept: Vec<u8> = kept.iter().map(|d| d.lsn.to_bytes()[9]).collect();
        assert_eq!(kept, expected, "{name}");
    }
}
