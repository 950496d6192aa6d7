//! Snapshot reads: the table's current rows in key order, one chunk per
//! query (keyset pagination), so a chunk is a bounded, resumable unit.

use serde_json::{Value, json};
use tiberius::ColumnData;

use super::cdc::CaptureInfo;
use super::connection::SqlClient;
use super::error::SourceError;
use super::types::{ValueKind, ValueLimit, quote_ident, quote_literal};
use crate::domain::TableName;

/// How a snapshot pages through a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Paging {
    /// Keyset pagination on the key columns, at these positions among the
    /// columns read: each chunk resumes after the last key copied.
    ByKey(Vec<usize>),
    /// One chunk: the table has no key, or a key type whose order and
    /// equality cannot be resumed from safely.
    WholeTable,
}

/// Whether a snapshot of `info`'s table can resume after a key: only when
/// every key column is read and is an integer, a string or a GUID.
pub fn paging(info: &CaptureInfo) -> Paging {
    let positions: Option<Vec<usize>> = info
        .key_columns
        .iter()
        .map(|key| {
            let position = info
                .columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(key))?;
            let kind = info.columns[position].kind().ok()?;
            matches!(
                kind,
                ValueKind::Int16
                    | ValueKind::Int32
                    | ValueKind::Int64
                    | ValueKind::Text
                    | ValueKind::Guid
            )
            .then_some(position)
        })
        .collect();
    match positions {
        Some(positions) if !positions.is_empty() => Paging::ByKey(positions),
        _ => Paging::WholeTable,
    }
}

/// The values of one key, one per key column, as SQL Server's driver
/// holds them: opaque to the engine, which keeps and hands them back.
pub type KeyValues = Vec<ColumnData<'static>>;

/// Where a chunk reads in key order: after a key (the last one read, or its
/// range's lower bound; from the start when `None`) and up to a key (its
/// range's upper bound; to the end when `None`), each a value per key
/// column.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyWindow<'a> {
    /// Keys greater than this.
    pub after: Option<&'a [ColumnData<'static>]>,
    /// Keys up to and including this.
    pub upto: Option<&'a [ColumnData<'static>]>,
}

impl KeyWindow<'_> {
    /// The query parameters, in the order [`chunk_query`] numbers them.
    pub fn params(&self) -> Vec<ColumnData<'static>> {
        let after = self.after.unwrap_or_default();
        let upto = self.upto.unwrap_or_default();
        after.iter().chain(upto).cloned().collect()
    }
}

/// The query of one chunk: up to `rows` rows within `window`, in key order.
/// Without key columns the whole table is one chunk.
pub fn chunk_query(
    table: &TableName,
    info: &CaptureInfo,
    rows: u64,
    window: KeyWindow<'_>,
    limit: ValueLimit,
) -> String {
    let mut columns: Vec<String> = info
        .columns
        .iter()
        .map(|c| c.select_expr(None, limit))
        .collect();
    columns.extend(limit.guard_columns(&info.columns, None));
    let from = format!(
        "{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.table)
    );
    if info.key_columns.is_empty() {
        return format!("SELECT {} FROM {from}", columns.join(", "));
    }
    let keys: Vec<String> = info.key_columns.iter().map(|k| quote_ident(k)).collect();
    let parameters = |first: usize| -> Vec<String> {
        info.key_columns
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let parameter = format!("@P{}", first + i);
                info.columns
                    .iter()
                    .find(|c| c.name.eq_ignore_ascii_case(key))
                    .map_or_else(|| parameter.clone(), |c| c.parameter_expr(&parameter))
            })
            .collect()
    };
    let mut terms = Vec::new();
    let mut next = 1;
    if window.after.is_some_and(|values| !values.is_empty()) {
        terms.push(format!("({})", after_predicate(&keys, &parameters(next))));
        next += keys.len();
    }
    if window.upto.is_some_and(|values| !values.is_empty()) {
        // Keys are never NULL where they page, so "not after" is "up to".
        terms.push(format!(
            "NOT ({})",
            after_predicate(&keys, &parameters(next))
        ));
    }
    let predicate = if terms.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", terms.join(" AND "))
    };
    format!(
        "SELECT TOP ({rows}) {} FROM {from}{predicate} ORDER BY {}",
        columns.join(", "),
        keys.join(", ")
    )
}

