//! Where a snapshot's table is split for a parallel read: keys sampled from
//! the table in key order, and the bounds chosen among them so that each
//! key range holds about as many rows. SQL Server orders the sample and
//! later compares keys with the bounds, so the ranges follow its own
//! ordering (collations included), whatever the key's type.

use serde_json::Value;
use tiberius::ColumnData;

use super::SourceError;
use super::cdc::CaptureInfo;
use super::connection::SqlClient;
use super::snapshot::key_to_json;
use super::types::quote_ident;
use crate::domain::TableName;

/// Up to this many rows (as the catalog estimates them), every key is read
/// to choose the bounds: exact, and cheap next to the snapshot's own read.
/// A small table may also sit on one page, which `TABLESAMPLE` returns
/// whole or not at all.
pub const EXACT_UP_TO_ROWS: u64 = 200_000;

/// Keys a sample of a larger table aims at.
pub const SAMPLE_KEYS: u64 = 20_000;

/// How to read the keys the bounds are chosen from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeySample {
    /// Every key.
    All,
    /// `TABLESAMPLE SYSTEM (percent PERCENT)`: the keys on about this share
    /// of the table's pages.
    Percent(f64),
}

/// The sample for a table of about `estimated_rows` rows; `None` when the
/// size is unknown (the table is then read in one range).
pub fn sample_for(estimated_rows: Option<u64>) -> Option<KeySample> {
    let rows = estimated_rows?;
    if rows <= EXACT_UP_TO_ROWS {
        return Some(KeySample::All);
    }
    let percent = (SAMPLE_KEYS as f64 * 100.0 / rows as f64).clamp(0.001, 100.0);
    Some(KeySample::Percent(percent))
}

/// The query reading the key columns of `info`'s table, in key order.
pub fn sample_query(table: &TableName, info: &CaptureInfo, sample: KeySample) -> String {
    let keys: Vec<String> = info.key_columns.iter().map(|k| quote_ident(k)).collect();
    let from = format!(
        "{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.table)
    );
    let tablesample = match sample {
        KeySample::All => String::new(),
        KeySample::Percent(percent) => format!(" TABLESAMPLE SYSTEM ({percent:.4} PERCENT)"),
    };
    format!(
        "SELECT {} FROM {from}{tablesample} ORDER BY {}",
        keys.join(", "),
        keys.join(", ")
    )
}

/// The sampled keys, in the table's key order, as JSON (rows with a key
/// value that cannot be resumed from, such as NULL, are left out).
pub async fn sample_keys(
    client: &mut SqlClient,
    table: &TableName,
    info: &CaptureInfo,
    sample: KeySample,
) -> Result<Vec<Vec<Value>>, SourceError> {
    let context = "sampling the table's keys";
    let rows = client
        .query(sample_query(table, info, sample).as_str(), &[])
        .await
        .map_err(SourceError::sql(context))?
        .into_first_result()
        .await
        .map_err(SourceError::sql(context))?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            row.into_iter()
                .map(|value: ColumnData<'static>| key_to_json(&value))
                .collect::<Option<Vec<_>>>()
        })
        .collect())
}

/// The bounds that split `sample` (keys in key order) into at most
/// `ranges` ranges of about equal size: range 0 holds the keys up to the
/// first bound, range `i` those after bound `i - 1` up to bound `i`, the
/// last those after the last bound. Ascending and distinct; empty when
/// the sample cannot split the table.
pub fn bounds(sample: &[Vec<Value>], ranges: usize) -> Vec<Vec<Value>> {
    let mut bounds: Vec<Vec<Value>> = Vec::new();
    if ranges < 2 {
        return bounds;
    }
    for i in 1..ranges {
        // The last key of range i - 1: its share of the sample.
        let Some(at) = (sample.len() * i / ranges).checked_sub(1) else {
            continue;
        };
        let Some(key) = sample.get(at) else {
            continue;
        };
        if bounds.last() != Some(key) {
            bounds.push(key.clone());
        }
    }
    // A bound at the last sampled key would leave the last range only keys
    // the sample did not see.
    if sample
        .last()
        .is_some_and(|last| bounds.last() == Some(last))
    {
        bounds.pop();
    }
    bounds
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::CaptureInstance;
    use crate::source::types::SqlColumn;

    fn keys(values: impl IntoIterator<Item = i64>) -> Vec<Vec<Value>> {
        values
            .into_iter()
            .map(|v| vec![json!({"int": v})])
            .collect()
    }

    #[test]
    fn bounds_give_ranges_of_about_equal_size() {
        type Case = (&'static str, Vec<Vec<Value>>, usize, Vec<Vec<Value>>);
        let cases: [Case; 6] = [
            ("two ranges", keys(1..=10), 2, keys([5])),
            ("four ranges", keys(1..=100), 4, keys([25, 50, 75])),
            ("uneven sample", keys(1..=10), 3, keys([3, 6])),
            ("fewer keys than ranges", keys([7, 9]), 4, keys([7])),
            ("one key cannot split", keys([7]), 4, Vec::new()),
            ("one range", keys(1..=10), 1, Vec::new()),
        ];
        for (name, sample, ranges, expected) in cases {
            assert_eq!(bounds(&sample, ranges), expected, "{name}");
        }
    }

    #[test]
    fn small_tables_are_read_whole_and_large_ones_sampled() {
        assert_eq!(sample_for(None), None);
        assert_eq!(sample_for(Some(0)), Some(KeySample::All));
        assert_eq!(sample_for(Some(EXACT_UP_TO_ROWS)), Some(KeySample::All));
        assert_eq!(
            sample_for(Some(SAMPLE_KEYS * 100)),
            Some(KeySample::Percent(1.0))
        );
        assert_eq!(sample_for(Some(u64::MAX)), Some(KeySample::Percent(0.001)));
    }

    #[test]
    fn the_sample_reads_the_key_columns_in_key_order() {
        let column = |name: &str| SqlColumn {
            name: name.into(),
            type_name: "int".into(),
            max_length: 4,
            precision: 0,
            scale: 0,
            nullable: false,
            column_id: None,
            collation: None,
        };
        let info = CaptureInfo {
            instance: CaptureInstance::new("dbo_t").unwrap(),
            change_table_id: 1,
            columns: vec![column("a"), column("b"), column("note")],
            key_columns: vec!["a".into(), "b".into()],
        };
        let table = TableName::parse("dbo.t").unwrap();
        assert_eq!(
            sample_query(&table, &info, KeySample::All),
            "SELECT [a], [b] FROM [dbo].[t] ORDER BY [a], [b]"
        );
        assert_eq!(
            sample_query(&table, &info, KeySample::Percent(2.5)),
            "SELECT [a], [b] FROM [dbo].[t] TABLESAMPLE SYSTEM (2.5000 PERCENT) ORDER BY [a], [b]"
        );
    }
}
