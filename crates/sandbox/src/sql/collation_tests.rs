//! Collations through T-SQL: COLLATE on columns, sys.columns, code pages
//! on store and CAST, collations on result columns, comparisons and
//! ORDER BY.

use crate::sql::Output;
use crate::sql::collation::lookup;
use crate::sql::test_support::{error_numbers, errors, int, ok, rows, run, shop, text};
use crate::sql::types::Value;

fn collation_names(s: &mut crate::sql::Session, table: &str) -> Vec<Value> {
    rows(
        s,
        &format!(
            "SELECT collation_name FROM sys.columns WHERE object_id = OBJECT_ID('{table}') ORDER BY column_id"
        ),
    )
    .into_iter()
    .map(|mut r| r.remove(0))
    .collect()
}

#[test]
fn column_collations_in_sys_columns() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (id int NOT NULL PRIMARY KEY, a varchar(10) COLLATE cyrillic_general_ci_as NULL, \
         b varchar(10), c nvarchar(10) COLLATE Latin1_General_BIN2)",
    );
    ok(
        &mut s,
        "ALTER TABLE t ADD d char(4) COLLATE Japanese_CI_AS NULL",
    );
    assert_eq!(
        collation_names(&mut s, "t"),
        vec![
            Value::Null,
            text("Cyrillic_General_CI_AS"),
            text("SQL_Latin1_General_CP1_CI_AS"),
            text("Latin1_General_BIN2"),
            text("Japanese_CI_AS"),
        ]
    );
    let r = rows(
        &mut s,
        "SELECT COLLATION_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 't' AND COLUMN_NAME = 'a'",
    );
    assert_eq!(r, vec![vec![text("Cyrillic_General_CI_AS")]]);
}

#[test]
fn collate_errors() {
    let (_e, mut s) = shop();
    let out = run(
        &mut s,
        "CREATE TABLE t (a int COLLATE Latin1_General_CI_AS)",
    );
    let e = errors(&out);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].number, 447);
    assert_eq!(
        e[0].message,
        "Expression type int is invalid for COLLATE clause."
    );
    let out = run(
        &mut s,
        "CREATE TABLE t (a varchar(5) COLLATE Klingon_CI_AS)",
    );
    let e = errors(&out);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].number, 448);
    assert_eq!(e[0].message, "Invalid collation 'Klingon_CI_AS'.");
    assert_eq!(
        error_numbers(&run(&mut s, "SELECT 1 COLLATE Latin1_General_CI_AS")),
        vec![447]
    );
    assert_eq!(
        error_numbers(&run(&mut s, "SELECT 'a' COLLATE Nope")),
        vec![448]
    );
}

#[test]
fn storing_converts_through_the_column_code_page() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (id int NOT NULL PRIMARY KEY, latin varchar(10), cyr varchar(10) COLLATE Cyrillic_General_CI_AS, \
         jp varchar(10) COLLATE Japanese_CI_AS, utf varchar(20) COLLATE Latin1_General_100_CI_AS_SC_UTF8, \
         uni nvarchar(10), fixed char(5) COLLATE Cyrillic_General_CI_AS)",
    );
    ok(
        &mut s,
        "INSERT INTO t VALUES (1, N'Жук café', N'Жук café', N'日本 Ж é', N'日本語 Жук', N'Жук café', N'Жук')",
    );
    let r = rows(&mut s, "SELECT latin, cyr, jp, utf, uni, fixed FROM t");
    assert_eq!(
        r,
        vec![vec![
            text("??? café"),
            text("Жук caf?"),
            text("日本 Ж ?"),
            text("日本語 Жук"),
            text("Жук café"),
            text("Жук  "),
        ]]
    );
    ok(
        &mut s,
        "UPDATE t SET latin = N'Ёж', cyr = N'Ёж€' WHERE id = 1",
    );
    assert_eq!(
        rows(&mut s, "SELECT latin, cyr FROM t"),
        vec![vec![text("??"), text("Ёж€")]]
    );
    // Variables are varchar of the database's collation.
    assert_eq!(
        rows(&mut s, "DECLARE @v varchar(10) = N'Жук' SELECT @v"),
        vec![vec![text("???")]]
    );
}

