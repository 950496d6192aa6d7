//! Test helpers: read Delta tables back through DataFusion.

use deltalake::DeltaTable;
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::prelude::SessionContext;

/// Runs `sql` against `table` registered as `t`; each row as strings.
pub(crate) async fn query(table: &DeltaTable, sql: &str) -> Vec<Vec<String>> {
    let ctx = SessionContext::new();
    table.update_datafusion_session(&ctx.state()).unwrap();
    let provider = table.table_provider().await.unwrap();
    ctx.register_table("t", provider).unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut rows = Vec::new();
    for batch in batches {
        for r in 0..batch.num_rows() {
            rows.push(
                batch
                    .columns()
                    .iter()
                    .map(|c| array_value_to_string(c, r).unwrap())
                    .collect(),
            );
        }
    }
    rows
}

/// Opens the table at `location` fresh from storage (as another reader would).
pub(crate) async fn reopen(location: &super::StorageLocation) -> DeltaTable {
    deltalake::open_table(location.url().clone()).await.unwrap()
}
