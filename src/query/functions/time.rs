//! Spark's clock and time-zone functions over one fixed query clock.
//!
//! Spark evaluates `current_timestamp()` and `localtimestamp()` once per
//! query, in the session time zone; here the clock is fixed when the
//! session is built (`--now` fixes it to a chosen instant). TIMESTAMP_NTZ
//! values are Arrow timestamps without a zone.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use chrono::{
    DateTime, Datelike, FixedOffset, LocalResult, NaiveDateTime, Offset, TimeZone, Timelike, Utc,
};
use chrono_tz::Tz;
use deltalake::arrow::array::{Array, ArrayRef, Int64Array, TimestampMicrosecondArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, TimeUnit};
use deltalake::datafusion::common::{ScalarValue, exec_err, plan_err};
use deltalake::datafusion::error::Result;
use deltalake::datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

const NTZ: DataType = DataType::Timestamp(TimeUnit::Microsecond, None);

/// A session time zone: a region (`Europe/Paris`, `UTC`) or a fixed offset
/// (`+02:00`), as Spark accepts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Zone {
    /// An IANA region.
    Region(Tz),
    /// A fixed offset from UTC.
    Offset(FixedOffset),
}

impl FromStr for Zone {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        if trimmed.eq_ignore_ascii_case("utc") || trimmed.eq_ignore_ascii_case("z") {
            return Ok(Zone::Region(Tz::UTC));
        }
        if trimmed.starts_with(['+', '-']) {
            return parse_offset(trimmed)
                .map(Zone::Offset)
                .ok_or_else(|| format!("time zone {text:?} is not an offset like +02:00"));
        }
        trimmed
            .parse::<Tz>()
            .map(Zone::Region)
            .map_err(|_| format!("unknown time zone {text:?}"))
    }
}

/// `+HH:MM`, `-H` and the like; `None` for anything else, including
/// offsets of a day or more (which no zone has, and whose seconds could
/// overflow).
fn parse_offset(text: &str) -> Option<FixedOffset> {
    let sign = if text.starts_with('-') { -1 } else { 1 };
    let (hours, minutes) = text[1..].split_once(':').unwrap_or((&text[1..], "0"));
    let (hours, minutes) = (hours.parse::<u32>().ok()?, minutes.parse::<u32>().ok()?);
    if hours >= 24 || minutes >= 60 {
        return None;
    }
    let seconds = i32::try_from(hours * 3600 + minutes * 60).ok()?;
    FixedOffset::east_opt(sign * seconds)
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Zone::Region(tz) => write!(f, "{tz}"),
            Zone::Offset(offset) => write!(f, "{offset}"),
        }
    }
}

impl Zone {
    /// The wall-clock time in this zone at the UTC instant `utc`.
    pub fn local_of(&self, utc: NaiveDateTime) -> NaiveDateTime {
        match self {
            Zone::Region(tz) => tz.from_utc_datetime(&utc).naive_local(),
            Zone::Offset(offset) => offset.from_utc_datetime(&utc).naive_local(),
        }
    }

    /// The UTC instant of the wall-clock time `local` in this zone. Like
    /// Java (and so Spark), an ambiguous time takes the earlier offset and
    /// a time in a gap moves later by the gap.
    pub fn utc_of(&self, local: NaiveDateTime) -> NaiveDateTime {
        match self {
            Zone::Region(tz) => utc_of(tz, local),
            Zone::Offset(offset) => utc_of(offset, local),
        }
    }
}

fn utc_of<T: TimeZone>(tz: &T, local: NaiveDateTime) -> NaiveDateTime {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.naive_utc(),
        LocalResult::None => {
            let before = tz
                .offset_from_utc_datetime(&(local - chrono::Duration::days(1)))
                .fix();
            local - chrono::Duration::seconds(i64::from(before.local_minus_utc()))
        }
    }
}

/// The instant a query runs at, and the session time zone it reads
/// wall-clock times in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueryClock {
    now: DateTime<Utc>,
    zone: Zone,
}

impl QueryClock {
    /// A clock fixed at `now`, in the session time zone `zone`.
    pub fn new(now: DateTime<Utc>, zone: Zone) -> Self {
        QueryClock { now, zone }
    }

    /// The query's instant.
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }
}

