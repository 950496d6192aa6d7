//! Turning tiberius values into Arrow arrays, column by column.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int16Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use tiberius::ColumnData;
use tiberius::time::{Date, DateTime2, Time};
use uuid::Uuid;

use super::SourceError;
use super::types::ValueKind;

/// Days from 0001-01-01 (SQL Server's `date` origin) to 1970-01-01.
const DATE_ORIGIN_TO_UNIX_DAYS: i64 = 719_162;
/// Days from 1900-01-01 (`datetime`'s origin) to 1970-01-01.
const DATETIME_ORIGIN_TO_UNIX_DAYS: i64 = 25_567;
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Accumulates one column of a record batch.
pub enum ColumnBuilder {
    /// bit
    Bool(BooleanBuilder),
    /// tinyint, smallint
    Int16(Int16Builder),
    /// int
    Int32(Int32Builder),
    /// bigint
    Int64(Int64Builder),
    /// real
    Float32(Float32Builder),
    /// float
    Float64(Float64Builder),
    /// decimal types
    Decimal(Decimal128Builder, u8, u8),
    /// text, guid and time
    Text(StringBuilder, ValueKind),
    /// binary
    Binary(BinaryBuilder),
    /// date
    Date(Date32Builder),
    /// timestamps
    Timestamp(TimestampMicrosecondBuilder),
}

impl ColumnBuilder {
    /// A builder for `kind` with room for `capacity` rows.
    pub fn new(kind: ValueKind, capacity: usize) -> Result<Self, SourceError> {
        Ok(match kind {
            ValueKind::Bool => ColumnBuilder::Bool(BooleanBuilder::with_capacity(capacity)),
            ValueKind::Int16 => ColumnBuilder::Int16(Int16Builder::with_capacity(capacity)),
            ValueKind::Int32 => ColumnBuilder::Int32(Int32Builder::with_capacity(capacity)),
            ValueKind::Int64 => ColumnBuilder::Int64(Int64Builder::with_capacity(capacity)),
            ValueKind::Float32 => ColumnBuilder::Float32(Float32Builder::with_capacity(capacity)),
            ValueKind::Float64 => ColumnBuilder::Float64(Float64Builder::with_capacity(capacity)),
            ValueKind::Decimal { precision, scale } => ColumnBuilder::Decimal(
                Decimal128Builder::with_capacity(capacity)
                    .with_precision_and_scale(precision, i8::try_from(scale).unwrap_or(i8::MAX))?,
                precision,
                scale,
            ),
            ValueKind::Text | ValueKind::Guid | ValueKind::Time => {
                ColumnBuilder::Text(StringBuilder::with_capacity(capacity, capacity * 16), kind)
            }
            ValueKind::Binary => {
                ColumnBuilder::Binary(BinaryBuilder::with_capacity(capacity, capacity * 16))
            }
            ValueKind::Date => ColumnBuilder::Date(Date32Builder::with_capacity(capacity)),
            ValueKind::TimestampNtz => {
                ColumnBuilder::Timestamp(TimestampMicrosecondBuilder::with_capacity(capacity))
            }
            ValueKind::TimestampUtc => ColumnBuilder::Timestamp(
                TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone("UTC"),
            ),
        })
    }

