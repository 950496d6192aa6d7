//! Parallel reads (`spec.source.readers`): a batch read in parts on several
//! sessions is still one bronze commit with every change once, a snapshot
//! copied in key ranges at once has every row once, and both record the
//! same rows and facts as one reader (read_mb sums the parts' bytes).

use serde_json::Value;

use crate::support::cdc::{capture_table, max_lsn, orders_changes, wait_for_capture};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::{StreamFixture, open_table};

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(50) NULL, qty int NULL)";

/// `stream` reading with `readers` sessions.
pub fn with_readers(mut stream: StreamFixture, readers: u32) -> StreamFixture {
    stream.manifest = stream.manifest.replace(
        "    table: dbo.orders\n",
        &format!("    table: dbo.orders\n    readers: {readers}\n"),
    );
    stream
}

/// A multi-row INSERT of ids `first..first + n` into `dbo.orders`.
pub fn insert_rows(first: i32, n: i32, note: &str) -> String {
    let values: Vec<String> = (first..first + n)
        .map(|id| format!("({id}, N'{note}', {id})"))
        .collect();
    format!("INSERT INTO dbo.orders VALUES {}", values.join(", "))
}

/// Ten transactions of different sizes on a captured, empty `dbo.orders`:
/// inserts of 3 to 24 rows, an update of ten rows (twenty change rows),
/// a delete of five. Returns the change rows they made.
async fn ten_transactions(client: &mut Client) -> i32 {
    let before = max_lsn(client).await;
    let mut first = 1;
    for t in 1..=8 {
        let n = 3 * t;
        run(client, &insert_rows(first, n, "new"))
            .await
            .expect("insert");
        first += n;
    }
    run(
        client,
        "BEGIN TRANSACTION; UPDATE dbo.orders SET qty = qty + 1 WHERE id <= 10; COMMIT",
    )
    .await
    .expect("update");
    run(client, "DELETE FROM dbo.orders WHERE id > 100")
        .await
        .expect("delete");
    let rows = (first - 1) + 20 + (first - 1 - 100);
    wait_for_capture(client, "dbo_orders", before.as_deref(), rows).await;
    rows
}

