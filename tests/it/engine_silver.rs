//! Silver tables against the sandbox (or `MSSQL_CDC_TEST_URL`): after any
//! crash, any resnapshot and any snapshot, silver is the source table row
//! for row, its verdict is held while a snapshot is open, and DuckDB reads
//! it with the source's types.

#[cfg(feature = "failpoints")]
use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use mssql_cdc::engine::Observer;
#[cfg(feature = "failpoints")]
use mssql_cdc::engine::SilverFill;
use mssql_cdc::engine::SnapshotProgress;
use serde_json::Value;

#[cfg(feature = "failpoints")]
use crate::engine_crash::run_until_killed;
#[cfg(feature = "failpoints")]
use crate::support::cdc::wait_for_capture;
use crate::support::cdc::{capture_table, lsn_literal};
use crate::support::duckdb::read_delta;
#[cfg(feature = "failpoints")]
use crate::support::long_run_batches;
use crate::support::server::{Client, TestServer, run};
#[cfg(feature = "failpoints")]
use crate::support::stream::open_table;
use crate::support::stream::{StreamFixture, query_table};

const ORDERS: &str = "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, \
                      note nvarchar(50) NULL, qty int NULL, price decimal(10,2) NULL)";

/// The columns compared between the source and silver.
const COLUMNS: &str = "id, note, qty, price";

/// The crash points a silver stream passes, the silver commit's among them.
#[cfg(feature = "failpoints")]
const CRASH_POINTS: [&str; 8] = [
    "mid_read",
    "after_offsets",
    "before_bronze_commit",
    "after_bronze_commit",
    "before_silver_commit",
    "after_silver_commit",
    "after_facts",
    "mid_snapshot",
];

/// A stream of `dbo.orders` with a silver table and a finalization control
/// table; `extra` goes into the spec.
fn silver_stream(server: &TestServer, db: &str, extra: &str) -> StreamFixture {
    let mut stream = StreamFixture::new(server, db, extra);
    let silver = stream.path("silver").display().to_string();
    let control = stream.path("control").display().to_string();
    stream.manifest.push_str(&format!(
        "  silver: {{name: silver.orders, location: \"{silver}\"}}\n  \
         finalization: {{name: ops.table_finalization, location: \"{control}\"}}\n"
    ));
    stream
}

