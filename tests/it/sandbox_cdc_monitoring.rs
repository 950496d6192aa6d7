//! What an operator watches: the capture job's progress (idle entries,
//! a stopped job), the job settings, the CDC DMVs and their permissions,
//! and the session DMVs a slow reader shows up in.
//!
//! - sys.fn_cdc_get_max_lsn and cdc.lsn_time_mapping ("entries may also be
//!   logged for which there are no change tables entries ... periods of low
//!   or no change activity"):
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/sys-fn-cdc-get-max-lsn-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-lsn-time-mapping-transact-sql>
//! - sys.sp_cdc_stop_job / sys.sp_cdc_start_job, msdb.dbo.cdc_jobs defaults
//!   (sys.sp_cdc_add_job: pollinginterval 5, maxtrans 500, maxscans 10,
//!   continuous 1, retention 4320):
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-stop-job-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-add-job-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/dbo-cdc-jobs-transact-sql>
//! - sys.dm_cdc_log_scan_sessions / sys.dm_cdc_errors (VIEW DATABASE STATE):
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/change-data-capture-sys-dm-cdc-log-scan-sessions>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/change-data-capture-sys-dm-cdc-errors>
//! - sys.dm_exec_session_wait_stats and sys.dm_exec_sessions ("everyone
//!   can see their own session"; wait stats require VIEW SERVER PERFORMANCE
//!   STATE from SQL Server 2022):
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-session-wait-stats-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-sessions-transact-sql>

use std::time::{Duration, Instant};

use futures::TryStreamExt;

use crate::support::cdc::{
    advance_clock, lsn_literal, max_lsn, orders_with_cdc, wait_for_capture, wait_for_max_lsn_past,
};
use crate::support::server::Client;
use crate::support::{TestServer, run, scalar, server_error};

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, status nvarchar(20) NOT NULL)";

/// A login with a user in `db` and no other permission.
async fn least_privilege_login(
    server: &TestServer,
    admin: &mut Client,
    db: &str,
    prefix: &str,
) -> (String, Client) {
    let login = format!("{prefix}_{}", &db[3..15]);
    run(
        admin,
        &format!(
            "CREATE LOGIN [{login}] WITH PASSWORD = 'Monitor-Pa55word!'; \
             CREATE USER [{login}] FOR LOGIN [{login}];"
        ),
    )
    .await
    .expect("login and user");
    let client = connect_as(server, &login, db).await;
    (login, client)
}

async fn connect_as(server: &TestServer, login: &str, db: &str) -> Client {
    let mut config = server.config_as(login, "Monitor-Pa55word!");
    config.database(db);
    server
        .connect_with(config)
        .await
        .expect("the login connects")
}

/// On a quiet database the capture job still records progress, so
/// `sys.fn_cdc_get_max_lsn()` keeps moving and readers can tell "no
/// changes" from "capture is stuck".
#[tokio::test]
async fn idle_entries_advance_max_lsn_on_a_quiet_database() {
    let server = TestServer::start().await;
    if !server.is_sandbox() {
        return; // waits for the idle interval: only the sandbox's clock can be moved
    }
    let (mut client, _db) = orders_with_cdc(&server, ORDERS, false).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'new')")
        .await
        .expect("insert");
    let last_change = wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    let before = max_lsn(&mut client).await.expect("a max LSN");

    advance_clock(&mut client, 3600).await;
    let after = wait_for_max_lsn_past(&mut client, Some(&before)).await;

    let changes_at_max: Option<i32> = scalar(
        &mut client,
        &format!(
            "SELECT COUNT(*) FROM cdc.dbo_orders_CT WHERE __$start_lsn > {}",
            lsn_literal(&last_change)
        ),
    )
    .await;
    assert_eq!(changes_at_max, Some(0), "nothing changed: an idle entry");
    let mapped: Option<i32> = scalar(
        &mut client,
        &format!(
            "SELECT COUNT(*) FROM cdc.lsn_time_mapping WHERE start_lsn = {}",
            lsn_literal(&after)
        ),
    )
    .await;
    assert_eq!(
        mapped,
        Some(1),
        "the new max LSN is a cdc.lsn_time_mapping entry"
    );
    let later: Option<i32> = scalar(
        &mut client,
        &format!(
            "SELECT DATEDIFF(second, sys.fn_cdc_map_lsn_to_time({}), sys.fn_cdc_map_lsn_to_time({}))",
            lsn_literal(&before),
            lsn_literal(&after)
        ),
    )
    .await;
    assert!(
        later.unwrap_or(0) > 0,
        "the idle entry is stamped later than the previous one: {later:?}"
    );
}

