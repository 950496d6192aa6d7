//! Every type through TYPE_INFO + value, as the server encodes it and as
//! the parameter decoder reads it back, NULL included.

use chrono::{FixedOffset, NaiveDate, NaiveTime, TimeZone};
use uuid::Uuid;

use super::decode::decode_value;
use super::encode::{encode_value, rescale};
use super::type_info::TypeInfo;
use crate::sql::{DataType, Decimal, Length, Value};
use crate::tds::wire::Reader;

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

pub(crate) fn samples() -> Vec<(DataType, Value)> {
    let max38 = 10i128.pow(38) - 1;
    let ts = date(9999, 12, 31)
        .and_hms_nano_opt(23, 59, 59, 999_999_900)
        .unwrap();
    vec![
        (DataType::Bit, Value::Bit(true)),
        (DataType::TinyInt, Value::TinyInt(255)),
        (DataType::SmallInt, Value::SmallInt(i16::MIN)),
        (DataType::Int, Value::Int(i32::MIN)),
        (DataType::BigInt, Value::BigInt(i64::MAX)),
        (
            DataType::Decimal {
                precision: 38,
                scale: 0,
            },
            Value::Decimal(Decimal::new(max38, 0)),
        ),
        (
            DataType::Decimal {
                precision: 38,
                scale: 38,
            },
            Value::Decimal(Decimal::new(-max38, 38)),
        ),
        (
            DataType::Decimal {
                precision: 18,
                scale: 4,
            },
            Value::Decimal(Decimal::new(-12_345_678_901_234, 4)),
        ),
        (
            DataType::Decimal {
                precision: 5,
                scale: 2,
            },
            Value::Decimal(Decimal::new(99_999, 2)),
        ),
        (DataType::Real, Value::Real(1.5e-30)),
        (DataType::Float, Value::Float(-1.7976931348623157e308)),
        (DataType::Money, Value::Money(i64::MIN)),
        (DataType::SmallMoney, Value::Money(i32::MAX as i64)),
        (DataType::Char(10), Value::String("abcdefghij".into())),
        (
            DataType::VarChar(Length::Fixed(50)),
            Value::String("café € naïve".into()),
        ),
        (
            DataType::VarChar(Length::Max),
            Value::String("x".repeat(10_000)),
        ),
        (DataType::NChar(5), Value::String("日本語ab".into())),
        (
            DataType::NVarChar(Length::Fixed(100)),
            Value::String("Grüße \u{1F600}".into()),
        ),
        (
            DataType::NVarChar(Length::Max),
            Value::String("ü".repeat(5_000)),
        ),
        (DataType::Binary(4), Value::Binary(vec![0, 1, 2, 255])),
        (
            DataType::VarBinary(Length::Fixed(8000)),
            Value::Binary(vec![7; 8000]),
        ),
        (
            DataType::VarBinary(Length::Max),
            Value::Binary((0..1_048_576u32).map(|i| (i % 251) as u8).collect()),
        ),
        (DataType::Date, Value::Date(date(1, 1, 1))),
        (DataType::Date, Value::Date(date(9999, 12, 31))),
        (
            DataType::Time { scale: 7 },
            Value::Time(NaiveTime::from_hms_nano_opt(23, 59, 59, 999_999_900).unwrap()),
        ),
        (
            DataType::Time { scale: 0 },
            Value::Time(NaiveTime::from_hms_opt(12, 0, 1).unwrap()),
        ),
        (
            DataType::DateTime,
            Value::DateTime(date(1753, 1, 1).and_hms_opt(0, 0, 0).unwrap()),
        ),
        (
            DataType::DateTime,
            Value::DateTime(
                date(2024, 2, 29)
                    .and_hms_milli_opt(13, 45, 30, 500)
                    .unwrap(),
            ),
        ),
        (
            DataType::SmallDateTime,
            Value::DateTime(date(2079, 6, 6).and_hms_opt(23, 59, 0).unwrap()),
        ),
        (DataType::DateTime2 { scale: 7 }, Value::DateTime(ts)),
        (
            DataType::DateTime2 { scale: 3 },
            Value::DateTime(date(1, 1, 1).and_hms_milli_opt(0, 0, 0, 1).unwrap()),
        ),
        (
            DataType::DateTimeOffset { scale: 7 },
            Value::DateTimeOffset(
                FixedOffset::east_opt(5 * 3600 + 1800)
                    .unwrap()
                    .from_utc_datetime(&ts),
            ),
        ),
        (
            DataType::DateTimeOffset { scale: 2 },
            Value::DateTimeOffset(
                FixedOffset::west_opt(14 * 3600)
                    .unwrap()
                    .from_utc_datetime(&date(2000, 1, 1).and_hms_milli_opt(10, 0, 0, 120).unwrap()),
            ),
        ),
        (
            DataType::UniqueIdentifier,
            Value::Guid(Uuid::parse_str("01234567-89ab-cdef-0123-456789abcdef").unwrap()),
        ),
    ]
}

