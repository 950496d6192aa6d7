//! Data safety: what must never let a row be lost or written twice, beyond
//! plain crashes (those are in `engine_crash`): unsafe store settings,
//! replaced checkpoints, store and source faults, two writers.

use mssql_cdc::engine::EngineError;

use crate::support::cdc::capture_table;
use crate::support::server::{Client, TestServer, run};
use crate::support::stream::StreamFixture;

/// A captured `dbo.orders` with two rows and a stream of it.
async fn orders(server: &TestServer, extra: &str) -> (Client, StreamFixture) {
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL)",
    )
    .await
    .expect("create table");
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (1, N'a'), (2, N'b')",
    )
    .await
    .expect("seed");
    capture_table(&mut client, "orders").await;
    (client, StreamFixture::new(server, &db, extra))
}

#[tokio::test]
async fn unsafe_s3_rename_is_refused_before_anything_is_written() {
    let server = TestServer::start().await;
    let (_client, stream) = orders(&server, "").await;
    let mut options = stream.options();
    options
        .env
        .insert("AWS_S3_ALLOW_UNSAFE_RENAME".into(), "true".into());
    let refused = mssql_cdc::engine::run(stream.config(), options).await;
    match refused {
        Err(EngineError::UnsafeStorage { found_in, .. }) => assert_eq!(found_in, "environment"),
        other => panic!("expected UnsafeStorage, got {other:?}"),
    }
    for dir in ["checkpoint", "bronze", "facts"] {
        assert!(!stream.path(dir).exists(), "{dir} was written");
    }

    let (_client, stream) = orders(
        &server,
        "  storageOptions:\n    aws_s3_allow_unsafe_rename: \"true\"\n",
    )
    .await;
    let refused = stream.run_once().await;
    assert!(
        matches!(
            refused,
            Err(EngineError::UnsafeStorage {
                found_in: "storageOptions",
                ..
            })
        ),
        "{refused:?}"
    );
}
