//! Which of many tables changed in a round: one statement asks every
//! change table of a chunk at once whether it holds a row in its window, so
//! a worker streaming a whole database pays a constant number of round
//! trips per round, whatever its number of quiet tables (issue 30).
//!
//! The statement is one `SELECT <index> WHERE EXISTS (...)` per window,
//! joined with `UNION ALL`. Each EXISTS is a seek on the change table's
//! clustered index (`__$start_lsn`, `__$seqval`, `__$operation`) that stops
//! at the first row, and a branch whose table has no row in its window
//! sends nothing back. The change tables are read directly, not through
//! `cdc.fn_cdc_get_all_changes_<instance>`, because a table-valued function
//! per branch would check its range against the validity interval and
//! raise 313 for one purged table, failing the other tables' answers.
//! Instance names are quoted as identifiers; LSNs are always bound.

use tiberius::{ColumnData, ToSql};

use super::SourceError;
use super::cdc::all_rows;
use super::connection::SqlClient;
use super::types::quote_ident;
use crate::domain::{CaptureInstance, Lsn};

/// Windows asked per statement: with 1,000 tables that is 5 statements.
/// The bound keeps the statement's text (a few hundred bytes a window) and
/// its parameters (one a window, SQL Server takes 2,100) well inside what
/// SQL Server compiles quickly and caches; the text of a chunk stays the
/// same from round to round while its tables do, so its plan is reused.
pub const CHUNK: usize = 200;

/// One table's window: changes after `after` up to the round's max LSN.
/// `after` is the last LSN the table's stream has read, so the question is
/// the one its next batch would ask, without reading anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeWindow {
    /// The capture instance whose change table is asked.
    pub instance: CaptureInstance,
    /// The window starts after this LSN.
    pub after: Lsn,
}

/// The answer of [`changed_tables`]: the tables to read this round, and
/// the tables that could not be asked, each with its own error, so one
/// missing or unreadable change table stops only its own stream.
#[derive(Debug, Default)]
pub struct ChangedTables {
    /// Instances with at least one change row in their window, in the order
    /// of the windows asked.
    pub changed: Vec<CaptureInstance>,
    /// Instances whose change table SQL Server refused (208: it does not
    /// exist; 229/230: the login may not read it), with that error.
    pub failed: Vec<(CaptureInstance, SourceError)>,
}