/// A scratch database with `table` (a CREATE TABLE of `dbo.orders`) filled
/// by `seed`, CDC on, and a silver stream of it with `extra` in its spec.
async fn orders_with_silver(
    server: &TestServer,
    table: &str,
    seed: &[String],
    extra: &str,
) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, table).await.expect("create table");
    for sql in seed {
        run(&mut client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    capture_table(&mut client, "orders").await;
    (client, silver_stream(server, &db, extra))
}

/// Two rows of `dbo.orders`.
fn two_rows() -> Vec<String> {
    vec![
        "INSERT INTO dbo.orders VALUES (1, N'a', 1, 1.00)".to_string(),
        "INSERT INTO dbo.orders VALUES (2, N'b', 2, 2.00)".to_string(),
    ]
}

/// Runs `sql` and waits until capture has `rows` more change rows of
/// `dbo_orders`; their commit LSN.
async fn change(client: &mut Client, sql: &str, rows: i32) -> Vec<u8> {
    crate::engine_source_changes::change(client, "dbo_orders", sql, rows).await
}

/// The source table, one string per row, ordered by key (NULL as empty).
async fn source_rows(client: &mut Client) -> Vec<String> {
    let rows = run(
        client,
        &format!("SELECT {COLUMNS} FROM dbo.orders ORDER BY id"),
    )
    .await
    .expect("read the source table");
    rows.into_iter()
        .flatten()
        .map(|row| {
            let id: i32 = row.get(0).expect("id");
            let note: Option<&str> = row.get(1);
            let qty: Option<i32> = row.get(2);
            let price: Option<tiberius::numeric::Numeric> = row.get(3);
            format!(
                "{id}|{}|{}|{}",
                note.unwrap_or_default(),
                qty.map(|q| q.to_string()).unwrap_or_default(),
                price.map(|p| p.to_string()).unwrap_or_default()
            )
        })
        .collect()
}

/// Silver, as [`source_rows`] spells the source.
async fn silver_rows(stream: &StreamFixture) -> Vec<String> {
    query_table(
        &stream.path("silver"),
        &format!("SELECT {COLUMNS} FROM t ORDER BY id"),
    )
    .await
    .into_iter()
    .map(|row| row.join("|"))
    .collect()
}

/// The control table's row of `table`: applied LSN, open snapshot LSN,
/// whether the verdict is set.
async fn verdict(stream: &StreamFixture, table: &str) -> Vec<String> {
    let rows = query_table(
        &stream.path("control"),
        &format!(
            "SELECT applied_lsn, open_snapshot_lsn, finalized_until IS NOT NULL FROM t \
             WHERE table_name = '{table}'"
        ),
    )
    .await;
    assert_eq!(rows.len(), 1, "one control row of {table}: {rows:?}");
    rows.into_iter().next().unwrap_or_default()
}

/// A random mix of the changes silver must get right, as transactions.
#[cfg(feature = "failpoints")]
struct Workload {
    rng: fastrand::Rng,
    live: BTreeSet<i32>,
    next_id: i32,
}

#[cfg(feature = "failpoints")]
impl Workload {
    fn new(seed: u64, live: impl IntoIterator<Item = i32>) -> Self {
        let live: BTreeSet<i32> = live.into_iter().collect();
        let next_id = live.last().map_or(1, |id| id + 1);
        Workload {
            rng: fastrand::Rng::with_seed(seed),
            live,
            next_id,
        }
    }

    fn values(&mut self, id: i32) -> String {
        let note = match self.rng.u8(0..4) {
            0 => "NULL".to_string(),
            n => format!("N'note {n}-{}'", self.rng.u16(..)),
        };
        let price = if self.rng.bool() {
            format!("{}.{:02}", self.rng.u16(..10_000), self.rng.u8(..100))
        } else {
            "NULL".to_string()
        };
        format!("({id}, {note}, {}, {price})", self.rng.i32(-50..1000))
    }

    fn fresh_id(&mut self) -> i32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn any_live(&mut self) -> Option<i32> {
        let n = self.live.len();
        (n > 0).then(|| self.live.iter().nth(self.rng.usize(..n)).copied())?
    }

    /// One transaction (a T-SQL batch); every kind the test needs comes up.
    fn transaction(&mut self, kind: u8) -> String {
        let Some(id) = self.any_live() else {
            let id = self.fresh_id();
            self.live.insert(id);
            return format!("INSERT INTO dbo.orders VALUES {}", self.values(id));
        };
        match kind {
            // An insert.
            0 | 1 => {
                let id = self.fresh_id();
                self.live.insert(id);
                format!("INSERT INTO dbo.orders VALUES {}", self.values(id))
            }
            // An update.
            2 | 3 => format!(
                "UPDATE dbo.orders SET qty = {}, note = N'u{}' WHERE id = {id}",
                self.rng.i32(..1000),
                self.rng.u16(..)
            ),
            // A delete.
            4 => {
                self.live.remove(&id);
                format!("DELETE FROM dbo.orders WHERE id = {id}")
            }
            // A key touched many times in one transaction.
            5 => format!(
                "BEGIN TRANSACTION; \
                 UPDATE dbo.orders SET qty = 1 WHERE id = {id}; \
                 UPDATE dbo.orders SET qty = qty + 1, note = NULL WHERE id = {id}; \
                 UPDATE dbo.orders SET price = 1.25 WHERE id = {id}; \
                 COMMIT"
            ),
            // Deleted and inserted again in one transaction.
            6 => format!(
                "BEGIN TRANSACTION; DELETE FROM dbo.orders WHERE id = {id}; \
                 INSERT INTO dbo.orders VALUES {}; COMMIT",
                self.values(id)
            ),
            // A primary-key update (captured as a delete and an insert).
            7 => {
                let to = self.fresh_id();
                self.live.remove(&id);
                self.live.insert(to);
                format!("UPDATE dbo.orders SET id = {to} WHERE id = {id}")
            }
            // A key that comes and goes in one transaction.
            _ => {
                let id = self.fresh_id();
                format!(
                    "BEGIN TRANSACTION; INSERT INTO dbo.orders VALUES {}; \
                     DELETE FROM dbo.orders WHERE id = {id}; COMMIT",
                    self.values(id)
                )
            }
        }
    }

    /// `n` transactions: every kind once, the rest at random; and an insert
    /// more should they leave the table empty (a snapshot of an empty table
    /// commits nothing, so its crash points would never be reached).
    fn round(&mut self, n: usize) -> Vec<String> {
        let mut round: Vec<String> = (0..n)
            .map(|i| {
                let kind = if i < 9 { i as u8 } else { self.rng.u8(..9) };
                self.transaction(kind)
            })
            .collect();
        if self.live.is_empty() {
            round.push(self.transaction(0));
        }
        round
    }
}

/// Runs `transactions`, then a marker insert into the captured
/// `dbo.marker`, and waits until capture has passed it (it captures in
/// commit order, so every transaction before is in).
#[cfg(feature = "failpoints")]
async fn apply_and_capture(client: &mut Client, transactions: &[String], round: i32) {
    for sql in transactions {
        run(client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    run(client, &format!("INSERT INTO dbo.marker VALUES ({round})"))
        .await
        .expect("marker");
    wait_for_capture(client, "dbo_marker", None, round + 1).await;
}

/// The seed the workload runs with: `MSSQL_CDC_TEST_SEED` to replay one.
#[cfg(feature = "failpoints")]
fn workload_seed() -> u64 {
    let seed = std::env::var("MSSQL_CDC_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("silver workload seed: {seed} (MSSQL_CDC_TEST_SEED={seed} replays it)");
    seed
}

#[cfg(feature = "failpoints")]
#[tokio::test]
async fn silver_is_the_source_row_for_row_after_kills_at_random_points() {
    silver_row_for_row_through_kills(1).await;
}

#[cfg(feature = "failpoints")]
#[tokio::test]
async fn silver_read_by_four_sessions_is_the_source_row_for_row_after_kills() {
    silver_row_for_row_through_kills(4).await;
}

/// A silver stream reading with `readers` sessions, killed in its bootstrap
/// and then in batches at random points, restarted each time: silver is
/// the source row for row after each restart. With several readers the
/// snapshot's chunks of different key ranges commit in the order their
/// reads end, and a batch's parts are staged apart.
#[cfg(feature = "failpoints")]
async fn silver_row_for_row_through_kills(readers: u32) {
    let server = TestServer::start().await;
    let seed = workload_seed();
    let mut workload = Workload::new(seed, []);
    let (mut client, stream) = orders_with_silver(
        &server,
        ORDERS,
        &workload.round(40),
        "  maxCommitsPerBatch: 5\n  snapshot: {mode: initial, chunkRows: 7}\n",
    )
    .await;
    let stream = if readers == 1 {
        stream
    } else {
        crate::engine_parallel::with_readers(stream, readers)
    };
    run(
        &mut client,
        "CREATE TABLE dbo.marker (id int NOT NULL PRIMARY KEY)",
    )
    .await
    .expect("marker table");
    capture_table(&mut client, "marker").await;

    // The bootstrap is killed in its snapshot, at a chunk's silver commit.
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut snapshot_points = vec![
        "mid_snapshot",
        "before_silver_commit",
        "after_silver_commit",
    ];
    if readers > 1 {
        snapshot_points.extend(["after_part_staged", "after_snapshot_range_done"]);
    }
    let snapshot_point = snapshot_points[rng.usize(..snapshot_points.len())];
    run_until_killed(&stream, snapshot_point).await;
    stream.run_once().await.expect("the bootstrap resumes");
    assert_eq!(
        silver_rows(&stream).await,
        source_rows(&mut client).await,
        "seed {seed}: after the bootstrap killed at {snapshot_point}"
    );

    let mut points: Vec<&str> = CRASH_POINTS[..7].to_vec();
    if readers > 1 {
        points.push("after_part_staged");
    }
    rng.shuffle(&mut points);
    for (round, point) in points.into_iter().enumerate() {
        let transactions = workload.round(14);
        apply_and_capture(&mut client, &transactions, round as i32).await;
        run_until_killed(&stream, point).await;
        stream.run_once().await.expect("the restarted run");
        assert_eq!(
            silver_rows(&stream).await,
            source_rows(&mut client).await,
            "seed {seed}: round {round}, killed at {point}"
        );
    }

    // Silver's verdict names the newest batch applied.
    let newest = stream
        .facts_query("SELECT end_lsn FROM t WHERE event IS NULL ORDER BY batch_id DESC LIMIT 1")
        .await;
    let silver = verdict(&stream, "silver.orders").await;
    assert_eq!(
        silver[0], newest[0][0],
        "applied_lsn is the newest batch's end"
    );
    assert_eq!(silver[1..], ["", "true"], "nothing holds it, it is set");
    let bronze = verdict(&stream, "bronze.orders").await;
    assert_eq!(bronze[0], "", "bronze's row has no applied_lsn");
}

#[tokio::test]
async fn a_resnapshot_rebuilds_silver_and_drops_the_keys_it_did_not_see() {
    let server = TestServer::start().await;
    let seed: Vec<String> = (1..=6)
        .map(|id| format!("INSERT INTO dbo.orders VALUES ({id}, N'seed', {id}, 1.00)"))
        .collect();
    let (mut client, stream) = orders_with_silver(
        &server,
        ORDERS,
        &seed,
        "  onDataLoss: resnapshot\n  snapshot: {mode: initial, chunkRows: 2}\n",
    )
    .await;
    stream.run_once().await.expect("bootstrap");
    assert_eq!(silver_rows(&stream).await, source_rows(&mut client).await);

    // While the stream is stopped: deletes, an insert, an update, and a
    // cleanup that purges all of them.
    change(&mut client, "DELETE FROM dbo.orders WHERE id IN (1, 4)", 2).await;
    change(
        &mut client,
        "INSERT INTO dbo.orders VALUES (7, N'new', 7, 7.00)",
        1,
    )
    .await;
    let newest = change(
        &mut client,
        "UPDATE dbo.orders SET qty = 20 WHERE id = 2",
        2,
    )
    .await;
    run(
        &mut client,
        &format!(
            "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', \
             @low_water_mark = {}, @threshold = 5000",
            lsn_literal(&newest)
        ),
    )
    .await
    .expect("cleanup");

    stream.run_once().await.expect("resnapshot");
    let events = stream
        .facts_query("SELECT COUNT(*) FROM t WHERE event = 'resnapshot'")
        .await;
    assert_eq!(events, [["1"]], "the stream took a new snapshot");
    assert_eq!(
        silver_rows(&stream).await,
        source_rows(&mut client).await,
        "keys 1 and 4, deleted while the changes were lost, are gone"
    );

    // And it streams on from the new snapshot.
    change(&mut client, "DELETE FROM dbo.orders WHERE id = 7", 1).await;
    stream.run_once().await.expect("streams on");
    assert_eq!(silver_rows(&stream).await, source_rows(&mut client).await);
}

#[tokio::test]
async fn soft_deletes_keep_deleted_keys_marked() {
    let server = TestServer::start().await;
    let (mut client, mut stream) = orders_with_silver(&server, ORDERS, &two_rows(), "").await;
    stream.manifest = stream.manifest.replace(
        "silver: {name: silver.orders,",
        "silver: {deletes: soft, name: silver.orders,",
    );
    stream.run_once().await.expect("bootstrap");
    let deleted_at = change(&mut client, "DELETE FROM dbo.orders WHERE id = 1", 1).await;
    stream.run_once().await.expect("the delete");
    let rows = query_table(
        &stream.path("silver"),
        "SELECT id, _deleted, _lsn, _commit_ts IS NOT NULL FROM t ORDER BY id",
    )
    .await;
    assert_eq!(
        rows,
        [
            vec!["1", "true", &lsn_literal(&deleted_at), "true"],
            vec!["2", "false", rows[1][2].as_str(), "true"]
        ]
    );
}

/// An observer that stops the engine at the `pause_at`-th snapshot chunk
/// until the test has looked at the lake.
struct PauseInSnapshot {
    pause_at: u64,
    seen: Mutex<u64>,
    reached: Mutex<Option<mpsc::Sender<SnapshotProgress>>>,
    resume: Mutex<Option<mpsc::Receiver<()>>>,
}

impl Observer for PauseInSnapshot {
    fn snapshot_progress(&self, progress: &SnapshotProgress) {
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        *seen += 1;
        if *seen != self.pause_at {
            return;
        }
        if let Some(reached) = self.reached.lock().ok().and_then(|mut r| r.take()) {
            let _ = reached.send(progress.clone());
        }
        if let Some(resume) = self.resume.lock().ok().and_then(|mut r| r.take()) {
            let _ = resume.recv();
        }
    }
}

/// The stale reason of each control-table row, as `mssql-cdc health`
/// gives it (the monitoring guide's rules).
async fn stale_reasons(stream: &StreamFixture) -> Value {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["health", "--json", "--facts"])
        .arg(stream.path("facts"))
        .arg("--control")
        .arg(stream.path("control"))
        .output()
        .await
        .expect("health runs");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "health's output is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    report["finalization"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| (r["table_name"].clone(), r["stale_reason"].clone()))
                .map(|(t, r)| Value::Array(vec![t, r]))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_chunked_bootstrap_holds_silver_until_its_end() {
    const ROWS: u64 = 100_000;
    let server = TestServer::start().await;
    // Doubled into place: a few statements for 100 k rows.
    let mut seed = vec!["INSERT INTO dbo.orders VALUES (1, N'row', 1, 0.50)".to_string()];
    let mut have = 1u64;
    while have < ROWS {
        let add = have.min(ROWS - have);
        seed.push(format!(
            "INSERT INTO dbo.orders SELECT TOP ({add}) id + {have}, note, qty + {have}, price \
             FROM dbo.orders ORDER BY id"
        ));
        have += add;
    }
    let (_client, stream) = orders_with_silver(
        &server,
        ORDERS,
        &seed,
        "  snapshot: {mode: initial, chunkRows: 5000}\n",
    )
    .await;

    let (reached_tx, reached) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel();
    let observer = Arc::new(PauseInSnapshot {
        pause_at: 3,
        seen: Mutex::new(0),
        reached: Mutex::new(Some(reached_tx)),
        resume: Mutex::new(Some(resume_rx)),
    });
    let config = stream.config();
    let mut options = stream.options();
    options.observer = observer;
    // The engine on its own thread, so the observer may block it.
    let engine = std::thread::spawn(move || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(mssql_cdc::engine::run(config, options))
            .map_err(|e| e.to_string())
    });
    let progress = tokio::task::spawn_blocking(move || {
        reached.recv_timeout(std::time::Duration::from_secs(600))
    })
    .await
    .expect("waiting")
    .expect("the snapshot reaches its third chunk");
    assert!(progress.rows < ROWS, "{progress:?}");

    // Mid-snapshot: silver's verdict is held by the open snapshot.
    let silver = verdict(&stream, "silver.orders").await;
    assert_eq!(silver[0], "", "nothing applied yet: {silver:?}");
    assert!(silver[1].starts_with("0x"), "open_snapshot_lsn: {silver:?}");
    assert_eq!(silver[2], "false");
    let reasons = stale_reasons(&stream).await;
    assert!(
        reasons
            .as_array()
            .is_some_and(|r| r.contains(&serde_json::json!(["silver.orders", "held"]))),
        "{reasons}"
    );
    let tables = [
        format!("ops.ingestion_facts={}", stream.path("facts").display()),
        format!(
            "ops.table_finalization={}",
            stream.path("control").display()
        ),
    ];
    // The guide's own stale query, when the guide is there to read.
    let guide = crate::monitoring::guide_stale_query();
    if let Some(query) = &guide {
        let rows = crate::monitoring::run_sql(&tables, query).await;
        let silver = rows.iter().find(|r| r["table_name"] == "silver.orders");
        assert_eq!(
            silver.map(|r| r["reason"].clone()),
            Some(Value::from("held")),
            "{rows:?}"
        );
    }
    let partial = query_table(&stream.path("silver"), "SELECT COUNT(*) FROM t").await;
    assert_eq!(
        partial[0][0],
        progress.rows.to_string(),
        "silver has the chunks so far"
    );

    resume.send(()).expect("the engine waits");
    let summary = tokio::task::spawn_blocking(move || engine.join())
        .await
        .expect("join")
        .expect("the engine thread")
        .expect("the bootstrap completes");
    assert_eq!(summary.snapshot_rows, ROWS, "{summary:?}");

    let silver = verdict(&stream, "silver.orders").await;
    assert!(silver[0].starts_with("0x"), "applied_lsn set: {silver:?}");
    assert_eq!(silver[1..], ["", "true"], "released and set: {silver:?}");
    let reasons = stale_reasons(&stream).await;
    assert!(
        reasons
            .as_array()
            .is_some_and(|r| r.contains(&serde_json::json!(["silver.orders", null]))),
        "silver is not stale: {reasons}"
    );
    let counts = query_table(
        &stream.path("silver"),
        "SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM t",
    )
    .await;
    assert_eq!(counts, [["100000", "100000", "1", "100000"]]);

    if let Some(query) = &guide {
        let rows = crate::monitoring::run_sql(&tables, query).await;
        assert!(
            rows.iter().all(|r| r["table_name"] != "silver.orders"),
            "{rows:?}"
        );
    }
}

#[tokio::test]
async fn duckdb_reads_silver_with_the_source_types() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders_with_silver(
        &server,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, \
         total decimal(12,2) NULL, placed datetime2 NULL, big bigint NULL, flag bit NULL, \
         day date NULL)",
        &[
            "INSERT INTO dbo.orders VALUES (1, N'caf\u{e9}', 10.50, '2026-11-30T10:00:00', \
           9000000000, 1, '2026-11-30')"
                .to_string(),
        ],
        "",
    )
    .await;
    stream.run_once().await.expect("bootstrap");
    change(
        &mut client,
        "UPDATE dbo.orders SET total = 30.00 WHERE id = 1; \
         INSERT INTO dbo.orders VALUES (2, NULL, 99.99, NULL, NULL, 0, NULL)",
        3,
    )
    .await;
    stream.run_once().await.expect("changes");

    let Some(silver) = read_delta(
        &stream.path("silver"),
        Some("SELECT id, note, CAST(total AS VARCHAR), big, flag FROM t ORDER BY id"),
    )
    .await
    else {
        return;
    };
    let Some(bronze) = read_delta(&stream.path("bronze"), None).await else {
        return;
    };
    for column in [
        "id",
        "note",
        "total",
        "placed",
        "big",
        "flag",
        "day",
        "_lsn",
        "_commit_ts",
    ] {
        assert_eq!(
            silver.column_type(column),
            bronze.column_type(column),
            "{column}: silver has bronze's (the source's) type"
        );
    }
    assert_eq!(silver.column_type("total"), "DECIMAL(12,2)");
    assert_eq!(silver.column_type("placed"), "TIMESTAMP");
    assert_eq!(
        silver.column_names(),
        [
            "id",
            "note",
            "total",
            "placed",
            "big",
            "flag",
            "day",
            "_lsn",
            "_commit_ts"
        ]
    );
    let rows: Vec<String> = silver
        .query
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        rows,
        [
            "1 \"caf\u{e9}\" \"30.00\" 9000000000 true",
            "2 null \"99.99\" null false"
        ]
    );
}

