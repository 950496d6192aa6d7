//! Step, batch and snapshot against the in-memory source (`fake_source`)
//! and the real lake code on a temporary directory: an idle batch, a busy
//! one, a snapshot in chunks, and every crash point's replay. A crash is
//! an armed `failpoint` that panics; the test then drops everything the
//! run held (source, sink, run state) as a killed process would, runs
//! again, and checks that bronze holds each change once and that the
//! checkpoint and the facts table agree with it.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use super::context::Run;
use super::error::EngineError;
use super::fake_source::{FakeDb, FakeSource, lsn, table_info, time_of};
use super::observer::Silent;
use super::options::RunOptions;
use super::sink::Sink;
use super::source_writes::SourceWrites;
use super::step::{Step, step};
use crate::failpoint;
use crate::lake::checkpoint::Checkpoint;
use crate::lake::lease::CheckpointLease;
use crate::lake::test_support::{query, reopen};
use crate::source::changed_tables::ChangeWindow;
use crate::source::round_marks::QuietWindow;
use crate::spec::{StreamConfig, load_yaml};

/// A stream's lake on a temporary directory.
struct Lake {
    _dir: tempfile::TempDir,
    config: StreamConfig,
    readers: u32,
    chunk_rows: u64,
    /// Writes facts and verdicts as a source's table does, through the
    /// source's writers (`source_writes.rs`), new for each run.
    through_source: bool,
}

/// How one run ended.
#[derive(Debug)]
enum Ran {
    /// Caught up.
    Done,
    /// Crashed at the armed point (a panic, or a read task that died of it).
    Crashed,
    /// Failed.
    Failed(#[allow(dead_code)] EngineError),
}

impl Lake {
    fn new(readers: u32, chunk_rows: u64, silver: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = stream_config(&dir, readers, chunk_rows, silver);
        Lake {
            _dir: dir,
            config,
            readers,
            chunk_rows,
            through_source: false,
        }
    }

    /// As [`Lake::new`], the stream a table of a source.
    fn of_source(readers: u32, chunk_rows: u64, silver: bool) -> Self {
        Lake {
            through_source: true,
            ..Lake::new(readers, chunk_rows, silver)
        }
    }

    /// The manifest gains `spec.silver`, as an edit of a running stream's.
    fn add_silver(&mut self) {
        self.config = stream_config(&self._dir, self.readers, self.chunk_rows, true);
    }

    async fn sink(&self, writes: Option<&SourceWrites>) -> Result<Sink, EngineError> {
        let config = &self.config;
        let options = config
            .checkpoint
            .options(&config.storage_options, std::iter::empty());
        let checkpoint = Checkpoint::open(&config.checkpoint, &options)?;
        let lease = CheckpointLease::bypassed(&config.checkpoint);
        Sink::open(
            config,
            &Default::default(),
            checkpoint,
            &table_info(),
            false,
            lease.guard(),
            writes,
        )
        .await
    }

    /// One process's run until caught up, crashing at `crash` if it is hit.
    async fn run(&self, db: &FakeDb, crash: Option<&str>) -> Ran {
        failpoint::arm(crash);
        let ran = AssertUnwindSafe(self.steps(db)).catch_unwind().await;
        failpoint::arm(None);
        match ran {
            Err(_panic) => Ran::Crashed,
            Ok(Ok(())) => Ran::Done,
            // A point hit on a read task panics there; the batch sees the
            // task die.
            Ok(Err(EngineError::ReadTask(task))) if task.is_panic() => Ran::Crashed,
            Ok(Err(error)) => Ran::Failed(error),
        }
    }

    async fn steps(&self, db: &FakeDb) -> Result<(), EngineError> {
        let mut options = RunOptions::new(Arc::new(Silent));
        options.once = true;
        let mut run = Run::new(&self.config, &options);
        let mut source = FakeSource::new(db);
        let writes = self
            .through_source
            .then(|| SourceWrites::new(std::time::Duration::from_millis(50)));
        let mut sink = self.sink(writes.as_ref()).await?;
        // As `run` does: a silver table new to the stream is filled first.
        super::silver_fill::fill_added_silver(&run, &mut sink).await?;
        loop {
            run.in_step = writes.as_ref().map(SourceWrites::step);
            match step(&mut run, &mut source, &mut sink).await? {
                Step::Progress => {}
                Step::Idle | Step::Done => return Ok(()),
            }
        }
    }

