//! Three tables of one CdcSource in one process under a random workload,
//! sharing a facts and a finalization table, one of them keeping silver,
//! the process killed (SIGKILL) at random crash points of whichever table
//! reaches one first (inside the group commits of the shared tables,
//! between a facts commit and the finalization MERGE, in silver's commit),
//! and once at a random moment while it runs on: after the last restart
//! each bronze holds its change table exactly (no change lost, none
//! twice), each snapshot row once, each table one facts row per batch that
//! counts its changes, silver the source table's rows, and no verdict past
//! a change bronze lacks. The crash points exist only in builds with the
//! `failpoints` feature (`scripts/test` turns it on).

#![cfg(feature = "failpoints")]

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::engine_source::{run_on, seeded_capture, source_doc, stream_doc};
use crate::support::cdc::{max_lsn, table_changes, wait_for_capture};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::{PASSWORD_ENV, StreamFixture, query_table};

const TABLES: [&str; 3] = ["orders", "items", "notes"];
const SEED_ROWS: i32 = 8;

/// Per-table settings that make several batches and snapshot chunks.
const DEFAULTS: &str = "    maxCommitsPerBatch: 2\n    snapshot: {mode: initial, chunkRows: 3}\n";

/// Random inserts, updates and deletes over the three tables, some
/// transactions touching two tables at once (one commit LSN in both).
struct Workload {
    rng: fastrand::Rng,
    live: [BTreeSet<i32>; 3],
    next_id: i32,
}

impl Workload {
    fn new(seed: u64) -> Self {
        let seeded: BTreeSet<i32> = (1..=SEED_ROWS).collect();
        Workload {
            rng: fastrand::Rng::with_seed(seed),
            live: [seeded.clone(), seeded.clone(), seeded],
            next_id: SEED_ROWS + 1,
        }
    }

    /// One change of table `t` and the change rows it makes (an update two).
    fn change(&mut self, t: usize) -> (String, i32) {
        let table = TABLES[t];
        let live: Vec<i32> = self.live[t].iter().copied().collect();
        let kind = if live.is_empty() {
            0
        } else {
            self.rng.u8(0..3)
        };
        match kind {
            0 => {
                let id = self.next_id;
                self.next_id += 1;
                self.live[t].insert(id);
                (
                    format!("INSERT INTO dbo.{table} VALUES ({id}, N'new {id}');"),
                    1,
                )
            }
            1 => {
                let id = live[self.rng.usize(..live.len())];
                let note = self.rng.u16(..);
                (
                    format!("UPDATE dbo.{table} SET note = N'n{note}' WHERE id = {id};"),
                    2,
                )
            }
            _ => {
                let id = live[self.rng.usize(..live.len())];
                self.live[t].remove(&id);
                (format!("DELETE FROM dbo.{table} WHERE id = {id};"), 1)
            }
        }
    }

    /// `n` transactions (every table changed at least once), and the change
    /// rows each table gets from them.
    fn round(&mut self, n: usize) -> (Vec<String>, [i32; 3]) {
        let mut rows = [0; 3];
        let mut transactions = Vec::new();
        for i in 0..n {
            let first = if i < 3 { i } else { self.rng.usize(..3) };
            let mut sql = String::new();
            let mut touched = vec![first];
            if self.rng.u8(..3) == 0 {
                touched.push((first + 1 + self.rng.usize(..2)) % 3);
            }
            for t in touched {
                let (statement, made) = self.change(t);
                sql.push_str(&statement);
                rows[t] += made;
            }
            transactions.push(format!("BEGIN TRANSACTION; {sql} COMMIT;"));
        }
        (transactions, rows)
    }
}

/// Applies a round and waits until capture has every change row of it.
async fn apply(client: &mut Client, workload: &mut Workload, n: usize) {
    let before = max_lsn(client).await;
    let (transactions, rows) = workload.round(n);
    for sql in &transactions {
        run(client, sql).await.expect("a workload transaction");
    }
    for (t, count) in rows.iter().enumerate() {
        wait_for_capture(
            client,
            &format!("dbo_{}", TABLES[t]),
            before.as_deref(),
            *count,
        )
        .await;
    }
}

/// `run --once -f file`, with the crash point `point` armed when given.
async fn run_source_once(file: &Path, password: &str, point: Option<&str>) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"));
    command
        .args(["run", "--once", "--lease-ttl", "2s", "-f"])
        .arg(file)
        .env(PASSWORD_ENV, password)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    if let Some(point) = point {
        command.env(mssql_cdc::failpoint::ENV, point);
    }
    tokio::time::timeout(Duration::from_secs(180), command.output())
        .await
        .expect("the run ends within 3 minutes")
        .expect("the binary runs")
}

