//! Collated varchar columns through tiberius and the real engine: the
//! client reads COLMETADATA's collation and decodes the bytes in its code
//! page.

use std::net::SocketAddr;

use tiberius::{AuthMethod, Config, EncryptionLevel};

use super::{bounded, connect_with};
use crate::{Sandbox, SandboxOptions};

const PASSWORD: &str = "Collation-Pa55word!";

#[tokio::test]
async fn cyrillic_and_japanese_varchar_reach_tiberius_intact() {
    bounded(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let sandbox = Sandbox::start(SandboxOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            sa_password: PASSWORD.into(),
            ..SandboxOptions::default()
        })
        .await
        .expect("sandbox starts");
        let mut config = Config::new();
        config.host("127.0.0.1");
        config.port(sandbox.local_addr().port());
        config.authentication(AuthMethod::sql_server("sa", PASSWORD));
        config.encryption(EncryptionLevel::Required);
        config.trust_cert();
        let mut client = connect_with(config, sandbox.local_addr())
            .await
            .expect("sa connects");
        client
            .simple_query(
                "CREATE DATABASE coll
USE coll
CREATE TABLE t (id int NOT NULL PRIMARY KEY, cyr varchar(20) COLLATE Cyrillic_General_CI_AS, \
jp varchar(20) COLLATE Japanese_CI_AS, latin varchar(20))
INSERT INTO t VALUES (1, N'Жук жужжит', N'日本語', N'Жук café')",
            )
            .await
            .expect("batch sent")
            .into_results()
            .await
            .expect("batch runs");
        let row = client
            .simple_query("SELECT cyr, jp, latin, CAST(N'Ёж' COLLATE Cyrillic_General_CI_AS AS varchar(5)) FROM t")
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
        drop(client);
        sandbox.stop().await.expect("sandbox stops");
    })
    .await;
}
