//! Operators: result types and values of arithmetic, and decimal(38) at
//! its limits.

use crate::sql::expr::test_scope::{check, check_errors};

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
