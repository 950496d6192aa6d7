//! Table-driven tests of the evaluator through the public API.

use chrono::{FixedOffset, NaiveDate, NaiveDateTime};
use sqlparser::ast::{Expr, Function, Ident, Query};
use sqlparser::dialect::MsSqlDialect;
use sqlparser::parser::Parser;

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Decimal, Length, Value};
use super::{Scope, Typed, eval};

/// Columns `i` (int 7), `n` (int NULL), `s` (varchar(10) 'Hello'),
/// `c` (char(5) 'ab   '), `d` (decimal(10,2) 12.34), `dt` (datetime2(7)),
/// variable `@v` (nvarchar(20) N'x'), `@@ROWCOUNT` = 3.
pub struct TestScope;

pub fn now() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2024, 5, 6)
        .and_then(|d| d.and_hms_nano_opt(7, 8, 9, 123_456_789))
        .unwrap_or_default()
}

impl Scope for TestScope {
    fn column(&self, parts: &[Ident]) -> SqlResult<Typed> {
        let name = parts
            .last()
            .map(|p| p.value.to_ascii_lowercase())
            .unwrap_or_default();
        Ok(match name.as_str() {
            "i" => Typed::new(Value::Int(7), DataType::Int),
            "n" => Typed::null(DataType::Int),
            "s" => Typed::new(
                Value::String("Hello".into()),
                DataType::VarChar(Length::Fixed(10)),
            ),
            "c" => Typed::new(Value::String("ab   ".into()), DataType::Char(5)),
            "d" => Typed::new(
                Value::Decimal(Decimal::new(1234, 2)),
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            "dt" => {
                let v = super::datetime::round_fraction(now(), 7).unwrap_or_default();
                Typed::new(Value::DateTime(v), DataType::DateTime2 { scale: 7 })
            }
            _ => return Err(SqlError::invalid_column(&name)),
        })
    }
    fn variable(&self, name: &str) -> SqlResult<Typed> {
        match name.to_ascii_lowercase().as_str() {
            "@v" => Ok(Typed::new(
                Value::String("x".into()),
                DataType::NVarChar(Length::Fixed(20)),
            )),
            _ => Err(SqlError::undeclared_variable(name)),
        }
    }
    fn scalar_subquery(&self, _query: &Query) -> SqlResult<Typed> {
        Ok(Typed::new(Value::Int(42), DataType::Int))
    }
    fn exists(&self, _query: &Query) -> SqlResult<bool> {
        Ok(true)
    }
    fn subquery_values(&self, _query: &Query) -> SqlResult<Vec<Typed>> {
        Ok(vec![
            Typed::new(Value::Int(1), DataType::Int),
            Typed::new(Value::Int(7), DataType::Int),
        ])
    }
    fn aggregate(&self, _function: &Function) -> Option<SqlResult<Typed>> {
        None
    }
    fn system_function(&self, name: &str, args: &[Typed]) -> Option<SqlResult<Typed>> {
        match name {
            "@@ROWCOUNT" => Some(Ok(Typed::new(Value::Int(3), DataType::Int))),
            "FN_CDC_GET_MAX_LSN" => Some(Ok(Typed::new(
                Value::Binary(vec![0; 10]),
                DataType::Binary(10),
            ))),
            "OBJECT_ID" => Some(Ok(Typed::new(Value::Int(args.len() as i32), DataType::Int))),
            _ => None,
        }
    }
    fn now_utc(&self) -> NaiveDateTime {
        now()
    }
    fn server_offset(&self) -> FixedOffset {
        FixedOffset::east_opt(2 * 3600)
            .unwrap_or_else(|| FixedOffset::west_opt(0).unwrap_or_else(|| unreachable!()))
    }
}

pub fn parse(sql: &str) -> Expr {
    Parser::new(&MsSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .unwrap_or_else(|e| panic!("parse {sql}: {e}"))
}

pub fn run(sql: &str) -> SqlResult<Typed> {
    eval(&parse(sql), &TestScope)
}

/// The value as text (NULL as "NULL") and the type's SQL name.
pub fn show(sql: &str) -> (String, String) {
    match run(sql) {
        Ok(t) => {
            let text = super::to_text(&t)
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .unwrap_or_else(|| "NULL".into());
            (text, t.ty.sql_name())
        }
        Err(e) => (format!("error {}", e.number), e.message),
    }
}

/// (expression, value text, type) triples.
fn check(cases: &[(&str, &str, &str)]) {
    let mut failures = Vec::new();
    for (sql, value, ty) in cases {
        let got = show(sql);
        if got != (value.to_string(), ty.to_string()) {
            failures.push(format!("{sql}: got {got:?}, want ({value:?}, {ty:?})"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// (expression, error number) pairs.
fn check_errors(cases: &[(&str, i32)]) {
    let mut failures = Vec::new();
    for (sql, number) in cases {
        match run(sql) {
            Err(e) if e.number == *number => {}
            other => failures.push(format!("{sql}: got {other:?}, want error {number}")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn literals() {
    check(&[
        ("1", "1", "int"),
        ("2147483647", "2147483647", "int"),
        ("2147483648", "2147483648", "decimal(10,0)"),
        ("1.5", "1.5", "decimal(2,1)"),
        ("0.05", "0.05", "decimal(2,2)"),
        ("123.450", "123.450", "decimal(6,3)"),
        ("1e3", "1000", "float"),
        ("'abc'", "abc", "varchar(3)"),
        ("''", "", "varchar(1)"),
        ("'it''s'", "it's", "varchar(4)"),
        ("N'abc'", "abc", "nvarchar(3)"),
        ("0x0A0B", "\n\u{b}", "varbinary(2)"),
        ("CONVERT(varchar(10), 0x0A0B, 1)", "0x0A0B", "varchar(10)"),
        ("NULL", "NULL", "int"),
        ("-1", "-1", "int"),
        ("-1.5", "-1.5", "decimal(2,1)"),
        ("~5", "-6", "int"),
    ]);
    check_errors(&[("123456789012345678901234567890123456789", 1007)]);
}

#[test]
fn names_and_variables() {
    check(&[
        ("i", "7", "int"),
        ("t.i", "7", "int"),
        ("[s]", "Hello", "varchar(10)"),
        ("@v", "x", "nvarchar(20)"),
        ("@@ROWCOUNT", "3", "int"),
        ("@@rowcount + 1", "4", "int"),
    ]);
    check_errors(&[("@nope", 137), ("@@NOPE", 137), ("nope", 207)]);
}

#[test]
fn arithmetic_types() {
    check(&[
        ("7 / 2", "3", "int"),
        ("-7 / 2", "-3", "int"),
        ("7 % 3", "1", "int"),
        ("-7 % 3", "-1", "int"),
        ("7 / 2.0", "3.500000", "decimal(8,6)"),
        ("1.5 + 2.25", "3.75", "decimal(4,2)"),
        ("1.5 * 2.25", "3.375", "decimal(6,3)"),
        ("10.0 / 3", "3.333333", "decimal(8,6)"),
        ("d + 1", "13.34", "decimal(11,2)"),
        ("d * d", "152.2756", "decimal(21,4)"),
        ("i + 1.5", "8.5", "decimal(12,1)"),
        ("i / 2.0", "3.500000", "decimal(17,6)"),
        ("d + 100", "112.34", "decimal(11,2)"),
        ("d * -(10)", "-123.40", "decimal(13,2)"),
        ("i + 1e0", "8", "float"),
        ("CAST(1 AS bigint) + 1", "2", "bigint"),
        ("CAST(1 AS tinyint) + CAST(2 AS tinyint)", "3", "tinyint"),
        ("CAST(1 AS smallint) * 3", "3", "int"),
        ("CAST(1.5 AS money) * 2", "3.00", "money"),
        ("CAST(10 AS money) / 3", "3.33", "money"),
        ("CAST(1 AS real) + 1", "2", "real"),
        ("'1' + 1", "2", "int"),
        ("'1.5' + 1.0", "2.5", "decimal(3,1)"),
        ("'a' + 'b'", "ab", "varchar(2)"),
        ("s + 'x'", "Hellox", "varchar(11)"),
        ("s + N'x'", "Hellox", "nvarchar(11)"),
        ("c + 'x'", "ab   x", "varchar(6)"),
        ("0x01 + 0x02", "\u{1}\u{2}", "varbinary(2)"),
        ("6 & 3", "2", "int"),
        ("6 | 3", "7", "int"),
        ("6 ^ 3", "5", "int"),
        ("n + 1", "NULL", "int"),
        ("NULL + 'a'", "NULL", "int"),
        ("CAST(NULL AS varchar(3)) + 'a'", "NULL", "varchar(4)"),
        (
            "CAST('2024-01-31' AS datetime) + 1",
            "Feb  1 2024 12:00AM",
            "datetime",
        ),
        (
            "CAST('2024-01-31 12:00' AS datetime) - 0.5",
            "Jan 31 2024 12:00AM",
            "datetime",
        ),
    ]);
    check_errors(&[
        ("1 / 0", 8134),
        ("1.0 / 0", 8134),
        ("1 % 0", 8134),
        ("1e0 / 0", 8134),
        ("2147483647 + 1", 8115),
        ("CAST(200 AS tinyint) + CAST(100 AS tinyint)", 220),
        ("-CAST(-2147483648 AS int)", 8115),
        ("'a' + 1", 245),
        ("'a' * 'b'", 402),
        ("1e0 % 2", 402),
        ("CAST('2024-01-01' AS date) + 1", 206),
        ("SYSDATETIME() + 1", 206),
        (
            "CAST(99999999999999999999999999999999999999 AS decimal(38,0)) + 1",
            8115,
        ),
    ]);
}

#[test]
fn decimal_extremes() {
    check(&[
        (
            "CAST(1 AS decimal(38,10)) + CAST(1 AS decimal(38,10))",
            "2.000000000",
            "decimal(38,9)",
        ),
        (
            "CAST(2 AS decimal(38,10)) * CAST(3 AS decimal(38,10))",
            "6.000000",
            "decimal(38,6)",
        ),
        (
            "CAST(1 AS decimal(38,10)) / CAST(3 AS decimal(38,10))",
            "0.333333",
            "decimal(38,6)",
        ),
        (
            "CAST(1 AS decimal(18,4)) / CAST(3 AS decimal(18,4))",
            "0.33333333333333333333",
            "decimal(38,20)",
        ),
        (
            "CAST(0.12345678901234567890123456789012345678 AS decimal(38,38))",
            "0.12345678901234567890123456789012345678",
            "decimal(38,38)",
        ),
        (
            "CAST('99999999999999999999999999999999999999' AS decimal(38,0))",
            "99999999999999999999999999999999999999",
            "decimal(38,0)",
        ),
        (
            "CAST(-99999999999999999999999999999999999999 AS decimal(38,0)) - 0",
            "-99999999999999999999999999999999999999",
            "decimal(38,0)",
        ),
        ("CAST(1.005 AS decimal(5,2))", "1.01", "decimal(5,2)"),
        ("CAST(-1.005 AS decimal(5,2))", "-1.01", "decimal(5,2)"),
        ("CAST(1.004 AS decimal(5,2))", "1.00", "decimal(5,2)"),
        ("CAST(12.5 AS int)", "12", "int"),
        ("CAST(-12.9 AS int)", "-12", "int"),
        ("CAST(2.5 AS money)", "2.50", "money"),
        ("CAST(CAST(2.5 AS money) AS int)", "3", "int"),
        ("CAST(1.23456 AS money)", "1.23", "money"),
        (
            "CONVERT(varchar(30), CAST(1.23456 AS money), 2)",
            "1.2346",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), CAST(1234567.891 AS money), 1)",
            "1,234,567.89",
            "varchar(30)",
        ),
    ]);
    check_errors(&[
        ("CAST(123.45 AS decimal(4,2))", 8115),
        ("CAST(1e40 AS decimal(38,0))", 8115),
        ("CAST('abc' AS decimal(5,2))", 8114),
        ("CAST('1e3' AS decimal(5,2))", 8114),
    ]);
}

#[test]
fn comparisons_and_logic() {
    check(&[
        ("1 = 1", "1", "bit"),
        ("1 <> 1", "0", "bit"),
        ("1 != 2", "1", "bit"),
        ("1 < 2", "1", "bit"),
        ("2 <= 2", "1", "bit"),
        ("3 > 2", "1", "bit"),
        ("2 >= 3", "0", "bit"),
        ("1 = NULL", "NULL", "bit"),
        ("n = n", "NULL", "bit"),
        ("'abc' = 'ABC'", "1", "bit"),
        ("'abc' = 'abc   '", "1", "bit"),
        ("' abc' = 'abc'", "0", "bit"),
        ("c = 'AB'", "1", "bit"),
        ("'a' < 'B'", "1", "bit"),
        ("N'É' = 'é'", "1", "bit"),
        ("1.0 = 1", "1", "bit"),
        ("1.50 = 1.5", "1", "bit"),
        ("'10' = 10", "1", "bit"),
        ("'2024-01-02' = CAST('2024-01-02' AS date)", "1", "bit"),
        (
            "CAST('2024-01-02' AS date) < CAST('2024-01-02 00:00:01' AS datetime2)",
            "1",
            "bit",
        ),
        ("0x01 < 0x02", "1", "bit"),
        ("0x0100 > 0x01", "1", "bit"),
        ("1e0 = 1", "1", "bit"),
        ("CAST(0.1 AS float) = 0.1", "1", "bit"),
        ("1 = 1 AND 2 = 2", "1", "bit"),
        ("1 = 1 AND 1 = 2", "0", "bit"),
        ("1 = 1 AND n = 1", "NULL", "bit"),
        ("1 = 2 AND n = 1", "0", "bit"),
        ("n = 1 AND 1 = 2", "0", "bit"),
        ("1 = 1 OR n = 1", "1", "bit"),
        ("n = 1 OR 1 = 1", "1", "bit"),
        ("1 = 2 OR n = 1", "NULL", "bit"),
        ("1 = 2 OR 1 = 2", "0", "bit"),
        ("NOT 1 = 1", "0", "bit"),
        ("NOT n = 1", "NULL", "bit"),
        ("NOT (1 = 2 OR n = 1)", "NULL", "bit"),
        ("n IS NULL", "1", "bit"),
        ("n IS DISTINCT FROM NULL", "0", "bit"),
        ("n IS NOT DISTINCT FROM NULL", "1", "bit"),
        ("i IS DISTINCT FROM NULL", "1", "bit"),
        ("i IS DISTINCT FROM 7", "0", "bit"),
        ("n IS NOT NULL", "0", "bit"),
        ("i IS NULL", "0", "bit"),
        ("i IN (1, 7)", "1", "bit"),
        ("i IN (1, 2)", "0", "bit"),
        ("i IN (1, NULL)", "NULL", "bit"),
        ("i IN (7, NULL)", "1", "bit"),
        ("i NOT IN (1, NULL)", "NULL", "bit"),
        ("i NOT IN (1, 2)", "1", "bit"),
        ("n IN (1, 2)", "NULL", "bit"),
        ("'B' IN ('a', 'b')", "1", "bit"),
        ("i IN (SELECT x FROM t)", "1", "bit"),
        ("3 IN (SELECT x FROM t)", "0", "bit"),
        ("3 NOT IN (SELECT x FROM t)", "1", "bit"),
        ("i BETWEEN 1 AND 7", "1", "bit"),
        ("i BETWEEN 8 AND 9", "0", "bit"),
        ("i NOT BETWEEN 8 AND 9", "1", "bit"),
        ("i BETWEEN 1 AND NULL", "NULL", "bit"),
        ("i BETWEEN 8 AND NULL", "0", "bit"),
        ("EXISTS (SELECT 1)", "1", "bit"),
        ("NOT EXISTS (SELECT 1)", "0", "bit"),
        ("(SELECT 1) + 1", "43", "int"),
    ]);
    check_errors(&[
        ("'abc' = 1", 245),
        ("CAST('2024-01-01' AS date) = 1", 206),
        ("'x' = CAST('2024-01-01' AS date)", 241),
        ("1 AND 1", 4145),
    ]);
}

#[test]
fn like_predicate() {
    check(&[
        ("'Hello' LIKE 'h%'", "1", "bit"),
        ("s LIKE '%LL%'", "1", "bit"),
        ("s LIKE 'H_llo'", "1", "bit"),
        ("s LIKE '[gh]ello'", "1", "bit"),
        ("s LIKE '[^h]ello'", "0", "bit"),
        ("s LIKE '[a-z]%'", "1", "bit"),
        ("s NOT LIKE 'x%'", "1", "bit"),
        ("'10%' LIKE '10!%' ESCAPE '!'", "1", "bit"),
        ("'10x' LIKE '10!%' ESCAPE '!'", "0", "bit"),
        ("c LIKE 'ab'", "1", "bit"),
        ("n LIKE '%'", "NULL", "bit"),
        ("i LIKE '7'", "1", "bit"),
    ]);
    check_errors(&[("'a' LIKE 'a' ESCAPE 'xy'", 506)]);
}

#[test]
fn case_and_null_functions() {
    check(&[
        (
            "CASE WHEN i = 7 THEN 'seven' ELSE 'other' END",
            "seven",
            "varchar(5)",
        ),
        ("CASE WHEN i = 8 THEN 'eight' END", "NULL", "varchar(5)"),
        (
            "CASE i WHEN 1 THEN 'one' WHEN 7 THEN 'seven' END",
            "seven",
            "varchar(5)",
        ),
        ("CASE i WHEN 1 THEN 1 ELSE 2.5 END", "2.5", "decimal(11,1)"),
        (
            "CASE WHEN i = 7 THEN 1 ELSE 2.5 END",
            "1.0",
            "decimal(11,1)",
        ),
        ("CASE WHEN n = 1 THEN 1 ELSE 0 END", "0", "int"),
        ("CASE WHEN i = 7 THEN 1 ELSE 1 / 0 END", "1", "int"),
        (
            "CASE WHEN 1 = 1 THEN 'a' ELSE N'bb' END",
            "a",
            "nvarchar(2)",
        ),
        ("ISNULL(n, 5)", "5", "int"),
        ("ISNULL(i, 5)", "7", "int"),
        (
            "ISNULL(CAST(NULL AS varchar(2)), 'abcdef')",
            "ab",
            "varchar(2)",
        ),
        ("COALESCE(n, NULL, 3)", "3", "int"),
        ("COALESCE(n, 2.5)", "2.5", "decimal(11,1)"),
        ("COALESCE(i, 2.5)", "7.0", "decimal(11,1)"),
        ("NULLIF(i, 7)", "NULL", "int"),
        ("NULLIF(i, 8)", "7", "int"),
        ("IIF(i > 5, 'big', 'small')", "big", "varchar(5)"),
        ("IIF(n > 5, 'big', 'small')", "small", "varchar(5)"),
    ]);
    check_errors(&[(
        "CASE WHEN 1 = 1 THEN 1 ELSE CAST('2024-01-01' AS date) END",
        206,
    )]);
}

#[test]
fn cast_and_convert() {
    check(&[
        ("CAST('123' AS int)", "123", "int"),
        ("CAST(' 123 ' AS int)", "123", "int"),
        ("CAST('' AS int)", "0", "int"),
        ("CAST('-5' AS smallint)", "-5", "smallint"),
        ("CAST('true' AS bit)", "1", "bit"),
        ("CAST(5 AS bit)", "1", "bit"),
        ("CAST('0' AS bit)", "0", "bit"),
        ("CAST(123 AS varchar)", "123", "varchar(30)"),
        ("CAST(123 AS varchar(2))", "*", "varchar(2)"),
        ("CAST('abcdef' AS varchar(3))", "abc", "varchar(3)"),
        ("CAST('ab' AS char(4))", "ab  ", "char(4)"),
        ("CAST('ab' AS nchar(3))", "ab ", "nchar(3)"),
        ("CAST(1.5 AS float)", "1.5", "float"),
        ("CAST(1.0E0/3 AS varchar(30))", "0.333333", "varchar(30)"),
        (
            "CAST(123456789.0E0 AS varchar(30))",
            "1.23457e+008",
            "varchar(30)",
        ),
        ("CAST(0.00001E0 AS varchar(30))", "1e-005", "varchar(30)"),
        ("CAST(123456.7E0 AS varchar(30))", "123457", "varchar(30)"),
        (
            "CONVERT(varchar(30), 1.0E0/3, 2)",
            "3.333333333333333e-001",
            "varchar(30)",
        ),
        ("CAST('1e3' AS float)", "1000", "float"),
        ("CAST(3.7E0 AS int)", "3", "int"),
        ("CAST(1 AS binary(4))", "\0\0\0\u{1}", "binary(4)"),
        (
            "CONVERT(varchar(20), CAST(258 AS varbinary(4)), 1)",
            "0x00000102",
            "varchar(20)",
        ),
        (
            "CONVERT(varchar(20), CAST('AB' AS varbinary(4)), 2)",
            "4142",
            "varchar(20)",
        ),
        (
            "CONVERT(varchar(20), CAST(N'A' AS varbinary(4)), 1)",
            "0x4100",
            "varchar(20)",
        ),
        (
            "CONVERT(varchar(20), CONVERT(varbinary(4), '0x0a0B', 1), 1)",
            "0x0A0B",
            "varchar(20)",
        ),
        (
            "CONVERT(varchar(20), CONVERT(varbinary(4), '0A0B', 2), 1)",
            "0x0A0B",
            "varchar(20)",
        ),
        ("CAST(0x00000102 AS int)", "258", "int"),
        ("CAST(0xFFFFFFFF AS int)", "-1", "int"),
        (
            "CAST(CAST(CAST(-1.5 AS decimal(5,1)) AS varbinary(20)) AS decimal(5,1))",
            "-1.5",
            "decimal(5,1)",
        ),
        (
            "CAST('6F9619FF-8B86-D011-B42D-00C04FC964FF' AS uniqueidentifier)",
            "6F9619FF-8B86-D011-B42D-00C04FC964FF",
            "uniqueidentifier",
        ),
        (
            "CAST(CAST('6F9619FF-8B86-D011-B42D-00C04FC964FF' AS uniqueidentifier) AS varbinary(16)) = 0xFF19966F868B11D0B42D00C04FC964FF",
            "1",
            "bit",
        ),
        ("CAST(N'abc' AS sysname)", "abc", "nvarchar(128)"),
        ("TRY_CAST('x' AS int)", "NULL", "int"),
        ("TRY_CAST('5' AS int)", "5", "int"),
        ("TRY_CONVERT(int, 'x')", "NULL", "int"),
        ("TRY_CONVERT(datetime2, 'nope')", "NULL", "datetime2(7)"),
        ("CAST(NULL AS date)", "NULL", "date"),
    ]);
    check_errors(&[
        ("CAST('abc' AS int)", 245),
        ("CAST('1.5' AS int)", 245),
        ("CAST('99999999999' AS int)", 248),
        ("CAST('300' AS tinyint)", 244),
        ("CAST(300 AS tinyint)", 220),
        ("CAST(3000000000 AS int)", 8115),
        ("CAST(1e10 AS int)", 8115),
        ("CAST(123456 AS nvarchar(2))", 8115),
        ("CAST(12.5 AS varchar(2))", 8115),
        ("CAST('x' AS float)", 8114),
        ("CAST('x' AS money)", 235),
        ("CAST('x' AS uniqueidentifier)", 8169),
        ("CAST(CAST('2024-01-01' AS date) AS int)", 529),
        ("CAST(CAST('10:00' AS time) AS date)", 529),
        ("CAST(NEWID() AS int)", 529),
        ("CAST(1e0 AS varbinary(8))", 529),
        ("TRY_CAST(CAST('2024-01-01' AS date) AS int)", 529),
        ("CAST(x AS xyz)", 2715),
        ("CONVERT(varchar(10), CAST('2024-01-01' AS date), 999)", 281),
        ("CAST(NEWID() AS char(10))", 8170),
    ]);
}

#[test]
fn dates_and_times() {
    check(&[
        ("CAST('2024-01-02' AS date)", "2024-01-02", "date"),
        ("CAST('20240102' AS date)", "2024-01-02", "date"),
        ("CAST('01/02/2024' AS date)", "2024-01-02", "date"),
        (
            "CAST('2024-01-02 03:04:05.1234567' AS datetime2)",
            "2024-01-02 03:04:05.1234567",
            "datetime2(7)",
        ),
        (
            "CAST('2024-01-02T03:04:05' AS datetime2(0))",
            "2024-01-02 03:04:05",
            "datetime2(0)",
        ),
        (
            "CAST('2024-01-02 03:04:05.12345675' AS datetime2(7))",
            "2024-01-02 03:04:05.1234568",
            "datetime2(7)",
        ),
        (
            "CAST('2024-01-02 03:04:05.5' AS datetime2(0))",
            "2024-01-02 03:04:06",
            "datetime2(0)",
        ),
        (
            "CAST('2024-01-02 03:04:05.125' AS datetime2(2))",
            "2024-01-02 03:04:05.13",
            "datetime2(2)",
        ),
        (
            "CAST('2024-01-02 03:04:05.123' AS datetime)",
            "Jan  2 2024  3:04AM",
            "datetime",
        ),
        (
            "CONVERT(varchar(30), CAST('2024-01-02 03:04:05.123' AS datetime), 121)",
            "2024-01-02 03:04:05.123",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), CAST('2024-01-02 03:04:05.001' AS datetime), 121)",
            "2024-01-02 03:04:05.000",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), CAST('2024-01-02 03:04:05.005' AS datetime), 121)",
            "2024-01-02 03:04:05.007",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), CAST('2024-01-02 23:59:59.999' AS datetime), 120)",
            "2024-01-03 00:00:00",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), CAST('2024-01-02 03:04:29.999' AS smalldatetime), 120)",
            "2024-01-02 03:05:00",
            "varchar(30)",
        ),
        (
            "CAST('2024-01-02 03:04:05 +01:00' AS datetimeoffset(0))",
            "2024-01-02 03:04:05 +01:00",
            "datetimeoffset(0)",
        ),
        (
            "CAST('2024-01-02T03:04:05.5-05:30' AS datetimeoffset(1))",
            "2024-01-02 03:04:05.5 -05:30",
            "datetimeoffset(1)",
        ),
        (
            "CAST('2024-01-02 03:04:05' AS datetimeoffset(0))",
            "2024-01-02 03:04:05 +00:00",
            "datetimeoffset(0)",
        ),
        (
            "CAST(CAST('2024-01-02 03:04:05 +01:00' AS datetimeoffset) AS datetime2(0))",
            "2024-01-02 03:04:05",
            "datetime2(0)",
        ),
        (
            "CONVERT(varchar(40), CAST('2024-01-02 03:04:05 +01:00' AS datetimeoffset(0)), 127)",
            "2024-01-02T02:04:05Z",
            "varchar(40)",
        ),
        ("CAST('10:11:12.5' AS time(1))", "10:11:12.5", "time(1)"),
        ("CAST('10:11:12' AS time)", "10:11:12.0000000", "time(7)"),
        (
            "CAST(CAST('2024-01-02 03:04:05' AS datetime2) AS time(0))",
            "03:04:05",
            "time(0)",
        ),
        (
            "CAST(CAST('2024-01-02 03:04:05' AS datetime2) AS date)",
            "2024-01-02",
            "date",
        ),
        (
            "CAST(CAST('2024-01-02' AS date) AS datetime2(0))",
            "2024-01-02 00:00:00",
            "datetime2(0)",
        ),
        (
            "CONVERT(varchar(30), CAST('10:11:12' AS datetime), 121)",
            "1900-01-01 10:11:12.000",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), dt, 126)",
            "2024-05-06T07:08:09.1234568",
            "varchar(30)",
        ),
        ("CONVERT(varchar(30), dt, 112)", "20240506", "varchar(30)"),
        ("CONVERT(varchar(30), dt, 23)", "2024-05-06", "varchar(30)"),
        ("CONVERT(varchar(30), dt, 101)", "05/06/2024", "varchar(30)"),
        ("CONVERT(varchar(30), dt, 1)", "05/06/24", "varchar(30)"),
        (
            "CONVERT(varchar(30), dt, 20)",
            "2024-05-06 07:08:09",
            "varchar(30)",
        ),
        ("CONVERT(date, '06/05/2024', 103)", "2024-05-06", "date"),
        (
            "CONVERT(datetime2(0), '20240506', 112)",
            "2024-05-06 00:00:00",
            "datetime2(0)",
        ),
        ("CAST(1 AS datetime)", "Jan  2 1900 12:00AM", "datetime"),
        (
            "CAST(CAST('1900-01-03 18:00' AS datetime) AS float)",
            "2.75",
            "float",
        ),
        (
            "CAST(CAST('1900-01-03 18:00' AS datetime) AS int)",
            "3",
            "int",
        ),
        (
            "CAST(CAST('2024-01-02' AS date) AS varchar(20))",
            "2024-01-02",
            "varchar(20)",
        ),
        (
            "CAST(dt AS nvarchar(40))",
            "2024-05-06 07:08:09.1234568",
            "nvarchar(40)",
        ),
    ]);
    check_errors(&[
        ("CAST('2024-02-30' AS date)", 241),
        ("CAST('nonsense' AS datetime2)", 241),
        ("CAST('1700-01-01' AS datetime)", 242),
        ("CAST('2080-01-01' AS smalldatetime)", 242),
    ]);
}

