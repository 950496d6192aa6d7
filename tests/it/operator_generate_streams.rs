//! `mssql-cdc generate-streams` end to end: the real binary against the
//! sandbox, on a source file holding a CdcSource and one of its streams,
//! its output applied with the real `kubectl` to the test API server.

use std::time::Duration;

use kube::Api;
use mssql_cdc::spec::CdcStream;

use crate::operator_worker::source_manifests;
use crate::support::kube::KubeEnv;
use crate::support::server::{TestServer, run};
use crate::support::stream::StreamFixture;
use crate::support::tools::run_mssql_cdc;

#[tokio::test]
async fn generated_streams_name_each_uncovered_table_once_and_kubectl_accepts_them() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for table in ["orders", "items", "audit_log"] {
        crate::engine_source::seeded_capture(&mut client, table, 1).await;
    }
    // A captured table of another schema, and a table not captured.
    for sql in [
        "CREATE SCHEMA sales",
        "CREATE TABLE sales.invoices (id int NOT NULL PRIMARY KEY, note nvarchar(40) NULL)",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'sales', @source_name = N'invoices', \
         @role_name = NULL",
        "CREATE TABLE dbo.plain (id int NOT NULL PRIMARY KEY)",
    ] {
        run(&mut client, sql).await.expect(sql);
    }
    let fixture = StreamFixture::new(&server, &db, "");
    let kube = KubeEnv::start().await;
    kube.install_crd().await;
    // The file's one stream covers dbo.orders; it is named as the stream
    // generated for dbo.items would be, which must not take its place.
    let source = source_manifests(
        &server,
        &db,
        fixture.lake.path(),
        &[("sales-items", "dbo.orders")],
        ("", "{processingTime: 5s}"),
    );
    let file = kube.write("sales.yaml", &source);

    let output = generate(
        &file,
        &[
            "--include",
            "dbo.*",
            "--include",
            "SALES.*",
            "--exclude",
            "*_log",
        ],
        &fixture.password,
    )
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    assert!(
        !stdout.contains(&fixture.password) && !stderr.contains(&fixture.password),
        "the password is never printed"
    );

    let generated = kube.write("generated.yaml", &stdout);
    kube.kubectl_ok(&["apply", "-n", "default", "-f", &file])
        .await;
    let applied = kube
        .kubectl_ok(&["apply", "-n", "default", "-f", &generated])
        .await;
    assert_eq!(
        applied.lines().filter(|l| l.ends_with(" created")).count(),
        2,
        "a stream for dbo.items and one for sales.invoices, each a new object: {applied}"
    );

    let api: Api<CdcStream> = Api::namespaced(kube.client().await, "default");
    let mut tables: Vec<(String, String)> = api
        .list(&Default::default())
        .await
        .expect("the streams")
        .items
        .into_iter()
        .map(|s| {
            let name = s.metadata.name.unwrap_or_default();
            (s.spec.source.table, name)
        })
        .collect();
    tables.sort();
    let by_table: Vec<&str> = tables.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        by_table,
        ["dbo.items", "dbo.orders", "sales.invoices"],
        "each uncovered, included table once; the covered, the excluded and the \
         uncaptured ones left out: {tables:?}"
    );
    let names: Vec<&str> = tables.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        names[1], "sales-items",
        "the file's own stream is untouched"
    );
    assert!(
        names[0].starts_with("sales-items-") && names[0].len() <= 60,
        "the stream of dbo.items takes another name: {names:?}"
    );
    assert_eq!(names[2], "sales-sales-invoices");
    let invoices = api.get("sales-sales-invoices").await.expect("its stream");
    assert_eq!(
        invoices.spec.source_ref.map(|r| r.name).as_deref(),
        Some("sales")
    );
    assert_eq!(
        invoices.spec.target.location,
        "s3://lake/sales/bronze/sales/invoices"
    );

    // Run again on the file and its output: nothing is left to generate.
    let both = kube.write("both.yaml", &format!("{source}{stdout}"));
    let again = generate(&both, &[], &fixture.password).await;
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let printed = String::from_utf8_lossy(&again.stdout).to_string();
    assert!(
        printed.contains("table: dbo.audit_log") && !printed.contains("dbo.items"),
        "without patterns only the excluded table is left: {printed}"
    );
}

/// `mssql-cdc generate-streams --source FILE --lake s3://lake/sales ARGS`,
/// the password in a variable as `--password-env` names it.
async fn generate(file: &str, args: &[&str], password: &str) -> std::process::Output {
    let mut all = vec![
        "generate-streams",
        "--source",
        file,
        "--lake",
        "s3://lake/sales",
        "--password-env",
        "GENERATE_PW",
    ];
    all.extend_from_slice(args);
    run_mssql_cdc(all, &[("GENERATE_PW", password)], Duration::from_secs(60)).await
}