/// The JSON file `rel` of the stream's lake.
fn json_file(stream: &StreamFixture, rel: &str) -> Value {
    let text = std::fs::read_to_string(stream.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The actions of bronze's commit `version`.
pub fn bronze_commit(stream: &StreamFixture, version: i64) -> Vec<Value> {
    let rel = format!("bronze/_delta_log/{version:020}.json");
    std::fs::read_to_string(stream.path(&rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a Delta action"))
        .collect()
}

/// Bronze's newest table version.
async fn bronze_version(stream: &StreamFixture) -> i64 {
    open_table(&stream.path("bronze"))
        .await
        .version()
        .and_then(|v| i64::try_from(v).ok())
        .expect("a version")
}

#[tokio::test]
async fn a_batch_read_in_parts_is_one_commit_with_the_rows_and_facts_of_one_reader() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    capture_table(&mut client, "orders").await;
    let change_rows = ten_transactions(&mut client).await;
    let source = orders_changes(&mut client).await;
    assert_eq!(source.len(), change_rows as usize);

    let mut facts_of = Vec::new();
    for readers in [1, 2, 4] {
        let stream = with_readers(
            StreamFixture::new(
                &server,
                &db,
                "  maxCommitsPerBatch: 1000\n  snapshot: {mode: never}\n",
            ),
            readers,
        );
        stream.run_once().await.expect("the run");
        assert_eq!(
            stream.bronze_changes().await,
            source,
            "readers {readers}: every change once"
        );

        let plan = json_file(&stream, "checkpoint/offsets/1");
        let parts = plan["parts"].as_array().map_or(0, Vec::len);
        let expected_parts = if readers == 1 { 0 } else { readers as usize };
        assert_eq!(parts, expected_parts, "readers {readers}: {plan}");
        assert_eq!(
            bronze_version(&stream).await,
            1,
            "readers {readers}: the batch is one bronze commit"
        );
        let commit = bronze_commit(&stream, 1);
        let files = commit.iter().filter(|a| a.get("add").is_some()).count();
        assert!(
            files >= parts.max(1),
            "readers {readers}: each part writes its own files ({files})"
        );
        let txn = commit
            .iter()
            .find_map(|a| a.get("txn"))
            .expect("the commit's txn");
        assert_eq!(
            (txn["appId"].as_str(), txn["version"].as_i64()),
            (Some("it-orders"), Some(1))
        );

        let facts = stream
            .facts_query(
                "SELECT COUNT(*), SUM(rows), CAST(SUM(read_mb) AS STRING), MIN(min_lsn), \
                 MAX(max_lsn), MAX(end_lsn), MIN(source_rtt_ms) > 0, MIN(read_seconds) > 0 \
                 FROM t WHERE event IS NULL",
            )
            .await;
        assert_eq!(
            facts[0][0..2],
            ["1", &change_rows.to_string()],
            "readers {readers}"
        );
        assert_eq!(
            facts[0][6..8],
            ["true", "true"],
            "readers {readers}: measured"
        );
        facts_of.push(facts[0][2..6].to_vec());
    }
    assert!(
        facts_of.windows(2).all(|pair| pair[0] == pair[1]),
        "read_mb and the LSN range are the same with 1, 2 and 4 readers: {facts_of:?}"
    );
}

/// Bronze's snapshot rows: how many, how many distinct keys.
async fn snapshot_rows(stream: &StreamFixture, key: &str) -> Vec<String> {
    stream
        .bronze_query(&format!(
            "SELECT CAST(COUNT(*) AS STRING), CAST(COUNT(DISTINCT {key}) AS STRING) FROM t \
             WHERE _operation = 'snapshot'"
        ))
        .await
        .remove(0)
}

/// The `mssql_cdc.snapshot` record of bronze's commit `version`.
fn chunk_record(stream: &StreamFixture, version: i64) -> Value {
    bronze_commit(stream, version)
        .into_iter()
        .find_map(|a| a.get("commitInfo").map(|i| i["mssql_cdc.snapshot"].clone()))
        .expect("a chunk record")
}

#[tokio::test]
async fn a_snapshot_is_copied_in_key_ranges_at_once_each_row_once() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    for first in (1..=500).step_by(50) {
        run(&mut client, &insert_rows(first, 50, "seed"))
            .await
            .expect("seed");
    }
    capture_table(&mut client, "orders").await;

    let mut bootstraps = Vec::new();
    for readers in [1, 4] {
        let stream = with_readers(
            StreamFixture::new(&server, &db, "  snapshot: {mode: initial, chunkRows: 40}\n"),
            readers,
        );
        stream.run_once().await.expect("the bootstrap");
        assert_eq!(
            snapshot_rows(&stream, "id").await,
            ["500", "500"],
            "readers {readers}: every row once"
        );
        let plan = json_file(&stream, "checkpoint/snapshots/0");
        let record = chunk_record(&stream, bronze_version(&stream).await);
        assert_eq!(record["finished"], true, "readers {readers}: {record}");
        assert_eq!(record["rows"], 500, "readers {readers}: {record}");
        if readers == 4 {
            let bounds: Vec<i64> = plan["key_bounds"]
                .as_array()
                .expect("key bounds")
                .iter()
                .filter_map(|b| b[0]["int"].as_i64())
                .collect();
            assert_eq!(bounds, [125, 250, 375], "ranges of about equal size");
            let ranges: Vec<(i64, bool)> = record["ranges"]
                .as_array()
                .expect("every range's progress")
                .iter()
                .map(|r| (r["rows"].as_i64().unwrap_or(-1), r["finished"] == true))
                .collect();
            assert_eq!(ranges, [(125, true); 4]);
            // Each range of 125 rows takes four chunks of 40 or fewer.
            assert_eq!(bronze_version(&stream).await, 16);
        } else {
            assert_eq!(plan.get("key_bounds"), None, "one range: {plan}");
            assert_eq!(record.get("ranges"), None, "as before ranges: {record}");
        }
        let bootstrap = stream
            .facts_query("SELECT rows, CAST(read_mb AS STRING) FROM t WHERE event = 'bootstrap'")
            .await;
        assert_eq!(bootstrap.len(), 1, "readers {readers}");
        assert_eq!(bootstrap[0][0], "500", "readers {readers}");
        bootstraps.push(bootstrap[0][1].clone());
    }
    assert_eq!(
        bootstraps[0], bootstraps[1],
        "read_mb sums the ranges' bytes"
    );
}

#[tokio::test]
async fn a_string_keyed_table_is_split_in_the_servers_own_order() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (code varchar(12) NOT NULL PRIMARY KEY, qty int NULL)",
    )
    .await
    .expect("create table");
    // Mixed case and punctuation: the server's collation orders them, not
    // byte order, and the ranges must follow it.
    let codes: Vec<String> = (0..300)
        .map(|i| match i % 3 {
            0 => format!("a-{i:03}"),
            1 => format!("B_{i:03}"),
            _ => format!("c {i:03}"),
        })
        .collect();
    for chunk in codes.chunks(50) {
        let values: Vec<String> = chunk.iter().map(|c| format!("('{c}', 1)")).collect();
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES {}", values.join(", ")),
        )
        .await
        .expect("seed");
    }
    capture_table(&mut client, "orders").await;
    let stream = with_readers(
        StreamFixture::new(&server, &db, "  snapshot: {mode: initial, chunkRows: 30}\n"),
        3,
    );
    stream.run_once().await.expect("the bootstrap");
    assert_eq!(snapshot_rows(&stream, "code").await, ["300", "300"]);
    let plan = json_file(&stream, "checkpoint/snapshots/0");
    assert_eq!(
        plan["key_bounds"].as_array().map(Vec::len),
        Some(2),
        "{plan}"
    );
}

#[tokio::test]
async fn a_sampled_split_draws_keys_in_the_servers_order() {
    use mssql_cdc::source::key_ranges::{KeySample, bounds, sample_keys};

    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    for first in (1..=4_000).step_by(200) {
        run(
            &mut client,
            &insert_rows(first, 200, "a note long enough to fill pages"),
        )
        .await
        .expect("seed");
    }
    capture_table(&mut client, "orders").await;
    let stream = StreamFixture::new(&server, &db, "");
    let config = stream.config();
    let info = mssql_cdc::source::cdc::discover(&mut client, &config.source.table, None, None)
        .await
        .expect("the capture instance");
    let sample = sample_keys(
        &mut client,
        &config.source.table,
        &info,
        KeySample::Percent(50.0),
    )
    .await
    .expect("TABLESAMPLE runs");
    let ids: Vec<i64> = sample.iter().filter_map(|k| k[0]["int"].as_i64()).collect();
    assert_eq!(ids.len(), sample.len(), "integer keys");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "in key order, distinct"
    );
    assert!(ids.len() < 4_000, "a sample, not the table: {}", ids.len());
    let cut = bounds(&sample, 4);
    assert!(cut.len() <= 3);
    let cut_ids: Vec<i64> = cut.iter().filter_map(|k| k[0]["int"].as_i64()).collect();
    assert!(cut_ids.windows(2).all(|w| w[0] < w[1]), "{cut_ids:?}");
    assert!(cut_ids.iter().all(|id| ids.contains(id)));
}
