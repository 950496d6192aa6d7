//! The scope the expression tests evaluate in, and their helpers: parse
//! and evaluate an expression, show its value and type, check tables of
//! cases.

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
pub fn check(cases: &[(&str, &str, &str)]) {
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
pub fn check_errors(cases: &[(&str, i32)]) {
    let mut failures = Vec::new();
    for (sql, number) in cases {
        match run(sql) {
            Err(e) if e.number == *number => {}
            other => failures.push(format!("{sql}: got {other:?}, want error {number}")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

pub fn typed(sql: &str) -> Typed {
    run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}