#[test]
fn change_tables_keep_the_column_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "EXEC sys.sp_cdc_enable_db
CREATE TABLE dbo.k (id varchar(10) COLLATE Cyrillic_General_CI_AS NOT NULL PRIMARY KEY, v int)
EXEC sys.sp_cdc_enable_table @source_schema = 'dbo', @source_name = 'k', @role_name = NULL
EXEC sys.sp_cdc_stop_job @job_type = N'capture'",
    );
    ok(&mut s, "INSERT INTO dbo.k VALUES (N'Жук', 1), (N'日本', 2)");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let r = rows(&mut s, "SELECT id FROM cdc.dbo_k_CT ORDER BY v");
    assert_eq!(r, vec![vec![text("Жук")], vec![text("??")]]);
    assert_eq!(
        collation_names(&mut s, "cdc.dbo_k_CT")
            .into_iter()
            .filter(|v| !v.is_null())
            .collect::<Vec<_>>(),
        vec![text("Cyrillic_General_CI_AS")]
    );
    let out = run(
        &mut s,
        "DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn('dbo_k'), @t binary(10) = sys.fn_cdc_get_max_lsn()
SELECT __$operation, id, v FROM cdc.fn_cdc_get_all_changes_dbo_k(@f, @t, N'all') ORDER BY v",
    );
    assert!(errors(&out).is_empty(), "{out:?}");
    assert_eq!(
        result_collations(&out),
        vec![None, Some("Cyrillic_General_CI_AS"), None]
    );
    let rows_out = crate::sql::test_support::result_sets(&out);
    assert_eq!(rows_out[0].1[0][1], text("Жук"));
}

#[test]
fn cast_uses_the_input_collation_code_page() {
    let (_e, mut s) = shop();
    assert_eq!(
        rows(
            &mut s,
            "SELECT CAST(N'Жук' AS varchar(10)), CAST(N'Жук' COLLATE Cyrillic_General_CI_AS AS varchar(10)), \
             CONVERT(char(4), N'Жук' COLLATE Cyrillic_General_CI_AS), CAST(N'Жук' AS nvarchar(10)), \
             CONVERT(varchar(10), N'日本' COLLATE Japanese_CI_AS), CAST(N'日本' COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS varchar(10))"
        ),
        vec![vec![
            text("???"),
            text("Жук"),
            text("Жук "),
            text("Жук"),
            text("日本"),
            text("日本"),
        ]]
    );
    ok(
        &mut s,
        "CREATE TABLE t (u nvarchar(10) COLLATE Cyrillic_General_CI_AS, d nvarchar(10))
INSERT INTO t VALUES (N'Жук', N'Жук')",
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT CAST(u AS varchar(10)), CAST(d AS varchar(10)), CAST(d COLLATE Cyrillic_General_CI_AS AS varchar(10)) FROM t"
        ),
        vec![vec![text("Жук"), text("???"), text("Жук")]]
    );
}

fn result_collations(out: &[Output]) -> Vec<Option<&'static str>> {
    out.iter()
        .find_map(|o| match o {
            Output::ResultSet { columns, .. } => Some(
                columns
                    .iter()
                    .map(|c| c.collation.map(|c| c.name))
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn result_columns_carry_their_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (a varchar(10) COLLATE Cyrillic_General_CI_AS, b varchar(10), n int)
INSERT INTO t VALUES (N'Жук', 'x', 1)",
    );
    let out = run(
        &mut s,
        "SELECT a, b, n, t.a AS a2, CAST(a AS varchar(5)), b COLLATE Latin1_General_100_CI_AS_SC_UTF8, UPPER(a) FROM t",
    );
    assert!(errors(&out).is_empty(), "{out:?}");
    assert_eq!(
        result_collations(&out),
        vec![
            Some("Cyrillic_General_CI_AS"),
            None,
            None,
            Some("Cyrillic_General_CI_AS"),
            Some("Cyrillic_General_CI_AS"),
            Some("Latin1_General_100_CI_AS_SC_UTF8"),
            Some("Cyrillic_General_CI_AS"),
        ]
    );
    // Through a derived table and SELECT *.
    let out = run(&mut s, "SELECT * FROM (SELECT a, n FROM t) AS d");
    assert_eq!(
        result_collations(&out),
        vec![Some("Cyrillic_General_CI_AS"), None]
    );
}

#[test]
fn comparisons_follow_the_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (id int NOT NULL PRIMARY KEY, ci varchar(10), cs varchar(10) COLLATE Latin1_General_CS_AS, \
         bin varchar(10) COLLATE Latin1_General_BIN2)
INSERT INTO t VALUES (1, 'abc', 'abc', 'abc'), (2, 'ABC', 'ABC', 'ABC'), (3, 'b', 'b', 'b'), (4, 'abc ', 'abc ', 'abc ')",
    );
    let ids = |s: &mut crate::sql::Session, sql: &str| -> Vec<Value> {
        rows(s, sql).into_iter().map(|mut r| r.remove(0)).collect()
    };
    assert_eq!(
        ids(&mut s, "SELECT id FROM t WHERE ci = 'abc' ORDER BY id"),
        vec![int(1), int(2), int(4)]
    );
    assert_eq!(
        ids(&mut s, "SELECT id FROM t WHERE cs = 'abc' ORDER BY id"),
        vec![int(1), int(4)]
    );
    assert_eq!(
        ids(&mut s, "SELECT id FROM t WHERE 'ABC' = bin ORDER BY id"),
        vec![int(2)]
    );
    // An explicit COLLATE wins over the column's.
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM t WHERE cs = 'ABC' COLLATE Latin1_General_CI_AS ORDER BY id"
        ),
        vec![int(1), int(2), int(4)]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM t WHERE ci COLLATE Latin1_General_CS_AS = 'ABC' ORDER BY id"
        ),
        vec![int(2)]
    );
    // BIN2 orders by code point: upper case before lower case.
    assert_eq!(
        ids(&mut s, "SELECT id FROM t WHERE id < 4 ORDER BY bin, id"),
        vec![int(2), int(1), int(3)]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM t WHERE id < 4 ORDER BY ci COLLATE Latin1_General_BIN2 DESC"
        ),
        vec![int(3), int(1), int(2)]
    );
    // Case-sensitive: lower case sorts just before upper case, both before 'b'.
    assert_eq!(
        ids(&mut s, "SELECT id FROM t WHERE id < 4 ORDER BY cs"),
        vec![int(1), int(2), int(3)]
    );
    // The default collation: case-insensitive, so ORDER BY ci, id keeps ids.
    assert_eq!(
        ids(&mut s, "SELECT id FROM t WHERE id < 4 ORDER BY ci, id"),
        vec![int(1), int(2), int(3)]
    );
}