#[tokio::test]
async fn maintain_clusters_silver_by_its_keys_and_keeps_its_rows() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders_with_silver(&server, ORDERS, &two_rows(), "").await;
    stream.run_once().await.expect("bootstrap");
    for sql in [
        "INSERT INTO dbo.orders VALUES (3, N'c', 3, 3.00)",
        "UPDATE dbo.orders SET qty = 10 WHERE id = 1",
        "DELETE FROM dbo.orders WHERE id = 2",
    ] {
        change(&mut client, sql, 1).await;
        stream.run_once().await.expect("a batch");
    }
    let rows = silver_rows(&stream).await;
    assert_eq!(rows, source_rows(&mut client).await);

    let maintain = |table: &str, flag: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
            .args(["maintain", "--keep-days", "30", "--retain-hours", "0"])
            .arg("--allow-short-retention")
            .arg("--facts")
            .arg(stream.path("facts"))
            .arg(flag)
            .arg(stream.path(table))
            .output()
            .expect("mssql-cdc runs")
    };
    let out = maintain("silver", "--silver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("z-ordered by id"), "{stdout}");
    let table = crate::support::stream::open_table(&stream.path("silver")).await;
    assert_eq!(table.get_file_uris().expect("files").count(), 1, "{stdout}");
    assert_eq!(
        silver_rows(&stream).await,
        rows,
        "compaction keeps the rows"
    );

    let refused = maintain("bronze", "--silver");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("is not a silver table"), "{stderr}");
}

