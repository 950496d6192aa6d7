//! Every supported type round-trips exactly, as a parameter and as a column,
//! NULL and extreme values included.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime};
use tiberius::numeric::Numeric;
use tiberius::{ColumnData, IntoSql};

use crate::support::{TestServer, query, run};

/// One type under test: its T-SQL declaration, a value to send, and the
/// value a column of that type gives back (padding, rounding).
struct Case {
    declared: &'static str,
    sent: ColumnData<'static>,
    stored: ColumnData<'static>,
}

fn case(declared: &'static str, sent: ColumnData<'static>) -> Case {
    Case {
        declared,
        stored: sent.clone(),
        sent,
    }
}

fn datetime2(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").expect("test timestamp")
}

fn cases() -> Vec<Case> {
    let mega: Vec<u8> = (0..1_048_576u32).map(|i| (i % 251) as u8).collect();
    let long_unicode: String = "Grüße, 世界 — ".repeat(800);
    let long_latin: String = "café ".repeat(2_000);
    let offset = FixedOffset::east_opt(-(5 * 3600 + 30 * 60)).expect("offset");
    let dto: DateTime<FixedOffset> = datetime2("2024-02-29 23:59:59.9999999")
        .and_local_timezone(offset)
        .single()
        .expect("local time");
    vec![
        case("bit", ColumnData::Bit(Some(true))),
        case("tinyint", ColumnData::U8(Some(255))),
        case("smallint", ColumnData::I16(Some(i16::MIN))),
        case("int", ColumnData::I32(Some(i32::MAX))),
        case("bigint", ColumnData::I64(Some(i64::MIN))),
        case(
            "decimal(38,0)",
            Numeric::new_with_scale(10i128.pow(38) - 1, 0).into_sql(),
        ),
        case(
            "decimal(38,10)",
            Numeric::new_with_scale(-(10i128.pow(38) - 1), 10).into_sql(),
        ),
        case(
            "numeric(38,37)",
            Numeric::new_with_scale(10i128.pow(38) - 1, 37).into_sql(),
        ),
        case(
            "decimal(9,2)",
            Numeric::new_with_scale(-1234567, 2).into_sql(),
        ),
        case("real", ColumnData::F32(Some(f32::MAX))),
        case(
            "float",
            ColumnData::F64(Some(-1.234_567_890_123_456_7e-300)),
        ),
        case("varchar(20)", ColumnData::String(Some("café crème".into()))),
        case("varchar(max)", ColumnData::String(Some(long_latin.into()))),
        case(
            "nvarchar(50)",
            ColumnData::String(Some("Grüße, 世界 😀".into())),
        ),
        case(
            "nvarchar(max)",
            ColumnData::String(Some(long_unicode.into())),
        ),
        Case {
            declared: "char(8)",
            sent: ColumnData::String(Some("ab".into())),
            stored: ColumnData::String(Some("ab      ".into())),
        },
        Case {
            declared: "nchar(4)",
            sent: ColumnData::String(Some("é".into())),
            stored: ColumnData::String(Some("é   ".into())),
        },
        Case {
            declared: "binary(4)",
            sent: ColumnData::Binary(Some(vec![1, 2].into())),
            stored: ColumnData::Binary(Some(vec![1, 2, 0, 0].into())),
        },
        case(
            "varbinary(16)",
            ColumnData::Binary(Some(vec![0, 255, 7].into())),
        ),
        case("varbinary(max)", ColumnData::Binary(Some(mega.into()))),
        case(
            "date",
            NaiveDate::from_ymd_opt(9999, 12, 31)
                .expect("date")
                .into_sql(),
        ),
        case(
            "date",
            NaiveDate::from_ymd_opt(1, 1, 1).expect("date").into_sql(),
        ),
        case(
            "time(7)",
            NaiveTime::from_hms_nano_opt(23, 59, 59, 999_999_900)
                .expect("time")
                .into_sql(),
        ),
        case(
            "datetime2(7)",
            datetime2("2024-06-30 12:34:56.1234567").into_sql(),
        ),
        case(
            "datetime2(7)",
            datetime2("0001-01-01 00:00:00.0000001").into_sql(),
        ),
        case("datetimeoffset(7)", dto.into_sql()),
        case(
            "datetime",
            ColumnData::DateTime(Some(tiberius::time::DateTime::new(45_000, 300 * 3_600 + 1))),
        ),
        case(
            "smalldatetime",
            ColumnData::SmallDateTime(Some(tiberius::time::SmallDateTime::new(40_000, 61))),
        ),
        case(
            "uniqueidentifier",
            ColumnData::Guid(Some(
                uuid::Uuid::parse_str("6F9619FF-8B86-D011-B42D-00C04FC964FF").expect("uuid"),
            )),
        ),
    ]
}