/// The time functions reading `clock`.
pub(super) fn functions(clock: QueryClock) -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(ClockFunction::local(clock)),
        ScalarUDF::new_from_impl(ClockFunction::current(clock)),
        ScalarUDF::new_from_impl(ConvertTimezone::new(clock.zone)),
        ScalarUDF::new_from_impl(TimestampDiff::new(clock.zone)),
    ]
}

/// `localtimestamp()` (TIMESTAMP_NTZ, session time zone) and
/// `current_timestamp()`/`now()` (an instant, shown in UTC).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ClockFunction {
    signature: Signature,
    clock: QueryClock,
    local: bool,
    aliases: Vec<String>,
}

impl ClockFunction {
    fn local(clock: QueryClock) -> Self {
        ClockFunction {
            signature: Signature::nullary(Volatility::Stable),
            clock,
            local: true,
            aliases: vec![],
        }
    }

    fn current(clock: QueryClock) -> Self {
        ClockFunction {
            signature: Signature::nullary(Volatility::Stable),
            clock,
            local: false,
            aliases: vec!["now".into()],
        }
    }
}

impl ScalarUDFImpl for ClockFunction {
    fn name(&self) -> &str {
        if self.local {
            "localtimestamp"
        } else {
            "current_timestamp"
        }
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(if self.local {
            NTZ
        } else {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        })
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let now = self.clock.now.naive_utc();
        Ok(ColumnarValue::Scalar(if self.local {
            let local = self.clock.zone.local_of(now);
            ScalarValue::TimestampMicrosecond(Some(local.and_utc().timestamp_micros()), None)
        } else {
            ScalarValue::TimestampMicrosecond(
                Some(now.and_utc().timestamp_micros()),
                Some("UTC".into()),
            )
        }))
    }
}

/// `convert_timezone([sourceTz,] targetTz, sourceTs)`: the wall-clock time
/// `sourceTs` in `sourceTz` (default: the session zone) as a wall-clock
/// time in `targetTz`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ConvertTimezone {
    signature: Signature,
    session: Zone,
}

impl ConvertTimezone {
    fn new(session: Zone) -> Self {
        ConvertTimezone {
            signature: Signature::user_defined(Volatility::Immutable),
            session,
        }
    }
}