#[test]
fn date_functions() {
    check(&[
        (
            "DATEADD(day, 1, '2024-01-31')",
            "Feb  1 2024 12:00AM",
            "datetime",
        ),
        (
            "DATEADD(month, 1, CAST('2024-01-31' AS date))",
            "2024-02-29",
            "date",
        ),
        (
            "DATEADD(yy, -1, CAST('2024-02-29' AS date))",
            "2023-02-28",
            "date",
        ),
        (
            "DATEADD(hour, 25, dt)",
            "2024-05-07 08:08:09.1234568",
            "datetime2(7)",
        ),
        (
            "DATEADD(ms, 1, CAST('2024-01-01' AS datetime2(3)))",
            "2024-01-01 00:00:00.001",
            "datetime2(3)",
        ),
        (
            "DATEADD(minute, 90, CAST('23:00' AS time(0)))",
            "00:30:00",
            "time(0)",
        ),
        ("DATEADD(day, n, dt)", "NULL", "datetime2(7)"),
        (
            "DATEADD(day, 1.9, CAST('2024-01-01' AS date))",
            "2024-01-02",
            "date",
        ),
        (
            "DATEDIFF(year, '2023-12-31 23:59:59', '2024-01-01')",
            "1",
            "int",
        ),
        ("DATEDIFF(month, '2024-01-31', '2024-02-01')", "1", "int"),
        (
            "DATEDIFF(day, '2024-01-01 23:59', '2024-01-02 00:01')",
            "1",
            "int",
        ),
        (
            "DATEDIFF(dd, CAST('2024-01-02' AS date), CAST('2024-01-01' AS date))",
            "-1",
            "int",
        ),
        ("DATEDIFF(week, '2024-01-06', '2024-01-07')", "1", "int"),
        (
            "DATEDIFF(hour, '2024-01-01 10:59:59', '2024-01-01 11:00:00')",
            "1",
            "int",
        ),
        (
            "DATEDIFF(second, '2024-01-01', '2024-01-02')",
            "86400",
            "int",
        ),
        (
            "DATEDIFF(ms, '2024-01-01', '2024-01-01 00:00:01.5')",
            "1500",
            "int",
        ),
        (
            "DATEDIFF(minute, CAST('2024-01-01 10:00 +02:00' AS datetimeoffset), CAST('2024-01-01 09:00 +00:00' AS datetimeoffset))",
            "60",
            "int",
        ),
        ("DATEDIFF(day, n, dt)", "NULL", "int"),
        (
            "DATEDIFF_BIG(ns, '2000-01-01', '2024-01-01')",
            "757382400000000000",
            "bigint",
        ),
        ("DATEPART(year, dt)", "2024", "int"),
        ("DATEPART(month, dt)", "5", "int"),
        ("DATEPART(dw, '2024-01-07')", "1", "int"),
        ("DATEPART(dayofyear, '2024-02-01')", "32", "int"),
        ("DATEPART(quarter, dt)", "2", "int"),
        ("DATEPART(ms, dt)", "123", "int"),
        (
            "DATEPART(tzoffset, CAST('2024-01-01 10:00 -05:00' AS datetimeoffset))",
            "-300",
            "int",
        ),
        ("DATENAME(month, dt)", "May", "nvarchar(30)"),
        ("DATENAME(weekday, '2024-01-07')", "Sunday", "nvarchar(30)"),
        ("DATENAME(year, dt)", "2024", "nvarchar(30)"),
        ("YEAR(dt)", "2024", "int"),
        ("MONTH('2024-03-04')", "3", "int"),
        ("DAY(dt)", "6", "int"),
        ("EOMONTH('2024-02-10')", "2024-02-29", "date"),
        (
            "EOMONTH(CAST('2024-01-31' AS date), 1)",
            "2024-02-29",
            "date",
        ),
        (
            "SYSUTCDATETIME()",
            "2024-05-06 07:08:09.1234568",
            "datetime2(7)",
        ),
        (
            "SYSDATETIME()",
            "2024-05-06 09:08:09.1234568",
            "datetime2(7)",
        ),
        (
            "CONVERT(varchar(30), GETUTCDATE(), 121)",
            "2024-05-06 07:08:09.123",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), GETDATE(), 121)",
            "2024-05-06 09:08:09.123",
            "varchar(30)",
        ),
        (
            "CONVERT(varchar(30), CURRENT_TIMESTAMP, 121)",
            "2024-05-06 09:08:09.123",
            "varchar(30)",
        ),
        (
            "SYSDATETIMEOFFSET()",
            "2024-05-06 09:08:09.1234568 +02:00",
            "datetimeoffset(7)",
        ),
    ]);
    check_errors(&[
        ("DATEADD(hour, 1, CAST('2024-01-01' AS date))", 9810),
        ("DATEADD(day, 1, CAST('10:00' AS time))", 9810),
        ("DATEADD(year, 8000, CAST('2024-01-01' AS date))", 517),
        ("DATEADD(nope, 1, dt)", 155),
        ("DATEDIFF(ns, '2000-01-01', '2024-01-01')", 535),
        ("DATEADD(day, 1)", 174),
    ]);
}

