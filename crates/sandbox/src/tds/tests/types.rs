//! Every type as an RPC parameter through tiberius and back as a column,
//! NULLs and extremes included; and every type as a column the backend
//! produces (ROW and NBCROW).

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeZone};
use tiberius::numeric::Numeric;
use tiberius::{EncryptionLevel, ToSql};
use uuid::Uuid;

use super::{TestServer, bounded, connect};
use crate::sql::{DataType, Length, Request, Value};

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

#[tokio::test]
async fn parameters_round_trip_as_columns() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::Required).await;

        let max38 = 10i128.pow(38) - 1;
        let dec_int = Numeric::new_with_scale(max38, 0);
        let dec_frac = Numeric::new_with_scale(-max38, 37);
        let dec_small = Numeric::new_with_scale(-12345, 2);
        let long_nvarchar = "ħ".repeat(4500);
        let blob: Vec<u8> = (0..1_048_576u32).map(|i| (i * 7 % 256) as u8).collect();
        let d = date(1, 1, 1);
        let t = NaiveTime::from_hms_nano_opt(23, 59, 59, 999_999_900).unwrap();
        let dt2 = date(9999, 12, 31).and_time(t);
        let dto: DateTime<FixedOffset> = FixedOffset::east_opt(-(8 * 3600 + 30 * 60))
            .unwrap()
            .from_utc_datetime(&date(2024, 2, 29).and_hms_nano_opt(1, 2, 3, 100).unwrap());
        let guid = Uuid::parse_str("00112233-4455-6677-8899-aabbccddeeff").unwrap();
        let rdec = rust_decimal::Decimal::new(-123_456_789, 4);
        let null_int: Option<i32> = None;
        let null_text: Option<&str> = None;
        let params: Vec<&dyn ToSql> = vec![
            &true,
            &255u8,
            &i16::MIN,
            &i32::MIN,
            &i64::MAX,
            &dec_int,
            &dec_frac,
            &dec_small,
            &1.25f32,
            &f64::MIN_POSITIVE,
            &"naïve café €",
            &long_nvarchar,
            &blob,
            &d,
            &t,
            &dt2,
            &dto,
            &guid,
            &rdec,
            &null_int,
            &null_text,
            &"",
        ];
        let row = client
            .query("ECHO", &params)
            .await
            .unwrap()
            .into_row()
            .await
            .unwrap()
            .unwrap();

        assert_eq!(row.get::<bool, _>(0), Some(true));
        assert_eq!(row.get::<u8, _>(1), Some(255));
        assert_eq!(row.get::<i16, _>(2), Some(i16::MIN));
        assert_eq!(row.get::<i32, _>(3), Some(i32::MIN));
        assert_eq!(row.get::<i64, _>(4), Some(i64::MAX));
        for (i, expected) in [(5, dec_int), (6, dec_frac), (7, dec_small)] {
            let got = row.get::<Numeric, _>(i).unwrap();
            assert_eq!(
                (got.value(), got.scale()),
                (expected.value(), expected.scale()),
                "column {i}"
            );
        }
        assert_eq!(row.get::<f32, _>(8), Some(1.25));
        assert_eq!(row.get::<f64, _>(9), Some(f64::MIN_POSITIVE));
        assert_eq!(row.get::<&str, _>(10), Some("naïve café €"));
        assert_eq!(row.get::<&str, _>(11), Some(long_nvarchar.as_str()));
        assert_eq!(row.get::<&[u8], _>(12), Some(blob.as_slice()));
        assert_eq!(row.get::<NaiveDate, _>(13), Some(d));
        assert_eq!(row.get::<NaiveTime, _>(14), Some(t));
        assert_eq!(row.get::<NaiveDateTime, _>(15), Some(dt2));
        assert_eq!(row.get::<DateTime<FixedOffset>, _>(16), Some(dto));
        assert_eq!(row.get::<Uuid, _>(17), Some(guid));
        assert_eq!(row.get::<rust_decimal::Decimal, _>(18), Some(rdec));
        assert_eq!(row.try_get::<i32, _>(19).unwrap(), None);
        // An untyped NULL parameter (NULLTYPE) is reported as int.
        assert_eq!(row.try_get::<i32, _>(20).unwrap(), None);
        assert_eq!(row.get::<&str, _>(21), Some(""));

        // What the backend received: types and values decoded exactly.
        let requests = server.events.requests.lock().unwrap().clone();
        let Some(Request::Rpc { procedure, params }) = requests.last() else {
            panic!("no RPC")
        };
        assert_eq!(procedure, "sp_executesql");
        let p = |name: &str| params.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p("stmt").value, Value::String("ECHO".into()));
        assert_eq!(
            p("@P6").ty,
            DataType::Decimal {
                precision: 38,
                scale: 0
            }
        );
        assert_eq!(p("@P12").ty, DataType::NVarChar(Length::Max));
        assert_eq!(p("@P13").ty, DataType::VarBinary(Length::Max));
        assert_eq!(p("@P16").ty, DataType::DateTime2 { scale: 7 });
        assert_eq!(p("@P16").value, Value::DateTime(dt2));
        assert_eq!(p("@P18").value, Value::Guid(guid));
        assert_eq!(p("@P20").value, Value::Null);
        server.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn legacy_datetime_parameters() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::NotSupported).await;
        let when = date(2024, 2, 29)
            .and_hms_milli_opt(13, 45, 30, 500)
            .unwrap();
        let days = (when.date() - date(1900, 1, 1)).num_days() as i32;
        let legacy = tiberius::ColumnData::DateTime(Some(tiberius::time::DateTime::new(
            days,
            (13 * 3600 + 45 * 60 + 30) * 300 + 150,
        )));
        let small = tiberius::ColumnData::SmallDateTime(Some(tiberius::time::SmallDateTime::new(
            days as u16,
            13 * 60 + 46,
        )));
        let row = client
            .query("ECHO", &[&legacy, &small])
            .await
            .unwrap()
            .into_row()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.get::<NaiveDateTime, _>(0), Some(when));
        assert_eq!(
            row.get::<NaiveDateTime, _>(1),
            Some(date(2024, 2, 29).and_hms_opt(13, 46, 0).unwrap())
        );
        let requests = server.events.requests.lock().unwrap().clone();
        let Some(Request::Rpc { params, .. }) = requests.last() else {
            panic!("no RPC")
        };
        assert_eq!(params[2].ty, DataType::DateTime);
        assert_eq!(params[3].ty, DataType::SmallDateTime);
        server.shutdown().await;
    })
    .await
}