impl ScalarUDFImpl for ConvertTimezone {
    fn name(&self) -> &str {
        "convert_timezone"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(2..=3).contains(&arg_types.len()) {
            return plan_err!("convert_timezone takes 2 or 3 arguments");
        }
        let mut types = vec![DataType::Utf8; arg_types.len() - 1];
        types.push(NTZ);
        Ok(types)
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(NTZ)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (source, target, ts) = match args.args.as_slice() {
            [target, ts] => (None, target, ts),
            [source, target, ts] => (Some(source), target, ts),
            _ => return exec_err!("convert_timezone takes 2 or 3 arguments"),
        };
        let source = match source {
            Some(zone) => constant_zone(zone, "sourceTz")?,
            None => self.session,
        };
        let target = constant_zone(target, "targetTz")?;
        let ts = ts.to_array(args.number_rows)?;
        let ts = micros(&ts)?;
        let out: TimestampMicrosecondArray = ts
            .iter()
            .map(|v| {
                v.and_then(DateTime::from_timestamp_micros).map(|t| {
                    let instant = source.utc_of(t.naive_utc());
                    target.local_of(instant).and_utc().timestamp_micros()
                })
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

fn constant_zone(value: &ColumnarValue, name: &str) -> Result<Zone> {
    match value {
        ColumnarValue::Scalar(scalar) => match scalar.cast_to(&DataType::Utf8)? {
            ScalarValue::Utf8(Some(text)) => match text.parse() {
                Ok(zone) => Ok(zone),
                Err(e) => exec_err!("convert_timezone {name}: {e}"),
            },
            _ => exec_err!("convert_timezone {name} is NULL"),
        },
        ColumnarValue::Array(_) => exec_err!("convert_timezone {name} must be a constant"),
    }
}

fn micros(array: &ArrayRef) -> Result<TimestampMicrosecondArray> {
    let cast = cast(array, &NTZ)?;
    match cast.as_any().downcast_ref::<TimestampMicrosecondArray>() {
        Some(ts) => Ok(ts.clone()),
        None => exec_err!("expected a timestamp, got {}", array.data_type()),
    }
}

/// `timestampdiff(unit, start, end)`: whole `unit`s from `start` to `end`,
/// the fraction truncated, counted on the session zone's wall clock
/// (Java's `ChronoUnit.between` on local date-times, as Spark does).
#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampDiff {
    signature: Signature,
    session: Zone,
    aliases: Vec<String>,
}

impl TimestampDiff {
    fn new(session: Zone) -> Self {
        TimestampDiff {
            signature: Signature::user_defined(Volatility::Immutable),
            session,
            aliases: vec!["timestamp_diff".into()],
        }
    }

    /// Wall-clock time of a value: NTZ values as they are, instants in
    /// the session zone.
    fn wall_clock(&self, array: &ArrayRef) -> Result<Vec<Option<NaiveDateTime>>> {
        let zoned = matches!(array.data_type(), DataType::Timestamp(_, Some(_)));
        let values = micros(array)?;
        Ok(values
            .iter()
            .map(|v| {
                v.and_then(DateTime::from_timestamp_micros).map(|t| {
                    if zoned {
                        self.session.local_of(t.naive_utc())
                    } else {
                        t.naive_utc()
                    }
                })
            })
            .collect())
    }
}

impl ScalarUDFImpl for TimestampDiff {
    fn name(&self) -> &str {
        "timestampdiff"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [_, start, end] = arg_types else {
            return plan_err!("timestampdiff takes (unit, start, end)");
        };
        let timestamp = |t: &DataType| match t {
            DataType::Timestamp(_, zone) => {
                DataType::Timestamp(TimeUnit::Microsecond, zone.clone())
            }
            _ => NTZ,
        };
        Ok(vec![DataType::Utf8, timestamp(start), timestamp(end)])
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [unit, start, end] = args.args.as_slice() else {
            return exec_err!("timestampdiff takes (unit, start, end)");
        };
        let unit = match unit {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(u))) => match DiffUnit::parse(u) {
                Some(unit) => unit,
                None => return exec_err!("timestampdiff: unknown unit {u:?}"),
            },
            _ => return exec_err!("timestampdiff: the unit must be a constant such as SECOND"),
        };
        let start = self.wall_clock(&start.to_array(args.number_rows)?)?;
        let end = self.wall_clock(&end.to_array(args.number_rows)?)?;
        let out: Int64Array = start
            .iter()
            .zip(&end)
            .map(|(s, e)| match (s, e) {
                (Some(s), Some(e)) => Some(unit.between(*s, *e)),
                _ => None,
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
    }
}

/// A unit of `timestampdiff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiffUnit {
    /// A fixed length, in microseconds.
    Fixed(i64),
    /// Calendar months, in multiples of this many.
    Months(i64),
}

impl DiffUnit {
    fn parse(text: &str) -> Option<Self> {
        const SECOND: i64 = 1_000_000;
        Some(match text.trim().to_ascii_uppercase().as_str() {
            "MICROSECOND" => DiffUnit::Fixed(1),
            "MILLISECOND" => DiffUnit::Fixed(1_000),
            "SECOND" => DiffUnit::Fixed(SECOND),
            "MINUTE" => DiffUnit::Fixed(60 * SECOND),
            "HOUR" => DiffUnit::Fixed(3600 * SECOND),
            "DAY" => DiffUnit::Fixed(86_400 * SECOND),
            "WEEK" => DiffUnit::Fixed(7 * 86_400 * SECOND),
            "MONTH" => DiffUnit::Months(1),
            "QUARTER" => DiffUnit::Months(3),
            "YEAR" => DiffUnit::Months(12),
            _ => return None,
        })
    }

    /// Whole units from `start` to `end`, truncated toward zero.
    fn between(self, start: NaiveDateTime, end: NaiveDateTime) -> i64 {
        match self {
            DiffUnit::Fixed(unit) => {
                let micros = (end - start).num_microseconds().unwrap_or(i64::MAX);
                micros / unit
            }
            DiffUnit::Months(per) => {
                let month_index =
                    |t: NaiveDateTime| i64::from(t.year()) * 12 + i64::from(t.month0());
                let rest =
                    |t: NaiveDateTime| (t.day(), t.num_seconds_from_midnight(), t.nanosecond());
                let mut months = month_index(end) - month_index(start);
                if months > 0 && rest(end) < rest(start) {
                    months -= 1;
                } else if months < 0 && rest(end) > rest(start) {
                    months += 1;
                }
                months / per
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn offsets_beyond_a_day_are_refused_without_overflow() {
        for bad in ["+999999999:00", "-2147483648", "+24:00", "+01:60", "+1:x"] {
            assert!(bad.parse::<Zone>().is_err(), "{bad}");
        }
        assert_eq!(
            "-03:30".parse::<Zone>().map(|z| z.to_string()),
            Ok("-03:30".to_string())
        );
    }

    use super::*;
    use crate::query::functions::test_support::eval;

    fn t(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap()
    }

    #[test]
    fn timestampdiff_truncates_whole_units() {
        let cases = [
            (
                "SECOND",
                "2026-01-01 00:00:00",
                "2026-01-01 00:00:59.999",
                59,
            ),
            ("MINUTE", "2026-01-01 00:00:00", "2026-01-01 00:01:59", 1),
            ("MINUTE", "2026-01-01 00:01:59", "2026-01-01 00:00:00", -1),
            ("HOUR", "2026-01-01 00:30:00", "2026-01-01 02:29:59", 1),
            ("DAY", "2026-01-01 12:00:00", "2026-01-03 11:59:59", 1),
            ("WEEK", "2026-01-01 00:00:00", "2026-01-15 00:00:00", 2),
            ("MONTH", "2026-01-31 00:00:00", "2026-02-28 00:00:00", 0),
            ("MONTH", "2026-01-15 00:00:00", "2026-03-15 00:00:00", 2),
            ("QUARTER", "2026-01-15 00:00:00", "2026-07-14 00:00:00", 1),
            ("YEAR", "2016-03-11 09:00:07", "2024-04-02 09:00:07", 8),
        ];
        for (unit, start, end, expected) in cases {
            let unit_value = DiffUnit::parse(unit).unwrap();
            assert_eq!(
                unit_value.between(t(start), t(end)),
                expected,
                "{unit} {start} {end}"
            );
        }
        assert_eq!(DiffUnit::parse("fortnight"), None);
    }

    #[test]
    fn zones_convert_wall_clock_times() {
        let paris: Zone = "Europe/Paris".parse().unwrap();
        assert_eq!(
            paris.utc_of(t("2026-07-01 12:00:00")),
            t("2026-07-01 10:00:00")
        );
        assert_eq!(
            paris.local_of(t("2026-01-01 10:00:00")),
            t("2026-01-01 11:00:00")
        );
        // 02:30 does not exist on 2026-03-29 in Paris: it moves an hour later.
        assert_eq!(
            paris.utc_of(t("2026-03-29 02:30:00")),
            t("2026-03-29 01:30:00")
        );
        let offset: Zone = "-03:30".parse().unwrap();
        assert_eq!(
            offset.utc_of(t("2026-01-01 00:00:00")),
            t("2026-01-01 03:30:00")
        );
        assert!("Mars/Olympus".parse::<Zone>().is_err());
    }

    #[tokio::test]
    async fn clock_functions_read_the_fixed_clock_in_the_session_zone() {
        // The test session runs at 2026-11-29 12:00 UTC in America/Los_Angeles.
        let (values, types) = eval(
            "localtimestamp(), convert_timezone('UTC', localtimestamp()), current_timestamp(), \
             convert_timezone('Europe/Paris', 'Asia/Tokyo', TIMESTAMP '2026-07-01 12:00:00')",
        )
        .await;
        assert_eq!(
            values,
            [
                "2026-11-29T04:00:00",
                "2026-11-29T12:00:00",
                "2026-11-29T12:00:00Z",
                "2026-07-01T19:00:00"
            ]
        );
        assert_eq!(types[0], "Timestamp(µs)");
    }

    #[tokio::test]
    async fn timestampdiff_takes_spark_unit_keywords() {
        let (values, types) = eval(
            "timestampdiff(SECOND, TIMESTAMP '2026-11-29 11:00:00.5', convert_timezone('UTC', localtimestamp())), \
             timestampdiff(MINUTE, TIMESTAMP '2026-11-29 12:00:59', TIMESTAMP '2026-11-29 11:00:00'), \
             timestampdiff(HOUR, NULL, localtimestamp())",
        )
        .await;
        assert_eq!(values, ["3599", "-60", ""]);
        assert_eq!(types[0], "Int64");
    }
}
