//! Spark's division and rounding.
//!
//! Spark's `/` never divides integers as integers: with a decimal operand
//! the result is a decimal whose scale is at least 6 (so
//! `timestampdiff(...) / 3600.0` keeps six places), otherwise a double; a
//! zero divisor gives NULL (outside ANSI mode). That is exactly
//! `try_divide`, so `/` is planned as `try_divide`. `round` rounds HALF_UP
//! on the decimal value Spark prints, where DataFusion rounds the binary
//! double.

use std::str::FromStr;
use std::sync::Arc;

use deltalake::arrow::array::{
    Array, ArrayRef, Decimal128Array, Float32Array, Float64Array, Int64Array,
};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::datatypes::{Field, FieldRef};
use deltalake::datafusion::common::{DFSchema, ScalarValue, exec_err, plan_err};
use deltalake::datafusion::error::Result;
use deltalake::datafusion::logical_expr::expr_schema::ExprSchemable;
use deltalake::datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use deltalake::datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use deltalake::datafusion::sql::sqlparser::ast::BinaryOperator;
use rust_decimal::{Decimal, RoundingStrategy};

const MAX_PRECISION: i32 = 38;

/// Precision and scale of a type as Spark widens it for decimal arithmetic.
fn as_decimal(t: &DataType) -> Option<DecimalShape> {
    match t {
        DataType::Decimal128(p, s) => Some((i32::from(*p), i32::from(*s))),
        DataType::Int8 | DataType::UInt8 => Some((3, 0)),
        DataType::Int16 | DataType::UInt16 => Some((5, 0)),
        DataType::Int32 | DataType::UInt32 | DataType::Null => Some((10, 0)),
        DataType::Int64 | DataType::UInt64 => Some((20, 0)),
        _ => None,
    }
}

fn is_numeric(t: &DataType) -> bool {
    t.is_numeric() || t == &DataType::Null
}

/// Spark's result type of decimal division, with its precision-loss
/// adjustment above 38 digits.
fn division_type(left: DecimalShape, right: DecimalShape) -> (u8, i8) {
    let ((p1, s1), (p2, s2)) = (left, right);
    let mut scale = 6.max(s1 + p2 + 1);
    let mut precision = p1 - s1 + s2 + scale;
    if precision > MAX_PRECISION {
        let integral = precision - scale;
        scale = (MAX_PRECISION - integral).max(scale.min(6));
        precision = MAX_PRECISION;
    }
    (precision as u8, scale as i8)
}

/// Precision and scale.
type DecimalShape = (i32, i32);

/// A decimal division: the operands' shapes and the result's.
type DecimalDivision = (DecimalShape, DecimalShape, (u8, i8));

/// The types `try_divide` computes in: two decimals and the result
/// decimal, or (`None`) doubles.
fn division_plan(left: &DataType, right: &DataType) -> Option<DecimalDivision> {
    let decimal =
        matches!(left, DataType::Decimal128(..)) || matches!(right, DataType::Decimal128(..));
    match (decimal, as_decimal(left), as_decimal(right)) {
        (true, Some(l), Some(r)) => Some((l, r, division_type(l, r))),
        _ => None,
    }
}

fn pow10(n: i32) -> Option<i128> {
    10i128.checked_pow(u32::try_from(n).ok()?)
}

/// `left / right` on unscaled decimals, HALF_UP; `None` on a zero divisor
/// or overflow (Spark's NULL).
fn divide_decimal(left: i128, right: i128, shift: i32, precision: u8) -> Option<i128> {
    if right == 0 {
        return None;
    }
    let (num, den) = if shift >= 0 {
        (left.checked_mul(pow10(shift)?)?, right)
    } else {
        (left, right.checked_mul(pow10(-shift)?)?)
    };
    let quotient = half_up(num, den)?;
    (quotient.abs() < pow10(i32::from(precision))?).then_some(quotient)
}