fn round_trip(ty: &DataType, value: &Value, nullable: bool) -> (DataType, Value) {
    let info = TypeInfo::for_type(ty, nullable);
    let mut buf = Vec::new();
    info.encode(&mut buf);
    encode_value(&mut buf, &info, value).unwrap_or_else(|e| panic!("{ty:?}: {e}"));
    let mut r = Reader::new(&buf);
    let decoded_info = TypeInfo::decode(&mut r).unwrap();
    let decoded = decode_value(&mut r, &decoded_info).unwrap();
    assert!(r.is_empty(), "{ty:?}: trailing bytes");
    (decoded_info.data_type(), decoded)
}

#[test]
fn every_type_round_trips_with_nulls() {
    for (ty, value) in samples() {
        assert_eq!(round_trip(&ty, &value, true), (ty, value.clone()), "{ty:?}");
        assert_eq!(
            round_trip(&ty, &Value::Null, true),
            (ty, Value::Null),
            "NULL {ty:?}"
        );
        // NOT NULL columns use the fixed-length codes where they exist.
        assert_eq!(round_trip(&ty, &value, false).1, value, "NOT NULL {ty:?}");
    }
}

#[test]
fn guid_uses_mixed_endian_layout() {
    let g = Uuid::parse_str("01234567-89ab-cdef-0123-456789abcdef").unwrap();
    let info = TypeInfo::for_type(&DataType::UniqueIdentifier, true);
    let mut buf = Vec::new();
    encode_value(&mut buf, &info, &Value::Guid(g)).unwrap();
    assert_eq!(
        buf,
        [
            16, 0x67, 0x45, 0x23, 0x01, 0xab, 0x89, 0xef, 0xcd, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef
        ]
    );
}