#[test]
fn string_functions() {
    check(&[
        ("LEN('abc  ')", "3", "int"),
        ("LEN(c)", "2", "int"),
        ("LEN(N'')", "0", "int"),
        ("LEN(n)", "NULL", "int"),
        ("LEN(CAST('x' AS varchar(max)))", "1", "bigint"),
        ("DATALENGTH('abc  ')", "5", "int"),
        ("DATALENGTH(N'abc')", "6", "int"),
        ("DATALENGTH(c)", "5", "int"),
        ("DATALENGTH(i)", "4", "int"),
        ("DATALENGTH(0x0102)", "2", "int"),
        ("UPPER(s)", "HELLO", "varchar(10)"),
        ("LOWER(N'ÀB')", "àb", "nvarchar(2)"),
        ("UPPER(c)", "AB   ", "varchar(5)"),
        ("LTRIM('  a ')", "a ", "varchar(4)"),
        ("RTRIM('  a ')", "  a", "varchar(4)"),
        ("TRIM('  a ')", "a", "varchar(4)"),
        ("TRIM('x' FROM 'xxaxx')", "a", "varchar(5)"),
        ("SUBSTRING('abcdef', 2, 3)", "bcd", "varchar(6)"),
        ("SUBSTRING('abcdef', 0, 3)", "ab", "varchar(6)"),
        ("SUBSTRING('abcdef', -1, 3)", "a", "varchar(6)"),
        ("SUBSTRING('abcdef', 5, 10)", "ef", "varchar(6)"),
        ("SUBSTRING('abc', 10, 1)", "", "varchar(3)"),
        (
            "CONVERT(varchar(10), SUBSTRING(0x010203, 2, 1), 1)",
            "0x02",
            "varchar(10)",
        ),
        ("LEFT(s, 2)", "He", "varchar(10)"),
        ("RIGHT(s, 3)", "llo", "varchar(10)"),
        ("LEFT(s, 20)", "Hello", "varchar(10)"),
        ("REPLACE('aXbxc', 'x', '-')", "a-b-c", "varchar(8000)"),
        ("REPLACE(N'abc', 'b', '')", "ac", "nvarchar(4000)"),
        ("CHARINDEX('l', s)", "3", "int"),
        ("CHARINDEX('L', s, 4)", "4", "int"),
        ("CHARINDEX('z', s)", "0", "int"),
        ("CHARINDEX(n, s)", "NULL", "int"),
        // Lengths add up the text lengths of the arguments (int: 11).
        ("CONCAT('a', 1, NULL, 2.5)", "a12.5", "varchar(27)"),
        ("CONCAT(s, N'!')", "Hello!", "nvarchar(11)"),
        ("REPLICATE('ab', 3)", "ababab", "varchar(8000)"),
        ("REPLICATE('ab', -1)", "NULL", "varchar(8000)"),
        ("REVERSE('abc')", "cba", "varchar(3)"),
    ]);
    check_errors(&[
        ("SUBSTRING('abc', 1, -1)", 537),
        ("LEFT('abc', -1)", 536),
        ("CONCAT('a')", 189),
        ("LEN('a', 'b')", 174),
    ]);
}

