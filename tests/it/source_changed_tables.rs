//! Which of many captured tables changed in a round, asked in one
//! statement (issue 30: a worker streams every table of a database, and a
//! quiet table must cost nothing but its branch of that statement). The
//! windows are the ones a stream's next batch would read: after its last
//! LSN, up to the round's max LSN.

use chrono::Utc;
use mssql_cdc::domain::{CaptureInstance, Lsn};
use mssql_cdc::source::cdc;
use mssql_cdc::source::changed_tables::{ChangeWindow, ChangedTables, changed_tables};
use mssql_cdc::source::round_marks::round_marks;
use mssql_cdc::source::time_zone::CommitClock;

use crate::support::cdc::{enable_db, wait_for_capture, wait_for_max_lsn_past, wait_until_count};
use crate::support::server::Client;
use crate::support::{TestServer, run};

/// Three captured tables, `dbo.a`, `dbo.b` and `dbo.c` (capture instances
/// `dbo_a`, `dbo_b`, `dbo_c`), and the max LSN once CDC has one: where
/// every window starts. Returns the administrator's client, the database
/// and that LSN.
async fn three_captured_tables(server: &TestServer) -> (Client, String, Lsn) {
    let (mut client, db) = server.scratch_database().await;
    enable_db(&mut client).await;
    for table in ["a", "b", "c"] {
        run(
            &mut client,
            &format!(
                "CREATE TABLE dbo.{table} (id int NOT NULL PRIMARY KEY); \
                 EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', \
                 @source_name = N'{table}', @role_name = NULL"
            ),
        )
        .await
        .expect("table captured");
    }
    let start = wait_for_max_lsn_past(&mut client, None).await;
    (client, db, lsn(&start))
}

/// Inserts a row into `dbo.<table>` and waits until CDC has captured it;
/// returns its commit LSN.
async fn change(client: &mut Client, table: &str, after: Lsn) -> Lsn {
    run(client, &format!("INSERT INTO dbo.{table} VALUES (1)"))
        .await
        .expect("insert");
    let bytes = after.to_bytes();
    lsn(&wait_for_capture(client, &format!("dbo_{table}"), Some(&bytes[..]), 1).await)
}

fn lsn(bytes: &[u8]) -> Lsn {
    Lsn::try_from(bytes).expect("a 10-byte LSN")
}

fn windows(names: &[(&str, Lsn)]) -> Vec<ChangeWindow> {
    names
        .iter()
        .map(|(name, after)| ChangeWindow {
            instance: CaptureInstance::new(*name).expect("instance name"),
            after: *after,
        })
        .collect()
}

fn changed(answer: &ChangedTables) -> Vec<&str> {
    answer.changed.iter().map(CaptureInstance::as_str).collect()
}

fn failed(answer: &ChangedTables) -> Vec<(&str, Option<u32>)> {
    answer
        .failed
        .iter()
        .map(|(instance, error)| (instance.as_str(), error.server_code()))
        .collect()
}

#[tokio::test]
async fn changed_tables_are_exactly_those_with_a_change_in_their_window() {
    let server = TestServer::start().await;
    let (mut client, _db, start) = three_captured_tables(&server).await;
    let at_a = change(&mut client, "a", start).await;
    let at_c = change(&mut client, "c", at_a).await;
    let every = windows(&[("dbo_a", start), ("dbo_b", start), ("dbo_c", start)]);

    let answer = changed_tables(&mut client, &every, at_c)
        .await
        .expect("asked");
    assert_eq!(changed(&answer), ["dbo_a", "dbo_c"], "{answer:?}");
    assert!(answer.failed.is_empty(), "{answer:?}");

    // The window's end excludes a later change...
    let answer = changed_tables(&mut client, &every, at_a)
        .await
        .expect("asked");
    assert_eq!(changed(&answer), ["dbo_a"], "{answer:?}");
    // ...and its start a change at the LSN a stream has already read.
    let read_a = windows(&[("dbo_a", at_a), ("dbo_b", start), ("dbo_c", start)]);
    let answer = changed_tables(&mut client, &read_a, at_c)
        .await
        .expect("asked");
    assert_eq!(changed(&answer), ["dbo_c"], "{answer:?}");
}

