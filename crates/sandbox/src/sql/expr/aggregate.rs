//! Aggregate functions, accumulated row by row by the executor.
//!
//! Result types: <https://learn.microsoft.com/sql/t-sql/functions/sum-transact-sql>,
//! <https://learn.microsoft.com/sql/t-sql/functions/avg-transact-sql>,
//! <https://learn.microsoft.com/sql/t-sql/functions/count-transact-sql>

use std::cmp::Ordering;
use std::collections::HashSet;

use sqlparser::ast::{
    DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments,
};

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Decimal, Value};
use super::Typed;
use super::cast::{exact, float_of};
use super::compare::{Key, compare, key};
use super::num::{self, fits};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateKind {
    CountStar,
    Count,
    /// COUNT_BIG(*): COUNT(*) as bigint.
    CountBigStar,
    /// COUNT_BIG(x).
    CountBig,
    Min,
    Max,
    Sum,
    Avg,
}

impl AggregateKind {
    fn name(self) -> &'static str {
        match self {
            AggregateKind::CountStar | AggregateKind::Count => "count",
            AggregateKind::CountBigStar | AggregateKind::CountBig => "count_big",
            AggregateKind::Min => "min",
            AggregateKind::Max => "max",
            AggregateKind::Sum => "sum",
            AggregateKind::Avg => "avg",
        }
    }
}

/// The aggregate a function call is, with DISTINCT and its argument;
/// `None` for non-aggregates and for window calls (with OVER).
pub fn classify(function: &Function) -> Option<(AggregateKind, bool, Option<&Expr>)> {
    if function.over.is_some() || function.name.0.len() != 1 {
        return None;
    }
    let name = function
        .name
        .0
        .first()?
        .as_ident()?
        .value
        .to_ascii_uppercase();
    let kind = match name.as_str() {
        "COUNT" => AggregateKind::Count,
        "COUNT_BIG" => AggregateKind::CountBig,
        "MIN" => AggregateKind::Min,
        "MAX" => AggregateKind::Max,
        "SUM" => AggregateKind::Sum,
        "AVG" => AggregateKind::Avg,
        _ => return None,
    };
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if kind == AggregateKind::Count => {
            Some((AggregateKind::CountStar, false, None))
        }
        [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if kind == AggregateKind::CountBig => {
            Some((AggregateKind::CountBigStar, false, None))
        }
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(e))] => Some((kind, distinct, Some(e))),
        _ => None,
    }
}

/// The type an aggregate returns for an argument type; 8117 for
/// arguments it cannot take (SUM of varchar, MAX of bit).
pub fn result_type(kind: AggregateKind, input: DataType) -> SqlResult<DataType> {
    use DataType::*;
    let invalid = || {
        Err(SqlError::new(
            8117,
            format!(
                "Operand data type {} is invalid for {} operator.",
                input.name(),
                kind.name()
            ),
        ))
    };
    Ok(match kind {
        AggregateKind::CountStar | AggregateKind::Count => Int,
        AggregateKind::CountBigStar | AggregateKind::CountBig => BigInt,
        AggregateKind::Min | AggregateKind::Max => match input {
            Bit => return invalid(),
            t => t,
        },
        AggregateKind::Sum | AggregateKind::Avg => match input {
            TinyInt | SmallInt | Int => Int,
            BigInt => BigInt,
            Decimal { scale, .. } if kind == AggregateKind::Sum => Decimal {
                precision: 38,
                scale,
            },
            Decimal { scale, .. } => Decimal {
                precision: 38,
                scale: scale.max(6),
            },
            Money | SmallMoney => Money,
            Real | Float => Float,
            _ => return invalid(),
        },
    })
}

/// Running state of one aggregate over one group.
#[derive(Debug, Clone)]
pub struct Accumulator {
    kind: AggregateKind,
    distinct: bool,
    input: DataType,
    count: i64,
    /// Exact sum as (unscaled, scale) of the input.
    exact: i128,
    float: f64,
    best: Option<Typed>,
    seen: HashSet<Key>,
}

impl Accumulator {
    /// `input` is the argument's type (ignored for COUNT(*)).
    pub fn new(kind: AggregateKind, distinct: bool, input: DataType) -> Self {
        Self {
            kind,
            distinct,
            input,
            count: 0,
            exact: 0,
            float: 0.0,
            best: None,
            seen: HashSet::new(),
        }
    }