#[test]
fn values_are_coerced_or_refused() {
    let mut buf = Vec::new();
    let bigint = TypeInfo::for_type(&DataType::BigInt, true);
    encode_value(&mut buf, &bigint, &Value::Int(-5)).unwrap();
    assert_eq!(buf, [8, 0xFB, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
    let tiny = TypeInfo::for_type(&DataType::TinyInt, false);
    assert!(encode_value(&mut Vec::new(), &tiny, &Value::Int(300)).is_err());
    assert!(encode_value(&mut Vec::new(), &tiny, &Value::Null).is_err());
    let dec = TypeInfo::for_type(
        &DataType::Decimal {
            precision: 3,
            scale: 1,
        },
        true,
    );
    assert!(
        encode_value(
            &mut Vec::new(),
            &dec,
            &Value::Decimal(Decimal::new(1000, 1))
        )
        .is_err()
    );
    let mut buf = Vec::new();
    encode_value(&mut buf, &dec, &Value::Decimal(Decimal::new(1255, 3))).unwrap();
    assert_eq!(buf, [5, 1, 13, 0, 0, 0]);
    let varchar = TypeInfo::for_type(&DataType::VarChar(Length::Fixed(3)), true);
    assert!(encode_value(&mut Vec::new(), &varchar, &Value::String("abcd".into())).is_err());
    assert!(encode_value(&mut Vec::new(), &varchar, &Value::Int(1)).is_err());
    assert_eq!(rescale(-15, 1, 0), Some(-2));
    assert_eq!(rescale(14, 1, 0), Some(1));
}

#[test]
fn malformed_values_are_errors_not_panics() {
    let cases: &[&[u8]] = &[
        &[0x26, 3, 3, 0, 0, 0], // INTN of length 3
        &[0x26, 4, 4, 0],       // truncated
        &[0x6A, 17, 39, 0, 0],  // precision 39
        &[
            0x6A, 17, 38, 0, 17, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        ],
        &[0x29, 8, 3, 0, 0, 0],                      // scale 8
        &[0x29, 7, 5, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], // beyond midnight
        &[0xE7, 0x03, 0x00, 0, 0, 0, 0, 0],          // odd nvarchar max
        &[0xE7, 0x10, 0x00, 0, 0, 0, 0, 0, 0x03, 0x00, 1, 2, 3],
        &[0xA5, 0x40, 0x00, 0x41, 0x00], // longer than declared
        &[
            0xA5, 0xFF, 0xFF, 5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 2, 0, 0, 0, 0,
        ],
        &[0xF1, 0],                 // xml: unsupported
        &[0x24, 16, 4, 1, 2, 3, 4], // GUID of 4 bytes
        &[],
    ];
    for bytes in cases {
        let mut r = Reader::new(bytes);
        let result = TypeInfo::decode(&mut r).and_then(|info| decode_value(&mut r, &info));
        assert!(result.is_err(), "{bytes:?} decoded as {result:?}");
    }
}

#[test]
fn legacy_parameter_types_decode() {
    use crate::tds::codec::type_info::DEFAULT_COLLATION;
    let mut text = vec![0x23, 0xFF, 0xFF, 0xFF, 0x7F];
    text.extend_from_slice(&DEFAULT_COLLATION);
    text.extend_from_slice(&[4, 0, 0, 0, b'c', b'a', b'f', 0xE9]);
    let mut ntext = vec![0x63, 0xFF, 0xFF, 0xFF, 0x7F];
    ntext.extend_from_slice(&DEFAULT_COLLATION);
    ntext.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]);
    let image = [0x22, 0xFF, 0xFF, 0xFF, 0x7F, 2, 0, 0, 0, 0xAB, 0xCD];
    let varchar = [0x27, 10, 2, b'h', b'i'];
    let cases: [(&[u8], DataType, Value); 4] = [
        (
            &text,
            DataType::VarChar(Length::Max),
            Value::String("café".into()),
        ),
        (&ntext, DataType::NVarChar(Length::Max), Value::Null),
        (
            &image,
            DataType::VarBinary(Length::Max),
            Value::Binary(vec![0xAB, 0xCD]),
        ),
        (
            &varchar,
            DataType::VarChar(Length::Fixed(10)),
            Value::String("hi".into()),
        ),
    ];
    for (bytes, ty, value) in cases {
        let mut r = Reader::new(bytes);
        let info = TypeInfo::decode(&mut r).unwrap();
        assert_eq!(info.data_type(), ty);
        assert_eq!(decode_value(&mut r, &info).unwrap(), value);
        assert!(r.is_empty());
    }
}

#[test]
fn collated_varchar_round_trips_in_its_code_page() {
    use crate::sql::collation::lookup;
    let cases = [
        (
            "Latin1_General_100_CI_AS_SC_UTF8",
            "日本語 Жук",
            "日本語 Жук".as_bytes().to_vec(),
        ),
        ("Cyrillic_General_CI_AS", "Жук", vec![0xC6, 0xF3, 0xEA]),
        ("Japanese_CI_AS", "日本", vec![0x93, 0xFA, 0x96, 0x7B]),
        (
            "SQL_Latin1_General_CP1_CI_AS",
            "café",
            vec![b'c', b'a', b'f', 0xE9],
        ),
    ];
    for (name, text, bytes) in cases {
        let collation = lookup(name).unwrap().tds();
        for ty in [
            DataType::VarChar(Length::Fixed(20)),
            DataType::VarChar(Length::Max),
        ] {
            let info = TypeInfo::for_type_collated(&ty, true, Some(collation));
            let mut buf = Vec::new();
            info.encode(&mut buf);
            // TYPE_INFO: type, max length (2 bytes), then the collation.
            assert_eq!(&buf[3..8], &collation, "{name}");
            let value_at = buf.len();
            encode_value(&mut buf, &info, &Value::String(text.into())).unwrap();
            if ty == DataType::VarChar(Length::Fixed(20)) {
                assert_eq!(&buf[value_at + 2..], &bytes[..], "{name}");
            }
            let mut r = Reader::new(&buf);
            let decoded_info = TypeInfo::decode(&mut r).unwrap();
            let decoded = decode_value(&mut r, &decoded_info).unwrap();
            assert!(r.is_empty());
            assert_eq!(decoded, Value::String(text.into()), "{name} {ty:?}");
        }
    }
    // Without a collation of its own a column is SQL_Latin1_General_CP1_CI_AS.
    let mut buf = Vec::new();
    TypeInfo::for_type(&DataType::Char(4), true).encode(&mut buf);
    assert_eq!(&buf[3..8], &[0x09, 0x04, 0xD0, 0x00, 0x34]);
}