#[tokio::test]
async fn silver_gains_a_newer_capture_instances_column() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders_with_silver(&server, ORDERS, &two_rows()[..1], "").await;
    stream.run_once().await.expect("bootstrap");
    run(&mut client, "ALTER TABLE dbo.orders ADD extra int NULL")
        .await
        .expect("alter table");
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
         @role_name = NULL, @capture_instance = N'dbo_orders_v2'",
    )
    .await
    .expect("second capture instance");
    crate::engine_source_changes::change(
        &mut client,
        "dbo_orders_v2",
        "INSERT INTO dbo.orders VALUES (2, N'b', 2, 2.00, 20); \
         UPDATE dbo.orders SET extra = 10, qty = 5 WHERE id = 1",
        3,
    )
    .await;
    stream.run_once().await.expect("the switch");
    assert_eq!(silver_rows(&stream).await, source_rows(&mut client).await);
    let extra = query_table(
        &stream.path("silver"),
        "SELECT id, extra FROM t ORDER BY id",
    )
    .await;
    assert_eq!(extra, [["1", "10"], ["2", "20"]]);
}

#[tokio::test]
async fn a_null_key_column_matches_its_row_so_updates_replace_it_and_deletes_land() {
    // Keyed by the primary key and a nullable column: rows whose `note` is
    // NULL must still be found by their key, across batches.
    let server = TestServer::start().await;
    let seed = [
        "INSERT INTO dbo.orders VALUES (1, NULL, 1, 1.00)",
        "INSERT INTO dbo.orders VALUES (2, NULL, 2, 2.00)",
        "INSERT INTO dbo.orders VALUES (3, N'c', 3, 3.00)",
    ]
    .map(String::from);
    let (mut client, mut stream) = orders_with_silver(&server, ORDERS, &seed, "").await;
    stream.manifest = stream.manifest.replace(
        "silver: {name: silver.orders,",
        "silver: {keys: [id, note], name: silver.orders,",
    );
    stream.run_once().await.expect("bootstrap");
    let batches: [&[(&str, i32)]; 2] = [
        &[
            ("UPDATE dbo.orders SET qty = 10 WHERE id = 1", 2),
            ("DELETE FROM dbo.orders WHERE id = 2", 1),
            // Moves row 3 from key (3, 'c') to (3, NULL).
            ("UPDATE dbo.orders SET note = NULL WHERE id = 3", 2),
        ],
        &[
            ("UPDATE dbo.orders SET qty = 30 WHERE id = 3", 2),
            ("DELETE FROM dbo.orders WHERE id = 1", 1),
        ],
    ];
    for batch in batches {
        for (sql, rows) in batch {
            change(&mut client, sql, *rows).await;
        }
        stream.run_once().await.expect("a batch of changes");
    }

    assert_eq!(silver_rows(&stream).await, source_rows(&mut client).await);
    assert_eq!(source_rows(&mut client).await, ["3||30|3.00"]);
    let Some(silver) = read_delta(
        &stream.path("silver"),
        Some("SELECT id, note, qty FROM t ORDER BY id"),
    )
    .await
    else {
        return;
    };
    assert_eq!(silver.rows, 1, "DuckDB sees one row: {:?}", silver.query);
    assert_eq!(
        silver.query,
        [vec![Value::from(3), Value::Null, Value::from(30)]]
    );
}