    /// Runs to the end, crashing once at `crash` first; panics unless the
    /// point was reached (a test of a point it never passes proves nothing).
    async fn run_crashing_at(&self, db: &FakeDb, crash: &str) {
        failpoint::hits();
        match self.run(db, Some(crash)).await {
            Ran::Crashed => {}
            other => panic!("{crash}: the run did not crash there: {other:?}"),
        }
        assert!(
            failpoint::hits().contains_key(crash),
            "{crash} was not passed"
        );
        self.run_to_end(db).await;
    }

    async fn run_to_end(&self, db: &FakeDb) {
        match self.run(db, None).await {
            Ran::Done => {}
            other => panic!("the run did not finish: {other:?}"),
        }
    }

    /// `(_lsn, _seqval, id, copies)` of every change row in bronze.
    async fn bronze(&self) -> Vec<(String, String, i64, i64)> {
        let table = reopen(&self.config.target.location).await;
        query(
            &table,
            "SELECT _lsn, _seqval, _operation, id, count(*) FROM t \
             GROUP BY _lsn, _seqval, _operation, id ORDER BY _lsn, _seqval, id",
        )
        .await
        .into_iter()
        .map(|r| {
            (
                r[0].clone(),
                r[2].clone(),
                r[3].parse().unwrap(),
                r[4].parse().unwrap(),
            )
        })
        .collect()
    }

    /// `(batch_id or event, rows, copies)` of the stream's facts rows.
    async fn facts(&self) -> Vec<(String, i64, i64)> {
        let table = reopen(&self.config.facts.location).await;
        query(
            &table,
            "SELECT coalesce(cast(batch_id AS VARCHAR), event), sum(rows), count(*) FROM t \
             WHERE event IS NULL OR event = 'bootstrap' GROUP BY 1 ORDER BY 1",
        )
        .await
        .into_iter()
        .map(|r| {
            (
                r[0].clone(),
                r[1].parse().unwrap_or(0),
                r[2].parse().unwrap(),
            )
        })
        .collect()
    }

