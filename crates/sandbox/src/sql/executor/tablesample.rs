//! `TABLESAMPLE [SYSTEM] (n [PERCENT | ROWS]) [REPEATABLE (seed)]` on a
//! table in FROM, as the FROM clause's reference describes it
//! (<https://learn.microsoft.com/en-us/sql/t-sql/queries/from-transact-sql>):
//! each page of the table is kept or left whole, at random, with the asked
//! share as its chance, before WHERE applies; `ROWS` is turned into the
//! share of the table's rows it is; without a unit the number is a
//! percentage; with `REPEATABLE` the same seed gives the same rows while the
//! table does not change. A one-page table is therefore returned whole or
//! not at all. The sandbox keeps no pages: a page is [`ROWS_PER_PAGE`]
//! consecutive rows in key order. Other sampling methods, and a sample of
//! anything but a table, are refused.

use sqlparser::ast::{
    Expr, TableSample, TableSampleKind, TableSampleMethod, TableSampleModifier, TableSampleUnit,
    Value as AstValue,
};

use super::relation::Relation;
use crate::sql::error::{SqlError, SqlResult};

/// Rows the sandbox counts as one page.
pub const ROWS_PER_PAGE: usize = 64;

/// The clause of a table factor, or an error for one the sandbox does not
/// sample.
pub fn clause(kind: &TableSampleKind) -> SqlResult<&TableSample> {
    let (TableSampleKind::BeforeTableAlias(sample) | TableSampleKind::AfterTableAlias(sample)) =
        kind;
    let supported = sample.modifier == TableSampleModifier::TableSample
        && matches!(sample.name, None | Some(TableSampleMethod::System))
        && sample.bucket.is_none()
        && sample.offset.is_none();
    if supported {
        Ok(sample)
    } else {
        Err(SqlError::unsupported(&sample.to_string()))
    }
}

/// A sample of anything but a table (a view, a table-valued function).
pub fn not_a_table() -> SqlError {
    SqlError::unsupported("TABLESAMPLE of a view or table-valued function")
}

/// Keeps the rows of the pages `sample` draws from `rel`, a scan of a
/// table in key order.
pub fn apply(sample: &TableSample, mut rel: Relation) -> SqlResult<Relation> {
    let quantity = sample
        .quantity
        .as_ref()
        .ok_or_else(|| SqlError::syntax("TABLESAMPLE"))?;
    let number = number(&quantity.value)?;
    let rows = rel.rows.len();
    let percent = match quantity.unit {
        Some(TableSampleUnit::Rows) if rows > 0 => number * 100.0 / rows as f64,
        Some(TableSampleUnit::Rows) => 0.0,
        Some(TableSampleUnit::Percent) | None => number,
    };
    if !(0.0..=100.0).contains(&percent) && quantity.unit != Some(TableSampleUnit::Rows) {
        return Err(SqlError::unsupported(&format!(
            "TABLESAMPLE ({number} PERCENT)"
        )));
    }
    let seed = match &sample.seed {
        Some(seed) => match &seed.value.value {
            AstValue::Number(text, _) => text.parse::<u64>().unwrap_or(0),
            other => return Err(SqlError::syntax(&other.to_string())),
        },
        None => random_seed(),
    };
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15 | 1;
    let mut keep_page = || {
        // xorshift64*, one draw per page.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let draw = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        (draw as f64 / (1u64 << 53) as f64) * 100.0 < percent
    };
    let pages: Vec<bool> = (0..rows.div_ceil(ROWS_PER_PAGE))
        .map(|_| keep_page())
        .collect();
    let mut index = 0;
    rel.rows.retain(|_| {
        let kept = pages.get(index / ROWS_PER_PAGE).copied().unwrap_or(false);
        index += 1;
        kept
    });
    Ok(rel)
}

/// A constant sample size.
fn number(expr: &Expr) -> SqlResult<f64> {
    match expr {
        Expr::Value(v) => match &v.value {
            AstValue::Number(text, _) => text.parse::<f64>().map_err(|_| SqlError::syntax(text)),
            other => Err(SqlError::syntax(&other.to_string())),
        },
        other => Err(SqlError::unsupported(&format!("TABLESAMPLE ({other})"))),
    }
}

/// A seed that differs from one query to the next.
fn random_seed() -> u64 {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    u64::from_le_bytes([
        bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
    ])
}

#[cfg(test)]
mod tests {
    use crate::sql::test_support::{error_numbers, int_of, ok, rows, run, shop};

    /// `n` rows with keys 1..=n in `t`.
    fn table(n: i64) -> (crate::sql::engine::Engine, crate::sql::session::Session) {
        let (e, mut s) = shop();
        ok(
            &mut s,
            "CREATE TABLE t (k int NOT NULL PRIMARY KEY, v int NULL)",
        );
        for first in (1..=n).step_by(100) {
            let values: Vec<String> = (first..(first + 100).min(n + 1))
                .map(|k| format!("({k}, {k})"))
                .collect();
            ok(
                &mut s,
                &format!("INSERT INTO t VALUES {}", values.join(", ")),
            );
        }
        (e, s)
    }

    fn keys(s: &mut crate::sql::session::Session, sql: &str) -> Vec<i64> {
        rows(s, sql).iter().map(|r| int_of(&r[0])).collect()
    }

    #[test]
    fn a_sample_keeps_whole_pages_of_about_the_share_asked() {
        let (_e, mut s) = table(6_400);
        assert_eq!(
            keys(&mut s, "SELECT k FROM t TABLESAMPLE SYSTEM (100 PERCENT)").len(),
            6_400
        );
        assert_eq!(
            keys(&mut s, "SELECT k FROM t TABLESAMPLE (0 PERCENT)").len(),
            0
        );
        let half = keys(
            &mut s,
            "SELECT k FROM t TABLESAMPLE SYSTEM (50 PERCENT) ORDER BY k",
        );
        // 100 pages of 64 rows, each kept with a chance of one half.
        assert!((1_280..=5_120).contains(&half.len()), "{}", half.len());
        assert_eq!(half.len() % super::ROWS_PER_PAGE, 0, "whole pages");
        for page in half.chunks(super::ROWS_PER_PAGE) {
            assert_eq!(page[0] % 64, 1, "a page starts on a page boundary");
            assert_eq!(page[63] - page[0], 63, "and is whole");
        }
    }

    #[test]
    fn repeatable_samples_are_the_same_and_where_applies_after() {
        let (_e, mut s) = table(3_200);
        let sql = "SELECT k FROM t TABLESAMPLE SYSTEM (30 PERCENT) REPEATABLE (7) ORDER BY k";
        assert_eq!(keys(&mut s, sql), keys(&mut s, sql));
        let filtered = keys(
            &mut s,
            "SELECT k FROM t TABLESAMPLE SYSTEM (30 PERCENT) REPEATABLE (7) WHERE k % 2 = 0 ORDER BY k",
        );
        let sampled = keys(&mut s, sql);
        let even: Vec<i64> = sampled.into_iter().filter(|k| k % 2 == 0).collect();
        assert_eq!(filtered, even);
    }

    #[test]
    fn other_methods_and_samples_of_functions_are_refused() {
        let (_e, mut s) = table(10);
        let out = run(&mut s, "SELECT k FROM t TABLESAMPLE BERNOULLI (10 PERCENT)");
        assert_eq!(error_numbers(&out), vec![40517]);
    }
}