/// An armed run: it must die at `point` (SIGKILL).
async fn killed_at(file: &Path, password: &str, point: &str) {
    let output = run_source_once(file, password, Some(point)).await;
    assert_eq!(
        output.status.signal(),
        Some(9),
        "the source's run should die at {point}: {:?}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An unarmed run: it must complete.
async fn run_to_the_end(file: &Path, password: &str, seed: u64) {
    let output = run_source_once(file, password, None).await;
    assert!(
        output.status.success(),
        "seed {seed}: the unarmed run completes: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Each bronze against its change table, its snapshot rows, and its facts;
/// silver against the source table; each verdict against bronze.
async fn check_exact(client: &mut Client, lake: &Path, seed: u64) {
    let mut source: Vec<Vec<String>> = run(client, "SELECT id, note FROM dbo.orders")
        .await
        .expect("the source rows")
        .into_iter()
        .flatten()
        .map(|row| {
            let id: Option<i32> = row.get(0);
            let note: Option<&str> = row.get(1);
            vec![
                id.map_or_else(|| "NULL".into(), |id| id.to_string()),
                note.map_or_else(|| "NULL".into(), str::to_string),
            ]
        })
        .collect();
    source.sort();
    let mut silver = query_table(
        &lake.join("silver/orders"),
        "SELECT CAST(id AS STRING), note FROM t",
    )
    .await;
    silver.sort();
    assert_eq!(
        silver, source,
        "seed {seed}: silver.orders holds dbo.orders"
    );
    for table in TABLES {
        // Every change committed before the verdict's instant is in bronze:
        // the verdict lies at or before the newest commit bronze holds, or
        // bronze holds every change the change table has.
        let verdict = query_table(
            &lake.join("finalization"),
            &format!(
                "SELECT CAST(finalized_until AS STRING) FROM t \
                 WHERE table_name = 'bronze.{table}' AND finalized_until IS NOT NULL"
            ),
        )
        .await;
        let newest = query_table(
            &lake.join(format!("bronze/{table}")),
            "SELECT CAST(max(_commit_ts) AS STRING) FROM t",
        )
        .await;
        if let (Some(verdict), Some(newest)) = (verdict.first(), newest.first()) {
            assert!(
                verdict[0] <= newest[0],
                "seed {seed}: {table}'s verdict {} passes its newest change in bronze {}",
                verdict[0],
                newest[0]
            );
        }
    }
    for table in TABLES {
        let bronze = lake.join(format!("bronze/{table}"));
        let mut changes: Vec<[String; 4]> = query_table(
            &bronze,
            "SELECT _lsn, _seqval, _operation, CAST(id AS STRING) FROM t \
             WHERE _operation <> 'snapshot'",
        )
        .await
        .into_iter()
        .map(|r| [r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone()])
        .collect();
        changes.sort();
        let source = table_changes(client, &format!("dbo_{table}")).await;
        assert_eq!(
            changes, source,
            "seed {seed}: bronze.{table} holds its change table exactly"
        );
        let snapshot = query_table(
            &bronze,
            "SELECT COUNT(*), COUNT(DISTINCT id) FROM t WHERE _operation = 'snapshot'",
        )
        .await;
        assert_eq!(
            snapshot[0],
            [SEED_ROWS.to_string(), SEED_ROWS.to_string()],
            "seed {seed}: every seed row of {table} once"
        );
        let facts = query_table(
            &lake.join("facts"),
            &format!(
                "SELECT COUNT(*), COUNT(DISTINCT batch_id), COALESCE(SUM(rows), 0) FROM t \
                 WHERE event IS NULL AND target = 'bronze.{table}'"
            ),
        )
        .await;
        assert_eq!(
            facts[0][0], facts[0][1],
            "seed {seed}: one facts row per batch of {table}"
        );
        assert_eq!(
            facts[0][2],
            source.len().to_string(),
            "seed {seed}: {table}'s facts rows count its changes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tables_of_one_worker_are_exact_after_kills_at_random_points() {
    let seed = std::env::var("MSSQL_CDC_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("source crash seed: {seed} (MSSQL_CDC_TEST_SEED={seed} replays it)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut workload = Workload::new(seed);

    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for table in TABLES {
        seeded_capture(&mut client, table, SEED_ROWS).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let write = |name: &str, trigger: &str| {
        let mut file = source_doc(&server, &db, lake, trigger, "2s");
        file.push_str(DEFAULTS);
        file.push_str(&format!(
            "    finalization: {{name: ops.finalization, location: \"{}\"}}\n",
            lake.join("finalization").display()
        ));
        for table in TABLES {
            file.push_str(&stream_doc(table, &format!("dbo.{table}"), lake));
            if table == "orders" {
                file.push_str(&format!(
                    "  silver: {{name: silver.orders, location: \"{}\"}}\n",
                    lake.join("silver/orders").display()
                ));
            }
        }
        let path = lake.join(name);
        std::fs::write(&path, file).expect("write the source file");
        path
    };
    let once = write("once.yaml", "{availableNow: true}");
    let on = write("on.yaml", "{processingTime: 1s}");

    // The bootstrap dies in a snapshot chunk or after a snapshot's row.
    let snapshot_points = ["mid_snapshot", "after_snapshot_facts"];
    let point = snapshot_points[rng.usize(..snapshot_points.len())];
    killed_at(&once, &fixture.password, point).await;
    // Each table's snapshot completes before any change, so each holds the
    // seed rows exactly and every change of its change table after them.
    run_to_the_end(&once, &fixture.password, seed).await;

    // Rounds of changes, each run dying at a batch's crash point.
    let mut points = vec![
        "mid_read",
        "after_offsets",
        "before_bronze_commit",
        "after_bronze_commit",
        "in_group_facts_commit",
        "after_facts",
        "in_group_finalization_commit",
        "before_silver_commit",
        "after_silver_commit",
    ];
    rng.shuffle(&mut points);
    for point in points {
        apply(&mut client, &mut workload, 9).await;
        killed_at(&once, &fixture.password, point).await;
    }

    // Running on, killed at a random moment while changes arrive.
    let mut worker = run_on(&on, &fixture.password);
    apply(&mut client, &mut workload, 9).await;
    tokio::time::sleep(Duration::from_millis(rng.u64(..1500))).await;
    worker.start_kill().expect("SIGKILL the worker");
    let status = worker.wait().await.expect("the worker ends");
    assert_eq!(status.signal(), Some(9), "killed, not exited: {status}");

    // The last run catches every table up.
    run_to_the_end(&once, &fixture.password, seed).await;
    check_exact(&mut client, lake, seed).await;
}