    /// Adds one row's argument value (any value for COUNT(*)); NULLs are
    /// ignored by every aggregate but COUNT(*).
    pub fn update(&mut self, value: &Typed) -> SqlResult<()> {
        if matches!(
            self.kind,
            AggregateKind::CountStar | AggregateKind::CountBigStar
        ) {
            self.count += 1;
            return Ok(());
        }
        result_type(self.kind, self.input)?;
        if value.value.is_null() {
            return Ok(());
        }
        if self.distinct && !self.seen.insert(key(value)) {
            return Ok(());
        }
        self.count += 1;
        match self.kind {
            AggregateKind::Min | AggregateKind::Max => {
                let replace = match &self.best {
                    None => true,
                    Some(b) => {
                        let o = compare(value, b)?;
                        o == Some(if self.kind == AggregateKind::Min {
                            Ordering::Less
                        } else {
                            Ordering::Greater
                        })
                    }
                };
                if replace {
                    self.best = Some(value.clone());
                }
            }
            AggregateKind::Sum | AggregateKind::Avg => {
                if let Some((v, s)) = exact(&value.value) {
                    let scale = self.input_scale();
                    let v = num::rescale(v, s, scale).ok_or_else(|| self.overflow())?;
                    self.exact = self.exact.checked_add(v).ok_or_else(|| self.overflow())?;
                } else if let Some(f) = float_of(&value.value) {
                    self.float += f;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn input_scale(&self) -> u8 {
        match self.input {
            DataType::Decimal { scale, .. } => scale,
            DataType::Money | DataType::SmallMoney => 4,
            _ => 0,
        }
    }

    fn overflow(&self) -> SqlError {
        let ty = result_type(self.kind, self.input).unwrap_or(DataType::Int);
        let name = if matches!(ty, DataType::Decimal { .. }) {
            "numeric"
        } else {
            ty.name()
        };
        SqlError::new(
            8115,
            format!("Arithmetic overflow error converting expression to data type {name}."),
        )
    }

    /// The aggregate's result, typed as SQL Server types it (COUNT int,
    /// SUM(int) int, SUM(decimal(p,s)) decimal(38,s), AVG(int) int...).
    pub fn finish(&self) -> SqlResult<Typed> {
        let ty = match self.kind {
            AggregateKind::CountStar => DataType::Int,
            AggregateKind::CountBigStar => DataType::BigInt,
            kind => result_type(kind, self.input)?,
        };
        match self.kind {
            AggregateKind::CountStar | AggregateKind::Count => {
                let n = i32::try_from(self.count).map_err(|_| self.overflow())?;
                return Ok(Typed::new(Value::Int(n), ty));
            }
            AggregateKind::CountBigStar | AggregateKind::CountBig => {
                return Ok(Typed::new(Value::BigInt(self.count), ty));
            }
            _ => {}
        }
        if self.count == 0 {
            return Ok(Typed::null(ty));
        }
        if matches!(self.kind, AggregateKind::Min | AggregateKind::Max) {
            return Ok(self.best.clone().unwrap_or_else(|| Typed::null(ty)));
        }
        let avg = self.kind == AggregateKind::Avg;
        let count = i128::from(self.count);
        let value = match ty {
            DataType::Float => Value::Float(if avg {
                self.float / self.count as f64
            } else {
                self.float
            }),
            DataType::Int | DataType::BigInt => {
                // AVG of integers divides as integers do.
                let v = if avg { self.exact / count } else { self.exact };
                let ok = if ty == DataType::Int {
                    i32::try_from(v).is_ok()
                } else {
                    i64::try_from(v).is_ok()
                };
                if !ok {
                    return Err(self.overflow());
                }
                if ty == DataType::Int {
                    Value::Int(v as i32)
                } else {
                    Value::BigInt(v as i64)
                }
            }
            DataType::Money => {
                let v = if avg {
                    num::muldiv(self.exact, 1, count).ok_or_else(|| self.overflow())?
                } else {
                    self.exact
                };
                Value::Money(i64::try_from(v).map_err(|_| self.overflow())?)
            }
            DataType::Decimal { precision, scale } => {
                let from = self.input_scale();
                let v = if avg {
                    num::muldiv(self.exact, num::pow10(scale - from), count)
                } else {
                    num::rescale(self.exact, from, scale)
                };
                match v {
                    Some(v) if fits(v, precision) => Value::Decimal(Decimal::new(v, scale)),
                    _ => return Err(self.overflow()),
                }
            }
            _ => Value::Null,
        };
        Ok(Typed::new(value, ty))
    }
}

#[cfg(test)]
#[path = "aggregate_tests.rs"]
mod tests;
