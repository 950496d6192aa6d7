//! Parsing Spark SQL for DataFusion.
//!
//! sqlparser's Databricks dialect reads Spark's syntax (backticks,
//! `INTERVAL 76 MINUTES`, `f(...).field`, `--` comments). One rewrite is
//! are two rewrites. Spark takes the unit of `timestampdiff`/`timestampadd`
//! as a bare keyword (`timestampdiff(SECOND, a, b)`), which DataFusion would
//! resolve as a column, so it becomes the string `'SECOND'`. And a field of
//! a computed struct (`from_json(...).warnings`) is a name after a dot,
//! which DataFusion's planner only takes as a string (`.'warnings'`).

use std::ops::ControlFlow;

use deltalake::datafusion::sql::sqlparser::ast::{
    AccessExpr, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Statement, Value,
    visit_expressions_mut,
};
use deltalake::datafusion::sql::sqlparser::dialect::DatabricksDialect;
use deltalake::datafusion::sql::sqlparser::parser::{Parser, ParserError};

/// Functions whose first argument is a unit keyword in Spark.
const UNIT_FIRST: [&str; 4] = [
    "timestampdiff",
    "timestamp_diff",
    "timestampadd",
    "timestamp_add",
];

/// Parses one Spark SQL statement (a trailing `;` is allowed) and rewrites
/// it for DataFusion.
pub(crate) fn parse_spark_sql(sql: &str) -> Result<Statement, ParserError> {
    let mut statements = Parser::parse_sql(&DatabricksDialect {}, sql)?;
    if statements.len() != 1 {
        return Err(ParserError::ParserError(format!(
            "expected one SQL statement, found {}",
            statements.len()
        )));
    }
    let mut statement = statements.remove(0);
    quote_unit_keywords(&mut statement);
    quote_field_names(&mut statement);
    Ok(statement)
}

/// `f(...).field` → `f(...).'field'`.
fn quote_field_names(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::CompoundFieldAccess { access_chain, .. } = expr {
            for access in access_chain {
                if let AccessExpr::Dot(field) = access
                    && let Expr::Identifier(name) = field
                {
                    *field = Expr::Value(Value::SingleQuotedString(name.value.clone()).into());
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `timestampdiff(SECOND, ...)` → `timestampdiff('SECOND', ...)`.
fn quote_unit_keywords(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Function(function) = expr {
            let name = function.name.to_string().to_ascii_lowercase();
            if UNIT_FIRST.contains(&name.as_str())
                && let FunctionArguments::List(list) = &mut function.args
                && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) =
                    list.args.first_mut()
                && let Expr::Identifier(unit) = first
                && unit.quote_style.is_none()
            {
                *first =
                    Expr::Value(Value::SingleQuotedString(unit.value.to_ascii_uppercase()).into());
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_units_and_struct_field_names_only() {
        let cases = [
            (
                "SELECT timestampdiff(SECOND, a, b) / 3600.0 FROM t",
                "SELECT timestampdiff('SECOND', a, b) / 3600.0 FROM t",
            ),
            (
                "SELECT TIMESTAMPDIFF(minute, a, b) FROM t;",
                "SELECT TIMESTAMPDIFF('MINUTE', a, b) FROM t",
            ),
            (
                "SELECT timestampdiff('HOUR', a, b), other(SECOND) FROM t",
                "SELECT timestampdiff('HOUR', a, b), other(SECOND) FROM t",
            ),
            (
                "SELECT from_json(d, 'w ARRAY<STRING>').w AS w, t.x FROM t",
                "SELECT from_json(d, 'w ARRAY<STRING>').'w' AS w, t.x FROM t",
            ),
            (
                "SELECT a FROM t WHERE b > c + INTERVAL 76 MINUTES -- note",
                "SELECT a FROM t WHERE b > c + INTERVAL 76 MINUTES",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_spark_sql(input).unwrap().to_string(), expected);
        }
    }

    #[test]
    fn rejects_several_statements() {
        let err = parse_spark_sql("SELECT 1; SELECT 2").unwrap_err();
        assert!(err.to_string().contains("one SQL statement"), "{err}");
    }
}
