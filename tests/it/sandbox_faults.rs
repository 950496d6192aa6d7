//! Source faults as a tiberius client sees them: `KILL` closing another
//! session's connection (idle, and in the middle of a result it is
//! receiving), with SQL Server's errors for a bad target; and, on the
//! sandbox only, an injected error's number (`sandbox.sp_inject_error`)
//! and a login routed elsewhere (`sandbox.sp_route_logins`), which
//! tiberius reports as `Error::Routing`.

use futures::TryStreamExt;
use tiberius::error::Error;

use crate::support::server::{Client, TRANSIENT_ERRORS};
use crate::support::{TestServer, run, scalar, server_error};

async fn session_id(client: &mut Client) -> i16 {
    scalar(client, "SELECT @@SPID").await.expect("@@SPID")
}

/// What `client` sends next fails on the transport: the server closed the
/// connection (a server error would mean the session still answered).
async fn assert_connection_broken(client: &mut Client, what: &str) {
    match run(client, "SELECT 1").await {
        Ok(rows) => panic!("{what}: the connection still answers: {rows:?}"),
        Err(error) => assert!(
            server_error(&error).is_none(),
            "{what}: expected a broken connection, got {error}"
        ),
    }
}

/// The sandbox-only procedures have no counterpart on SQL Server.
fn sandbox_only(server: &TestServer, test: &str) -> bool {
    if !server.is_sandbox() {
        println!("skipped on a real SQL Server: {test} needs the sandbox's fault procedures");
    }
    server.is_sandbox()
}

#[tokio::test]
async fn kill_closes_an_idle_session_and_refuses_itself_and_the_unknown() {
    let server = TestServer::start().await;
    let mut control = server.connect().await;
    let mut victim = server.connect().await;
    let victim_id = session_id(&mut victim).await;
    run(&mut control, &format!("KILL {victim_id}"))
        .await
        .expect("KILL runs");
    assert_connection_broken(&mut victim, "after KILL").await;

    let own = session_id(&mut control).await;
    let error = run(&mut control, &format!("KILL {own}"))
        .await
        .expect_err("killing oneself");
    assert_eq!(server_error(&error).map(|e| e.0), Some(6104), "{error}");
    let error = run(&mut control, "KILL 32767")
        .await
        .expect_err("no such session");
    assert_eq!(server_error(&error).map(|e| e.0), Some(6106), "{error}");
    // KILL's errors leave the killer's own session as it was.
    assert_eq!(session_id(&mut control).await, own);
}

/// 10,000 rows of 8 KB each, far more than the socket buffers between
/// the server and the client hold: the server is still sending when the
/// KILL comes.
const BIG_RESULT: &str = "SELECT a.n + 10 * b.n + 100 * c.n + 1000 * d.n AS n, REPLICATE(N'x', 4000) AS pad \
     FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) AS a(n) \
     CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) AS b(n) \
     CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) AS c(n) \
     CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) AS d(n)";

#[tokio::test]
async fn kill_cuts_a_result_in_the_middle_and_the_client_sees_an_error() {
    let server = TestServer::start().await;
    let mut control = server.connect().await;
    let mut victim = server.connect().await;
    let victim_id = session_id(&mut victim).await;
    let mut rows = victim
        .simple_query(BIG_RESULT)
        .await
        .expect("the query starts")
        .into_row_stream();
    assert!(rows.try_next().await.expect("a first row").is_some());
    run(&mut control, &format!("KILL {victim_id}"))
        .await
        .expect("KILL runs while the victim's result is being sent");
    let mut received = 1usize;
    let cut = loop {
        match rows.try_next().await {
            Ok(Some(_)) => received += 1,
            Ok(None) => break None,
            Err(error) => break Some(error),
        }
    };
    // A result that ends as if complete would hand the client a
    // truncated read it cannot tell from a whole one.
    let error = cut.unwrap_or_else(|| {
        panic!("the result ended without an error after {received} of 10000 rows")
    });
    assert!(
        server_error(&error).is_none(),
        "the stream breaks, no error token: {error}"
    );
    assert!(received < 10_000, "{received} rows arrived");
    println!("KILL cut the result after {received} of 10000 rows: {error}");
    drop(rows);
    assert_connection_broken(&mut victim, "after the cut").await;
    let left: Option<i32> = scalar(
        &mut control,
        &format!("SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE session_id = {victim_id}"),
    )
    .await;
    assert_eq!(left, Some(0), "the killed session is gone");
}

/// Two errors the engine must not retry: permission denied, no such object.
const NOT_TRANSIENT: [(u32, u8); 2] = [(229, 14), (208, 16)];

#[tokio::test]
async fn an_injected_error_reaches_the_client_with_its_number_class_and_state() {
    let server = TestServer::start().await;
    if !sandbox_only(&server, "an_injected_error_reaches_the_client") {
        return;
    }
    let (mut control, db) = server.scratch_database().await;
    let mut victim = server.connect_to(&db).await;
    // Severities below 20: the connection stays open.
    let injected = TRANSIENT_ERRORS
        .into_iter()
        .chain(NOT_TRANSIENT)
        .filter(|(_, severity)| *severity < 20);
    for (number, severity) in injected {
        run(
            &mut control,
            &format!(
                "EXEC sandbox.sp_inject_error @number = {number}, @severity = {severity}, @state = 2, @pattern = N'Sys.Objects'"
            ),
        )
        .await
        .expect("sandbox.sp_inject_error runs");
        let error = crate::support::query(
            &mut victim,
            "SELECT COUNT(*) FROM sys.objects WHERE object_id > @P1",
            &[&0i32],
        )
        .await
        .expect_err("the injected error");
        assert_eq!(server_error(&error), Some((number, severity, 2)), "{error}");
        // Used up: the same query runs now, on the same connection.
        let objects: Option<i32> = scalar(&mut victim, "SELECT COUNT(*) FROM sys.objects").await;
        assert!(objects.is_some());
    }
    // Severity 20 and above ends the connection, as SQL Server does.
    run(
        &mut control,
        "EXEC sandbox.sp_inject_error @number = 40197, @severity = 20",
    )
    .await
    .expect("sandbox.sp_inject_error runs");
    let error = run(&mut victim, "SELECT 1")
        .await
        .expect_err("the injected error");
    assert_eq!(server_error(&error).map(|e| e.0), Some(40197), "{error}");
    assert_connection_broken(&mut victim, "after a severity 20 error").await;
}

#[tokio::test]
async fn a_routed_login_is_error_routing_and_the_next_one_logs_in() {
    let server = TestServer::start().await;
    if !sandbox_only(&server, "a_routed_login_is_error_routing") {
        return;
    }
    let mut control = server.connect().await;
    run(
        &mut control,
        "EXEC sandbox.sp_route_logins @server = N'node-7.example.net', @port = 11007",
    )
    .await
    .expect("sandbox.sp_route_logins runs");
    match server.connect_with(server.config()).await {
        Err(Error::Routing { host, port }) => {
            assert_eq!((host.as_str(), port), ("node-7.example.net", 11007))
        }
        Err(other) => panic!("expected Error::Routing, got {other}"),
        Ok(_) => panic!("expected Error::Routing, the login went through"),
    }
    let mut next = server.connect().await;
    assert!(session_id(&mut next).await > 0, "only one login was routed");
}
