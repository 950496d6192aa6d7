//! Whole streams on object stores (S3 on moto, Azure on Azurite) and an
//! independent reader (DuckDB) of what the engine wrote.

use mssql_cdc::engine::EngineError;
use mssql_cdc::lake::lease::CheckpointLease;

use crate::support::cdc::{capture_table, max_lsn, wait_for_capture};
use crate::support::duckdb::read_delta;
use crate::support::objectstores::{Azurite, Moto, TestStore};
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::{StreamFixture, query_uri};

const ORDERS: &str = "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, total decimal(12,2) NULL, \
                      placed datetime2(3) NULL, note nvarchar(40) NULL)";

/// A captured `dbo.orders` with three rows, and a stream of it whose lake is
/// on `store` (or local when `None`).
async fn orders(server: &TestServer, store: Option<&dyn TestStore>) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (1, 10.50, '2024-05-01 10:00:00', N'a'), \
         (2, 20.25, '2024-05-02 11:00:00', N'b'), (3, NULL, NULL, NULL)",
    )
    .await
    .expect("seed");
    capture_table(&mut client, "orders").await;
    let mut stream = StreamFixture::new(server, &db, "");
    if let Some(store) = store {
        let base = store.base_uri();
        let base = base.trim_end_matches('/');
        let options: Vec<String> = store
            .options()
            .iter()
            .map(|(k, v)| format!("    {k}: \"{v}\""))
            .collect();
        stream.manifest = stream
            .manifest
            .replace(
                &format!("\"{}\"", stream.path("bronze").display()),
                &format!("\"{base}/bronze\""),
            )
            .replace(
                &format!("\"{}\"", stream.path("checkpoint").display()),
                &format!("\"{base}/checkpoint\""),
            )
            .replace(
                &format!("\"{}\"", stream.path("facts").display()),
                &format!("\"{base}/facts\""),
            );
        stream
            .manifest
            .push_str(&format!("  storageOptions:\n{}\n", options.join("\n")));
    }
    (client, stream)
}

async fn changes(client: &mut Client) {
    let before = max_lsn(client).await;
    run(
        client,
        "INSERT INTO dbo.orders VALUES (4, 99.99, '2024-05-03 12:00:00', N'new')",
    )
    .await
    .expect("insert");
    run(client, "UPDATE dbo.orders SET total = 30.00 WHERE id = 1")
        .await
        .expect("update");
    run(client, "DELETE FROM dbo.orders WHERE id = 2")
        .await
        .expect("delete");
    wait_for_capture(client, "dbo_orders", before.as_deref(), 4).await;
}

async fn stream_on(store: &dyn TestStore) {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, Some(store)).await;
    let first = stream
        .run_once()
        .await
        .expect("bootstrap on the object store");
    assert_eq!(first.snapshot_rows, 3);
    changes(&mut client).await;
    // A second run right after the first: the first released its lease.
    let second = stream
        .run_once()
        .await
        .expect("changes on the object store");
    assert_eq!(second.rows, 4, "{second:?}");

    let base = store.base_uri();
    let base = base.trim_end_matches('/');
    let options = store.options();
    let bronze = query_uri(
        &format!("{base}/bronze"),
        &options,
        "SELECT _operation, COUNT(*) FROM t GROUP BY _operation ORDER BY _operation",
    )
    .await;
    assert_eq!(
        bronze,
        vec![
            vec!["delete", "1"],
            vec!["insert", "1"],
            vec!["snapshot", "3"],
            vec!["update_after", "1"],
            vec!["update_before", "1"],
        ]
    );
    let facts = query_uri(
        &format!("{base}/facts"),
        &options,
        "SELECT COUNT(*), SUM(rows) FROM t WHERE event IS NULL",
    )
    .await;
    assert_eq!(facts[0][1], "4");

    // While a lease is held and renewed, another run waits out its TTL,
    // then is refused without writing.
    let ttl = std::time::Duration::from_secs(2);
    let (location, store_options) = store.location("checkpoint");
    let _held = CheckpointLease::acquire(&location, &store_options, ttl)
        .await
        .expect("a lease after the clean stop (released, so taken at once)");
    let mut options = stream.options();
    options.lease_ttl = ttl;
    let refused = mssql_cdc::engine::run(stream.config(), options)
        .await
        .expect_err("the lease is held");
    assert!(matches!(refused, EngineError::Lease(_)), "{refused}");
}

#[tokio::test]
async fn a_stream_runs_on_s3() {
    let Some(moto) = Moto::start().await else {
        return;
    };
    stream_on(&moto).await;
}

#[tokio::test]
async fn a_stream_runs_on_azure() {
    let Some(azurite) = Azurite::start().await else {
        return;
    };
    stream_on(&azurite).await;
}

#[tokio::test]
async fn duckdb_reads_bronze_and_facts_with_the_same_rows_and_types() {
    let server = TestServer::start().await;
    let (mut client, stream) = orders(&server, None).await;
    stream.run_once().await.expect("bootstrap");
    changes(&mut client).await;
    stream.run_once().await.expect("changes");

    let Some(bronze) = read_delta(
        &stream.path("bronze"),
        Some("SELECT id, CAST(total AS VARCHAR), _operation FROM t ORDER BY _lsn, _seqval, _operation DESC"),
    )
    .await
    else {
        return;
    };
    let ours = stream.bronze_query("SELECT COUNT(*) FROM t").await;
    assert_eq!(bronze.rows.to_string(), ours[0][0]);
    assert_eq!(bronze.column_type("total"), "DECIMAL(12,2)");
    assert_eq!(bronze.column_type("placed"), "TIMESTAMP");
    assert_eq!(bronze.column_type("_commit_ts"), "TIMESTAMP");
    assert_eq!(bronze.column_type("_batch_id"), "BIGINT");
    assert_eq!(bronze.column_type("note"), "VARCHAR");
    let changes: Vec<String> = bronze
        .query
        .iter()
        .skip(3)
        .map(|r| format!("{} {} {}", r[0], r[1], r[2]))
        .collect();
    assert_eq!(
        changes,
        vec![
            "4 \"99.99\" \"insert\"",
            "1 \"10.50\" \"update_before\"",
            "1 \"30.00\" \"update_after\"",
            "2 \"20.25\" \"delete\"",
        ]
    );

    let facts = read_delta(&stream.path("facts"), None)
        .await
        .expect("facts read");
    let ours = stream.facts_query("SELECT COUNT(*) FROM t").await;
    assert_eq!(facts.rows.to_string(), ours[0][0]);
    assert_eq!(facts.columns.len(), mssql_cdc::domain::facts::COLUMNS.len());
    assert_eq!(facts.column_type("written_at"), "TIMESTAMP");
    assert_eq!(facts.column_type("batch_id"), "BIGINT");
    assert_eq!(facts.column_type("retention_headroom_hours"), "DOUBLE");
}
