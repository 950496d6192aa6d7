//! Streams share the facts and finalization tables, whose rows carry the
//! target's (and silver's) name: a second stream whose table of the same
//! name lives elsewhere must be refused before it writes, not have its
//! facts dropped as "already written" or overwrite the first one's verdict.

use mssql_cdc::engine::EngineError;
use mssql_cdc::lake::claims::ClaimError;

use crate::support::cdc::orders_with_cdc;
use crate::support::server::{TestServer, run};
use crate::support::stream::StreamFixture;

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL)";

/// A stream of `dbo.orders` in `db` writing `shared`'s facts table, with
/// its own bronze and checkpoint.
fn sharing_facts(server: &TestServer, db: &str, shared: &StreamFixture) -> StreamFixture {
    let mut stream = StreamFixture::new(server, db, "  snapshot: {mode: initial}\n");
    let own = stream.path("facts").display().to_string();
    let theirs = shared.path("facts").display().to_string();
    stream.manifest = stream.manifest.replace(&own, &theirs);
    stream
}

/// The manifest lines of a finalization table under `owner`'s lake.
fn finalization(owner: &StreamFixture) -> String {
    format!(
        "  finalization: {{name: ops.table_finalization, location: \"{}\"}}\n",
        owner.path("control").display()
    )
}

#[tokio::test]
async fn a_second_stream_with_the_same_app_id_and_target_name_is_refused() {
    let server = TestServer::start().await;
    let (mut client, db) = orders_with_cdc(&server, ORDERS, false).await;
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (1, N'a'), (2, N'b')",
    )
    .await
    .expect("seed");
    let first = StreamFixture::new(&server, &db, "  snapshot: {mode: initial}\n");
    first.run_once().await.expect("the first stream runs");
    let facts_before = first.facts_query("SELECT COUNT(*) FROM t").await;

    // Same appId, same target name, another bronze table and checkpoint:
    // before, its facts rows were dropped as the first stream's.
    let second = sharing_facts(&server, &db, &first);
    assert!(second.manifest.contains("appId: it-orders"));
    let said = second.run_once().await.map(|_| ()).unwrap_err();
    let message = said.to_string();
    assert!(
        matches!(&said, EngineError::Claim(claim) if matches!(**claim, ClaimError::Claimed { .. })),
        "{said:?}"
    );
    for part in [
        "\"bronze.orders\"",
        &first.path("bronze").display().to_string(),
        &second.path("bronze").display().to_string(),
        "_mssql_cdc_claims",
    ] {
        assert!(message.contains(part), "{part} missing from: {message}");
    }
    assert!(
        !second.path("bronze").exists(),
        "nothing was written for the refused stream"
    );
    assert_eq!(
        first.facts_query("SELECT COUNT(*) FROM t").await,
        facts_before,
        "the shared facts table is untouched"
    );

    // Under a name of its own it runs, and its rows are its own.
    let mut renamed = second;
    renamed.manifest = renamed
        .manifest
        .replace("name: bronze.orders", "name: bronze.orders_copy");
    renamed
        .run_once()
        .await
        .expect("a stream with its own name runs");
    let by_target = first
        .facts_query("SELECT target, COUNT(*) FROM t GROUP BY target ORDER BY target")
        .await;
    assert_eq!(by_target.len(), 2, "{by_target:?}");
    assert_eq!(by_target[1][0], "bronze.orders_copy", "{by_target:?}");

    // The first stream, restarted, still owns its name.
    first.run_once().await.expect("the first stream restarts");
}

#[tokio::test]
async fn a_shared_finalization_table_refuses_a_second_table_of_the_same_name() {
    let server = TestServer::start().await;
    let (mut client, db) = orders_with_cdc(&server, ORDERS, false).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'a')")
        .await
        .expect("seed");
    let mut first = StreamFixture::new(&server, &db, "  snapshot: {mode: initial}\n");
    first.manifest.push_str(&finalization(&first));
    first.run_once().await.expect("the first stream runs");

    // Another appId and facts table, the same target name and control
    // table: before, both streams overwrote one verdict row.
    let mut second = StreamFixture::new(&server, &db, "  snapshot: {mode: initial}\n");
    second.manifest = second
        .manifest
        .replace("appId: it-orders", "appId: it-orders-eu");
    second.manifest.push_str(&finalization(&first));
    let said = second.run_once().await.map(|_| ()).unwrap_err();
    assert!(
        matches!(&said, EngineError::Claim(claim)
            if matches!(&**claim, ClaimError::Claimed { shared, .. } if shared.contains("control"))),
        "{said:?}"
    );
    assert!(!second.path("bronze").exists(), "nothing was written");
    assert!(
        !second.path("facts/_delta_log").exists(),
        "not even its own facts table"
    );
}