    /// Appends one value; `column` and `sql_type` name it in errors.
    pub fn append(
        &mut self,
        value: ColumnData<'_>,
        column: &str,
        sql_type: &str,
    ) -> Result<(), SourceError> {
        let mismatch = |value: &ColumnData<'_>| SourceError::UnexpectedValue {
            column: column.to_string(),
            sql_type: sql_type.to_string(),
            found: wire_type(value).to_string(),
            row: String::new(),
        };
        match (self, value) {
            (ColumnBuilder::Bool(b), ColumnData::Bit(v)) => b.append_option(v),
            (ColumnBuilder::Int16(b), ColumnData::U8(v)) => b.append_option(v.map(i16::from)),
            (ColumnBuilder::Int16(b), ColumnData::I16(v)) => b.append_option(v),
            (ColumnBuilder::Int32(b), ColumnData::I32(v)) => b.append_option(v),
            (ColumnBuilder::Int64(b), ColumnData::I64(v)) => b.append_option(v),
            (ColumnBuilder::Float32(b), ColumnData::F32(v)) => b.append_option(v),
            (ColumnBuilder::Float64(b), ColumnData::F64(v)) => b.append_option(v),
            (ColumnBuilder::Float64(b), ColumnData::F32(v)) => b.append_option(v.map(f64::from)),
            (ColumnBuilder::Decimal(b, precision, scale), ColumnData::Numeric(v)) => match v {
                None => b.append_null(),
                Some(n) => match fitted(n.value(), n.scale(), *precision, *scale) {
                    Some(value) => b.append_value(value),
                    None => {
                        return Err(SourceError::DoesNotFit {
                            column: column.to_string(),
                            precision: *precision,
                            scale: *scale,
                            row: String::new(),
                        });
                    }
                },
            },
            (ColumnBuilder::Text(b, ValueKind::Time), ColumnData::Time(v)) => {
                b.append_option(v.map(time_text))
            }
            (ColumnBuilder::Text(b, _), ColumnData::String(v)) => b.append_option(v),
            (ColumnBuilder::Text(b, _), ColumnData::Xml(v)) => {
                b.append_option(v.map(|x| x.as_ref().to_string()))
            }
            // SQL Server's own spelling, upper case, without an allocation.
            (ColumnBuilder::Text(b, _), ColumnData::Guid(v)) => match v {
                None => b.append_null(),
                Some(g) => b.append_value(g.hyphenated().encode_upper(&mut Uuid::encode_buffer())),
            },
            (ColumnBuilder::Binary(b), ColumnData::Binary(v)) => b.append_option(v),
            (ColumnBuilder::Date(b), ColumnData::Date(v)) => {
                b.append_option(v.map(|d| date_days(d) as i32))
            }
            (ColumnBuilder::Timestamp(b), ColumnData::DateTime(v)) => {
                b.append_option(v.map(|d| {
                    let days = i64::from(d.days()) - DATETIME_ORIGIN_TO_UNIX_DAYS;
                    // 1/300 s ticks.
                    days * MICROS_PER_DAY + i64::from(d.seconds_fragments()) * 10_000 / 3
                }))
            }
            (ColumnBuilder::Timestamp(b), ColumnData::SmallDateTime(v)) => {
                b.append_option(v.map(|d| {
                    let days = i64::from(d.days()) - DATETIME_ORIGIN_TO_UNIX_DAYS;
                    days * MICROS_PER_DAY + i64::from(d.seconds_fragments()) * 60_000_000
                }))
            }
            (ColumnBuilder::Timestamp(b), ColumnData::DateTime2(v)) => {
                b.append_option(v.map(datetime2_micros))
            }
            (ColumnBuilder::Timestamp(b), ColumnData::DateTimeOffset(v)) => {
                // The wire value is UTC; the offset only says how it was written.
                b.append_option(v.map(|d| datetime2_micros(d.datetime2())))
            }
            (_, other) => return Err(mismatch(&other)),
        }
        Ok(())
    }

    /// The finished array.
    pub fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Bool(b) => Arc::new(b.finish()),
            ColumnBuilder::Int16(b) => Arc::new(b.finish()),
            ColumnBuilder::Int32(b) => Arc::new(b.finish()),
            ColumnBuilder::Int64(b) => Arc::new(b.finish()),
            ColumnBuilder::Float32(b) => Arc::new(b.finish()),
            ColumnBuilder::Float64(b) => Arc::new(b.finish()),
            ColumnBuilder::Decimal(b, precision, scale) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*precision, i8::try_from(*scale).unwrap_or(i8::MAX))
                    .unwrap_or_else(|_| Decimal128Builder::new().finish()),
            ),
            ColumnBuilder::Text(b, _) => Arc::new(b.finish()),
            ColumnBuilder::Binary(b) => Arc::new(b.finish()),
            ColumnBuilder::Date(b) => Arc::new(b.finish()),
            ColumnBuilder::Timestamp(b) => Arc::new(b.finish()),
        }
    }
}