    /// How many facts rows of event `event` the stream wrote.
    async fn events(&self, event: &str) -> usize {
        let table = reopen(&self.config.facts.location).await;
        let rows = query(
            &table,
            &format!("SELECT count(*) FROM t WHERE event = '{event}'"),
        )
        .await;
        rows.first()
            .and_then(|r| r.first())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Asserts the lake holds the source's changes exactly once: each change
    /// row (and each snapshot row) in bronze once, one facts row per batch
    /// and one for the bootstrap, whose rows add up to bronze's, and a
    /// checkpoint with nothing pending whose last batch has its facts row.
    async fn assert_exactly_once(&self, db: &FakeDb, snapshot_rows: usize, context: &str) {
        let changes = db.state().changes.clone();
        let bronze = self.bronze().await;
        let copies: Vec<_> = bronze.iter().filter(|r| r.3 != 1).collect();
        assert!(
            copies.is_empty(),
            "{context}: rows in bronze twice: {copies:?}"
        );
        let snapshot = bronze.iter().filter(|r| r.1 == "snapshot").count();
        let changed = bronze.len() - snapshot;
        assert_eq!(changed, changes.len(), "{context}: change rows in bronze");
        let facts = self.facts().await;
        let twice: Vec<_> = facts.iter().filter(|f| f.2 != 1).collect();
        assert!(twice.is_empty(), "{context}: facts rows twice: {twice:?}");
        let bootstrap = facts.iter().find(|f| f.0 == "bootstrap");
        assert_eq!(
            bootstrap.map(|f| f.1),
            Some(snapshot as i64),
            "{context}: the bootstrap's facts row counts bronze's snapshot rows"
        );
        assert_eq!(
            snapshot, snapshot_rows,
            "{context}: snapshot rows in bronze"
        );
        let batch_rows: i64 = facts
            .iter()
            .filter(|f| f.0 != "bootstrap")
            .map(|f| f.1)
            .sum();
        assert_eq!(
            batch_rows,
            changes.len() as i64,
            "{context}: the batches' facts rows count bronze's change rows"
        );
        let sink = self.sink(None).await.unwrap();
        let state = sink.checkpoint.state().await.unwrap();
        assert!(
            state.pending().is_none(),
            "{context}: a batch is left pending"
        );
        let last_in_facts = facts.iter().filter_map(|f| f.0.parse::<u64>().ok()).max();
        assert_eq!(
            state.latest_committed.map(|b| b.to_string()),
            last_in_facts.map(|b| b.to_string()),
            "{context}: the checkpoint's last committed batch is the facts table's last"
        );
    }

    /// Whether no silver table exists yet.
    async fn silver_is_missing(&self) -> bool {
        let Some(silver) = &self.config.silver else {
            return true;
        };
        !std::path::Path::new(silver.table.location.url().path())
            .join("_delta_log")
            .exists()
    }

    /// Silver's rows: `(id, name)` in key order.
    async fn silver(&self) -> Vec<(i64, String)> {
        let Some(silver) = &self.config.silver else {
            return Vec::new();
        };
        let table = reopen(&silver.table.location).await;
        query(&table, "SELECT id, name FROM t ORDER BY id")
            .await
            .into_iter()
            .map(|r| (r[0].parse().unwrap(), r[1].clone()))
            .collect()
    }
}

/// The stream's manifest on `dir`, validated.
fn stream_config(
    dir: &tempfile::TempDir,
    readers: u32,
    chunk_rows: u64,
    silver: bool,
) -> StreamConfig {
    let at = dir.path().display();
    let silver = if silver {
        format!("  silver: {{name: silver.t, location: {at}/silver}}\n")
    } else {
        String::new()
    };
    let yaml = format!(
        "apiVersion: mssql-cdc.io/v1alpha1\nkind: CdcStream\nmetadata: {{name: t}}\nspec:\n  \
             appId: t-v1\n  source:\n    host: fake\n    database: db\n    table: dbo.t\n    \
             readers: {readers}\n    credentials:\n      username: u\n      \
             passwordFrom: {{env: PW}}\n  \
             target: {{name: bronze.t, location: {at}/bronze}}\n  checkpoint: {at}/checkpoint\n  \
             facts: {{name: ops.facts, location: {at}/facts}}\n  trigger: {{processingTime: 1s}}\n  \
             snapshot: {{chunkRows: {chunk_rows}}}\n{silver}"
    );
    load_yaml(&yaml)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
        .spec
        .validate()
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn rows_of(db: &FakeDb) -> Vec<(i64, String)> {
    db.state()
        .rows
        .iter()
        .map(|(id, name)| (i64::from(*id), name.clone()))
        .collect()
}

#[tokio::test]
async fn a_snapshot_in_chunks_then_a_busy_batch_then_an_idle_one() {
    let lake = Lake::new(1, 3, false);
    let db = FakeDb::with_rows(10);
    lake.run_to_end(&db).await;
    lake.assert_exactly_once(&db, 10, "after the snapshot")
        .await;
    let versions = reopen(&lake.config.target.location).await.version();
    // 10 rows in chunks of 3: 4 chunks, each its own bronze commit.
    assert_eq!(
        versions,
        Some(4),
        "the table's creation and a commit per chunk"
    );

    db.commit(&[1, 11]);
    db.commit(&[12]);
    lake.run_to_end(&db).await;
    lake.assert_exactly_once(&db, 10, "after a busy batch")
        .await;
    let busy = reopen(&lake.config.target.location).await.version();
    assert_eq!(busy, Some(5), "one bronze commit for the batch");

    // Commits of other tables (or the capture job's idle entries) move the
    // max LSN without changes: a batch with a facts row of 0 rows and no
    // bronze commit.
    db.commit(&[]);
    lake.run_to_end(&db).await;
    lake.assert_exactly_once(&db, 10, "after an idle batch")
        .await;
    let idle = reopen(&lake.config.target.location).await.version();
    assert_eq!(idle, busy, "an idle batch makes no bronze commit");
    let facts = lake.facts().await;
    assert_eq!(
        facts
            .iter()
            .filter(|f| f.0 != "bootstrap")
            .map(|f| f.1)
            .collect::<Vec<_>>(),
        vec![3, 0],
        "a busy batch of 3 change rows, then an idle one"
    );
}

/// Where each crash point is reached: in the bootstrap snapshot, or in the
/// batch after it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Snapshot,
    Batch,
}

#[tokio::test]
async fn every_crash_point_replays_to_each_change_once() {
    use Phase::{Batch, Snapshot};
    // (point, where, readers, silver)
    let cases: &[(&str, Phase, u32, bool)] = &[
        ("before_bronze_commit", Snapshot, 1, false),
        ("mid_snapshot", Snapshot, 1, false),
        ("mid_snapshot", Snapshot, 3, false),
        ("after_snapshot_range_done", Snapshot, 3, false),
        ("after_part_staged", Snapshot, 3, false),
        ("after_snapshot_facts", Snapshot, 1, false),
        ("before_silver_commit", Snapshot, 1, true),
        ("after_silver_commit", Snapshot, 1, true),
        ("after_offsets", Batch, 1, false),
        ("mid_read", Batch, 1, false),
        ("mid_read", Batch, 2, false),
        ("after_part_staged", Batch, 2, false),
        ("before_bronze_commit", Batch, 1, false),
        ("after_bronze_commit", Batch, 1, false),
        ("after_bronze_commit", Batch, 2, false),
        ("before_silver_commit", Batch, 1, true),
        ("after_silver_commit", Batch, 1, true),
        ("after_facts", Batch, 1, false),
    ];
    for &(point, phase, readers, silver) in cases {
        let context = format!("{point} in the {phase:?} with {readers} reader(s), silver {silver}");
        let lake = Lake::new(readers, 4, silver);
        crash_and_replay(&lake, point, phase, silver, &context).await;
    }
}

/// Snapshots 10 rows, then streams 12 changes, crashing once at `point`
/// in `phase`; then the lake must hold each change once (and silver be
/// the table).
async fn crash_and_replay(lake: &Lake, point: &str, phase: Phase, silver: bool, context: &str) {
    let db = FakeDb::with_rows(10);
    if phase == Phase::Snapshot {
        lake.run_crashing_at(&db, point).await;
    } else {
        lake.run_to_end(&db).await;
    }
    for n in 0..6 {
        db.commit(&[n, 20 + n]);
    }
    if phase == Phase::Batch {
        lake.run_crashing_at(&db, point).await;
    } else {
        lake.run_to_end(&db).await;
    }
    lake.assert_exactly_once(&db, 10, context).await;
    if silver {
        assert_eq!(
            lake.silver().await,
            rows_of(&db),
            "{context}: silver is the table"
        );
    }
}

/// The crash points around the facts and verdict writes, with the stream
/// a table of a source: its facts and verdicts go through the source's
/// writers, committed in groups, and a crash still replays to each change
/// once and one facts row per batch.
#[tokio::test]
async fn a_sources_table_replays_every_crash_around_its_group_commits_to_each_change_once() {
    use Phase::{Batch, Snapshot};
    let cases: &[(&str, Phase, bool)] = &[
        ("after_snapshot_facts", Snapshot, false),
        ("after_silver_commit", Snapshot, true),
        ("after_bronze_commit", Batch, false),
        ("after_silver_commit", Batch, true),
        ("after_facts", Batch, false),
        ("after_facts", Batch, true),
    ];
    for &(point, phase, silver) in cases {
        let context = format!("{point} in the {phase:?} of a source's table, silver {silver}");
        let lake = Lake::of_source(1, 4, silver);
        crash_and_replay(&lake, point, phase, silver, &context).await;
    }
}

/// Silver added to a stream after its snapshot and a batch: the first run
/// crashes mid-fill, the next fills it, and silver is the table; batches
/// after the fill reach it.
#[tokio::test]
async fn silver_added_later_is_filled_through_a_crash_mid_fill() {
    let mut lake = Lake::new(1, 4, false);
    let db = FakeDb::with_rows(10);
    lake.run_to_end(&db).await;
    for n in 0..6 {
        db.commit(&[n, 20 + n]);
    }
    lake.run_to_end(&db).await;
    lake.add_silver();
    assert!(lake.silver_is_missing().await, "no silver table before");
    lake.run_crashing_at(&db, "mid_silver_fill").await;
    lake.assert_exactly_once(&db, 10, "silver added").await;
    assert_eq!(lake.silver().await, rows_of(&db), "silver is the table");
    db.commit(&[3, 40]);
    lake.run_to_end(&db).await;
    assert_eq!(lake.silver().await, rows_of(&db), "and follows it");
}

/// A newer capture instance created while the stream runs: the batch that
/// moves to it crashes after its plan is recorded or after its bronze
/// commit, and the replay reads each change once, from the old instance up
/// to the new one's start and from the new one after, with one
/// `capture_instance_switched` row and the new instance's column in bronze
/// (and silver).
/// The instance read is disabled once the stream has read it all, and a
/// new one enabled (a captured column renamed): under `onDataLoss: skip`
/// the batch that moves to it records the (empty) gap and the switch, and
/// a crash at either point of that batch replays to each change once.
#[tokio::test]
async fn a_crash_at_the_switch_from_a_disabled_instance_replays_to_each_change_once() {
    for point in ["after_offsets_of_switch", "after_bronze_commit_of_switch"] {
        let mut lake = Lake::new(1, 4, true);
        lake.config.on_data_loss = crate::spec::OnDataLoss::Skip;
        let db = FakeDb::with_rows(10);
        lake.run_to_end(&db).await;
        db.commit(&[1, 20]);
        lake.run_to_end(&db).await;
        db.disable_first();
        // The disable, the rename and the enable move the database's LSN
        // past the stream's position: a gap that holds no change.
        db.state().max_lsn += 3;
        db.add_instance("dbo_t_v2", 8);
        for n in 3..6 {
            db.commit(&[n, 20 + n]);
        }
        lake.run_crashing_at(&db, point).await;
        lake.assert_exactly_once(&db, 10, point).await;
        assert_eq!(lake.events("capture_instance_switched").await, 1, "{point}");
        assert_eq!(lake.events("data_skipped").await, 1, "{point}");
        assert_eq!(
            lake.silver().await,
            rows_of(&db),
            "{point}: silver is the table"
        );
    }
}

/// A batch planned on an instance that is disabled before its replay stops
/// the stream with a `DataLoss` naming it, instead of retrying a read that
/// cannot succeed: its changes went with the change table.
#[tokio::test]
async fn a_batch_planned_on_an_instance_disabled_before_its_replay_is_data_loss() {
    let lake = Lake::new(1, 4, false);
    let db = FakeDb::with_rows(10);
    lake.run_to_end(&db).await;
    db.commit(&[1, 20]);
    assert!(matches!(
        lake.run(&db, Some("after_offsets")).await,
        Ran::Crashed
    ));
    db.disable_first();
    db.add_instance("dbo_t_v2", 8);
    let Ran::Failed(error) = lake.run(&db, None).await else {
        panic!("the replay must fail");
    };
    assert_eq!(error.kind(), "data_loss", "{error}");
    assert!(
        error
            .to_string()
            .contains("dbo_t was disabled before the stream read the batch"),
        "{error}"
    );
}

/// A pinned instance disabled between two runs of a worker that kept its
/// session says so, naming the table's other instance, and is retried
/// (it may be enabled again under its name), instead of a missing LSN.
#[tokio::test]
async fn a_pinned_instance_disabled_says_so_and_names_the_others() {
    let lake = Lake::new(1, 4, false);
    let db = FakeDb::with_rows(10);
    db.state().pinned = true;
    lake.run_to_end(&db).await;
    db.commit(&[1, 20]);
    db.disable_first();
    db.add_instance("dbo_t_v2", 8);
    let Ran::Failed(error) = lake.run(&db, None).await else {
        panic!("a disabled pinned instance cannot be read");
    };
    assert!(
        matches!(error, EngineError::PinnedInstanceDisabled { .. }),
        "{error}"
    );
    assert!(error.is_transient(), "{error}");
    let said = error.to_string();
    for part in ["dbo_t, which spec.source.captureInstance pins", "dbo_t_v2"] {
        assert!(said.contains(part), "{part}: {said}");
    }
}

#[tokio::test]
async fn a_crash_in_the_batch_that_switches_instance_replays_to_each_change_once() {
    // (point, readers, silver)
    let cases: &[(&str, u32, bool)] = &[
        ("after_offsets_of_switch", 1, false),
        ("after_offsets_of_switch", 1, true),
        ("after_bronze_commit_of_switch", 1, false),
        ("after_bronze_commit_of_switch", 2, false),
        ("after_bronze_commit_of_switch", 1, true),
    ];
    for &(point, readers, silver) in cases {
        let context = format!("{point} with {readers} reader(s), silver {silver}");
        let lake = Lake::new(readers, 4, silver);
        let db = FakeDb::with_rows(10);
        lake.run_to_end(&db).await;
        for n in 0..3 {
            db.commit(&[n, 20 + n]);
        }
        db.add_instance("dbo_t_v2", 8);
        for n in 3..6 {
            db.commit(&[n, 20 + n]);
        }
        lake.run_crashing_at(&db, point).await;
        lake.assert_exactly_once(&db, 10, &context).await;
        assert_eq!(
            lake.events("capture_instance_switched").await,
            1,
            "{context}: one switch row"
        );
        let bronze = reopen(&lake.config.target.location).await;
        let columns = query(&bronze, "SELECT count(note) FROM t").await;
        assert_eq!(
            columns,
            vec![vec!["0".to_string()]],
            "{context}: bronze has the new instance's column"
        );
        if silver {
            assert_eq!(
                lake.silver().await,
                rows_of(&db),
                "{context}: silver is the table"
            );
        }
        // Batches after the switch read the new instance.
        db.commit(&[7, 40]);
        lake.run_to_end(&db).await;
        lake.assert_exactly_once(&db, 10, &format!("{context}, then a batch"))
            .await;
    }
}

/// A continuous run of `lake` on `db`, stepped until it waits for the
/// trigger, with the window its next batch would read (what a source's
/// round asks about).
async fn caught_up<'a>(
    lake: &'a Lake,
    db: &FakeDb,
    options: &'a RunOptions,
) -> (Run<'a>, FakeSource, Sink, ChangeWindow) {
    let mut run = Run::new(&lake.config, options);
    let mut source = FakeSource::new(db);
    let mut sink = lake.sink(None).await.expect("the sink opens");
    loop {
        match step(&mut run, &mut source, &mut sink).await {
            Ok(Step::Progress) => {}
            Ok(Step::Idle) => {
                let window = run.caught_up.take().expect("caught up at a window");
                return (run, source, sink, window);
            }
            other => panic!("a continuous run does not end: {other:?}"),
        }
    }
}

/// What a source's round answers for `window` when the database moved to
/// `max` without a change of the table (`source::round_marks`).
fn quiet_window(window: &ChangeWindow, max: u64, db: &FakeDb) -> QuietWindow {
    let min = db.state().min_lsn;
    QuietWindow {
        window: window.clone(),
        change_table_id: table_info().change_table_id,
        max_lsn: lsn(max),
        max_commit_ts: Some(time_of(max)),
        min_lsn: lsn(min),
        min_commit_ts: Some(time_of(min)),
        observed_at: chrono::Utc::now(),
        round_trip: std::time::Duration::from_millis(2),
    }
}

/// The checkpoint's newest planned batch's end.
async fn planned_end(lake: &Lake) -> Option<crate::domain::Lsn> {
    let sink = lake.sink(None).await.expect("the sink opens");
    let state = sink.checkpoint.state().await.expect("the checkpoint reads");
    state.latest_planned.map(|plan| plan.end_lsn)
}

#[tokio::test]
async fn a_quiet_window_the_round_answered_is_committed_without_asking_the_source() {
    let lake = Lake::new(1, 4, false);
    let db = FakeDb::with_rows(3);
    lake.run_to_end(&db).await;
    db.commit(&[1]);
    let options = RunOptions::new(Arc::new(Silent));
    let (mut run, mut source, mut sink, window) = caught_up(&lake, &db, &options).await;

    // Another table's commit moves the max LSN; the round found the
    // window empty and answers for it.
    let max = db.commit(&[]);
    let answer = quiet_window(&window, max, &db);
    let asked = db.state().questions;
    run.quiet = Some(answer.clone());
    let stepped = step(&mut run, &mut source, &mut sink).await;
    assert!(matches!(stepped, Ok(Step::Idle)), "{stepped:?}");
    assert_eq!(
        db.state().questions,
        asked,
        "the quiet batch asked the source nothing"
    );
    assert_eq!(
        planned_end(&lake).await,
        Some(lsn(max)),
        "it read up to the round's max LSN"
    );
    assert_eq!(
        run.caught_up.take().map(|w| w.after),
        Some(lsn(max)),
        "the next window starts after it"
    );
    lake.assert_exactly_once(&db, 3, "after a quiet batch")
        .await;
    let rows: Vec<i64> = lake
        .facts()
        .await
        .iter()
        .filter(|f| f.0 != "bootstrap")
        .map(|f| f.1)
        .collect();
    assert_eq!(
        rows,
        vec![1, 0],
        "a batch of one change, then the quiet one"
    );

    // An answer for a window the stream has left is not used: the step
    // asks the source, and the batch holds the change made meanwhile.
    let changed = db.commit(&[2]);
    let asked = db.state().questions;
    run.quiet = Some(answer);
    let stepped = step(&mut run, &mut source, &mut sink).await;
    assert!(matches!(stepped, Ok(Step::Idle)), "{stepped:?}");
    assert!(
        db.state().questions > asked,
        "the stale answer was not used"
    );
    assert_eq!(planned_end(&lake).await, Some(lsn(changed)));
    lake.assert_exactly_once(&db, 3, "after a stale answer")
        .await;

    // Nor is an answer for a change table the session does not read (the
    // instance was disabled and enabled again under its name).
    let window = run.caught_up.take().expect("caught up");
    let max = db.commit(&[]);
    let mut other_table = quiet_window(&window, max, &db);
    other_table.change_table_id += 1;
    let asked = db.state().questions;
    run.quiet = Some(other_table);
    step(&mut run, &mut source, &mut sink)
        .await
        .expect("a step");
    assert!(
        db.state().questions > asked,
        "the other table's answer was not used"
    );
    lake.assert_exactly_once(&db, 3, "after another table's answer")
        .await;
}

#[tokio::test]
async fn a_quiet_batch_replays_every_crash_to_each_change_once() {
    for point in ["after_offsets", "after_bronze_commit", "after_facts"] {
        let lake = Lake::new(1, 4, false);
        let db = FakeDb::with_rows(3);
        lake.run_to_end(&db).await;
        let options = RunOptions::new(Arc::new(Silent));
        let (mut run, mut source, mut sink, window) = caught_up(&lake, &db, &options).await;
        let max = db.commit(&[]);
        run.quiet = Some(quiet_window(&window, max, &db));
        failpoint::hits();
        failpoint::arm(Some(point));
        let crashed = AssertUnwindSafe(step(&mut run, &mut source, &mut sink))
            .catch_unwind()
            .await;
        failpoint::arm(None);
        assert!(
            crashed.is_err(),
            "{point}: the quiet batch did not crash there"
        );
        assert!(
            failpoint::hits().contains_key(point),
            "{point} was not passed"
        );
        drop((run, source, sink));
        // The next process replays the planned batch from the source; a
        // change made meanwhile comes in a batch after it.
        db.commit(&[7]);
        lake.run_to_end(&db).await;
        lake.assert_exactly_once(&db, 3, point).await;
        assert_eq!(planned_end(&lake).await, Some(lsn(max + 1)), "{point}");
    }
}
