//! The unique keys of a source table, as its catalog declares them: its
//! primary key, unique constraints and unique indexes. A silver table's key
//! must contain the columns of one of them, or rows that share it would be
//! merged into one.
//!
//! Only indexes that hold for every row count: a filtered index
//! (`has_filter`) lets rows outside its filter repeat, and a disabled or
//! hypothetical one enforces nothing. Included columns are not part of the
//! key. Plain `sys.indexes`, `sys.index_columns` and `sys.columns`, so it
//! runs the same against SQL Server and the sandbox.

use tiberius::Row;

use super::SourceError;
use super::cdc::all_rows;
use super::connection::SqlClient;
use super::types::{quote_literal, quote_table};
use crate::domain::TableName;

/// What declares a unique key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniqueKind {
    /// `PRIMARY KEY`.
    PrimaryKey,
    /// `UNIQUE` constraint.
    UniqueConstraint,
    /// `CREATE UNIQUE INDEX`.
    UniqueIndex,
}

impl UniqueKind {
    /// How a message names it.
    pub fn describe(self) -> &'static str {
        match self {
            UniqueKind::PrimaryKey => "primary key",
            UniqueKind::UniqueConstraint => "unique constraint",
            UniqueKind::UniqueIndex => "unique index",
        }
    }
}

/// One unique key of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqueKey {
    /// The index's name.
    pub name: String,
    /// What declares it.
    pub kind: UniqueKind,
    /// Its key columns, in key order.
    pub columns: Vec<String>,
}

const QUERY: &str = "SELECT i.index_id, i.name, i.is_primary_key, i.is_unique_constraint, c.name \
     FROM sys.indexes AS i \
     JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id \
     JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id \
     WHERE i.object_id = OBJECT_ID({table}) AND i.is_unique = 1 AND i.has_filter = 0 \
       AND i.is_disabled = 0 AND i.is_hypothetical = 0 AND ic.is_included_column = 0 \
     ORDER BY i.index_id, ic.key_ordinal";

/// The unique keys of `table`, in index order (empty for a heap without
/// any, or a table the login cannot see).
pub async fn unique_keys(
    client: &mut SqlClient,
    table: &TableName,
) -> Result<Vec<UniqueKey>, SourceError> {
    let qualified = quote_table(table);
    let sql = QUERY.replace("{table}", &quote_literal(&qualified));
    let context = format!("unique indexes of {}.{}", table.schema, table.table);
    let rows = all_rows(client, &sql, &[], &context).await?;
    let mut keys: Vec<(i32, UniqueKey)> = Vec::new();
    for row in &rows {
        let (index_id, key, column) = key_column(row, &context)?;
        match keys.last_mut() {
            Some((id, last)) if *id == index_id => last.columns.push(column),
            _ => keys.push((
                index_id,
                UniqueKey {
                    columns: vec![column],
                    ..key
                },
            )),
        }
    }
    Ok(keys.into_iter().map(|(_, key)| key).collect())
}

/// One row of [`QUERY`]: the index id, the key (without columns) and the
/// column.
fn key_column(row: &Row, context: &str) -> Result<(i32, UniqueKey, String), SourceError> {
    let missing = |what: &str| SourceError::Missing(format!("{context}: {what}"));
    let index_id: Option<i32> = row.try_get(0).map_err(SourceError::sql(context))?;
    let name: Option<&str> = row.try_get(1).map_err(SourceError::sql(context))?;
    let primary: Option<bool> = row.try_get(2).map_err(SourceError::sql(context))?;
    let constraint: Option<bool> = row.try_get(3).map_err(SourceError::sql(context))?;
    let column: Option<&str> = row.try_get(4).map_err(SourceError::sql(context))?;
    let kind = match (primary, constraint) {
        (Some(true), _) => UniqueKind::PrimaryKey,
        (_, Some(true)) => UniqueKind::UniqueConstraint,
        _ => UniqueKind::UniqueIndex,
    };
    Ok((
        index_id.ok_or_else(|| missing("index_id"))?,
        UniqueKey {
            name: name.ok_or_else(|| missing("name"))?.to_string(),
            kind,
            columns: Vec::new(),
        },
        column.ok_or_else(|| missing("column name"))?.to_string(),
    ))
}
