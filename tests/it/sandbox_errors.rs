//! Errors carry SQL Server's numbers, classes and states, and unwind as far
//! as SQL Server unwinds them.

use crate::support::{TestServer, run, scalar, server_error};

#[tokio::test]
async fn syntax_error_is_102_and_runs_nothing() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.t (id int PRIMARY KEY)")
        .await
        .expect("setup");
    let error = run(
        &mut client,
        "INSERT INTO dbo.t VALUES (1); SELEC * FROM dbo.t;",
    )
    .await
    .expect_err("syntax error");
    assert_eq!(server_error(&error), Some((102, 15, 1)), "{error}");
    assert!(
        error.to_string().contains("Incorrect syntax near"),
        "{error}"
    );

    let mut fresh = server.connect_to(&db).await;
    let count: Option<i32> = scalar(&mut fresh, "SELECT COUNT(*) FROM dbo.t").await;
    assert_eq!(
        count,
        Some(0),
        "a batch that does not parse runs no statement"
    );
}

#[tokio::test]
async fn unknown_object_is_208_and_ends_the_batch() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.t (id int PRIMARY KEY)")
        .await
        .expect("setup");
    let error = run(
        &mut client,
        "INSERT INTO dbo.t VALUES (1); SELECT * FROM dbo.no_such_table; INSERT INTO dbo.t VALUES (2);",
    )
    .await
    .expect_err("unknown object");
    assert_eq!(server_error(&error), Some((208, 16, 1)), "{error}");
    assert!(error.to_string().contains("'dbo.no_such_table'"), "{error}");

    let mut fresh = server.connect_to(&db).await;
    let count: Option<i32> = scalar(&mut fresh, "SELECT COUNT(*) FROM dbo.t").await;
    assert_eq!(
        count,
        Some(1),
        "statements before the error ran, after it did not"
    );
}

#[tokio::test]
async fn unknown_column_is_207() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.t (id int PRIMARY KEY)")
        .await
        .expect("setup");
    let error = run(&mut client, "SELECT nope FROM dbo.t")
        .await
        .expect_err("unknown column");
    assert_eq!(server_error(&error), Some((207, 16, 1)), "{error}");
}

#[tokio::test]
async fn duplicate_key_is_2627_and_ends_only_the_statement() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.t (id int PRIMARY KEY)")
        .await
        .expect("setup");
    let error = run(
        &mut client,
        "INSERT INTO dbo.t VALUES (1); INSERT INTO dbo.t VALUES (1); INSERT INTO dbo.t VALUES (2);",
    )
    .await
    .expect_err("duplicate key");
    assert_eq!(
        server_error(&error).map(|e| (e.0, e.1)),
        Some((2627, 14)),
        "{error}"
    );

    let mut fresh = server.connect_to(&db).await;
    let count: Option<i32> = scalar(&mut fresh, "SELECT COUNT(*) FROM dbo.t").await;
    assert_eq!(
        count,
        Some(2),
        "the batch went on after the failed statement"
    );
}

#[tokio::test]
async fn null_into_not_null_is_515() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.t (id int PRIMARY KEY, v int NOT NULL)",
    )
    .await
    .expect("setup");
    let error = run(&mut client, "INSERT INTO dbo.t (id, v) VALUES (1, NULL)")
        .await
        .expect_err("NULL refused");
    assert_eq!(server_error(&error).map(|e| e.0), Some(515), "{error}");
}

#[tokio::test]
async fn unsupported_statements_fail_loudly_and_keep_the_session() {
    let server = TestServer::start().await;
    if !server.is_sandbox() {
        return; // a real server supports it; the point is the sandbox never pretends
    }
    let mut client = server.connect().await;
    let error = run(&mut client, "CREATE FULLTEXT CATALOG ftc AS DEFAULT")
        .await
        .expect_err("not supported");
    assert!(
        server_error(&error).is_some(),
        "a SQL Server error token: {error}"
    );
    let one: Option<i32> = scalar(&mut client, "SELECT 1").await;
    assert_eq!(one, Some(1), "the session survives");
}