/// The NULL of the same variant, to send a typed NULL.
fn null_of(value: &ColumnData<'static>) -> ColumnData<'static> {
    match value {
        ColumnData::Bit(_) => ColumnData::Bit(None),
        ColumnData::U8(_) => ColumnData::U8(None),
        ColumnData::I16(_) => ColumnData::I16(None),
        ColumnData::I32(_) => ColumnData::I32(None),
        ColumnData::I64(_) => ColumnData::I64(None),
        ColumnData::F32(_) => ColumnData::F32(None),
        ColumnData::F64(_) => ColumnData::F64(None),
        ColumnData::Numeric(_) => ColumnData::Numeric(None),
        ColumnData::String(_) => ColumnData::String(None),
        ColumnData::Binary(_) => ColumnData::Binary(None),
        ColumnData::Guid(_) => ColumnData::Guid(None),
        ColumnData::Date(_) => ColumnData::Date(None),
        ColumnData::Time(_) => ColumnData::Time(None),
        ColumnData::DateTime(_) => ColumnData::DateTime(None),
        ColumnData::SmallDateTime(_) => ColumnData::SmallDateTime(None),
        ColumnData::DateTime2(_) => ColumnData::DateTime2(None),
        ColumnData::DateTimeOffset(_) => ColumnData::DateTimeOffset(None),
        other => panic!("no NULL form for {other:?}"),
    }
}

/// NULLs compare by variant, except that tiberius reports every NULL of a
/// nullable datetime family column (DATETIMN, also smalldatetime) as
/// `DateTime(None)` when the row comes as an NBCROW, as SQL Server sends it.
fn same_null(got: &ColumnData<'_>, expected: &ColumnData<'_>) -> bool {
    match (got, expected) {
        (ColumnData::DateTime(None), ColumnData::SmallDateTime(None)) => true,
        _ => got == expected,
    }
}

fn numeric_scale(value: &ColumnData<'_>) -> Option<u8> {
    match value {
        ColumnData::Numeric(Some(n)) => Some(n.scale()),
        _ => None,
    }
}

fn short(value: &ColumnData<'_>) -> String {
    let text = format!("{value:?}");
    text.chars().take(120).collect()
}

#[tokio::test]
async fn every_type_round_trips_as_a_parameter() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    for case in cases() {
        let null = null_of(&case.sent);
        let rows = query(
            &mut client,
            "SELECT @P1 AS v, @P2 AS n",
            &[&case.sent, &null],
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.declared));
        let row = rows.into_iter().next().expect("one row");
        let cells: Vec<ColumnData<'static>> = row.into_iter().collect();
        assert!(
            cells[0] == case.sent,
            "{}: sent {} got {}",
            case.declared,
            short(&case.sent),
            short(&cells[0])
        );
        assert_eq!(
            numeric_scale(&cells[0]),
            numeric_scale(&case.sent),
            "{}",
            case.declared
        );
        assert!(
            same_null(&cells[1], &null),
            "{}: NULL parameter, got {:?}",
            case.declared,
            cells[1]
        );
    }
}

#[tokio::test]
async fn every_type_round_trips_as_a_column() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    for (i, case) in cases().into_iter().enumerate() {
        let table = format!("dbo.t{i}");
        run(
            &mut client,
            &format!(
                "CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, v {} NULL)",
                case.declared
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.declared));
        client
            .execute(
                format!("INSERT INTO {table} (id, v) VALUES (1, @P1), (2, NULL)"),
                &[&case.sent],
            )
            .await
            .unwrap_or_else(|e| panic!("{}: insert: {e}", case.declared));
        let rows = query(
            &mut client,
            &format!("SELECT v FROM {table} ORDER BY id"),
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("{}: select: {e}", case.declared));
        let values: Vec<ColumnData<'static>> =
            rows.into_iter().flat_map(|row| row.into_iter()).collect();
        assert_eq!(values.len(), 2, "{}", case.declared);
        assert!(
            values[0] == case.stored,
            "{}: expected {} got {}",
            case.declared,
            short(&case.stored),
            short(&values[0])
        );
        assert_eq!(
            numeric_scale(&values[0]),
            numeric_scale(&case.stored),
            "{}",
            case.declared
        );
        assert!(
            same_null(&values[1], &null_of(&case.stored)),
            "{}: NULL, got {:?}",
            case.declared,
            values[1]
        );
    }
}

#[tokio::test]
async fn money_keeps_four_decimals() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    let rows = run(
        &mut client,
        "CREATE TABLE dbo.m (id int PRIMARY KEY, a money NULL, b smallmoney NULL); \
         INSERT INTO dbo.m VALUES (1, 922337203685477.5807, -214748.3648), (2, NULL, NULL), \
         (3, 123456789.1234, 0.0001); \
         SELECT CAST(a AS varchar(30)), CAST(b AS varchar(30)), a, b FROM dbo.m ORDER BY id;",
    )
    .await
    .expect("batch runs");
    let rows = rows.into_iter().flatten().collect::<Vec<_>>();
    assert_eq!(rows[0].get::<&str, _>(0), Some("922337203685477.58"));
    assert_eq!(rows[0].get::<&str, _>(1), Some("-214748.36"));
    assert_eq!(rows[0].get::<f64, _>(3), Some(-214_748.364_8));
    assert_eq!(rows[1].get::<f64, _>(2), None);
    assert_eq!(rows[2].get::<f64, _>(2), Some(123_456_789.123_4));
    assert_eq!(rows[2].get::<f64, _>(3), Some(0.000_1));
}