/// With the capture job stopped nothing is captured and the max LSN stays
/// where it was; starting the job again catches up.
#[tokio::test]
async fn a_stopped_capture_job_freezes_max_lsn() {
    let server = TestServer::start().await;
    let (mut client, _db) = orders_with_cdc(&server, ORDERS, false).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'new')")
        .await
        .expect("insert");
    let captured = wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_stop_job @job_type = N'capture'",
    )
    .await
    .expect("capture job stops");
    let frozen = max_lsn(&mut client).await.expect("a max LSN");
    run(&mut client, "INSERT INTO dbo.orders VALUES (2, N'new')")
        .await
        .expect("insert while stopped");

    // Absence can only be observed over a window: long enough for a
    // running job to have captured the insert (twice SQL Server's 5-second
    // polling interval; on the sandbox an hour of clock passes as well,
    // which would also have produced idle entries).
    let window = if server.is_sandbox() {
        advance_clock(&mut client, 3600).await;
        Duration::from_secs(1)
    } else {
        Duration::from_secs(11)
    };
    let until = Instant::now() + window;
    while Instant::now() < until {
        assert_eq!(
            max_lsn(&mut client).await,
            Some(frozen.clone()),
            "max LSN moved while the capture job was stopped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let uncaptured: Option<i32> = scalar(
        &mut client,
        &format!(
            "SELECT COUNT(*) FROM cdc.dbo_orders_CT WHERE __$start_lsn > {}",
            lsn_literal(&captured)
        ),
    )
    .await;
    assert_eq!(uncaptured, Some(0), "nothing captured while stopped");

    run(
        &mut client,
        "EXEC sys.sp_cdc_start_job @job_type = N'capture'",
    )
    .await
    .expect("capture job starts");
    let caught_up = wait_for_capture(&mut client, "dbo_orders", Some(&captured), 1).await;
    assert!(caught_up > frozen);
}

/// Enabling CDC creates a capture and a cleanup job with the documented
/// defaults; sys.sp_cdc_change_job changes them.
#[tokio::test]
async fn cdc_jobs_have_the_documented_defaults() {
    let server = TestServer::start().await;
    let (mut client, _db) = orders_with_cdc(&server, ORDERS, false).await;
    let rows = run(
        &mut client,
        "SELECT job_type, maxtrans, maxscans, continuous, pollinginterval, retention, threshold \
         FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID() ORDER BY job_type",
    )
    .await
    .expect("msdb.dbo.cdc_jobs");
    let rows: Vec<_> = rows.into_iter().flatten().collect();
    assert_eq!(rows.len(), 2, "a capture and a cleanup job");
    let capture = &rows[0];
    assert_eq!(capture.get::<&str, _>("job_type"), Some("capture"));
    assert_eq!(capture.get::<i32, _>("maxtrans"), Some(500));
    assert_eq!(capture.get::<i32, _>("maxscans"), Some(10));
    assert_eq!(capture.get::<bool, _>("continuous"), Some(true));
    assert_eq!(capture.get::<i64, _>("pollinginterval"), Some(5));
    let cleanup = &rows[1];
    assert_eq!(cleanup.get::<&str, _>("job_type"), Some("cleanup"));
    assert_eq!(cleanup.get::<i64, _>("retention"), Some(4320));
    assert_eq!(cleanup.get::<i64, _>("threshold"), Some(5000));

    run(
        &mut client,
        "EXEC sys.sp_cdc_change_job @job_type = N'capture', @pollinginterval = 2",
    )
    .await
    .expect("change job");
    let polling: Option<i64> = scalar(
        &mut client,
        "SELECT pollinginterval FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID() AND job_type = N'capture'",
    )
    .await;
    assert_eq!(polling, Some(2));
}

