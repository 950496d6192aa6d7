//! Collated varchar columns through tiberius and the real engine: the
//! client reads COLMETADATA's collation and decodes the bytes in its code
//! page.

use std::net::SocketAddr;

use super::{bounded, connect_with, sa_config};
use crate::{Sandbox, SandboxOptions};

const PASSWORD: &str = "Collation-Pa55word!";

#[tokio::test]
async fn cyrillic_japanese_and_utf8_varchar_reach_tiberius_intact() {
    bounded(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let sandbox = Sandbox::start(SandboxOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            sa_password: PASSWORD.into(),
            ..SandboxOptions::default()
        })
        .await
        .expect("sandbox starts");
        let mut client = connect_with(sa_config(&sandbox, PASSWORD), sandbox.local_addr())
            .await
            .expect("sa connects");
        client
            .simple_query(
                "CREATE DATABASE coll
USE coll
CREATE TABLE t (id int NOT NULL PRIMARY KEY, cyr varchar(20) COLLATE Cyrillic_General_CI_AS, \
jp varchar(20) COLLATE Japanese_CI_AS, latin varchar(20), \
utf8 varchar(40) COLLATE Latin1_General_100_CI_AS_SC_UTF8)
INSERT INTO t VALUES (1, N'Жук жужжит', N'日本語', N'Жук café', N'日本 Жук été')",
            )
            .await
            .expect("batch sent")
            .into_results()
            .await
            .expect("batch runs");
        let row = client
            .simple_query(
                "SELECT cyr, jp, latin, CAST(N'Ёж' COLLATE Cyrillic_General_CI_AS AS varchar(5)), \
                 utf8 FROM t",
            )
            .await
            .expect("query")
            .into_row()
            .await
            .expect("row")
            .expect("one row");
        assert_eq!(row.get::<&str, _>(0), Some("Жук жужжит"));
        assert_eq!(row.get::<&str, _>(1), Some("日本語"));
        assert_eq!(row.get::<&str, _>(2), Some("??? café"));
        assert_eq!(row.get::<&str, _>(3), Some("Ёж"));
        // fUTF8: read as UTF-8 by the patched tiberius (vendor/README.md).
        assert_eq!(row.get::<&str, _>(4), Some("日本 Жук été"));
        drop(client);
        sandbox.stop().await.expect("sandbox stops");
    })
    .await;
}