/// The wire type of `value`, for errors: what arrived, never what it holds.
pub fn wire_type(value: &ColumnData<'_>) -> &'static str {
    match value {
        ColumnData::U8(_) => "tinyint",
        ColumnData::I16(_) => "smallint",
        ColumnData::I32(_) => "int",
        ColumnData::I64(_) => "bigint",
        ColumnData::F32(_) => "real",
        ColumnData::F64(_) => "float",
        ColumnData::Bit(_) => "bit",
        ColumnData::String(_) => "string",
        ColumnData::Guid(_) => "uniqueidentifier",
        ColumnData::Binary(_) => "binary",
        ColumnData::Numeric(_) => "numeric",
        ColumnData::Xml(_) => "xml",
        ColumnData::DateTime(_) => "datetime",
        ColumnData::SmallDateTime(_) => "smalldatetime",
        ColumnData::Time(_) => "time",
        ColumnData::Date(_) => "date",
        ColumnData::DateTime2(_) => "datetime2",
        ColumnData::DateTimeOffset(_) => "datetimeoffset",
    }
}

/// `value` (with `from` digits after the point) as a decimal(`precision`,
/// `scale`) holds it, or None when it cannot exactly: more digits before
/// the point than the column holds, or digits after the point it would
/// drop. The Parquet writer stores decimals of up to 18 digits in 32 or
/// 64 bits and would wrap a wider value silently.
fn fitted(value: i128, from: u8, precision: u8, scale: u8) -> Option<i128> {
    use std::cmp::Ordering;
    let scaled = match from.cmp(&scale) {
        Ordering::Equal => value,
        Ordering::Less => value.checked_mul(10i128.checked_pow(u32::from(scale - from))?)?,
        Ordering::Greater => {
            let divisor = 10i128.checked_pow(u32::from(from - scale))?;
            (value % divisor == 0).then_some(value / divisor)?
        }
    };
    let limit = 10i128.checked_pow(u32::from(precision))?;
    (scaled.unsigned_abs() < limit.unsigned_abs()).then_some(scaled)
}

fn date_days(date: Date) -> i64 {
    i64::from(date.days()) - DATE_ORIGIN_TO_UNIX_DAYS
}

fn time_nanos(time: Time) -> i64 {
    let increments = i64::try_from(time.increments()).unwrap_or(i64::MAX);
    let scale = u32::from(time.scale().min(9));
    increments.saturating_mul(10i64.pow(9 - scale))
}

fn datetime2_micros(value: DateTime2) -> i64 {
    date_days(value.date()) * MICROS_PER_DAY + time_nanos(value.time()) / 1_000
}

/// `HH:MM:SS.fffffff`, SQL Server's own text form of `time(7)`.
fn time_text(time: Time) -> String {
    let nanos = time_nanos(time);
    let seconds = nanos / 1_000_000_000;
    let fraction = (nanos % 1_000_000_000) / 100;
    format!(
        "{:02}:{:02}:{:02}.{:07}",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60,
        fraction
    )
}

/// A `datetime`/`datetime2` value read as UTC (CDC commit times are server
/// local times; the engine treats them as UTC as the brief asks).
pub fn naive_utc(value: &ColumnData<'_>) -> Option<DateTime<Utc>> {
    let micros = match value {
        ColumnData::DateTime(Some(d)) => {
            (i64::from(d.days()) - DATETIME_ORIGIN_TO_UNIX_DAYS) * MICROS_PER_DAY
                + i64::from(d.seconds_fragments()) * 10_000 / 3
        }
        ColumnData::DateTime2(Some(d)) => datetime2_micros(*d),
        ColumnData::SmallDateTime(Some(d)) => {
            (i64::from(d.days()) - DATETIME_ORIGIN_TO_UNIX_DAYS) * MICROS_PER_DAY
                + i64::from(d.seconds_fragments()) * 60_000_000
        }
        _ => return None,
    };
    DateTime::<Utc>::from_timestamp_micros(micros)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{Array, StringArray};

    fn unix_days(date: NaiveDate) -> i64 {
        date.signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default())
            .num_days()
    }
    use chrono::NaiveDate;
    use tiberius::time::DateTime as SqlDateTime;

    #[test]
    fn time_text_keeps_seven_digits() {
        let t = Time::new(452_961_234_567, 7);
        assert_eq!(time_text(t), "12:34:56.1234567");
    }

    #[test]
    fn dates_and_datetimes_convert_to_unix_time() {
        let d = Date::new(738_885); // 2024-01-01 counted from 0001-01-01
        assert_eq!(
            date_days(d),
            unix_days(NaiveDate::from_ymd_opt(2024, 1, 1).unwrap_or_default())
        );
        let dt = SqlDateTime::new(45_290, 300); // 2024-01-01 00:00:01
        let ts = naive_utc(&ColumnData::DateTime(Some(dt))).map(|t| t.to_rfc3339());
        assert_eq!(ts.as_deref(), Some("2024-01-01T00:00:01+00:00"));
    }

    #[test]
    fn decimals_rescale_to_the_column_scale_only_when_exact() {
        assert_eq!(fitted(12_345, 2, 10, 4), Some(1_234_500));
        assert_eq!(fitted(12_300, 4, 10, 2), Some(123), "trailing zeros go");
        assert_eq!(fitted(12_345, 4, 10, 2), None, "1.2345 is not 1.23");
        assert_eq!(fitted(-99_999, 2, 5, 2), Some(-99_999));
        assert_eq!(fitted(100_000, 2, 5, 2), None, "1000.00 has six digits");
    }

    #[test]
    fn a_decimal_wider_than_its_column_is_refused_never_wrapped() {
        // decimal(10,2) read after the source became decimal(18,2): the
        // Parquet writer would keep the low 32 bits of it.
        let mut builder = ColumnBuilder::new(
            ValueKind::Decimal {
                precision: 9,
                scale: 2,
            },
            1,
        )
        .expect("builder");
        let wide = tiberius::numeric::Numeric::new_with_scale(123_456_789_012_345, 2);
        let error = builder
            .append(ColumnData::Numeric(Some(wide)), "amount", "decimal")
            .expect_err("refused");
        let text = error.in_row(|| "__$start_lsn 0x01".into()).to_string();
        assert!(
            text.contains("amount") && text.contains("decimal(9,2)"),
            "{text}"
        );
        assert!(text.contains("0x01"), "names the row: {text}");
        assert!(!text.contains("123456789012345"), "never the value: {text}");
        let fits = tiberius::numeric::Numeric::new_with_scale(1_234_567, 2);
        builder
            .append(ColumnData::Numeric(Some(fits)), "amount", "decimal")
            .expect("a value that fits");
    }

    #[test]
    fn guids_are_spelled_as_sql_server_prints_them() {
        let mut builder = ColumnBuilder::new(ValueKind::Guid, 2).expect("builder");
        let guid = Uuid::parse_str("6f9619ff-8b86-d011-b42d-00c04fc964ff").expect("a guid");
        for value in [Some(guid), None] {
            builder
                .append(ColumnData::Guid(value), "id", "uniqueidentifier")
                .expect("appended");
        }
        let array = builder.finish();
        let text = array.as_any().downcast_ref::<StringArray>().expect("text");
        assert_eq!(text.value(0), "6F9619FF-8B86-D011-B42D-00C04FC964FF");
        assert!(text.is_null(1));
    }

    #[test]
    fn mismatched_values_name_the_column() {
        let mut builder = ColumnBuilder::new(ValueKind::Int32, 1).expect("builder");
        let err = builder
            .append(ColumnData::String(Some("x".into())), "qty", "int")
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("qty") && e.contains("int")));
    }

    #[test]
    fn an_unexpected_value_names_column_type_and_row_but_never_the_value() {
        let mut builder = ColumnBuilder::new(ValueKind::Int32, 1).expect("builder");
        let error = builder
            .append(
                ColumnData::String(Some("jane.doe@example.com-SECRET-4711".into())),
                "email",
                "int",
            )
            .expect_err("a string is not an int")
            .in_row(|| "the change at __$start_lsn 0x01, __$seqval 0x02".into());
        let shown = error.to_string();
        for needle in ["email", "int", "string", "__$start_lsn 0x01"] {
            assert!(shown.contains(needle), "{needle}: {shown}");
        }
        assert!(!shown.contains("SECRET-4711"), "the value leaked: {shown}");
        assert!(!format!("{error:?}").contains("SECRET-4711"), "{error:?}");
    }
}
