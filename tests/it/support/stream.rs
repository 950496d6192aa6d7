//! Running the engine under test: a manifest for a scratch database and a
//! temporary lake, in-process runs, runs of the real binary, and reading
//! bronze and facts back through DataFusion.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::DeltaTable;
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::prelude::SessionContext;
use mssql_cdc::engine::{EngineError, RunOptions, RunSummary, Silent};
use mssql_cdc::spec::{StreamConfig, load_yaml};

use super::server::{Endpoint, TestServer};

/// The variable the manifests name for the password.
pub const PASSWORD_ENV: &str = "MSSQL_CDC_IT_PASSWORD";

/// One stream of `dbo.orders` in a scratch database into a temporary lake.
pub struct StreamFixture {
    pub lake: tempfile::TempDir,
    pub manifest: String,
    pub password: String,
}

impl StreamFixture {
    /// `extra` is appended to the spec (indented two spaces), e.g.
    /// `"  maxCommitsPerBatch: 2\n"`.
    pub fn new(server: &TestServer, database: &str, extra: &str) -> Self {
        Self::with_endpoint(server.endpoint(), database, extra)
    }

    /// Like [`StreamFixture::new`], through another address (a proxy).
    pub fn with_endpoint(endpoint: Endpoint, database: &str, extra: &str) -> Self {
        let lake = tempfile::tempdir().expect("temporary lake");
        let path = |rel: &str| lake.path().join(rel).display().to_string();
        let manifest = format!(
            r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: orders}}
spec:
  appId: it-orders
  source:
    host: "{host}"
    port: {port}
    database: {database}
    table: dbo.orders
    credentials:
      username: "{user}"
      passwordFrom: {{env: {PASSWORD_ENV}}}
    encrypt: required
    trustServerCertificate: true
  target: {{name: bronze.orders, location: "{bronze}"}}
  checkpoint: "{checkpoint}"
  facts: {{name: ops.ingestion_facts, location: "{facts}"}}
  trigger: {{availableNow: true}}
{extra}"#,
            host = endpoint.host,
            port = endpoint.port,
            user = endpoint.user,
            bronze = path("bronze"),
            checkpoint = path("checkpoint"),
            facts = path("facts"),
        );
        StreamFixture {
            lake,
            manifest,
            password: endpoint.password,
        }
    }

    pub fn config(&self) -> StreamConfig {
        let stream = load_yaml(&self.manifest).expect("manifest parses");
        stream.spec.validate().expect("manifest is valid")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.lake.path().join(rel)
    }

    /// Writes the manifest to the lake directory, for the binary.
    pub fn manifest_file(&self) -> PathBuf {
        let file = self.path("stream.yaml");
        std::fs::write(&file, &self.manifest).expect("write manifest");
        file
    }

    pub fn options(&self) -> RunOptions {
        let mut options = RunOptions::new(Arc::new(Silent));
        options.once = true;
        options.env = BTreeMap::from([(PASSWORD_ENV.to_string(), self.password.clone())]);
        options
    }

    /// Runs the stream in-process until caught up.
    pub async fn run_once(&self) -> Result<RunSummary, EngineError> {
        mssql_cdc::engine::run(self.config(), self.options()).await
    }

    pub async fn bronze(&self) -> Vec<Vec<String>> {
        self.bronze_query("SELECT * FROM t ORDER BY _lsn, _seqval, _operation")
            .await
    }

    pub async fn bronze_query(&self, sql: &str) -> Vec<Vec<String>> {
        query_table(&self.path("bronze"), sql).await
    }

    /// Bronze's change rows (not the snapshot's) of a `dbo.orders` stream
    /// as `cdc::orders_changes` spells the source's: LSN, seqval,
    /// operation and id, sorted.
    pub async fn bronze_changes(&self) -> Vec<[String; 4]> {
        let mut rows: Vec<[String; 4]> = self
            .bronze_query("SELECT _lsn, _seqval, _operation, CAST(id AS STRING) FROM t WHERE _operation <> 'snapshot'")
            .await
            .into_iter()
            .map(|r| [r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone()])
            .collect();
        rows.sort();
        rows
    }

    pub async fn facts_query(&self, sql: &str) -> Vec<Vec<String>> {
        query_table(&self.path("facts"), sql).await
    }
}

/// Opens the Delta table at `dir` (as any other reader would).
pub async fn open_table(dir: &Path) -> DeltaTable {
    let url = url::Url::from_directory_path(dir).expect("absolute path");
    deltalake::open_table(url).await.expect("Delta table opens")
}

/// Runs `sql` against the table at `dir` registered as `t`; rows as strings.
pub async fn query_table(dir: &Path, sql: &str) -> Vec<Vec<String>> {
    let table = open_table(dir).await;
    let ctx = SessionContext::new();
    table
        .update_datafusion_session(&ctx.state())
        .expect("session");
    let provider = table.table_provider().await.expect("provider");
    ctx.register_table("t", provider).expect("register");
    let batches = ctx
        .sql(sql)
        .await
        .expect("query plans")
        .collect()
        .await
        .expect("query runs");
    let mut rows = Vec::new();
    for batch in batches {
        for r in 0..batch.num_rows() {
            rows.push(
                batch
                    .columns()
                    .iter()
                    .map(|c| array_value_to_string(c, r).expect("displayable"))
                    .collect(),
            );
        }
    }
    rows
}

/// Counts rows of the table at `uri` through deltalake with `options`.
pub async fn query_uri(
    uri: &str,
    options: &BTreeMap<String, String>,
    sql: &str,
) -> Vec<Vec<String>> {
    mssql_cdc::lake::register_handlers();
    let url = url::Url::parse(uri).expect("table URI");
    let table =
        deltalake::open_table_with_storage_options(url, options.clone().into_iter().collect())
            .await
            .expect("table opens");
    let ctx = SessionContext::new();
    table
        .update_datafusion_session(&ctx.state())
        .expect("session");
    ctx.register_table("t", table.table_provider().await.expect("provider"))
        .expect("register");
    let batches = ctx
        .sql(sql)
        .await
        .expect("plans")
        .collect()
        .await
        .expect("runs");
    batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |r| {
                b.columns()
                    .iter()
                    .map(|c| array_value_to_string(c, r).expect("displayable"))
                    .collect()
            })
        })
        .collect()
}
