//! Sessions: cancelling a running request, and many clients at once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::support::{TestServer, run, scalar};

#[tokio::test]
async fn cancel_stops_a_long_query_and_the_session_goes_on() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    run(&mut client, "CREATE TABLE dbo.t (id int PRIMARY KEY)")
        .await
        .expect("setup");

    let started = Instant::now();
    // The request is on the wire once the future has been polled for a
    // moment; it cannot finish for 60 seconds, so the timeout always fires.
    let timed_out = tokio::time::timeout(
        Duration::from_millis(300),
        client.simple_query("WAITFOR DELAY '00:01:00'; INSERT INTO dbo.t VALUES (1);"),
    )
    .await
    .is_err();
    assert!(timed_out, "the long query was still running");
    tokio::time::timeout(Duration::from_secs(20), client.cancel_query())
        .await
        .expect("the server acknowledges the attention promptly")
        .expect("cancel succeeds");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "cancelled, not waited out"
    );

    let count: Option<i32> = scalar(&mut client, "SELECT COUNT(*) FROM dbo.t").await;
    assert_eq!(count, Some(0), "the rest of the cancelled batch never ran");
}

#[tokio::test]
async fn fifty_concurrent_sessions_each_doing_dml() {
    const SESSIONS: i32 = 50;
    const ROWS_EACH: i32 = 20;
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.events (session int NOT NULL, seq int NOT NULL, PRIMARY KEY (session, seq))",
    )
    .await
    .expect("setup");

    let mut tasks = tokio::task::JoinSet::new();
    for session in 0..SESSIONS {
        let mut client = server.connect_to(&db).await;
        tasks.spawn(async move {
            let spid: i32 = scalar::<i16>(&mut client, "SELECT @@SPID")
                .await
                .map(i32::from)
                .expect("spid");
            for seq in 0..ROWS_EACH {
                let sql = if seq % 2 == 0 {
                    format!("INSERT INTO dbo.events VALUES ({session}, {seq})")
                } else {
                    format!(
                        "BEGIN TRAN; INSERT INTO dbo.events VALUES ({session}, {seq}); \
                         UPDATE dbo.events SET seq = seq WHERE session = {session}; COMMIT;"
                    )
                };
                run(&mut client, &sql).await.expect("DML runs");
            }
            run(
                &mut client,
                &format!("BEGIN TRAN; DELETE FROM dbo.events WHERE session = {session}; ROLLBACK;"),
            )
            .await
            .expect("rolled-back delete runs");
            spid
        });
    }
    let mut spids = BTreeSet::new();
    while let Some(result) = tasks.join_next().await {
        spids.insert(result.expect("session task finished"));
    }
    assert_eq!(
        spids.len(),
        SESSIONS as usize,
        "each session has its own SPID"
    );

    let total: Option<i32> = scalar(&mut client, "SELECT COUNT(*) FROM dbo.events").await;
    assert_eq!(total, Some(SESSIONS * ROWS_EACH));
    let per_session: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM (SELECT session FROM dbo.events GROUP BY session HAVING COUNT(*) = 20) AS s",
    )
    .await;
    assert_eq!(per_session, Some(SESSIONS));
}