/// The CDC DMVs need VIEW DATABASE STATE: a least-privilege login gets
/// error 300, and can read them once granted.
#[tokio::test]
async fn cdc_dmvs_need_view_database_state() {
    let server = TestServer::start().await;
    let (mut admin, db) = orders_with_cdc(&server, ORDERS, false).await;
    run(&mut admin, "INSERT INTO dbo.orders VALUES (1, N'new')")
        .await
        .expect("insert");
    wait_for_capture(&mut admin, "dbo_orders", None, 1).await;
    let (login, mut monitor) = least_privilege_login(&server, &mut admin, &db, "monitor").await;

    for dmv in ["sys.dm_cdc_log_scan_sessions", "sys.dm_cdc_errors"] {
        let denied = run(&mut monitor, &format!("SELECT * FROM {dmv}"))
            .await
            .expect_err("denied without VIEW DATABASE STATE");
        assert_eq!(
            server_error(&denied).map(|e| e.0),
            Some(300),
            "{dmv}: {denied}"
        );
        assert!(
            denied.to_string().contains("permission was denied"),
            "{dmv}: {denied}"
        );
    }

    run(
        &mut admin,
        &format!("GRANT VIEW DATABASE STATE TO [{login}]"),
    )
    .await
    .expect("grant");
    let mut monitor = connect_as(&server, &login, &db).await;
    let sessions: Option<i32> = scalar(
        &mut monitor,
        "SELECT COUNT(*) FROM sys.dm_cdc_log_scan_sessions",
    )
    .await;
    assert!(
        sessions.unwrap_or(0) >= 1,
        "a capture scan ran in this database: {sessions:?}"
    );
    let errors: Option<i32> = scalar(&mut monitor, "SELECT COUNT(*) FROM sys.dm_cdc_errors").await;
    assert!(errors.is_some(), "sys.dm_cdc_errors is readable");
}

