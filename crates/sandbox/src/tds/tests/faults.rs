//! Faults as a client sees them, through the real engine: an injected
//! error's number, KILL closing an idle connection and cutting a result
//! being sent, and a login routed elsewhere (tiberius' `Error::Routing`).

use std::net::SocketAddr;

use futures::TryStreamExt;
use tiberius::{Config, EncryptionLevel};

use super::{TestClient, bounded, connect_with, scalar};
use crate::{Sandbox, SandboxOptions};

const PASSWORD: &str = "Faults-Pa55word!";

async fn sandbox() -> Sandbox {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Sandbox::start(SandboxOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        sa_password: PASSWORD.into(),
        ..SandboxOptions::default()
    })
    .await
    .expect("sandbox starts")
}

fn sa_config(sandbox: &Sandbox) -> Config {
    super::sa_config(sandbox, PASSWORD)
}

async fn sa(sandbox: &Sandbox) -> TestClient {
    connect_with(sa_config(sandbox), sandbox.local_addr())
        .await
        .expect("sa connects")
}

async fn exec(client: &mut TestClient, sql: &str) {
    client
        .simple_query(sql)
        .await
        .expect("batch sent")
        .into_results()
        .await
        .expect("batch runs");
}

async fn spid(client: &mut TestClient) -> i16 {
    scalar(client, "SELECT @@SPID").await
}

/// The client's connection is gone: what it sends next fails on the
/// transport, not with a server error.
async fn assert_broken(client: &mut TestClient) {
    let outcome = async { client.simple_query("SELECT 1").await?.into_results().await }.await;
    match outcome {
        Err(tiberius::error::Error::Server(token)) => {
            panic!("expected a broken connection, got server error {token:?}")
        }
        Err(_) => {}
        Ok(rows) => panic!("the killed connection still answered: {rows:?}"),
    }
}

#[tokio::test]
async fn an_injected_error_reaches_other_clients_with_its_number() {
    bounded(async {
        let sandbox = sandbox().await;
        let mut control = sa(&sandbox).await;
        let mut victim = sa(&sandbox).await;
        exec(
            &mut control,
            "EXEC sandbox.sp_inject_error @number = 40501, @pattern = N'sys.objects'",
        )
        .await;
        let failed = victim
            .query(
                "SELECT COUNT(*) FROM sys.objects WHERE object_id > @P1",
                &[&0i32],
            )
            .await
            .map(|_| ())
            .expect_err("the injected error");
        let tiberius::error::Error::Server(token) = failed else {
            panic!("not a server error: {failed:?}")
        };
        assert_eq!((token.code(), token.class(), token.state()), (40501, 16, 1));
        assert!(
            token
                .message()
                .starts_with("The service is currently busy.")
        );
        // Used up, and severity 16 leaves the connection open.
        exec(&mut victim, "SELECT COUNT(*) FROM sys.objects").await;

        exec(
            &mut control,
            "EXEC sandbox.sp_inject_error @number = 40197, @severity = 20",
        )
        .await;
        let failed = victim.simple_query("SELECT 1").await.map(|_| ());
        let code = match failed {
            Err(tiberius::error::Error::Server(token)) => token.code(),
            other => panic!("expected error 40197, got {other:?}"),
        };
        assert_eq!(code, 40197);
        assert_broken(&mut victim).await;
        sandbox.stop().await.expect("stops");
    })
    .await
}

#[tokio::test]
async fn kill_closes_an_idle_connection_and_answers_6104_and_6106() {
    bounded(async {
        let sandbox = sandbox().await;
        let mut control = sa(&sandbox).await;
        let mut victim = sa(&sandbox).await;
        let victim_id = spid(&mut victim).await;
        exec(&mut control, &format!("KILL {victim_id}")).await;
        assert_broken(&mut victim).await;

        let own = spid(&mut control).await;
        for (sql, number) in [
            (format!("KILL {own}"), 6104),
            (format!("KILL {victim_id}"), 6106),
        ] {
            let failed = control.simple_query(sql).await.map(|_| ());
            match failed {
                Err(tiberius::error::Error::Server(token)) => assert_eq!(token.code(), number),
                other => panic!("expected error {number}, got {other:?}"),
            }
        }
        sandbox.stop().await.expect("stops");
    })
    .await
}

/// `SELECT n, pad` of 4^7 = 16,384 rows of 8 KB (n = 0, 1, ...): far
/// more than socket buffers hold, so the server is still sending (blocked
/// on the client) when the KILL comes.
fn big_result() -> String {
    let digits: Vec<String> = (0..7)
        .map(|i| format!("(VALUES (0),(1),(2),(3)) AS d{i}(n)"))
        .collect();
    let n: Vec<String> = (0..7)
        .map(|i| format!("{} * d{i}.n", 1 << (2 * i)))
        .collect();
    format!(
        "SELECT {} AS n, REPLICATE(N'x', 4000) AS pad FROM {}",
        n.join(" + "),
        digits.join(" CROSS JOIN ")
    )
}

#[tokio::test]
async fn kill_cuts_a_result_the_client_is_receiving() {
    bounded(async {
        let sandbox = sandbox().await;
        let mut control = sa(&sandbox).await;
        let mut victim = sa(&sandbox).await;
        let victim_id = spid(&mut victim).await;
        let mut rows = victim
            .simple_query(big_result())
            .await
            .expect("the query starts")
            .into_row_stream();
        let first = rows.try_next().await.expect("a first row");
        assert!(first.is_some());
        // The victim reads no further while KILL runs: KILL returns once
        // the server has dropped the session, though it was blocked sending.
        exec(&mut control, &format!("KILL {victim_id}")).await;
        let mut received = 1;
        let ended = loop {
            match rows.try_next().await {
                Ok(Some(_)) => received += 1,
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        let Some(error) = ended else {
            panic!("the result ended normally after {received} rows: the stream was not cut");
        };
        assert!(
            !matches!(error, tiberius::error::Error::Server(_)),
            "a broken connection, not a server error: {error:?}"
        );
        assert!(received < 16_384, "{received} rows");
        println!("the KILL cut the result after {received} of 16384 rows");
        drop(rows);
        assert_broken(&mut victim).await;
        let left = control
            .simple_query(format!(
                "SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE session_id = {victim_id}"
            ))
            .await
            .expect("query")
            .into_row()
            .await
            .expect("row")
            .and_then(|r| r.get::<i32, _>(0));
        assert_eq!(left, Some(0), "the killed session is gone");
        sandbox.stop().await.expect("stops");
    })
    .await
}

#[tokio::test]
async fn a_routed_login_is_told_where_to_go_and_the_next_logs_in() {
    bounded(async {
        let sandbox = sandbox().await;
        let mut control = sa(&sandbox).await;
        exec(
            &mut control,
            "EXEC sandbox.sp_route_logins @server = N'replica.example.net', @port = 11433, @count = 2",
        )
        .await;
        for encryption in [EncryptionLevel::Required, EncryptionLevel::NotSupported] {
            let mut config = sa_config(&sandbox);
            config.encryption(encryption);
            let routed = connect_with(config, sandbox.local_addr()).await;
            match routed {
                Err(tiberius::error::Error::Routing { host, port }) => {
                    assert_eq!((host.as_str(), port), ("replica.example.net", 11433))
                }
                Err(other) => panic!("expected Error::Routing, got {other:?}"),
                Ok(_) => panic!("expected Error::Routing, the login succeeded"),
            }
        }
        let mut third = sa(&sandbox).await;
        assert!(spid(&mut third).await > 0);
        sandbox.stop().await.expect("stops");
    })
    .await
}