/// Reads column `i` of the TYPES/NULLS result as the sample at `i` expects.
fn check_column(row: &tiberius::Row, i: usize, ty: &DataType, value: &Value) {
    macro_rules! same {
        ($t:ty, $expected:expr) => {
            assert_eq!(
                row.try_get::<$t, _>(i).unwrap(),
                $expected,
                "column {i} {ty:?}"
            )
        };
    }
    match value {
        Value::Null => assert!(
            row.cells().nth(i).is_some_and(|(_, cell)| is_null(cell)),
            "column {i}"
        ),
        Value::Bit(b) => same!(bool, Some(*b)),
        Value::TinyInt(n) => same!(u8, Some(*n)),
        Value::SmallInt(n) => same!(i16, Some(*n)),
        Value::Int(n) => same!(i32, Some(*n)),
        Value::BigInt(n) => same!(i64, Some(*n)),
        Value::Decimal(d) => {
            let got = row.try_get::<Numeric, _>(i).unwrap().unwrap();
            assert_eq!((got.value(), got.scale()), (d.value, d.scale), "column {i}");
        }
        Value::Real(f) => same!(f32, Some(*f)),
        Value::Float(f) => same!(f64, Some(*f)),
        Value::Money(m) => same!(f64, Some(*m as f64 / 10_000.0)),
        Value::String(s) => same!(&str, Some(s.as_str())),
        Value::Binary(b) => same!(&[u8], Some(b.as_slice())),
        Value::Date(d) => same!(NaiveDate, Some(*d)),
        Value::Time(t) => same!(NaiveTime, Some(*t)),
        Value::DateTime(dt) => same!(NaiveDateTime, Some(*dt)),
        Value::DateTimeOffset(dto) => same!(DateTime<FixedOffset>, Some(*dto)),
        Value::Guid(g) => same!(Uuid, Some(*g)),
    }
}

#[tokio::test]
async fn every_type_as_a_column_with_nulls() {
    bounded(async {
        let server = TestServer::start().await;
        let mut client = connect(server.addr, EncryptionLevel::Off).await;
        let samples = crate::tds::codec::tests::samples();
        for batch in ["TYPES", "NULLS"] {
            let rows = client
                .simple_query(batch)
                .await
                .unwrap()
                .into_first_result()
                .await
                .unwrap();
            assert_eq!(rows.len(), if batch == "NULLS" { 2 } else { 1 });
            assert_eq!(rows[0].columns().len(), samples.len());
            for (i, (ty, value)) in samples.iter().enumerate() {
                check_column(&rows[0], i, ty, value);
            }
            if batch == "NULLS" {
                for i in 0..samples.len() {
                    // tiberius reports NULL as None whatever the getter's type.
                    let cell = rows[1].cells().nth(i).unwrap().1;
                    assert!(is_null(cell), "column {i} not NULL: {cell:?}");
                }
            }
        }
        server.shutdown().await;
    })
    .await
}

fn is_null(data: &tiberius::ColumnData<'_>) -> bool {
    use tiberius::ColumnData as C;
    matches!(
        data,
        C::U8(None)
            | C::I16(None)
            | C::I32(None)
            | C::I64(None)
            | C::F32(None)
            | C::F64(None)
            | C::Bit(None)
            | C::String(None)
            | C::Guid(None)
            | C::Binary(None)
            | C::Numeric(None)
            | C::DateTime(None)
            | C::SmallDateTime(None)
            | C::Time(None)
            | C::Date(None)
            | C::DateTime2(None)
            | C::DateTimeOffset(None)
    )
}
