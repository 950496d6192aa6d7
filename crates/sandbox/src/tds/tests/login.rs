//! PRELOGIN, every encryption mode, LOGIN7 success and failure, packet
//! size negotiation, malformed handshakes.

use std::sync::atomic::Ordering;

use tiberius::EncryptionLevel;

use super::raw::{Raw, contains};
use super::{TestServer, bounded, config, connect, connect_with, select_one};
use crate::tds::TdsConfig;
use crate::tds::packet::{HEADER_LEN, kind, status};
use crate::tds::wire::put_ucs2;

#[tokio::test]
async fn login_without_encryption() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::NotSupported).await;
        assert_eq!(select_one(&mut client).await, 1);
        assert_eq!(select_one(&mut client).await, 1);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn login_only_encryption_then_clear_text() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::Off).await;
        assert_eq!(select_one(&mut client).await, 1);
        let rows = client
            .simple_query("MULTI")
            .await
            .unwrap()
            .into_results()
            .await
            .unwrap();
        assert_eq!(rows.len(), 3);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn full_tls_when_required_or_on() {
    bounded(async {
        let server = TestServer::start().await;
        for level in [EncryptionLevel::Required, EncryptionLevel::On] {
            let mut client = connect(server.addr, level).await;
            assert_eq!(select_one(&mut client).await, 1);
            // A result spanning many packets and TLS records.
            let rows = client
                .simple_query("BIG 50 4000")
                .await
                .unwrap()
                .into_first_result()
                .await
                .unwrap();
            assert_eq!(rows.len(), 50);
            assert_eq!(rows[49].get::<&[u8], _>(1).unwrap(), &[49u8; 4000][..]);
        }
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn strict_tds8_tls_before_prelogin() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::Strict).await;
        assert_eq!(select_one(&mut client).await, 1);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn wrong_password_is_error_18456() {
    bounded(async {
        let server = TestServer::start().await;
        for level in [EncryptionLevel::NotSupported, EncryptionLevel::Required] {
            let mut cfg = config(server.addr, level);
            cfg.authentication(tiberius::AuthMethod::sql_server("sa", "wrong"));
            let err = connect_with(cfg, server.addr)
                .await
                .map(|_| ())
                .expect_err("an error");
            match err {
                tiberius::error::Error::Server(token) => {
                    assert_eq!(token.code(), 18456);
                    assert_eq!(token.class(), 14);
                    assert_eq!(token.state(), 1);
                    assert_eq!(token.message(), "Login failed for user 'sa'.");
                }
                other => panic!("expected a server error, got {other:?}"),
            }
        }
        assert_eq!(server.events.closed.load(Ordering::SeqCst), 0);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn login_response_tokens_and_packet_size() {
    bounded(async {
        let server = TestServer::start().await;
        let (mut raw, response) = Raw::login(server.addr, "secret", 512).await;
        let mut envchange_512 = vec![0xE3, 0, 0, 4, 3];
        put_ucs2(&mut envchange_512, "512");
        envchange_512.push(4);
        put_ucs2(&mut envchange_512, "4096");
        envchange_512[1] = (envchange_512.len() - 3) as u8;
        assert!(contains(&response, &envchange_512), "packet size ENVCHANGE");
        assert!(
            contains(
                &response,
                &[0xE3, 8, 0, 7, 5, 0x09, 0x04, 0xD0, 0x00, 0x34, 0]
            ),
            "collation"
        );
        let mut ack = vec![0x01, 0x74, 0x00, 0x00, 0x04, 20];
        put_ucs2(&mut ack, "Microsoft SQL Server");
        // 16.0.4135: SERVERPROPERTY('ProductVersion')'s major, minor, build.
        ack.extend_from_slice(&[16, 0, 0x10, 0x27]);
        assert!(contains(&response, &ack), "LOGINACK");
        let mut db = vec![];
        put_ucs2(&mut db, "Changed database context to 'testdb'.");
        assert!(contains(&response, &db), "INFO 5701");
        assert_eq!(
            &response[response.len() - 13..],
            &[0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );

        raw.send(kind::SQL_BATCH, &super::raw::batch("BIG 20 300"), 512)
            .await;
        let packets = raw.packets().await.expect("response");
        assert!(packets.len() > 10);
        for (i, p) in packets.iter().enumerate() {
            assert!(p.header.length as usize <= 512);
            let last = i + 1 == packets.len();
            assert_eq!(p.header.status & status::END_OF_MESSAGE != 0, last);
            if !last {
                assert_eq!(p.header.length as usize, 512);
            }
            assert_eq!(p.header.ty, kind::TABULAR_RESULT);
            assert!(p.payload.len() + HEADER_LEN == p.header.length as usize);
        }

        // tiberius with the same negotiated size.
        let mut cfg = config(server.addr, EncryptionLevel::NotSupported);
        cfg.packet_size(512);
        let mut client = connect_with(cfg, server.addr).await.unwrap();
        let rows = client
            .simple_query("BIG 30 2000")
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap();
        assert_eq!(rows.len(), 30);
        assert_eq!(rows[7].get::<&[u8], _>(1).unwrap(), &[7u8; 2000][..]);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn malformed_handshakes_disconnect_cleanly() {
    bounded(async {
        let server = TestServer::start().await;
        // A header whose length is shorter than the header itself.
        let mut raw = Raw::connect(server.addr).await;
        tokio::io::AsyncWriteExt::write_all(&mut raw.stream, &[0x12, 1, 0, 4, 0, 0, 1, 0])
            .await
            .unwrap();
        assert!(raw.packets().await.is_none());
        // A batch before login.
        let mut raw = Raw::connect(server.addr).await;
        raw.send(kind::SQL_BATCH, &super::raw::batch("SELECT 1"), 4096)
            .await;
        assert!(raw.packets().await.is_none());
        // A truncated LOGIN7.
        let mut raw = Raw::connect(server.addr).await;
        raw.send(kind::PRELOGIN, &super::raw::prelogin(2), 4096)
            .await;
        raw.message().await.unwrap();
        raw.send(kind::LOGIN7, &[0x10; 40], 4096).await;
        assert!(raw.packets().await.is_none());
        // Garbage PRELOGIN options.
        let mut raw = Raw::connect(server.addr).await;
        raw.send(kind::PRELOGIN, &[0x00, 0xFF, 0xFF, 0x00, 0x06, 0xFF], 4096)
            .await;
        assert!(raw.packets().await.is_none());
        // The server still serves.
        let mut client = connect(server.addr, EncryptionLevel::NotSupported).await;
        assert_eq!(select_one(&mut client).await, 1);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn disconnect_closes_the_backend_session() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::Required).await;
        assert_eq!(select_one(&mut client).await, 1);
        drop(client);
        server.events.session_closed.notified().await;
        assert_eq!(server.events.closed.load(Ordering::SeqCst), 1);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn loginack_carries_the_product_version_the_server_reports() {
    bounded(async {
        let server = TestServer::start_with(TdsConfig::for_product_version("15.0.4355.3")).await;
        let (_raw, response) = Raw::login(server.addr, "secret", 4096).await;
        let mut ack = vec![];
        put_ucs2(&mut ack, "Microsoft SQL Server");
        // 15.0.4355 = 0x1103, the build big-endian as MS-TDS 2.2.7.14 has it.
        ack.extend_from_slice(&[15, 0, 0x11, 0x03]);
        assert!(contains(&response, &ack), "LOGINACK of SQL Server 2019");
        server.shutdown().await;
    })
    .await
}