#[test]
fn math_functions() {
    check(&[
        ("ABS(-5)", "5", "int"),
        ("ABS(-1.25)", "1.25", "decimal(3,2)"),
        ("ABS(-2e0)", "2", "float"),
        ("ABS(n)", "NULL", "int"),
        ("CEILING(1.2)", "2", "decimal(1,0)"),
        ("CEILING(-1.2)", "-1", "decimal(1,0)"),
        ("CEILING(9.5)", "10", "decimal(2,0)"),
        ("FLOOR(-1.2)", "-2", "decimal(1,0)"),
        ("FLOOR(7)", "7", "int"),
        ("FLOOR(2.5e0)", "2", "float"),
        ("ROUND(1.2345, 2)", "1.2300", "decimal(5,4)"),
        ("ROUND(1.235, 2)", "1.240", "decimal(4,3)"),
        ("ROUND(-1.235, 2)", "-1.240", "decimal(4,3)"),
        ("ROUND(1.239, 2, 1)", "1.230", "decimal(4,3)"),
        ("ROUND(1234, -2)", "1200", "int"),
        ("ROUND(1250, -2)", "1300", "int"),
        ("ROUND(2.5e0, 0)", "3", "float"),
        ("POWER(2, 10)", "1024", "int"),
        ("POWER(2.0, 3)", "8.0", "decimal(38,1)"),
        ("POWER(2e0, 0.5)", "1.41421", "float"),
        ("SIGN(-5)", "-1", "int"),
        ("SIGN(2.50)", "1.00", "decimal(3,2)"),
        ("SIGN(0e0)", "0", "float"),
        ("SQRT(16)", "4", "float"),
        ("ISNUMERIC('12.5')", "1", "int"),
        ("ISNUMERIC('abc')", "0", "int"),
        ("ISNUMERIC(5)", "1", "int"),
        ("LEN(CAST(NEWID() AS varchar(36)))", "36", "int"),
    ]);
    check_errors(&[
        ("ROUND(9.5, 0)", 8115),
        ("POWER(2, 40)", 8115),
        ("SQRT(-1)", 3623),
    ]);
}

