//! A DataFusion session that reads Delta tables under Spark-style dotted
//! names and runs Spark SQL with a fixed clock.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use deltalake::DeltaTableError;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafusion::catalog::MemorySchemaProvider;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::execution::context::SQLOptions;
use deltalake::datafusion::prelude::{SessionConfig, SessionContext};
use deltalake::datafusion::sql::parser::Statement as DfStatement;

use super::dialect::parse_spark_sql;
use super::functions::{QueryClock, register};
use crate::lake::storage::{StorageLocation, StorageOptions, register_handlers};

/// Why a query could not run.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The table name is not `table`, `schema.table` or `catalog.schema.table`.
    #[error("table name {0:?} must be table, schema.table or catalog.schema.table")]
    TableRef(String),
    /// The Delta table could not be opened.
    #[error("cannot open Delta table {name} at {location}: {source}")]
    Open {
        /// The name it was to be registered under.
        name: String,
        /// Its location.
        location: String,
        /// deltalake's error.
        source: Box<DeltaTableError>,
    },
    /// The SQL text does not parse.
    #[error("SQL does not parse: {0}")]
    Parse(String),
    /// The statement would change a table or the catalog.
    #[error(
        "mssql-cdc sql only reads: {0}. Query the tables with SELECT; change them with the \
         tool that owns them (the stream, or `mssql-cdc maintain`)"
    )]
    ReadOnly(String),
    /// DataFusion could not plan or run the query.
    #[error("{0}")]
    DataFusion(#[from] Box<DataFusionError>),
}

impl From<DataFusionError> for QueryError {
    fn from(e: DataFusionError) -> Self {
        QueryError::DataFusion(Box::new(e))
    }
}

/// A dotted table name, lower-cased as unquoted SQL identifiers are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    catalog: Option<String>,
    schema: Option<String>,
    table: String,
}

impl FromStr for TableRef {
    type Err = QueryError;

    fn from_str(text: &str) -> Result<Self, QueryError> {
        let parts: Vec<String> = text
            .split('.')
            .map(|p| p.trim().to_ascii_lowercase())
            .collect();
        if parts.iter().any(String::is_empty) {
            return Err(QueryError::TableRef(text.to_string()));
        }
        match parts.as_slice() {
            [table] => Ok(TableRef {
                catalog: None,
                schema: None,
                table: table.clone(),
            }),
            [schema, table] => Ok(TableRef {
                catalog: None,
                schema: Some(schema.clone()),
                table: table.clone(),
            }),
            [catalog, schema, table] => Ok(TableRef {
                catalog: Some(catalog.clone()),
                schema: Some(schema.clone()),
                table: table.clone(),
            }),
            _ => Err(QueryError::TableRef(text.to_string())),
        }
    }
}

impl fmt::Display for TableRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in [&self.catalog, &self.schema].into_iter().flatten() {
            write!(f, "{part}.")?;
        }
        f.write_str(&self.table)
    }
}

/// A query session: Spark functions, a fixed clock and registered tables.
pub struct SparkSession {
    ctx: SessionContext,
}

impl SparkSession {
    /// A session whose clock functions all read `clock`.
    pub fn new(clock: QueryClock) -> Result<Self, QueryError> {
        let mut config = SessionConfig::new().with_information_schema(true);
        // Spark reads 3600.0 as a decimal literal, not a double.
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        let mut ctx = SessionContext::new_with_config(config);
        register(&mut ctx, clock)?;
        Ok(SparkSession { ctx })
    }

    /// Registers the Delta table at `location` as `name`.
    pub async fn register_delta(
        &self,
        name: &TableRef,
        location: &StorageLocation,
        options: &StorageOptions,
    ) -> Result<(), QueryError> {
        register_handlers();
        let open_error = |source: DeltaTableError| QueryError::Open {
            name: name.to_string(),
            location: location.to_string(),
            source: Box::new(source),
        };
        let table =
            deltalake::open_table_with_storage_options(location.url().clone(), options.to_map())
                .await
                .map_err(open_error)?;
        table
            .update_datafusion_session(&self.ctx.state())
            .map_err(open_error)?;
        let provider = table.table_provider().await?;
        let catalog_name = name.catalog.clone().unwrap_or_else(|| {
            self.ctx
                .state()
                .config()
                .options()
                .catalog
                .default_catalog
                .clone()
        });
        let Some(catalog) = self.ctx.catalog(&catalog_name) else {
            return Err(QueryError::TableRef(name.to_string()));
        };
        let schema_name = name.schema.clone().unwrap_or_else(|| {
            self.ctx
                .state()
                .config()
                .options()
                .catalog
                .default_schema
                .clone()
        });
        let schema = match catalog.schema(&schema_name) {
            Some(schema) => schema,
            None => {
                let schema = Arc::new(MemorySchemaProvider::new());
                catalog.register_schema(&schema_name, schema.clone())?;
                schema
            }
        };
        schema.register_table(name.table.clone(), provider)?;
        Ok(())
    }

