//! Aggregates: what each computes over values and NULLs, its result
//! type, and which calls are aggregates.

use sqlparser::ast::Expr;

use crate::sql::error::SqlResult;
use crate::sql::expr::Typed;
use crate::sql::expr::test_scope::parse;
use crate::sql::types::{DataType, Decimal, Length, Value};

fn accumulate(
    kind: crate::sql::expr::aggregate::AggregateKind,
    distinct: bool,
    input: DataType,
    values: &[Value],
) -> SqlResult<Typed> {
    let mut acc = crate::sql::expr::aggregate::Accumulator::new(kind, distinct, input);
    for v in values {
        acc.update(&Typed::new(v.clone(), input))?;
    }
    acc.finish()
}

#[test]
fn aggregates() {
    use crate::sql::expr::aggregate::AggregateKind::*;
    let ints = [Value::Int(1), Value::Null, Value::Int(2), Value::Int(2)];
    let dec = |v: i128, s: u8| Value::Decimal(Decimal::new(v, s));
    let d52 = DataType::Decimal {
        precision: 5,
        scale: 2,
    };
    let cases: Vec<(
        crate::sql::expr::aggregate::AggregateKind,
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
    use crate::sql::expr::aggregate::{AggregateKind, classify};
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