#[test]
fn unknown_and_engine_functions() {
    check(&[
        (
            "sys.fn_cdc_get_max_lsn()",
            "\0\0\0\0\0\0\0\0\0\0",
            "binary(10)",
        ),
        ("OBJECT_ID('dbo.t', 'U')", "2", "int"),
    ]);
    let e = run("xyz(1)").err().map(|e| (e.number, e.message));
    assert_eq!(
        e,
        Some((
            195,
            "'xyz' is not a recognized built-in function name.".to_string()
        ))
    );
    assert_eq!(run("dbo.xyz(1)").err().map(|e| e.number), Some(4121));
    // Aggregates outside a grouped query are refused by the scope.
    assert_eq!(run("SUM(i)").err().map(|e| e.number), Some(147));
}

#[test]
fn types_do_not_depend_on_nulls() {
    // Each expression evaluated with a NULL operand has the type it has
    // with a value.
    let pairs = [
        ("i + 1", "n + 1"),
        ("i / 2.0", "n / 2.0"),
        ("CAST(i AS varchar(5))", "CAST(n AS varchar(5))"),
        (
            "CASE WHEN i = 7 THEN 1.5 ELSE i END",
            "CASE WHEN n = 7 THEN 1.5 ELSE n END",
        ),
        ("COALESCE(i, 1.5)", "COALESCE(n, 1.5)"),
        ("DATEADD(day, i, dt)", "DATEADD(day, n, dt)"),
        ("LEFT(s, i)", "LEFT(s, n)"),
        ("ROUND(d, i)", "ROUND(d, n)"),
        ("i = 7", "n = 7"),
    ];
    for (a, b) in pairs {
        let (ta, tb) = (run(a).map(|t| t.ty), run(b).map(|t| t.ty));
        assert!(ta.is_ok(), "{a}: {ta:?}");
        assert_eq!(ta, tb, "{a} vs {b}");
    }
}