#[tokio::test]
async fn a_silver_key_that_is_not_unique_is_refused_before_anything_is_written() {
    let server = TestServer::start().await;
    let (_client, mut stream) = orders_with_silver(&server, ORDERS, &two_rows(), "").await;
    stream.manifest = stream.manifest.replace(
        "silver: {name: silver.orders,",
        "silver: {keys: [note, QTY], name: silver.orders,",
    );
    let error = stream.run_once().await.expect_err("refused");
    assert_eq!(error.kind(), "silver_key", "{error}");
    let said = error.to_string();
    for part in [
        "spec.silver.keys (note, QTY)",
        "dbo.orders",
        "(id) primary key",
    ] {
        assert!(said.contains(part), "{part:?} in {said}");
    }
    for table in ["silver", "bronze"] {
        assert!(!stream.path(table).exists(), "no {table} table: {said}");
    }

    // With the primary key among them, the same keys are accepted.
    stream.manifest = stream
        .manifest
        .replace("keys: [note, QTY]", "keys: [note, QTY, ID]");
    stream.run_once().await.expect("accepted");
    assert_eq!(silver_rows(&stream).await.len(), 2);
}

/// Blocks the engine where it starts filling a silver table added to a
/// running stream, until the test has looked.
#[cfg(feature = "failpoints")]
struct PauseInFill {
    reached: Mutex<Option<mpsc::Sender<SilverFill>>>,
    resume: Mutex<Option<mpsc::Receiver<()>>>,
}