    /// Whether registered table `table` has a column `column`: monitoring
    /// queries ask before naming a column that older tables lack.
    pub async fn has_column(&self, table: &str, column: &str) -> Result<bool, QueryError> {
        let frame = self.ctx.table(table).await?;
        Ok(frame.schema().field_with_unqualified_name(column).is_ok())
    }

    /// Runs one Spark SQL statement and collects its result.
    pub async fn sql(&self, sql: &str) -> Result<Vec<RecordBatch>, QueryError> {
        let statement = parse_spark_sql(sql).map_err(|e| QueryError::Parse(e.to_string()))?;
        let state = self.ctx.state();
        let plan = state
            .statement_to_plan(DfStatement::Statement(Box::new(statement)))
            .await?;
        // The Delta provider implements INSERT: a query tool must not be a
        // way to overwrite bronze or the facts.
        SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .verify_plan(&plan)
            .map_err(|e| QueryError::ReadOnly(e.strip_backtrace()))?;
        let frame = self.ctx.execute_logical_plan(plan).await?;
        Ok(frame.collect().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::FactRow;
    use crate::lake::facts::{FactsKey, FactsTable};
    use crate::lake::txn::FactSequence;

    #[tokio::test]
    async fn statements_that_write_are_refused_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let location = StorageLocation::parse(dir.path().to_str().unwrap()).unwrap();
        let options = StorageOptions::default();
        let mut facts = FactsTable::open_or_create(&location, &options)
            .await
            .unwrap();
        let key = FactsKey {
            target: "bronze.orders".into(),
            app_id: "orders-v1".into(),
            sequence: FactSequence::Snapshot(0),
        };
        let row = FactRow::new(
            "bronze.orders",
            "orders-v1",
            None,
            Some(crate::domain::FactEvent::Bootstrap),
            chrono::Utc::now(),
        );
        facts.append(&key, &[row]).await.unwrap();
        let utc: super::super::functions::Zone = "UTC".parse().unwrap();
        let session = SparkSession::new(QueryClock::new(chrono::Utc::now(), utc)).unwrap();
        let name: TableRef = "ops.facts".parse().unwrap();
        session
            .register_delta(&name, &location, &options)
            .await
            .unwrap();
        for statement in [
            "INSERT OVERWRITE TABLE ops.facts SELECT * FROM ops.facts WHERE false",
            "INSERT INTO ops.facts SELECT * FROM ops.facts",
            "CREATE TABLE copy AS SELECT * FROM ops.facts",
            "DROP TABLE ops.facts",
        ] {
            let error = session.sql(statement).await.err();
            assert!(
                matches!(error, Some(QueryError::ReadOnly(_))),
                "{statement}: {error:?}"
            );
        }
        let count = session.sql("SELECT count(*) FROM ops.facts").await.unwrap();
        let rows = count[0]
            .column(0)
            .as_any()
            .downcast_ref::<deltalake::arrow::array::Int64Array>()
            .unwrap()
            .value(0);
        assert_eq!(rows, 1);
    }

    #[test]
    fn table_names_split_on_dots() {
        let name: TableRef = "Ops.Ingestion_Facts".parse().unwrap();
        assert_eq!(name.to_string(), "ops.ingestion_facts");
        assert_eq!("c.s.t".parse::<TableRef>().unwrap().to_string(), "c.s.t");
        for bad in ["", "a..b", "a.b.c.d"] {
            assert!(bad.parse::<TableRef>().is_err(), "{bad}");
        }
    }
}