/// `(k1, k2) > (p1, p2)` spelled out for T-SQL:
/// `k1 > p1 OR (k1 = p1 AND k2 > p2)`.
fn after_predicate(keys: &[String], parameters: &[String]) -> String {
    let mut terms = Vec::new();
    for (i, (key, parameter)) in keys.iter().zip(parameters).enumerate() {
        let mut parts: Vec<String> = keys[..i]
            .iter()
            .zip(parameters)
            .map(|(k, p)| format!("{k} = {p}"))
            .collect();
        parts.push(format!("{key} > {parameter}"));
        terms.push(format!("({})", parts.join(" AND ")));
    }
    terms.join(" OR ")
}

/// Whether the table has a row within `window` (the keys after the last
/// one read, up to the range's end), on the same session that read the
/// chunk. A chunk shorter than asked for ends its range, so the end is
/// confirmed rather than taken from the row count: a session killed
/// mid-result may end it with a DONE token carrying only an error flag,
/// which the driver takes for the end. A killed session's connection is
/// closed, so this query then fails too.
pub async fn has_rows_within(
    client: &mut SqlClient,
    table: &TableName,
    info: &CaptureInfo,
    window: KeyWindow<'_>,
) -> Result<bool, SourceError> {
    // Only whether a row exists matters: no value of any size is sent.
    let sql = chunk_query(table, info, 1, window, ValueLimit::new(0));
    let values = window.params();
    let params: Vec<&dyn tiberius::ToSql> =
        values.iter().map(|p| p as &dyn tiberius::ToSql).collect();
    let context = "confirming the end of the snapshot";
    let row = client
        .query(sql.as_str(), &params)
        .await
        .map_err(SourceError::sql(context))?
        .into_row()
        .await
        .map_err(SourceError::sql(context))?;
    Ok(row.is_some())
}

/// The table's row count as the catalog estimates it (for progress), or an
/// exact count where the catalog has no partitions view.
pub async fn estimated_rows(client: &mut SqlClient, table: &TableName) -> Option<u64> {
    let qualified = format!(
        "{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.table)
    );
    let estimate = format!(
        "SELECT SUM(p.rows) FROM sys.partitions AS p WHERE p.object_id = OBJECT_ID({}) AND p.index_id IN (0, 1)",
        quote_literal(&qualified)
    );
    if let Some(n) = count(client, &estimate).await {
        return Some(n);
    }
    count(client, &format!("SELECT COUNT_BIG(*) FROM {qualified}")).await
}

async fn count(client: &mut SqlClient, sql: &str) -> Option<u64> {
    let row = client.query(sql, &[]).await.ok()?.into_row().await.ok()??;
    match row.into_iter().next()? {
        ColumnData::I64(Some(n)) => u64::try_from(n).ok(),
        ColumnData::I32(Some(n)) => u64::try_from(n).ok(),
        _ => None,
    }
}

/// A key value as JSON, so a snapshot's position survives in a commit's
/// metadata; `None` for types that cannot be resumed from.
pub fn key_to_json(value: &ColumnData<'_>) -> Option<Value> {
    Some(match value {
        ColumnData::U8(Some(v)) => json!({"int": v}),
        ColumnData::I16(Some(v)) => json!({"int": v}),
        ColumnData::I32(Some(v)) => json!({"int": v}),
        ColumnData::I64(Some(v)) => json!({"int": v}),
        ColumnData::String(Some(v)) => json!({"text": v}),
        ColumnData::Guid(Some(v)) => json!({"guid": v.to_string()}),
        _ => return None,
    })
}

