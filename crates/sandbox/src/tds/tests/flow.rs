//! Responses and the request loop: several result sets, INFO/ERROR tokens,
//! fatal errors, ATTENTION, concurrency, back-pressure, RPC details,
//! transaction manager requests, malformed requests, shutdown.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tiberius::EncryptionLevel;

use super::raw::{Raw, all_headers, batch, contains, rpc};
use super::{TestServer, bounded, connect, select_one};
use crate::sql::Request;
use crate::tds::packet::kind;
use crate::tds::wire::put_ucs2;

#[tokio::test]
async fn several_result_sets_in_one_response() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::NotSupported).await;
        let sets = client
            .simple_query("MULTI")
            .await
            .unwrap()
            .into_results()
            .await
            .unwrap();
        assert_eq!(sets.len(), 3);
        assert_eq!(
            sets[0]
                .iter()
                .map(|r| r.get::<i32, _>(0).unwrap())
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(sets[1][0].get::<&str, _>("b"), Some("x"));
        assert!(sets[2].is_empty());
        let counts = client.execute("MULTI", &[]).await.unwrap();
        assert_eq!(counts.rows_affected(), &[2, 1, 0]);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn error_tokens_reach_the_client() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::Required).await;
        let err = client
            .simple_query("ERROR 2627")
            .await
            .map(|_| ())
            .expect_err("an error");
        let tiberius::error::Error::Server(token) = err else {
            panic!("not a server error: {err:?}")
        };
        assert_eq!((token.code(), token.state(), token.class()), (2627, 3, 16));
        assert_eq!(token.message(), "Test error 2627");
        assert_eq!(token.procedure(), "test_proc");
        assert_eq!(token.line(), 2);
        assert_eq!(token.server(), "SANDBOX");
        // INFO messages do not fail the query.
        let row = client
            .simple_query("INFO")
            .await
            .unwrap()
            .into_row()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.get::<i32, _>(0), Some(7));
        // Unknown procedures and syntax errors are plain errors too.
        let err = client.simple_query("gibberish").await.err().unwrap();
        assert!(matches!(err, tiberius::error::Error::Server(ref t) if t.code() == 102));
        assert_eq!(select_one(&mut client).await, 1);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn connection_level_errors_close_the_connection() {
    bounded(async {
        let server = TestServer::start().await;
        let (mut raw, _) = Raw::login(server.addr, "secret", 4096).await;
        raw.send(kind::SQL_BATCH, &batch("FATAL"), 4096).await;
        let response = raw.message().await.expect("error response");
        assert_eq!(response[0], 0xAA);
        assert!(raw.packets().await.is_none(), "connection must close");
        server.events.session_closed.notified().await;
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn unsendable_values_become_errors() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::NotSupported).await;
        let err = client
            .simple_query("MISMATCH")
            .await
            .unwrap()
            .into_results()
            .await
            .map(|_| ())
            .expect_err("an error");
        assert!(
            matches!(err, tiberius::error::Error::Server(ref t) if t.code() == 50000),
            "{err:?}"
        );
        assert_eq!(select_one(&mut client).await, 1);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn cancel_query_interrupts_a_long_request() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::Required).await;
        let started = server.events.slow_started.notified();
        tokio::select! {
            _ = client.simple_query("SLOW") => panic!("SLOW finished before it was cancelled"),
            _ = started => {}
        }
        client.cancel_query().await.expect("attention acknowledged");
        server.events.slow_cancelled.notified().await;
        assert_eq!(select_one(&mut client).await, 1);
        // An ATTENTION when nothing runs is acknowledged as well.
        client
            .cancel_query()
            .await
            .expect("idle attention acknowledged");
        assert_eq!(select_one(&mut client).await, 1);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn attention_cuts_a_large_response_short() {
    bounded(async {
        let server = TestServer::start().await;
        let (mut raw, _) = Raw::login(server.addr, "secret", 4096).await;
        raw.send(kind::SQL_BATCH, &batch("BIG 4000 8000"), 4096)
            .await;
        server.events.big_ready.notified().await;
        raw.send(kind::ATTENTION, &[], 4096).await;
        // Read until the message ends: the last token is DONE with DONE_ATTN.
        let response = raw.message().await.expect("response");
        assert!(
            response.len() < 4000 * 8000,
            "the response was not cut short"
        );
        assert_eq!(&response[response.len() - 13..][..3], &[0xFD, 0x20, 0x00]);
        raw.send(kind::SQL_BATCH, &batch("SELECT 1"), 4096).await;
        let next = raw.message().await.expect("next response");
        assert_eq!(next[0], 0x81);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn fifty_concurrent_sessions() {
    bounded(async {
        let server = TestServer::start().await;
        let addr = server.addr;
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..50 {
            tasks.spawn(async move {
                let level = [
                    EncryptionLevel::NotSupported,
                    EncryptionLevel::Off,
                    EncryptionLevel::Required,
                ][i % 3];
                let mut client = connect(addr, level).await;
                for j in 0..5i32 {
                    let row = client
                        .query("ECHO", &[&(i as i32), &j])
                        .await
                        .unwrap()
                        .into_row()
                        .await
                        .unwrap()
                        .unwrap();
                    assert_eq!(
                        (row.get::<i32, _>(0), row.get::<i32, _>(1)),
                        (Some(i as i32), Some(j))
                    );
                }
                let sets = client
                    .simple_query("MULTI")
                    .await
                    .unwrap()
                    .into_results()
                    .await
                    .unwrap();
                assert_eq!(sets.len(), 3);
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("client task");
        }
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn network_wait_is_measured_under_back_pressure() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::NotSupported).await;
        // 24 MB: more than the socket buffers on both sides can hold.
        let mut stream = client.simple_query("BIG 3000 8000").await.unwrap();
        server.events.big_ready.notified().await;
        // The client is slow to read: the server's writes must block.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut rows = 0;
        while let Some(item) = futures::TryStreamExt::try_next(&mut stream).await.unwrap() {
            if item.as_row().is_some() {
                rows += 1;
            }
        }
        drop(stream);
        assert_eq!(rows, 3000);
        // The wait is recorded before the next request is read.
        assert_eq!(select_one(&mut client).await, 1);
        let waited = server.events.total_wait();
        assert!(
            waited >= Duration::from_millis(100),
            "recorded wait {waited:?}"
        );
        server.shutdown().await;
    })
    .await
}

/// The text of every SQL batch the server was sent, TM requests as the
/// batches they map to.
fn batches(server: &TestServer) -> Vec<String> {
    server
        .events
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| match r {
            Request::Batch { sql } => Some(sql.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn transaction_manager_requests_map_to_batches() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::NotSupported).await;
        client.begin_transaction().await.unwrap();
        assert_eq!(select_one(&mut client).await, 1);
        client.commit_transaction().await.unwrap();
        client.begin_transaction().await.unwrap();
        client.rollback_transaction().await.unwrap();
        let sql = batches(&server);
        assert_eq!(
            sql,
            [
                "BEGIN TRANSACTION",
                "SELECT 1",
                "COMMIT",
                "BEGIN TRANSACTION",
                "ROLLBACK"
            ]
        );
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn a_named_transactions_name_is_counted_in_bytes() {
    bounded(async {
        let server = TestServer::start().await;
        let (mut raw, _) = Raw::login(server.addr, "secret", 4096).await;
        // TM_BEGIN_XACT, then TM_COMMIT_XACT, of transaction "load": its
        // name a B_VARBYTE of 8 bytes (MS-TDS 2.2.6.9), as tedious sends it.
        let tm = |request: u16, begin_level: Option<u8>| {
            let mut payload = all_headers();
            payload.extend_from_slice(&request.to_le_bytes());
            payload.extend(begin_level);
            payload.push(8);
            put_ucs2(&mut payload, "load");
            payload
        };
        raw.send(kind::TRANSACTION_MANAGER, &tm(5, Some(0)), 4096)
            .await;
        raw.message().await.expect("the begin's response");
        raw.send(kind::TRANSACTION_MANAGER, &tm(7, None), 4096)
            .await;
        raw.message().await.expect("the commit's response");
        let sql = batches(&server);
        assert_eq!(
            sql,
            ["BEGIN TRANSACTION [load]", "COMMIT TRANSACTION [load]"]
        );
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn rpc_return_values_batches_and_malformed_rpcs() {
    bounded(async {
        let server = TestServer::start().await;
        let (mut raw, _) = Raw::login(server.addr, "secret", 4096).await;

        // A named procedure with an output parameter.
        let mut payload = all_headers();
        payload.extend(rpc("sp_out", &[("@in", 1, false), ("@out", 0, true)]));
        raw.send(kind::RPC, &payload, 4096).await;
        let response = raw.message().await.unwrap();
        let mut expected = vec![0xAC, 1, 0, 4];
        put_ucs2(&mut expected, "@out");
        expected.extend_from_slice(&[0x01, 0, 0, 0, 0, 0x01, 0x00, 0x26, 4, 4, 42, 0, 0, 0]);
        expected.extend_from_slice(&[0x79, 7, 0, 0, 0]);
        expected.extend_from_slice(&[0xFE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(response, expected);

        // Two RPCs in one message: two DONEPROCs, the first with DONE_MORE.
        let mut payload = all_headers();
        payload.extend(rpc("sp_out", &[]));
        payload.push(0xFF);
        payload.extend(rpc("sp_missing", &[]));
        raw.send(kind::RPC, &payload, 4096).await;
        let response = raw.message().await.unwrap();
        assert!(contains(&response, &[0xFE, 0x01, 0x00]));
        assert_eq!(&response[response.len() - 13..][..3], &[0xFE, 0x02, 0x00]);
        let mut missing = Vec::new();
        put_ucs2(
            &mut missing,
            "Could not find stored procedure 'sp_missing'.",
        );
        assert!(contains(&response, &missing));

        // An RPC with an unsupported parameter type: error 8009, connection lives.
        let mut payload = all_headers();
        payload.extend(rpc("sp_out", &[]));
        payload.extend_from_slice(&[2, b'@', 0, b'x', 0, 0, 0xF1, 0]);
        raw.send(kind::RPC, &payload, 4096).await;
        let response = raw.message().await.unwrap();
        assert_eq!(response[0], 0xAA);
        assert_eq!(&response[3..7], &8009i32.to_le_bytes());

        // A truncated SQLBatch (odd UCS-2): error 4002.
        let mut payload = all_headers();
        payload.push(b'x');
        raw.send(kind::SQL_BATCH, &payload, 4096).await;
        let response = raw.message().await.unwrap();
        assert_eq!(&response[3..7], &4002i32.to_le_bytes());

        // A large batch split over many packets still parses.
        let long = format!("SELECT {}", " ".repeat(20_000));
        raw.send(kind::SQL_BATCH, &batch(&long), 512).await;
        assert_eq!(raw.message().await.unwrap()[0], 0x81);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn use_database_sends_envchange() {
    bounded(async {
        let server = TestServer::start().await;
        let (mut raw, _) = Raw::login(server.addr, "secret", 4096).await;
        raw.send(kind::SQL_BATCH, &batch("USE other"), 4096).await;
        let response = raw.message().await.unwrap();
        let mut expected = vec![0xE3, 0, 0, 1, 5];
        put_ucs2(&mut expected, "other");
        expected.push(6);
        put_ucs2(&mut expected, "testdb");
        expected[1] = (expected.len() - 3) as u8;
        assert_eq!(&response[..expected.len()], &expected[..]);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn shutdown_stops_accepting_and_closes_sessions() {
    bounded(async {
        let server = TestServer::start().await;
        let addr = server.addr;
        let mut client = connect(addr, EncryptionLevel::NotSupported).await;
        assert_eq!(select_one(&mut client).await, 1);
        let events = server.events.clone();
        server.shutdown().await;
        assert_eq!(events.closed.load(Ordering::SeqCst), 1);
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    })
    .await
}