#[cfg(feature = "failpoints")]
impl Observer for PauseInFill {
    fn silver_filling(&self, fill: &SilverFill) {
        if let Some(reached) = self.reached.lock().ok().and_then(|mut r| r.take()) {
            let _ = reached.send(fill.clone());
            if let Some(resume) = self.resume.lock().ok().and_then(|mut r| r.take()) {
                let _ = resume.recv_timeout(std::time::Duration::from_secs(600));
            }
        }
    }
}

/// Silver named in the manifest of a stream that already made a long
/// history of batches: it is filled from bronze before the next batch (killed once
/// mid-fill), its verdict is held while it fills, and afterwards it is
/// the source table row for row and streams on.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn silver_added_after_a_long_history_is_filled_and_held_until_it_is() {
    // Past bronze's first checkpoint (every 100 commits); the full length
    // (300 or more) with MSSQL_CDC_TEST_LONG_RUN, as the history tests.
    let batches = long_run_batches();
    let server = TestServer::start().await;
    let seed = workload_seed();
    let mut workload = Workload::new(seed, []);
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    for sql in workload.round(30) {
        run(&mut client, &sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    capture_table(&mut client, "orders").await;
    run(
        &mut client,
        "CREATE TABLE dbo.marker (id int NOT NULL PRIMARY KEY)",
    )
    .await
    .expect("marker table");
    capture_table(&mut client, "marker").await;

    // The stream runs without silver: a bootstrap, then a batch per commit.
    let mut stream = StreamFixture::new(
        &server,
        &db,
        "  maxCommitsPerBatch: 1\n  snapshot: {mode: initial}\n",
    );
    let control = stream.path("control").display().to_string();
    stream.manifest.push_str(&format!(
        "  finalization: {{name: ops.table_finalization, location: \"{control}\"}}\n"
    ));
    stream.run_once().await.expect("bootstrap");
    apply_and_capture(
        &mut client,
        &workload.round(batches.unsigned_abs() as usize),
        0,
    )
    .await;
    let ran = stream.run_once().await.expect("the batches");
    assert!(
        ran.batches >= u64::from(batches.unsigned_abs()),
        "seed {seed}: {ran:?}"
    );

    // Silver is added to the manifest; the first run dies mid-fill.
    let silver = stream.path("silver").display().to_string();
    stream.manifest.push_str(&format!(
        "  silver: {{name: silver.orders, location: \"{silver}\"}}\n"
    ));
    run_until_killed(&stream, "mid_silver_fill").await;
    let held = verdict(&stream, "silver.orders").await;
    assert_eq!(held[0], "", "seed {seed}: nothing applied: {held:?}");
    assert!(held[1].starts_with("0x"), "seed {seed}: held: {held:?}");

    // The next run fills it; the test looks while it does.
    let (reached_tx, reached) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel();
    let config = stream.config();
    let mut options = stream.options();
    options.observer = Arc::new(PauseInFill {
        reached: Mutex::new(Some(reached_tx)),
        resume: Mutex::new(Some(resume_rx)),
    });
    let engine = std::thread::spawn(move || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(mssql_cdc::engine::run(config, options))
            .map_err(|e| e.to_string())
    });
    let fill = tokio::task::spawn_blocking(move || {
        reached.recv_timeout(std::time::Duration::from_secs(600))
    })
    .await
    .expect("waiting")
    .expect("the run starts filling silver");
    let newest = stream
        .facts_query("SELECT end_lsn FROM t WHERE event IS NULL ORDER BY batch_id DESC LIMIT 1")
        .await;
    assert_eq!(
        fill.lsn.to_string(),
        newest[0][0],
        "it fills up to the newest batch"
    );
    let held = verdict(&stream, "silver.orders").await;
    assert_eq!(
        held,
        ["", newest[0][0].as_str(), "false"],
        "seed {seed}: silver is held at the fill's position"
    );
    let reasons = stale_reasons(&stream).await;
    assert!(
        reasons
            .as_array()
            .is_some_and(|r| r.contains(&serde_json::json!(["silver.orders", "held"]))),
        "{reasons}"
    );
    let empty = query_table(&stream.path("silver"), "SELECT COUNT(*) FROM t").await;
    assert_eq!(empty, [["0"]], "no batch reached silver before the fill");

    resume.send(()).expect("the engine waits");
    tokio::task::spawn_blocking(move || engine.join())
        .await
        .expect("join")
        .expect("the engine thread")
        .expect("the run fills silver");
    assert_eq!(
        silver_rows(&stream).await,
        source_rows(&mut client).await,
        "seed {seed}: silver is the source after the fill"
    );
    // The run went on after the fill (to the source's newest LSN).
    let newest = stream
        .facts_query("SELECT end_lsn FROM t WHERE event IS NULL ORDER BY batch_id DESC LIMIT 1")
        .await;
    let filled = verdict(&stream, "silver.orders").await;
    assert_eq!(
        filled,
        [newest[0][0].as_str(), "", "true"],
        "seed {seed}: released, applied to the newest batch"
    );

    // It streams on, and a restart does not fill it again.
    let version = open_table(&stream.path("silver")).await.version();
    stream.run_once().await.expect("an idle restart");
    assert_eq!(
        open_table(&stream.path("silver")).await.version(),
        version,
        "an idle restart writes nothing to silver"
    );
    apply_and_capture(&mut client, &workload.round(20), 1).await;
    stream.run_once().await.expect("streams on");
    assert_eq!(
        silver_rows(&stream).await,
        source_rows(&mut client).await,
        "seed {seed}: silver follows the changes after the fill"
    );
}