fn typed(sql: &str) -> Typed {
    run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn assignment_conversions() {
    use super::assign;
    let vc3 = DataType::VarChar(Length::Fixed(3));
    let long = typed("'abcdef'");
    let e = assign(&long, vc3, "dbo.t.name").err();
    assert_eq!(
        e.as_ref().map(|e| (e.number, e.message.as_str())),
        Some((
            2628,
            "String or binary data would be truncated in table 'dbo.t', column 'name'. Truncated value: 'abc'."
        ))
    );
    assert_eq!(
        assign(&long, vc3, "name")
            .err()
            .map(|e| (e.number, e.message)),
        Some((
            2628,
            "String or binary data would be truncated in column 'name'. Truncated value: 'abc'."
                .into()
        ))
    );
    // Variables truncate silently; trailing spaces never count.
    assert_eq!(assign(&long, vc3, "@v"), Ok(Value::String("abc".into())));
    assert_eq!(
        assign(&typed("'ab   '"), vc3, "dbo.t.c"),
        Ok(Value::String("ab ".into()))
    );
    assert_eq!(
        assign(&typed("'ab'"), DataType::Char(4), "dbo.t.c"),
        Ok(Value::String("ab  ".into()))
    );
    assert_eq!(
        assign(
            &typed("0x010203"),
            DataType::VarBinary(Length::Fixed(2)),
            "dbo.t.b"
        )
        .err()
        .map(|e| e.number),
        Some(2628)
    );
    // Implicit conversions that need CONVERT, and those that do not exist.
    assert_eq!(
        assign(&typed("'ab'"), DataType::VarBinary(Length::Max), "dbo.t.b")
            .err()
            .map(|e| e.number),
        Some(257)
    );
    assert_eq!(
        assign(&typed("GETDATE()"), DataType::Int, "dbo.t.i")
            .err()
            .map(|e| e.number),
        Some(257)
    );
    assert_eq!(
        assign(
            &typed("CAST('2024-01-01' AS date)"),
            DataType::Int,
            "dbo.t.i"
        )
        .err()
        .map(|e| e.number),
        Some(206)
    );
    assert_eq!(
        assign(
            &typed("1.005"),
            DataType::Decimal {
                precision: 5,
                scale: 2
            },
            "dbo.t.d"
        ),
        Ok(Value::Decimal(Decimal::new(101, 2)))
    );
    assert_eq!(
        assign(
            &typed("123.4"),
            DataType::Decimal {
                precision: 3,
                scale: 1
            },
            "dbo.t.d"
        )
        .err()
        .map(|e| e.number),
        Some(8115)
    );
    assert_eq!(
        assign(&typed("300"), DataType::TinyInt, "dbo.t.i")
            .err()
            .map(|e| e.number),
        Some(220)
    );
    assert_eq!(
        assign(&typed("'42'"), DataType::Int, "dbo.t.i"),
        Ok(Value::Int(42))
    );
    assert_eq!(
        assign(&typed("0"), DataType::DateTime, "dbo.t.d").map(|v| matches!(v, Value::DateTime(_))),
        Ok(true)
    );
    assert_eq!(
        assign(&typed("NULL"), DataType::Date, "dbo.t.d"),
        Ok(Value::Null)
    );
    assert_eq!(
        super::convert_with_style(&typed("'2024-05-06'"), DataType::Date, Some(23)),
        Ok(Value::Date(
            NaiveDate::from_ymd_opt(2024, 5, 6).unwrap_or_default()
        ))
    );
}

#[test]
fn compare_and_keys() {
    use super::{Key, compare, key};
    use std::cmp::Ordering;
    use std::collections::HashSet;
    let cases = [
        ("'abc'", "'ABC  '", Some(Ordering::Equal)),
        ("'a'", "'b'", Some(Ordering::Less)),
        ("1.50", "1.5", Some(Ordering::Equal)),
        ("2", "1.5", Some(Ordering::Greater)),
        ("NULL", "1", None),
        (
            "CAST('2024-01-01 10:00 +02:00' AS datetimeoffset)",
            "CAST('2024-01-01 08:00 +00:00' AS datetimeoffset)",
            Some(Ordering::Equal),
        ),
        ("0x01", "0x0100", Some(Ordering::Less)),
        (
            "CAST('00000000-0000-0000-0000-000000000001' AS uniqueidentifier)",
            "CAST('01000000-0000-0000-0000-000000000000' AS uniqueidentifier)",
            Some(Ordering::Greater),
        ),
    ];
    for (a, b, want) in cases {
        assert_eq!(compare(&typed(a), &typed(b)), Ok(want), "{a} vs {b}");
        if let Some(o) = want {
            assert_eq!(key(&typed(a)).cmp(&key(&typed(b))), o, "key {a} vs {b}");
        }
    }
    let keys: HashSet<Key> = ["'abc'", "'ABC'", "'abc '", "'abd'"]
        .iter()
        .map(|s| key(&typed(s)))
        .collect();
    assert_eq!(keys.len(), 2);
    let nums: HashSet<Key> = ["1", "1.0", "1.00", "CAST(1 AS money)", "2"]
        .iter()
        .map(|s| key(&typed(s)))
        .collect();
    assert_eq!(nums.len(), 2);
    assert!(key(&typed("NULL")) < key(&typed("-5")));
    assert!(key(&typed("-2.5")) < key(&typed("-2")));
    assert_eq!(key(&typed("0e0")), key(&typed("-0e0")));
}

fn accumulate(
    kind: super::aggregate::AggregateKind,
    distinct: bool,
    input: DataType,
    values: &[Value],
) -> SqlResult<Typed> {
    let mut acc = super::aggregate::Accumulator::new(kind, distinct, input);
    for v in values {
        acc.update(&Typed::new(v.clone(), input))?;
    }
    acc.finish()
}

#[test]
fn aggregates() {
    use super::aggregate::AggregateKind::*;
    let ints = [Value::Int(1), Value::Null, Value::Int(2), Value::Int(2)];
    let dec = |v: i128, s: u8| Value::Decimal(Decimal::new(v, s));
    let d52 = DataType::Decimal {
        precision: 5,
        scale: 2,
    };
    let cases: Vec<(
        super::aggregate::AggregateKind,
        bool,
        DataType,
        Vec<Value>,
        Typed,
    )> = vec![
        (
            CountStar,
            false,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(4), DataType::Int),
        ),
        (
            Count,
            false,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(3), DataType::Int),
        ),
        (
            Count,
            true,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(2), DataType::Int),
        ),
        (
            Sum,
            false,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(5), DataType::Int),
        ),
        (
            Sum,
            true,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(3), DataType::Int),
        ),
        (
            Sum,
            false,
            DataType::TinyInt,
            vec![Value::TinyInt(200), Value::TinyInt(200)],
            Typed::new(Value::Int(400), DataType::Int),
        ),
        (
            Avg,
            false,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(1), DataType::Int),
        ),
        (
            Min,
            false,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(1), DataType::Int),
        ),
        (
            Max,
            false,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::Int(2), DataType::Int),
        ),
        (
            Sum,
            false,
            DataType::Int,
            vec![],
            Typed::null(DataType::Int),
        ),
        (
            Count,
            false,
            DataType::Int,
            vec![],
            Typed::new(Value::Int(0), DataType::Int),
        ),
        (
            CountBigStar,
            false,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::BigInt(4), DataType::BigInt),
        ),
        (
            CountBig,
            true,
            DataType::Int,
            ints.to_vec(),
            Typed::new(Value::BigInt(2), DataType::BigInt),
        ),
        (
            Max,
            false,
            DataType::Int,
            vec![Value::Null],
            Typed::null(DataType::Int),
        ),
        (
            Sum,
            false,
            d52,
            vec![dec(150, 2), dec(25, 2)],
            Typed::new(
                dec(175, 2),
                DataType::Decimal {
                    precision: 38,
                    scale: 2,
                },
            ),
        ),
        (
            Avg,
            false,
            d52,
            vec![dec(100, 2), dec(0, 2), dec(0, 2)],
            Typed::new(
                dec(333_333, 6),
                DataType::Decimal {
                    precision: 38,
                    scale: 6,
                },
            ),
        ),
        (
            Sum,
            false,
            DataType::BigInt,
            vec![Value::BigInt(i64::from(i32::MAX)), Value::BigInt(1)],
            Typed::new(Value::BigInt(2_147_483_648), DataType::BigInt),
        ),
        (
            Sum,
            false,
            DataType::Money,
            vec![Value::Money(15_000), Value::Money(1)],
            Typed::new(Value::Money(15_001), DataType::Money),
        ),
        (
            Avg,
            false,
            DataType::Float,
            vec![Value::Float(1.0), Value::Float(2.0)],
            Typed::new(Value::Float(1.5), DataType::Float),
        ),
        (
            Sum,
            false,
            DataType::Real,
            vec![Value::Real(1.5)],
            Typed::new(Value::Float(1.5), DataType::Float),
        ),
        (
            Max,
            false,
            DataType::VarChar(Length::Fixed(5)),
            vec![
                Value::String("b".into()),
                Value::String("B ".into()),
                Value::String("a".into()),
            ],
            Typed::new(
                Value::String("b".into()),
                DataType::VarChar(Length::Fixed(5)),
            ),
        ),
        (
            Count,
            true,
            DataType::VarChar(Length::Fixed(5)),
            vec![
                Value::String("b".into()),
                Value::String("B ".into()),
                Value::String("a".into()),
            ],
            Typed::new(Value::Int(2), DataType::Int),
        ),
    ];
    for (kind, distinct, input, values, want) in cases {
        assert_eq!(
            accumulate(kind, distinct, input, &values),
            Ok(want),
            "{kind:?} {distinct} {input:?}"
        );
    }
    let overflow = accumulate(
        Sum,
        false,
        DataType::Int,
        &[Value::Int(i32::MAX), Value::Int(1)],
    );
    assert_eq!(overflow.err().map(|e| e.number), Some(8115));
    let bad = accumulate(
        Sum,
        false,
        DataType::VarChar(Length::Fixed(3)),
        &[Value::String("1".into())],
    );
    assert_eq!(bad.err().map(|e| e.number), Some(8117));
    assert_eq!(
        accumulate(Max, false, DataType::Bit, &[])
            .err()
            .map(|e| e.number),
        Some(8117)
    );
}