/// A client that reads a large result slowly makes the server wait on the
/// network: ASYNC_NETWORK_IO grows in sys.dm_exec_session_wait_stats for
/// that session.
#[tokio::test]
async fn a_slow_reader_accumulates_async_network_io() {
    const ROWS: i32 = 1000;
    let server = TestServer::start().await;
    let (mut admin, db) = server.scratch_database().await;
    run(
        &mut admin,
        "CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, v nvarchar(4000) NOT NULL)",
    )
    .await
    .expect("create table");
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(250) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, REPLICATE(N'x', 4000))"))
            .collect();
        run(
            &mut admin,
            &format!("INSERT INTO dbo.big (id, v) VALUES {}", values.join(", ")),
        )
        .await
        .expect("insert 8 KB rows");
    }

    let mut reader = server.connect_to(&db).await;
    let spid: i32 = scalar::<i16>(&mut reader, "SELECT @@SPID")
        .await
        .map(i32::from)
        .expect("spid");
    let waits_sql = "SELECT CAST(ISNULL(SUM(waiting_tasks_count), 0) AS bigint), \
                     CAST(ISNULL(SUM(wait_time_ms), 0) AS bigint) \
                     FROM sys.dm_exec_session_wait_stats \
                     WHERE session_id = @@SPID AND wait_type = N'ASYNC_NETWORK_IO'";
    let (count_before, ms_before) = waits(&mut reader, waits_sql).await;

    // About 32 MB, far more than the loopback socket buffers hold.
    let mut stream = reader
        .simple_query("SELECT a.v FROM dbo.big AS a CROSS JOIN (VALUES (1), (2), (3), (4)) AS b(n)")
        .await
        .expect("query starts");
    let mut rows = 0usize;
    while let Some(item) = stream.try_next().await.expect("result streams") {
        if item.as_row().is_some() {
            rows += 1;
            if rows == 1 {
                // The slow client: it takes its time before reading on.
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    drop(stream);
    assert_eq!(rows, 4 * ROWS as usize);

    let (count_after, ms_after) = waits(&mut reader, waits_sql).await;
    assert!(
        count_after > count_before,
        "ASYNC_NETWORK_IO waits counted: {count_before} -> {count_after}"
    );
    assert!(
        ms_after - ms_before >= 100,
        "the server waited on the client: {ms_before} ms -> {ms_after} ms"
    );
    let seen_by_admin: Option<i32> = scalar(
        &mut admin,
        &format!(
            "SELECT COUNT(*) FROM sys.dm_exec_session_wait_stats \
             WHERE session_id = {spid} AND wait_type = N'ASYNC_NETWORK_IO'"
        ),
    )
    .await;
    assert_eq!(
        seen_by_admin,
        Some(1),
        "an administrator sees other sessions' waits"
    );
}

async fn waits(client: &mut Client, sql: &str) -> (i64, i64) {
    let rows = run(client, sql).await.expect("wait stats");
    let row = rows.into_iter().flatten().next().expect("a row");
    (
        row.get::<i64, _>(0).unwrap_or(0),
        row.get::<i64, _>(1).unwrap_or(0),
    )
}

/// Without VIEW SERVER STATE a login sees its own session in
/// sys.dm_exec_sessions and (up to SQL Server 2019)
/// sys.dm_exec_session_wait_stats, and no other;
/// sys.dm_exec_connections refuses it outright. With the grant it sees
/// every session.
#[tokio::test]
async fn a_login_sees_only_its_own_session_without_view_server_state() {
    let server = TestServer::start().await;
    let (mut admin, db) = server.scratch_database().await;
    let admin_spid: i32 = scalar::<i16>(&mut admin, "SELECT @@SPID")
        .await
        .map(i32::from)
        .expect("spid");
    let (login, mut user) = least_privilege_login(&server, &mut admin, &db, "viewer").await;

    let rows = run(
        &mut user,
        "SELECT session_id, CAST(CASE WHEN session_id = @@SPID THEN 1 ELSE 0 END AS bit) AS mine \
         FROM sys.dm_exec_sessions",
    )
    .await
    .expect("own session is visible");
    let rows: Vec<_> = rows.into_iter().flatten().collect();
    assert_eq!(rows.len(), 1, "exactly one session visible");
    assert_eq!(rows[0].get::<bool, _>("mine"), Some(true));

    // Up to SQL Server 2019 the wait stats show the own session; from 2022
    // they require VIEW SERVER PERFORMANCE STATE.
    let major: Option<i32> = scalar(
        &mut user,
        "SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS int)",
    )
    .await;
    let waits_sql =
        "SELECT COUNT(*) FROM sys.dm_exec_session_wait_stats WHERE session_id <> @@SPID";
    if major.unwrap_or(0) >= 16 {
        let denied = run(&mut user, waits_sql)
            .await
            .expect_err("2022 needs VIEW SERVER PERFORMANCE STATE for wait stats");
        assert_eq!(server_error(&denied).map(|e| e.0), Some(300), "{denied}");
    } else {
        let others: Option<i32> = scalar(&mut user, waits_sql).await;
        assert_eq!(others, Some(0), "no other session's waits");
    }

    let denied = run(&mut user, "SELECT * FROM sys.dm_exec_connections")
        .await
        .expect_err("dm_exec_connections needs VIEW SERVER STATE");
    assert_eq!(server_error(&denied).map(|e| e.0), Some(300), "{denied}");

    run(
        &mut admin,
        &format!("USE master; GRANT VIEW SERVER STATE TO [{login}];"),
    )
    .await
    .expect("grant VIEW SERVER STATE");
    let mut user = connect_as(&server, &login, &db).await;
    let sees_admin: Option<i32> = scalar(
        &mut user,
        &format!("SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE session_id = {admin_spid}"),
    )
    .await;
    assert_eq!(sees_admin, Some(1), "with the grant, every session");
    let waits: Option<i32> = scalar(
        &mut user,
        "SELECT COUNT(*) FROM sys.dm_exec_session_wait_stats WHERE session_id = @@SPID",
    )
    .await;
    assert!(waits.is_some(), "with the grant, wait stats are readable");
}

#[tokio::test]
async fn a_failed_log_scan_shows_in_the_errors_view_and_agent_shows_the_job_state() {
    let server = TestServer::start().await;
    if !server.is_sandbox() {
        return; // the failure is the sandbox's own procedure
    }
    let (mut client, _db) = orders_with_cdc(&server, ORDERS, false).await;
    let running = "SELECT COUNT(*) FROM msdb.dbo.sysjobactivity AS a \
                   JOIN msdb.dbo.cdc_jobs AS j ON j.job_id = a.job_id \
                   WHERE j.database_id = DB_ID() AND j.job_type = N'capture' \
                   AND a.start_execution_date IS NOT NULL AND a.stop_execution_date IS NULL";
    assert_eq!(scalar::<i32>(&mut client, running).await, Some(1));
    run(
        &mut client,
        "EXEC sandbox.sp_cdc_fail_next_scan @error_number = 22859",
    )
    .await
    .expect("a failure for the next scan");
    advance_clock(&mut client, 10).await;
    let errors: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM sys.dm_cdc_errors WHERE error_number = 22859",
    )
    .await;
    assert_eq!(errors, Some(1));
    let failed: Option<i32> = scalar(
        &mut client,
        "SELECT failed_sessions_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id = 0",
    )
    .await;
    assert_eq!(failed, Some(1));
    // The next scan goes on where the failed one stopped.
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'new')")
        .await
        .expect("insert");
    wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_stop_job @job_type = N'capture'",
    )
    .await
    .expect("stop");
    assert_eq!(scalar::<i32>(&mut client, running).await, Some(0));
}
