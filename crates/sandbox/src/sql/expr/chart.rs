//! The conversion chart: which conversions exist between two types
//! (implicitly, only explicitly, or not at all), with SQL Server's errors,
//! and the type two branches meet at (CASE, COALESCE, UNION).
//!
//! Which conversions exist: <https://learn.microsoft.com/sql/t-sql/data-types/data-type-conversion-database-engine>

use super::super::error::{SqlError, SqlResult};
use super::super::types::{DataType, Length};
use super::types::{
    Family, decimal, decimal_shape, family, higher, is_datetime_like, nvarchar, string_length,
    varchar,
};

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Allowed {
    No,
    Explicit,
    Implicit,
}

/// The conversion chart, as far as the sandbox's types go.
fn allowed(from: &DataType, to: &DataType) -> Allowed {
    use Family::*;
    match (family(from), family(to)) {
        (Temporal, Temporal) => match (from, to) {
            (DataType::Date, DataType::Time { .. }) | (DataType::Time { .. }, DataType::Date) => {
                Allowed::No
            }
            _ => Allowed::Implicit,
        },
        (a, b) if a == b => Allowed::Implicit,
        (Exact | Approx, Exact | Approx) => Allowed::Implicit,
        (String, Binary) => Allowed::Explicit,
        (String, _) | (_, String) => Allowed::Implicit,
        (Exact, Binary) | (Binary, Exact) => Allowed::Implicit,
        (Guid, Binary) | (Binary, Guid) => Allowed::Implicit,
        (Temporal, Exact | Approx) if is_datetime_like(from) => Allowed::Explicit,
        (Exact | Approx, Temporal) if is_datetime_like(to) => Allowed::Implicit,
        (Temporal, Binary) if is_datetime_like(from) => Allowed::Implicit,
        (Binary, Temporal) if is_datetime_like(to) => Allowed::Implicit,
        _ => Allowed::No,
    }
}

/// 529 when CAST/CONVERT cannot convert between the types.
pub fn check_explicit(from: &DataType, to: &DataType) -> SqlResult<()> {
    if allowed(from, to) == Allowed::No {
        return Err(SqlError::new(
            529,
            format!(
                "Explicit conversion from data type {} to {} is not allowed.",
                from.name(),
                to.name()
            ),
        )
        .with_state(2));
    }
    Ok(())
}

/// 206 when the types are incompatible, 257 when only an explicit
/// conversion exists.
pub fn check_implicit(from: &DataType, to: &DataType) -> SqlResult<()> {
    match allowed(from, to) {
        Allowed::Implicit => Ok(()),
        Allowed::Explicit => Err(SqlError::new(
            257,
            format!(
                "Implicit conversion from data type {} to {} is not allowed. Use the CONVERT function to run this query.",
                from.name(),
                to.name()
            ),
        )
        .with_state(3)),
        Allowed::No => Err(clash(from, to)),
    }
}

/// 206: the types cannot meet.
pub fn clash(from: &DataType, to: &DataType) -> SqlError {
    SqlError::new(
        206,
        format!(
            "Operand type clash: {} is incompatible with {}",
            from.name(),
            to.name()
        ),
    )
    .with_state(2)
}

fn max_len(a: Length, b: Length) -> Length {
    match (a, b) {
        (Length::Fixed(x), Length::Fixed(y)) => Length::Fixed(x.max(y)),
        _ => Length::Max,
    }
}

/// The result type of CASE, COALESCE, IIF and UNION over two branch
/// types: the higher precedence type, widened so both fit (decimal
/// precision/scale union, longest string). 206 when no implicit
/// conversion exists between them.
pub fn union(a: DataType, b: DataType) -> SqlResult<DataType> {
    use DataType::*;
    if a == b {
        return Ok(a);
    }
    let (fa, fb) = (family(&a), family(&b));
    if fa == Family::String && fb == Family::String {
        let len = max_len(string_length(&a), string_length(&b));
        let unicode = a.is_unicode() || b.is_unicode();
        let fixed = matches!(a, Char(_) | NChar(_)) && matches!(b, Char(_) | NChar(_));
        return Ok(match (unicode, fixed, len) {
            (true, true, Length::Fixed(n)) => NChar(n),
            (false, true, Length::Fixed(n)) => Char(n),
            (true, _, l) => nvarchar(l),
            (false, _, l) => varchar(l),
        });
    }
    if fa == Family::Binary && fb == Family::Binary {
        let len = max_len(string_length(&a), string_length(&b));
        return Ok(match (a, b, len) {
            (Binary(_), Binary(_), Length::Fixed(n)) => Binary(n),
            (_, _, l) => VarBinary(l),
        });
    }
    let hi = higher(a, b);
    let lo = if hi == a { b } else { a };
    check_implicit(&lo, &hi)?;
    if let (Decimal { .. }, Some((p1, s1)), Some((p2, s2))) =
        (hi, decimal_shape(&a), decimal_shape(&b))
    {
        let s = s1.max(s2);
        let int = (p1 - s1).max(p2 - s2);
        return Ok(decimal(usize::from(int) + usize::from(s), usize::from(s)));
    }
    Ok(match (hi, lo) {
        (DateTime2 { scale: x }, DateTime2 { scale: y }) => DateTime2 { scale: x.max(y) },
        (DateTimeOffset { scale: x }, DateTimeOffset { scale: y }) => {
            DateTimeOffset { scale: x.max(y) }
        }
        (Time { scale: x }, Time { scale: y }) => Time { scale: x.max(y) },
        (h, _) => h,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_widens_like_case_does() {
        use DataType::*;
        let d = |p, s| Decimal {
            precision: p,
            scale: s,
        };
        assert_eq!(union(Int, d(5, 2)), Ok(d(12, 2)));
        assert_eq!(union(d(38, 10), d(38, 30)), Ok(d(38, 30)));
        assert_eq!(union(Int, BigInt), Ok(BigInt));
        assert_eq!(union(Int, Float), Ok(Float));
        assert_eq!(
            union(VarChar(Length::Fixed(3)), NVarChar(Length::Fixed(2))),
            Ok(NVarChar(Length::Fixed(3)))
        );
        assert_eq!(union(Char(3), Char(5)), Ok(Char(5)));
        assert_eq!(union(VarChar(Length::Fixed(3)), Int), Ok(Int));
        assert_eq!(union(Date, DateTime), Ok(DateTime));
        assert_eq!(union(Date, Int).map_err(|e| e.number), Err(206));
    }
}