/// `num / den` rounded half away from zero.
fn half_up(num: i128, den: i128) -> Option<i128> {
    let quotient = num.checked_div(den)?;
    let rest = num.checked_rem(den)?;
    if rest.unsigned_abs().checked_mul(2)? >= den.unsigned_abs() {
        let sign = if (num < 0) == (den < 0) { 1 } else { -1 };
        quotient.checked_add(sign)
    } else {
        Some(quotient)
    }
}

/// `try_divide(a, b)`: Spark's division, NULL when `b` is 0.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TryDivide {
    signature: Signature,
}

impl TryDivide {
    pub(super) fn new() -> Self {
        TryDivide {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for TryDivide {
    fn name(&self) -> &str {
        "try_divide"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [left, right] = arg_types else {
            return plan_err!("try_divide takes 2 arguments");
        };
        if !is_numeric(left) || !is_numeric(right) {
            return plan_err!("try_divide needs numbers, got {left} and {right}");
        }
        Ok(match division_plan(left, right) {
            Some(((p1, s1), (p2, s2), _)) => vec![
                DataType::Decimal128(p1 as u8, s1 as i8),
                DataType::Decimal128(p2 as u8, s2 as i8),
            ],
            None => vec![DataType::Float64, DataType::Float64],
        })
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match arg_types {
            [left, right] => match division_plan(left, right) {
                Some((_, _, (p, s))) => DataType::Decimal128(p, s),
                None => DataType::Float64,
            },
            _ => DataType::Float64,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right] = args.args.as_slice() else {
            return exec_err!("try_divide takes 2 arguments");
        };
        let left = left.to_array(args.number_rows)?;
        let right = right.to_array(args.number_rows)?;
        let out: ArrayRef = match args.return_type() {
            DataType::Decimal128(p, s) => {
                let (Some(l), Some(r)) = (
                    left.as_any().downcast_ref::<Decimal128Array>(),
                    right.as_any().downcast_ref::<Decimal128Array>(),
                ) else {
                    return exec_err!("try_divide: decimal operands expected");
                };
                let (s1, s2) = (i32::from(l.scale()), i32::from(r.scale()));
                let shift = i32::from(*s) - s1 + s2;
                let values: Decimal128Array = l
                    .iter()
                    .zip(r.iter())
                    .map(|(a, b)| divide_decimal(a?, b?, shift, *p))
                    .collect();
                Arc::new(values.with_precision_and_scale(*p, *s)?)
            }
            _ => {
                let l = cast(&left, &DataType::Float64)?;
                let r = cast(&right, &DataType::Float64)?;
                let (Some(l), Some(r)) = (
                    l.as_any().downcast_ref::<Float64Array>(),
                    r.as_any().downcast_ref::<Float64Array>(),
                ) else {
                    return exec_err!("try_divide: numeric operands expected");
                };
                let values: Float64Array = l
                    .iter()
                    .zip(r.iter())
                    .map(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
                        _ => None,
                    })
                    .collect();
                Arc::new(values)
            }
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// Plans SQL's `a / b` on numbers as `try_divide(a, b)`: Spark's division.
#[derive(Debug)]
pub(super) struct SparkDivision {
    try_divide: Arc<ScalarUDF>,
}

impl SparkDivision {
    pub(super) fn new(try_divide: Arc<ScalarUDF>) -> Self {
        SparkDivision { try_divide }
    }
}

impl ExprPlanner for SparkDivision {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        if expr.op != BinaryOperator::Divide {
            return Ok(PlannerResult::Original(expr));
        }
        let numeric = |e: &Expr| e.get_type(schema).is_ok_and(|t| is_numeric(&t));
        if !numeric(&expr.left) || !numeric(&expr.right) {
            return Ok(PlannerResult::Original(expr));
        }
        Ok(PlannerResult::Planned(self.try_divide.call(vec![
            spark_literal(expr.left),
            spark_literal(expr.right),
        ])))
    }
}

/// Spark types an integer literal INT when it fits 32 bits (DataFusion:
/// BIGINT); the width decides a decimal quotient's scale.
fn spark_literal(expr: Expr) -> Expr {
    match expr {
        Expr::Literal(ScalarValue::Int64(Some(v)), metadata) => match i32::try_from(v) {
            Ok(narrow) => Expr::Literal(ScalarValue::Int32(Some(narrow)), metadata),
            Err(_) => Expr::Literal(ScalarValue::Int64(Some(v)), metadata),
        },
        other => other,
    }
}

/// `round(x [, d])`: HALF_UP to `d` decimal places (negative `d`: to tens,
/// hundreds...). Doubles round the shortest decimal that prints them, as
/// Spark's do; decimals keep the smaller of their scale and `d`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct SparkRound {
    signature: Signature,
}

impl SparkRound {
    pub(super) fn new() -> Self {
        SparkRound {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

fn round_places(scalar: Option<&ScalarValue>) -> Result<i32> {
    match scalar {
        None => Ok(0),
        Some(value) => match value.cast_to(&DataType::Int64)? {
            ScalarValue::Int64(Some(d)) => Ok(i32::try_from(d).unwrap_or(i32::MAX).clamp(-38, 38)),
            _ => exec_err!("round: the scale must be a constant integer"),
        },
    }
}

fn round_double(x: f64, places: i32) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let shown = format!("{x:e}");
    match Decimal::from_scientific(&shown) {
        Ok(d) if places >= 0 => d
            .round_dp_with_strategy(places as u32, RoundingStrategy::MidpointAwayFromZero)
            .to_string()
            .parse()
            .unwrap_or(x),
        Ok(d) => {
            let step = Decimal::from_str(&format!("1e{}", -places)).ok();
            let step = step.or_else(|| Decimal::from_scientific(&format!("1e{}", -places)).ok());
            match step {
                Some(step) => ((d / step)
                    .round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero)
                    * step)
                    .to_string()
                    .parse()
                    .unwrap_or(x),
                None => 0.0,
            }
        }
        // Beyond 28 significant digits a double has no fraction to round.
        Err(_) if x.abs() >= 1.0 => x,
        Err(_) => 0.0_f64.copysign(x),
    }
}

impl ScalarUDFImpl for SparkRound {
    fn name(&self) -> &str {
        "round"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let Some(value) = arg_types.first() else {
            return plan_err!("round takes 1 or 2 arguments");
        };
        let value = match value {
            DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) | DataType::Int64 => {
                value.clone()
            }
            t if t.is_integer() || t == &DataType::Null => DataType::Int64,
            t if t.is_numeric() => DataType::Float64,
            t => return plan_err!("round needs a number, got {t}"),
        };
        match arg_types.len() {
            1 => Ok(vec![value]),
            2 => Ok(vec![value, DataType::Int64]),
            _ => plan_err!("round takes 1 or 2 arguments"),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Float64))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let Some(value) = args.arg_fields.first() else {
            return plan_err!("round takes 1 or 2 arguments");
        };
        let places = round_places(args.scalar_arguments.get(1).copied().flatten())?;
        let data_type = match value.data_type() {
            DataType::Decimal128(p, s) => {
                let s = i32::from(*s);
                let scale = places.clamp(0, s);
                let precision = (i32::from(*p) - s + 1 + scale).min(MAX_PRECISION);
                DataType::Decimal128(precision as u8, scale as i8)
            }
            other => other.clone(),
        };
        Ok(Arc::new(Field::new(self.name(), data_type, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let places = match args.args.get(1) {
            None => 0,
            Some(ColumnarValue::Scalar(s)) => round_places(Some(s))?,
            Some(ColumnarValue::Array(_)) => {
                return exec_err!("round: the scale must be a constant integer");
            }
        };
        let Some(value) = args.args.first() else {
            return exec_err!("round takes 1 or 2 arguments");
        };
        let value = value.to_array(args.number_rows)?;
        let any = value.as_any();
        let out: ArrayRef = if let Some(v) = any.downcast_ref::<Float64Array>() {
            Arc::new(
                v.unary::<_, deltalake::arrow::datatypes::Float64Type>(|x| round_double(x, places)),
            )
        } else if let Some(v) = any.downcast_ref::<Float32Array>() {
            Arc::new(v.unary::<_, deltalake::arrow::datatypes::Float32Type>(|x| {
                round_double(f64::from(x), places) as f32
            }))
        } else if let Some(v) = any.downcast_ref::<Int64Array>() {
            let step = if places >= 0 { None } else { pow10(-places) };
            let values: Int64Array = v
                .iter()
                .map(|x| match (x, step) {
                    (Some(x), Some(step)) => half_up(i128::from(x), step)
                        .and_then(|q| q.checked_mul(step))
                        .and_then(|r| i64::try_from(r).ok()),
                    (x, _) => x,
                })
                .collect();
            Arc::new(values)
        } else if let Some(v) = any.downcast_ref::<Decimal128Array>() {
            let DataType::Decimal128(p, s) = args.return_type().clone() else {
                return exec_err!("round: decimal result expected");
            };
            let drop = i32::from(v.scale()) - i32::from(s);
            let values: Decimal128Array = v
                .iter()
                .map(|x| {
                    let x = x?;
                    let rounded = if drop > 0 {
                        half_up(x, pow10(drop)?)?
                    } else {
                        x
                    };
                    (rounded.abs() < pow10(i32::from(p))?).then_some(rounded)
                })
                .collect();
            Arc::new(values.with_precision_and_scale(p, s)?)
        } else {
            return exec_err!("round: unsupported type {}", value.data_type());
        };
        Ok(ColumnarValue::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::functions::test_support::eval;

    #[test]
    fn decimal_division_types_follow_spark() {
        // bigint / 3600.0 (decimal(5,1)) → decimal(27,6)
        assert_eq!(division_type((20, 0), (5, 1)), (27, 6));
        // decimal(38,10) / decimal(38,10): precision loss keeps 6 places.
        assert_eq!(division_type((38, 10), (38, 10)), (38, 6));
    }

    #[test]
    fn doubles_round_half_up_on_their_printed_value() {
        let cases = [
            (2.5, 0, 3.0),
            (-2.5, 0, -3.0),
            (2.675, 2, 2.68),
            (1.005, 2, 1.01),
            (0.125, 2, 0.13),
            (1234.5, -2, 1200.0),
            (1250.0, -2, 1300.0),
            (1e300, 2, 1e300),
        ];
        for (x, places, expected) in cases {
            assert_eq!(round_double(x, places), expected, "round({x}, {places})");
        }
    }

    #[tokio::test]
    async fn division_is_spark_division() {
        let (values, types) = eval(
            "CAST(901 AS BIGINT) / 3600.0, 7 / 2, 1 / 0, 1.0 / 0, 2.0 / 3, try_divide(5, 2), \
             try_divide(CAST(1 AS DOUBLE), 0) AS by_zero, try_divide(CAST(10 AS BIGINT), 4000.0)",
        )
        .await;
        assert_eq!(
            values,
            [
                "0.250278",
                "3.5",
                "",
                "",
                "0.666666666667",
                "2.5",
                "",
                "0.002500"
            ]
        );
        assert_eq!(types[0], "Decimal128(27, 6)");
        assert_eq!(types[1], "Float64");
    }

    #[tokio::test]
    async fn round_is_half_up_and_keeps_spark_types() {
        let (values, types) = eval(
            "round(CAST(2.675 AS DOUBLE), 2), round(CAST(2.5 AS DOUBLE)), round(CAST(0.250278 AS DECIMAL(27,6)), 2), \
             round(15, -1), round(try_divide(CAST(300 AS BIGINT), CAST(400.0 AS DOUBLE)), 2), round(NULL, 2)",
        )
        .await;
        assert_eq!(values, ["2.68", "3.0", "0.25", "20", "0.75", ""]);
        assert_eq!(types[2], "Decimal128(24, 2)");
    }
}