#[tokio::test]
async fn a_change_table_the_login_may_not_read_fails_alone() {
    let server = TestServer::start().await;
    let (mut admin, db, start) = three_captured_tables(&server).await;
    let login = format!("reader_{}", &db[3..15]);
    let password = "Reader-Pa55word!";
    run(
        &mut admin,
        &format!(
            "CREATE LOGIN [{login}] WITH PASSWORD = '{password}'; \
             CREATE USER [{login}] FOR LOGIN [{login}]; \
             GRANT SELECT ON SCHEMA::cdc TO [{login}]; \
             DENY SELECT ON cdc.dbo_b_CT TO [{login}];"
        ),
    )
    .await
    .expect("reader login");
    let at_a = change(&mut admin, "a", start).await;
    let at_b = change(&mut admin, "b", at_a).await;
    let at_c = change(&mut admin, "c", at_b).await;
    let mut config = server.config_as(&login, password);
    config.database(&db);
    let mut reader = server.connect_with(config).await.expect("reader connects");

    // dbo_gone was never enabled: its change table does not exist.
    let every = windows(&[
        ("dbo_a", start),
        ("dbo_b", start),
        ("dbo_gone", start),
        ("dbo_c", start),
    ]);
    let answer = changed_tables(&mut reader, &every, at_c)
        .await
        .expect("asked");
    assert_eq!(changed(&answer), ["dbo_a", "dbo_c"], "{answer:?}");
    assert_eq!(
        failed(&answer),
        [("dbo_b", Some(229)), ("dbo_gone", Some(208))],
        "{answer:?}"
    );

    // Without the broken tables, one statement answers again on the same
    // session.
    let working = windows(&[("dbo_a", at_a), ("dbo_c", start)]);
    let answer = changed_tables(&mut reader, &working, at_c)
        .await
        .expect("asked");
    assert_eq!(changed(&answer), ["dbo_c"], "{answer:?}");
    assert!(answer.failed.is_empty(), "{answer:?}");
}

/// Runs DDL on `dbo.<table>` and waits until capture has recorded it in
/// `cdc.ddl_history`.
async fn ddl(client: &mut Client, table: &str, sql: &str) {
    let count = format!(
        "SELECT COUNT(*) FROM cdc.ddl_history WHERE source_object_id = OBJECT_ID(N'dbo.{table}')"
    );
    let before = wait_until_count(client, &count, "ddl_history", |_| true).await;
    run(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    wait_until_count(client, &count, sql, |n| n > before).await;
}

#[tokio::test]
async fn a_rounds_marks_answer_every_quiet_window_as_its_own_questions_would() {
    let server = TestServer::start().await;
    let (mut client, _db, start) = three_captured_tables(&server).await;
    let at_a = change(&mut client, "a", start).await;
    let every = windows(&[("dbo_a", at_a), ("dbo_b", start), ("dbo_c", start)]);
    let clock = cdc::commit_clock(&mut client, None).await.expect("clock");
    let marks = round_marks(&mut client, start, at_a, Utc::now(), clock)
        .await
        .expect("read");
    assert_eq!(
        marks.max_commit_ts,
        cdc::lsn_time(&mut client, at_a, clock).await.expect("time"),
        "the max LSN's time"
    );
    for window in &every {
        let quiet = marks
            .quiet(window)
            .unwrap_or_else(|| panic!("{window:?} is quiet: {marks:?}"));
        let min = cdc::min_lsn(&mut client, &window.instance)
            .await
            .expect("min LSN");
        assert_eq!(quiet.min_lsn, min, "{window:?}: fn_cdc_get_min_lsn");
        assert_eq!(
            quiet.min_commit_ts,
            cdc::first_time_from(&mut client, min, clock)
                .await
                .expect("time"),
            "{window:?}: the low-water mark's time"
        );
        assert_eq!(quiet.max_lsn, at_a);
    }

    // A DDL statement on dbo.b after its window's start: its batch needs
    // the table's own look; the others stay quiet.
    ddl(&mut client, "b", "ALTER TABLE dbo.b ADD note int NULL").await;
    let max = wait_for_max_lsn_past(&mut client, None).await;
    let marks = round_marks(
        &mut client,
        start,
        lsn(&max),
        Utc::now(),
        CommitClock::Fixed(0),
    )
    .await
    .expect("read");
    assert!(marks.quiet(&every[1]).is_none(), "{marks:?}");
    assert!(marks.quiet(&every[0]).is_some() && marks.quiet(&every[2]).is_some());

    // A second capture instance of dbo.c: a move to it may be due.
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'c', \
         @role_name = NULL, @capture_instance = N'dbo_c_v2'",
    )
    .await
    .expect("second instance");
    let marks = round_marks(
        &mut client,
        start,
        lsn(&max),
        Utc::now(),
        CommitClock::Fixed(0),
    )
    .await
    .expect("read");
    assert!(marks.quiet(&every[2]).is_none(), "{marks:?}");
    assert!(marks.quiet(&every[0]).is_some());
}