/// Which of `windows` have at least one change row in (after, upto]: one
/// statement for all of them (chunked at most [`CHUNK`] windows per
/// statement so the text stays bounded; with 1,000 tables that is a handful
/// of statements, not 1,000). A window that is empty by its bounds
/// (`after >= upto`) is not asked.
///
/// When a chunk's statement fails with an error that names one object
/// ([`SourceError::is_object_error`]), its windows are asked one by one, so
/// the tables that work are still answered and each broken one is in
/// `failed` with its own error. Any other error (the connection, the
/// login, the server) concerns every table and is returned.
pub async fn changed_tables(
    client: &mut SqlClient,
    windows: &[ChangeWindow],
    upto: Lsn,
) -> Result<ChangedTables, SourceError> {
    let mut answer = ChangedTables::default();
    for chunk in statements(windows, upto) {
        match ask(client, &chunk, upto).await {
            Ok(changed) => answer.changed.extend(changed),
            Err(error) if error.is_object_error() => {
                if let [only] = chunk.as_slice() {
                    answer.failed.push((only.instance.clone(), error));
                    continue;
                }
                for window in &chunk {
                    match ask(client, &[*window], upto).await {
                        Ok(changed) => answer.changed.extend(changed),
                        Err(error) if error.is_object_error() => {
                            answer.failed.push((window.instance.clone(), error));
                        }
                        Err(error) => return Err(error),
                    }
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(answer)
}

/// The windows each statement asks, in order: at most [`CHUNK`] each,
/// without the windows that are empty by their bounds.
pub fn statements(windows: &[ChangeWindow], upto: Lsn) -> Vec<Vec<&ChangeWindow>> {
    let asked: Vec<&ChangeWindow> = windows.iter().filter(|w| w.after < upto).collect();
    asked.chunks(CHUNK).map(<[_]>::to_vec).collect()
}

/// The statement asking `windows` at once: `@P1` is the round's max LSN,
/// `@P<i + 2>` the start of window `i`, and the rows are the indexes of the
/// windows with a change.
pub fn changed_query(windows: &[&ChangeWindow]) -> String {
    windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            format!(
                "SELECT {i} WHERE EXISTS (SELECT 1 FROM [cdc].{} \
                 WHERE __$start_lsn > @P{} AND __$start_lsn <= @P1)",
                quote_ident(&format!("{}_CT", w.instance.as_str())),
                i + 2
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

/// The values bound to [`changed_query`]'s parameters, in order.
pub fn changed_params(windows: &[&ChangeWindow], upto: Lsn) -> Vec<[u8; 10]> {
    std::iter::once(upto)
        .chain(windows.iter().map(|w| w.after))
        .map(Lsn::to_bytes)
        .collect()
}

/// Runs one statement for `windows`; the instances that changed.
async fn ask(
    client: &mut SqlClient,
    windows: &[&ChangeWindow],
    upto: Lsn,
) -> Result<Vec<CaptureInstance>, SourceError> {
    let context = match windows {
        [only] => format!("whether change table {}_CT changed", only.instance),
        _ => format!("which of {} change tables changed", windows.len()),
    };
    let values = changed_params(windows, upto);
    let slices: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
    let params: Vec<&dyn ToSql> = slices.iter().map(|s| s as &dyn ToSql).collect();
    let rows = all_rows(client, &changed_query(windows), &params, &context).await?;
    let mut indexes = Vec::with_capacity(rows.len());
    for row in rows {
        let value = row.into_iter().next();
        indexes.push(window_index(value.as_ref(), windows.len(), &context)?);
    }
    indexes.sort_unstable();
    indexes.dedup();
    Ok(indexes
        .into_iter()
        .map(|i| windows[i].instance.clone())
        .collect())
}

/// The window a result row names: an integer below `windows`.
fn window_index(
    value: Option<&ColumnData<'_>>,
    windows: usize,
    context: &str,
) -> Result<usize, SourceError> {
    let index = match value {
        Some(ColumnData::I32(Some(i))) => i64::from(*i),
        Some(ColumnData::I16(Some(i))) => i64::from(*i),
        Some(ColumnData::U8(Some(i))) => i64::from(*i),
        Some(ColumnData::I64(Some(i))) => *i,
        Some(other) => {
            return Err(SourceError::UnexpectedValue {
                column: "window index".into(),
                sql_type: "int".into(),
                found: super::arrow_rows::wire_type(other).to_string(),
                row: context.into(),
            });
        }
        None => return Err(SourceError::Missing(context.into())),
    };
    usize::try_from(index)
        .ok()
        .filter(|i| *i < windows)
        .ok_or_else(|| SourceError::Missing(format!("{context}: window {index}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(n: u8) -> Lsn {
        Lsn::from_low_byte(n)
    }

    fn window(name: &str, after: u8) -> ChangeWindow {
        ChangeWindow {
            instance: CaptureInstance::new(name).unwrap(),
            after: lsn(after),
        }
    }

    #[test]
    fn changed_tables_statement_asks_each_window_with_bound_lsns() {
        let (a, b) = (window("dbo_orders", 1), window("dbo_customers", 2));
        let sql = changed_query(&[&a, &b]);
        assert_eq!(
            sql,
            "SELECT 0 WHERE EXISTS (SELECT 1 FROM [cdc].[dbo_orders_CT] \
             WHERE __$start_lsn > @P2 AND __$start_lsn <= @P1) UNION ALL \
             SELECT 1 WHERE EXISTS (SELECT 1 FROM [cdc].[dbo_customers_CT] \
             WHERE __$start_lsn > @P3 AND __$start_lsn <= @P1)"
        );
        let params = changed_params(&[&a, &b], lsn(9));
        assert_eq!(
            params,
            vec![lsn(9).to_bytes(), lsn(1).to_bytes(), lsn(2).to_bytes()]
        );
    }

    #[test]
    fn changed_tables_quotes_instance_names_as_identifiers() {
        let odd = window("dbo_a]b'; DROP TABLE x --", 1);
        let sql = changed_query(&[&odd]);
        assert!(
            sql.contains("FROM [cdc].[dbo_a]]b'; DROP TABLE x --_CT] WHERE"),
            "{sql}"
        );
    }

    #[test]
    fn changed_tables_chunks_keep_statements_few_and_bounded() {
        let windows: Vec<ChangeWindow> = (0..1000)
            .map(|i| window(&format!("dbo_table_{i:04}_with_a_rather_long_name"), 1))
            .collect();
        let chunks = statements(&windows, lsn(2));
        assert_eq!(chunks.len(), 5, "a handful of statements for 1,000 tables");
        assert_eq!(chunks.iter().map(Vec::len).sum::<usize>(), 1000);
        for chunk in &chunks {
            let sql = changed_query(chunk);
            assert_eq!(sql.matches("WHERE EXISTS").count(), chunk.len());
            assert!(
                changed_params(chunk, lsn(2)).len() <= 2100,
                "SQL Server's limit"
            );
            assert!(sql.len() < 64 * 1024, "{} bytes", sql.len());
        }
    }

    #[test]
    fn changed_tables_does_not_ask_windows_empty_by_their_bounds() {
        let windows = [window("a", 1), window("b", 5), window("c", 7)];
        let asked: Vec<Vec<&str>> = statements(&windows, lsn(5))
            .iter()
            .map(|c| c.iter().map(|w| w.instance.as_str()).collect())
            .collect();
        assert_eq!(asked, vec![vec!["a"]]);
        assert!(
            statements(&windows, lsn(1)).is_empty(),
            "no statement at all"
        );
    }

    #[test]
    fn changed_tables_reads_window_indexes_within_the_chunk() {
        let ok = window_index(Some(&ColumnData::I32(Some(2))), 3, "t");
        assert_eq!(ok.ok(), Some(2));
        for bad in [
            ColumnData::I32(Some(3)),
            ColumnData::I32(Some(-1)),
            ColumnData::I32(None),
            ColumnData::String(Some("0".into())),
        ] {
            assert!(window_index(Some(&bad), 3, "t").is_err(), "{bad:?}");
        }
        assert!(window_index(None, 3, "t").is_err());
    }
}
