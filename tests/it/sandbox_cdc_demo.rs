//! `mssql-cdc sandbox --demo` as the library runs it: the shop database
//! with CDC, a generator whose changes reach the change tables, and the
//! release knob.

use std::net::SocketAddr;

use mssql_cdc_sandbox::{DemoOptions, Sandbox, SandboxOptions, SqlVersion};
use tiberius::{AuthMethod, Config, EncryptionLevel};

use crate::support::TestServer;
use crate::support::cdc::wait_for_capture;
use crate::support::scalar;

const PASSWORD: &str = "Demo-Sandbox-Pa55!";

#[tokio::test]
async fn the_demo_keeps_changing_cdc_enabled_tables() {
    let helper = TestServer::start().await; // installs the TLS provider
    let sandbox = Sandbox::start(SandboxOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        sa_password: PASSWORD.into(),
        sql_version: SqlVersion::Sql2019,
        demo: Some(DemoOptions {
            rate: 200.0,
            seed: 5,
        }),
        ..SandboxOptions::default()
    })
    .await
    .expect("the demo sandbox starts");
    let mut config = Config::new();
    config.host(sandbox.local_addr().ip());
    config.port(sandbox.local_addr().port());
    config.authentication(AuthMethod::sql_server("sa", PASSWORD));
    config.encryption(EncryptionLevel::Required);
    config.trust_cert();
    config.database("shop");
    let mut client = helper.connect_with(config).await.expect("connects to shop");

    let version: Option<String> = scalar(
        &mut client,
        "SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(32))",
    )
    .await;
    assert!(
        version.as_deref().is_some_and(|v| v.starts_with("15.")),
        "--product-version 2019: {version:?}"
    );
    let tracked: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM sys.tables WHERE is_tracked_by_cdc = 1 AND name IN (N'orders', N'customers')",
    )
    .await;
    assert_eq!(tracked, Some(2), "both demo tables are CDC-enabled");

    wait_for_capture(&mut client, "dbo_orders", None, 10).await;
    let operations: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(DISTINCT __$operation) FROM cdc.dbo_orders_CT",
    )
    .await;
    assert!(
        operations.unwrap_or(0) >= 2,
        "inserts and updates or deletes: {operations:?}"
    );
    assert!(sandbox.demo_changes().unwrap_or(0) >= 10);
    drop(client);
    sandbox
        .stop()
        .await
        .expect("the sandbox stops with its demo");
}
