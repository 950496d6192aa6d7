//! Rounding a date-time to what a type keeps: fractions of a second
//! (time, datetime2, datetimeoffset), 1/300 s (datetime) or minutes
//! (smalldatetime), with each type's range.

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

use super::{base_date, base_datetime};

/// Rounds to `scale` fractional digits of a second (half up), carrying
/// into the date. `None` beyond 9999-12-31.
pub fn round_fraction(dt: NaiveDateTime, scale: u8) -> Option<NaiveDateTime> {
    let unit = 10u32.pow(9 - u32::from(scale.min(9)));
    let nanos = dt.nanosecond();
    let rounded = (nanos + unit / 2) / unit * unit;
    let base = dt.with_nanosecond(0)?;
    base.checked_add_signed(Duration::nanoseconds(i64::from(rounded)))
}

/// Rounds a time of day to `scale` digits, wrapping past midnight.
pub fn round_time(t: NaiveTime, scale: u8) -> NaiveTime {
    round_fraction(base_date().and_time(t), scale)
        .map(|d| d.time())
        .unwrap_or(t)
}

/// datetime keeps 1/300 s: rounds to the nearest tick. `None` outside
/// 1753-01-01..9999-12-31.
/// <https://learn.microsoft.com/sql/t-sql/data-types/datetime-transact-sql>
pub fn round_datetime(dt: NaiveDateTime) -> Option<NaiveDateTime> {
    let ns = i64::from(dt.num_seconds_from_midnight()) * 1_000_000_000
        + i64::from(dt.nanosecond() % 1_000_000_000);
    let ticks = (ns * 3 + 5_000_000) / 10_000_000;
    let back = (ticks * 10_000_000 + 1) / 3;
    let out = dt
        .date()
        .and_time(NaiveTime::MIN)
        .checked_add_signed(Duration::nanoseconds(back))?;
    (out.year() >= 1753 && out.year() <= 9999).then_some(out)
}

/// smalldatetime keeps minutes: 29.998 s and more round up. `None`
/// outside 1900-01-01..2079-06-06 23:59.
/// <https://learn.microsoft.com/sql/t-sql/data-types/smalldatetime-transact-sql>
pub fn round_smalldatetime(dt: NaiveDateTime) -> Option<NaiveDateTime> {
    let secs = dt.second();
    let base = dt.with_second(0)?.with_nanosecond(0)?;
    let ms = secs * 1000 + dt.nanosecond() / 1_000_000;
    let out = if ms >= 29_999 {
        base.checked_add_signed(Duration::minutes(1))?
    } else {
        base
    };
    let max = NaiveDate::from_ymd_opt(2079, 6, 6)?.and_hms_opt(23, 59, 0)?;
    (out >= base_datetime() && out <= max).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::super::{dt, format};
    use super::*;
    use crate::sql::types::DataType;

    #[test]
    fn rounds_datetime_to_three_hundredths() {
        let r = |s: &str| {
            round_datetime(dt(s))
                .map(|d| format(d, None, &DataType::DateTime, Some(121)).unwrap_or_default())
        };
        assert_eq!(
            r("2024-01-02 03:04:05.001").as_deref(),
            Some("2024-01-02 03:04:05.000")
        );
        assert_eq!(
            r("2024-01-02 03:04:05.002").as_deref(),
            Some("2024-01-02 03:04:05.003")
        );
        assert_eq!(
            r("2024-01-02 03:04:05.005").as_deref(),
            Some("2024-01-02 03:04:05.007")
        );
        assert_eq!(
            r("2024-01-02 23:59:59.999").as_deref(),
            Some("2024-01-03 00:00:00.000")
        );
        assert_eq!(r("1700-01-01"), None);
        let s = round_smalldatetime(dt("2024-01-02 03:04:29.999")).map(|d| d.to_string());
        assert_eq!(s.as_deref(), Some("2024-01-02 03:05:00"));
        let s = round_smalldatetime(dt("2024-01-02 03:04:29.998")).map(|d| d.to_string());
        assert_eq!(s.as_deref(), Some("2024-01-02 03:04:00"));
        let f = round_fraction(dt("2024-01-02 03:04:05.12345675"), 7).map(|d| d.nanosecond());
        assert_eq!(f, Some(123_456_800));
        let f = round_fraction(dt("2024-12-31 23:59:59.9999999"), 3).map(|d| d.to_string());
        assert_eq!(f.as_deref(), Some("2025-01-01 00:00:00"));
    }
}