#[test]
fn known_collation_round_trip_names() {
    assert_eq!(
        lookup("latin1_general_100_ci_as_sc_utf8")
            .map(|c| c.name)
            .ok(),
        Some("Latin1_General_100_CI_AS_SC_UTF8")
    );
}

#[test]
fn expressions_and_unions_keep_the_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (a varchar(10) COLLATE Cyrillic_General_CI_AS, b varchar(10))
INSERT INTO t VALUES (N'Жук', 'x')",
    );
    let out = run(
        &mut s,
        "SELECT a + '!', UPPER(a), ISNULL(a, ''), SUBSTRING(a, 1, 2), CASE WHEN 1 = 1 THEN a END, \
         b + a, LEN(a), a COLLATE database_default FROM t",
    );
    assert!(errors(&out).is_empty(), "{out:?}");
    let cyr = Some("Cyrillic_General_CI_AS");
    assert_eq!(
        result_collations(&out),
        vec![
            cyr,
            cyr,
            cyr,
            cyr,
            cyr,
            cyr,
            None,
            Some("SQL_Latin1_General_CP1_CI_AS")
        ]
    );
    let out = run(&mut s, "SELECT b FROM t UNION ALL SELECT a FROM t");
    assert_eq!(result_collations(&out), vec![cyr]);
    // A concatenation's value keeps the collation when CAST to varchar.
    assert_eq!(
        rows(&mut s, "SELECT CAST(a + N'ё' AS varchar(10)) FROM t"),
        vec![vec![text("Жукё")]]
    );
}

#[test]
fn grouping_follows_the_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (ci varchar(10), cs varchar(10) COLLATE SQL_Latin1_General_CP1_CS_AS)
INSERT INTO t VALUES ('a', 'a'), ('A', 'A'), ('a ', 'a ')",
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT COUNT(*) FROM (SELECT ci FROM t GROUP BY ci) AS g"
        ),
        vec![vec![int(1)]]
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT COUNT(*) FROM (SELECT cs FROM t GROUP BY cs) AS g"
        ),
        vec![vec![int(2)]]
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT COUNT(*) FROM (SELECT DISTINCT cs FROM t) AS g"
        ),
        vec![vec![int(2)]]
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT COUNT(*) FROM (SELECT DISTINCT ci FROM t) AS g"
        ),
        vec![vec![int(1)]]
    );
}

#[test]
fn alter_column_sets_or_resets_the_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (a nvarchar(10))
INSERT INTO t VALUES (N'Жук')
ALTER TABLE t ALTER COLUMN a varchar(10) COLLATE Cyrillic_General_CI_AS NULL",
    );
    assert_eq!(
        collation_names(&mut s, "t"),
        vec![text("Cyrillic_General_CI_AS")]
    );
    assert_eq!(rows(&mut s, "SELECT a FROM t"), vec![vec![text("Жук")]]);
    assert_eq!(
        error_numbers(&run(
            &mut s,
            "ALTER TABLE t ALTER COLUMN a int COLLATE Cyrillic_General_CI_AS"
        )),
        vec![447]
    );
    assert_eq!(
        collation_names(&mut s, "t"),
        vec![text("Cyrillic_General_CI_AS")]
    );
    ok(&mut s, "ALTER TABLE t ALTER COLUMN a varchar(10) NULL");
    assert_eq!(
        collation_names(&mut s, "t"),
        vec![text("SQL_Latin1_General_CP1_CI_AS")]
    );
    assert_eq!(rows(&mut s, "SELECT a FROM t"), vec![vec![text("???")]]);
}