/// The inverse of [`key_to_json`].
pub fn key_from_json(value: &Value) -> Option<ColumnData<'static>> {
    if let Some(v) = value.get("int") {
        return v.as_i64().map(|v| ColumnData::I64(Some(v)));
    }
    if let Some(v) = value.get("text") {
        return v
            .as_str()
            .map(|v| ColumnData::String(Some(v.to_string().into())));
    }
    if let Some(v) = value.get("guid") {
        return v
            .as_str()
            .and_then(|v| v.parse().ok())
            .map(|v| ColumnData::Guid(Some(v)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CaptureInstance;
    use crate::source::types::SqlColumn;

    fn column(name: &str, type_name: &str) -> SqlColumn {
        SqlColumn {
            name: name.into(),
            type_name: type_name.into(),
            max_length: 8,
            precision: 0,
            scale: 0,
            nullable: false,
            column_id: None,
            collation: None,
        }
    }

    fn info(keys: &[&str]) -> CaptureInfo {
        CaptureInfo {
            instance: CaptureInstance::new("dbo_t").unwrap(),
            change_table_id: 1,
            columns: vec![
                column("id", "bigint"),
                column("code", "nvarchar"),
                column("guid", "uniqueidentifier"),
                column("price", "decimal"),
                column("at", "datetime2"),
            ],
            key_columns: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn a_varchar_key_is_compared_in_its_own_type() {
        let mut info = info(&["id", "code"]);
        info.columns[1] = column("code", "varchar");
        let table = TableName::parse("dbo.t").unwrap();
        let after = [
            ColumnData::I64(Some(7)),
            ColumnData::String(Some("x".into())),
        ];
        let window = KeyWindow {
            after: Some(&after),
            upto: None,
        };
        let sql = chunk_query(&table, &info, 100, window, ValueLimit::none());
        assert!(
            sql.ends_with(
                "WHERE (([id] > @P1) OR ([id] = @P1 AND [code] > CAST(@P2 AS varchar(8)))) \
                 ORDER BY [id], [code]"
            ),
            "{sql}"
        );
        let first = chunk_query(&table, &info, 100, KeyWindow::default(), ValueLimit::none());
        assert!(!first.contains("WHERE"), "{first}");
    }

    #[test]
    fn a_range_reads_after_its_lower_bound_up_to_its_upper_one() {
        let info = info(&["id"]);
        let table = TableName::parse("dbo.t").unwrap();
        let (low, high) = ([ColumnData::I64(Some(10))], [ColumnData::I64(Some(20))]);
        let both = KeyWindow {
            after: Some(&low),
            upto: Some(&high),
        };
        let sql = chunk_query(&table, &info, 5, both, ValueLimit::none());
        assert!(
            sql.ends_with("WHERE (([id] > @P1)) AND NOT (([id] > @P2)) ORDER BY [id]"),
            "{sql}"
        );
        assert_eq!(both.params().len(), 2);
        let first_range = KeyWindow {
            after: None,
            upto: Some(&high),
        };
        let sql = chunk_query(&table, &info, 5, first_range, ValueLimit::none());
        assert!(
            sql.ends_with("WHERE NOT (([id] > @P1)) ORDER BY [id]"),
            "{sql}"
        );
    }

    #[test]
    fn snapshots_page_by_key_only_where_the_key_resumes_safely() {
        let cases: [(&str, &[&str], Paging); 7] = [
            ("bigint key", &["id"], Paging::ByKey(vec![0])),
            (
                "composite of int, text, guid",
                &["ID", "code", "guid"],
                Paging::ByKey(vec![0, 1, 2]),
            ),
            ("no key", &[], Paging::WholeTable),
            ("decimal key", &["price"], Paging::WholeTable),
            ("datetime key", &["at"], Paging::WholeTable),
            ("one part unsupported", &["id", "at"], Paging::WholeTable),
            ("key column not read", &["missing"], Paging::WholeTable),
        ];
        for (name, keys, expected) in cases {
            assert_eq!(paging(&info(keys)), expected, "{name}");
        }
    }

    #[test]
    fn composite_keys_compare_lexicographically() {
        let keys = vec!["[a]".to_string(), "[b]".to_string()];
        let parameters = vec!["@P1".to_string(), "CAST(@P2 AS varchar(10))".to_string()];
        assert_eq!(
            after_predicate(&keys, &parameters),
            "([a] > @P1) OR ([a] = @P1 AND [b] > CAST(@P2 AS varchar(10)))"
        );
    }

    #[test]
    fn keys_round_trip_through_json() {
        for value in [
            ColumnData::I32(Some(7)),
            ColumnData::String(Some("x'y".into())),
        ] {
            let json = key_to_json(&value).expect("supported key");
            let back = key_from_json(&json).expect("decodes");
            assert_eq!(key_to_json(&back), Some(json));
        }
        assert!(key_to_json(&ColumnData::F64(Some(1.0))).is_none());
    }
}
