//! Built-in functions by family, and names left to the engine.

use crate::sql::expr::test_scope::{check, check_errors, run};

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
        ("DATALENGTH(REPLICATE(0x0102, 5000))", "8000", "int"),
        (
            "DATALENGTH(REPLICATE(CAST(0x41 AS varbinary(max)), 3000000))",
            "3000000",
            "bigint",
        ),
        (
            "LEN(REPLICATE(CAST('a' AS varchar(max)), 2000000))",
            "2000000",
            "bigint",
        ),
        ("LEN(REPLICATE('a', 2000000000))", "8000", "int"),
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