#[test]
fn varchar_lengths_are_bytes_in_multibyte_code_pages() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (u varchar(6) COLLATE Latin1_General_100_CI_AS_SC_UTF8, j varchar(4) COLLATE Japanese_CI_AS, l varchar(3))",
    );
    ok(&mut s, "INSERT INTO t VALUES (N'日本', N'日本', N'éèê')");
    let out = run(&mut s, "INSERT INTO t (u) VALUES (N'日本語')");
    let e = errors(&out);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].number, 2628);
    assert!(
        e[0].message.contains("Truncated value: '日本'"),
        "{}",
        e[0].message
    );
    assert_eq!(
        error_numbers(&run(&mut s, "INSERT INTO t (j) VALUES (N'日本a')")),
        vec![2628]
    );
    assert_eq!(rows(&mut s, "SELECT COUNT(*) FROM t"), vec![vec![int(1)]]);
}

#[test]
fn subqueries_keep_the_column_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (cs varchar(10) COLLATE Latin1_General_CS_AS)
INSERT INTO t VALUES ('Abc')",
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT CASE WHEN 'abc' IN (SELECT cs FROM t) THEN 1 ELSE 0 END, \
             CASE WHEN (SELECT cs FROM t) = 'abc' THEN 1 ELSE 0 END, \
             CASE WHEN (SELECT cs FROM t) = 'Abc' THEN 1 ELSE 0 END"
        ),
        vec![vec![int(0), int(0), int(1)]]
    );
}

#[test]
fn like_follows_the_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE t (ci varchar(10), cs varchar(10) COLLATE Latin1_General_CS_AS)
INSERT INTO t VALUES ('Abc', 'Abc')",
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT (SELECT COUNT(*) FROM t WHERE ci LIKE 'a%'), (SELECT COUNT(*) FROM t WHERE cs LIKE 'a%'), \
             (SELECT COUNT(*) FROM t WHERE cs LIKE 'A%'), (SELECT COUNT(*) FROM t WHERE ci LIKE 'a%' COLLATE Latin1_General_BIN2)"
        ),
        vec![vec![int(1), int(0), int(1), int(0)]]
    );
}

#[test]
fn primary_keys_are_unique_under_the_column_collation() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE cs (k varchar(10) COLLATE Latin1_General_CS_AS NOT NULL PRIMARY KEY)
CREATE TABLE ci (k varchar(10) NOT NULL PRIMARY KEY)
INSERT INTO cs VALUES ('a'), ('A'), ('b')
INSERT INTO ci VALUES ('a')",
    );
    assert_eq!(
        error_numbers(&run(&mut s, "INSERT INTO ci VALUES ('A')")),
        vec![2627]
    );
    assert_eq!(
        error_numbers(&run(&mut s, "INSERT INTO cs VALUES ('a ')")),
        vec![2627]
    );
    assert_eq!(
        rows(&mut s, "SELECT k FROM cs ORDER BY k"),
        vec![vec![text("a")], vec![text("A")], vec![text("b")]]
    );
    ok(&mut s, "UPDATE cs SET k = 'B' WHERE k = 'A'");
    assert_eq!(
        rows(&mut s, "SELECT k FROM cs WHERE k > 'a' ORDER BY k"),
        vec![vec![text("b")], vec![text("B")]]
    );
}

#[test]
fn key_order_is_comparison_order_for_paging() {
    // '[' and '_' lie between 'Z' and 'a': a reader paging with
    // `k > @last ORDER BY k` sees every row once, in the order comparisons
    // (upper-cased code points) give, which is also the key order.
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE p (k varchar(10) NOT NULL PRIMARY KEY)
INSERT INTO p VALUES ('A_'), ('AB'), ('Aa'), ('A[')",
    );
    let mut seen = Vec::new();
    let mut last = String::new();
    for _ in 0..10 {
        let r = rows(
            &mut s,
            &format!("SELECT TOP 1 k FROM p WHERE k > '{last}' ORDER BY k"),
        );
        let Some(row) = r.into_iter().next() else {
            break;
        };
        let Value::String(k) = &row[0] else {
            panic!("{row:?}")
        };
        last = k.clone();
        seen.push(text(k));
    }
    let all: Vec<Value> = rows(&mut s, "SELECT k FROM p ORDER BY k")
        .into_iter()
        .map(|mut r| r.remove(0))
        .collect();
    assert_eq!(all, vec![text("Aa"), text("AB"), text("A["), text("A_")]);
    assert_eq!(seen, all);
}