/// Bronze holds a batch whose commit cannot be read: a run killed after
/// bronze's commit, and that commit's log entry lost while the table
/// loads from a Delta checkpoint. The restart stops with an error naming
/// the batch, silver has not moved past it, and once the entry reads
/// again the stream goes on.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_bronze_commit_that_cannot_be_read_stops_the_stream_naming_its_batch() {
    use mssql_cdc::engine::EngineError;
    use mssql_cdc::lake::faults::{Call, Fault, FaultPlan, Rule, install, remove};

    let server = TestServer::start().await;
    let (mut client, stream) = orders_with_silver(&server, ORDERS, &two_rows(), "").await;
    stream.run_once().await.expect("bootstrap");
    change(
        &mut client,
        "INSERT INTO dbo.orders VALUES (3, N'c', 3, 3.00)",
        1,
    )
    .await;
    stream.run_once().await.expect("a batch");
    change(
        &mut client,
        "UPDATE dbo.orders SET qty = 30 WHERE id = 3",
        2,
    )
    .await;
    run_until_killed(&stream, "after_bronze_commit").await;
    let newest = stream
        .facts_query("SELECT MAX(batch_id) FROM t WHERE event IS NULL")
        .await;
    let pending: u64 = newest[0][0].parse::<u64>().expect("a batch id") + 1;
    let bronze = open_table(&stream.path("bronze")).await;
    let version = bronze.version().expect("bronze has versions");
    deltalake::checkpoints::create_checkpoint(&bronze, None)
        .await
        .expect("a Delta checkpoint of bronze");
    let silver_version = open_table(&stream.path("silver")).await.version();
    let silver_before = silver_rows(&stream).await;

    let plan = FaultPlan::new(&url::Url::from_directory_path(stream.lake.path()).expect("url"));
    plan.add(Rule {
        path: format!("bronze/_delta_log/{version:020}.json"),
        calls: vec![Call::Get],
        fault: Fault::Lost,
        odds: 1.0,
        limit: None,
        after: 0,
    });
    install(plan.clone());
    let stopped = stream.run_once().await;
    remove(&plan);
    let error = stopped.expect_err("the stream stops");
    assert!(
        matches!(error, EngineError::BronzeCommitMissing { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("holds batch {pending} ")),
        "the error names the batch: {message}"
    );
    assert!(plan.injected() > 0, "the lost entry was asked for");
    assert_eq!(
        open_table(&stream.path("silver")).await.version(),
        silver_version,
        "silver wrote nothing"
    );
    assert_eq!(silver_rows(&stream).await, silver_before);

    // The entry reads again: the replay finishes and silver catches up.
    stream.run_once().await.expect("the replay");
    assert_eq!(silver_rows(&stream).await, source_rows(&mut client).await);
}
