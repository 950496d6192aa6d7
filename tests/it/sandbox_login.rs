//! Logging in: every encryption mode a client can ask for, and failures.

use tiberius::EncryptionLevel;

use crate::support::{TestServer, run, scalar, server_error};

async fn select_one(server: &TestServer, level: EncryptionLevel) -> (i32, Option<bool>) {
    let mut config = server.config();
    config.encryption(level);
    select_one_with(server, config).await
}

async fn select_one_with(server: &TestServer, config: tiberius::Config) -> (i32, Option<bool>) {
    let mut client = server.connect_with(config).await.expect("login succeeds");
    let row = client
        .query(
            "SELECT 1 AS one, CAST(CASE c.encrypt_option WHEN 'TRUE' THEN 1 ELSE 0 END AS bit) AS encrypted \
             FROM sys.dm_exec_connections AS c WHERE c.session_id = @@SPID",
            &[],
        )
        .await
        .expect("query runs")
        .into_row()
        .await
        .expect("row arrives")
        .expect("one row for this session");
    (row.get::<i32, _>(0).expect("one"), row.get::<bool, _>(1))
}

#[tokio::test]
async fn login_without_encryption_sends_no_tls() {
    let server = TestServer::start().await;
    let (one, encrypted) = select_one(&server, EncryptionLevel::NotSupported).await;
    assert_eq!(one, 1);
    assert_eq!(encrypted, Some(false));
}

#[tokio::test]
async fn login_only_encryption_leaves_the_session_in_plain_text() {
    let server = TestServer::start().await;
    let (one, encrypted) = select_one(&server, EncryptionLevel::Off).await;
    assert_eq!(one, 1);
    assert_eq!(encrypted, Some(false));
}

#[tokio::test]
async fn full_tls_encrypts_the_session() {
    let server = TestServer::start().await;
    let (one, encrypted) = select_one(&server, EncryptionLevel::Required).await;
    assert_eq!(one, 1);
    assert_eq!(encrypted, Some(true));
}

#[tokio::test]
async fn wrong_password_fails_with_18456() {
    let server = TestServer::start().await;
    let config = server.config_as("sa", "certainly-not-the-password");
    let error = server
        .connect_with(config)
        .await
        .expect_err("login is refused");
    let (number, class, _) = server_error(&error).expect("a server error token");
    assert_eq!((number, class), (18456, 14));
}

#[tokio::test]
async fn unknown_login_fails_with_18456_and_the_same_message() {
    let server = TestServer::start().await;
    let config = server.config_as("nobody_here", "whatever-1A!");
    let error = server
        .connect_with(config)
        .await
        .expect_err("login is refused");
    assert_eq!(server_error(&error).map(|e| e.0), Some(18456));
    assert!(
        error
            .to_string()
            .contains("Login failed for user 'nobody_here'"),
        "{error}"
    );
}

#[tokio::test]
async fn initial_database_is_the_one_asked_for() {
    let server = TestServer::start().await;
    let (mut client, name) = server.scratch_database().await;
    let row = client
        .query("SELECT DB_NAME()", &[])
        .await
        .expect("query runs")
        .into_row()
        .await
        .expect("row arrives")
        .expect("one row");
    assert_eq!(row.get::<&str, _>(0), Some(name.as_str()));
}

#[tokio::test]
async fn least_privilege_login_reads_only_what_it_was_granted() {
    let server = TestServer::start().await;
    let (mut admin, db) = server.scratch_database().await;
    let login = format!("reader_{}", &db[3..15]);
    run(
        &mut admin,
        &format!(
            "CREATE TABLE dbo.granted (id int PRIMARY KEY); \
             CREATE TABLE dbo.secret (id int PRIMARY KEY); \
             INSERT INTO dbo.granted VALUES (1), (2); \
             CREATE LOGIN [{login}] WITH PASSWORD = 'Reader-Pa55word!'; \
             CREATE USER [{login}] FOR LOGIN [{login}]; \
             GRANT SELECT ON dbo.granted TO [{login}];"
        ),
    )
    .await
    .expect("setup runs");

    let mut config = server.config_as(&login, "Reader-Pa55word!");
    config.database(&db);
    let mut reader = server.connect_with(config).await.expect("reader logs in");
    let count: Option<i32> = scalar(&mut reader, "SELECT COUNT(*) FROM dbo.granted").await;
    assert_eq!(count, Some(2));

    let denied = run(&mut reader, "SELECT * FROM dbo.secret")
        .await
        .expect_err("SELECT on an ungranted table is denied");
    assert_eq!(server_error(&denied).map(|e| e.0), Some(229), "{denied}");
}

/// `encrypt:` as a manifest says it, through the engine's own client
/// configuration: `optional` encrypts the whole session when the server
/// offers TLS, not the login alone.
#[tokio::test]
async fn the_manifest_encrypt_policy_decides_whether_the_session_is_encrypted() {
    let server = TestServer::start().await;
    for (encrypt, encrypted) in [("required", true), ("optional", true), ("off", false)] {
        let fixture = crate::support::stream::StreamFixture::new(&server, "master", "");
        let manifest = fixture
            .manifest
            .replace("encrypt: required", &format!("encrypt: {encrypt}"));
        let stream = mssql_cdc::spec::load_yaml(&manifest).expect("manifest parses");
        let config = stream.spec.validate().expect("manifest is valid");
        let password = secrecy::SecretString::from(fixture.password.clone());
        let client = mssql_cdc::source::client_config(&config.source, &password);
        let (one, on_the_wire) = select_one_with(&server, client).await;
        assert_eq!(one, 1);
        assert_eq!(on_the_wire, Some(encrypted), "encrypt: {encrypt}");
    }
}