#[test]
fn classify_aggregates() {
    use super::aggregate::{AggregateKind, classify};
    let kind = |sql: &str| match parse(sql) {
        Expr::Function(f) => classify(&f).map(|(k, d, a)| (k, d, a.map(|e| e.to_string()))),
        _ => None,
    };
    assert_eq!(
        kind("COUNT(*)"),
        Some((AggregateKind::CountStar, false, None))
    );
    assert_eq!(
        kind("count(x)"),
        Some((AggregateKind::Count, false, Some("x".into())))
    );
    assert_eq!(
        kind("COUNT(DISTINCT x)"),
        Some((AggregateKind::Count, true, Some("x".into())))
    );
    assert_eq!(
        kind("Sum(a + 1)"),
        Some((AggregateKind::Sum, false, Some("a + 1".into())))
    );
    assert_eq!(
        kind("AVG(a)"),
        Some((AggregateKind::Avg, false, Some("a".into())))
    );
    assert_eq!(kind("MIN(a)").map(|k| k.0), Some(AggregateKind::Min));
    assert_eq!(kind("MAX(a)").map(|k| k.0), Some(AggregateKind::Max));
    assert_eq!(
        kind("COUNT_BIG(*)"),
        Some((AggregateKind::CountBigStar, false, None))
    );
    assert_eq!(
        kind("COUNT_BIG(DISTINCT a)"),
        Some((AggregateKind::CountBig, true, Some("a".into())))
    );
    assert_eq!(kind("LEN(a)"), None);
    assert_eq!(kind("SUM(a) OVER (PARTITION BY b)"), None);
    assert_eq!(kind("dbo.SUM(a)"), None);
}

#[test]
fn cast_target_lengths() {
    // CAST/CONVERT default lengths are 30, declarations 1.
    check(&[
        ("CAST('abc' AS varchar)", "abc", "varchar(30)"),
        ("CAST('abc' AS nvarchar)", "abc", "nvarchar(30)"),
        (
            "CAST('abc' AS char)",
            "abc                           ",
            "char(30)",
        ),
        ("CONVERT(nvarchar, 5)", "5", "nvarchar(30)"),
    ]);
}
