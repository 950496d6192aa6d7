//! CAST, CONVERT (with styles), date/time strings, and conversions on
//! assignment with their truncation and overflow errors.

use chrono::NaiveDate;

use crate::sql::expr::test_scope::{check, check_errors, typed};
use crate::sql::types::{DataType, Decimal, Length, Value};

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
fn assignment_conversions() {
    use crate::sql::expr::assign;
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
        crate::sql::expr::convert_with_style(&typed("'2024-05-06'"), DataType::Date, Some(23)),
        Ok(Value::Date(
            NaiveDate::from_ymd_opt(2024, 5, 6).unwrap_or_default()
        ))
    );
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
