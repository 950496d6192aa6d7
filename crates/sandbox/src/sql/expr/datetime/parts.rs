//! Date parts: the names DATEADD, DATEDIFF, DATEPART and DATENAME take,
//! which types have them, and the calendar arithmetic on them.
//!
//! DATEADD: <https://learn.microsoft.com/sql/t-sql/functions/dateadd-transact-sql>
//! DATEDIFF: <https://learn.microsoft.com/sql/t-sql/functions/datediff-transact-sql>
//! DATEPART: <https://learn.microsoft.com/sql/t-sql/functions/datepart-transact-sql>

use chrono::{Datelike, Duration, FixedOffset, NaiveDate, NaiveDateTime, Timelike};

use super::format::offset_text;
use super::{MONTHS, WEEKDAYS};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::types::DataType;

/// A DATEADD/DATEDIFF/DATEPART date part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatePart {
    Year,
    Quarter,
    Month,
    DayOfYear,
    Day,
    Week,
    Weekday,
    Hour,
    Minute,
    Second,
    Millisecond,
    Microsecond,
    Nanosecond,
    TzOffset,
    IsoWeek,
}

impl DatePart {
    /// A date part by name or abbreviation (`yy`, `mm`, `dd`, `hh`, `mi`...).
    pub fn parse(name: &str) -> Option<DatePart> {
        use DatePart::*;
        Some(match name.to_ascii_lowercase().as_str() {
            "year" | "yy" | "yyyy" => Year,
            "quarter" | "qq" | "q" => Quarter,
            "month" | "mm" | "m" => Month,
            "dayofyear" | "dy" | "y" => DayOfYear,
            "day" | "dd" | "d" => Day,
            "week" | "wk" | "ww" => Week,
            "weekday" | "dw" | "w" => Weekday,
            "hour" | "hh" => Hour,
            "minute" | "mi" | "n" => Minute,
            "second" | "ss" | "s" => Second,
            "millisecond" | "ms" => Millisecond,
            "microsecond" | "mcs" => Microsecond,
            "nanosecond" | "ns" => Nanosecond,
            "tzoffset" | "tz" => TzOffset,
            "iso_week" | "isowk" | "isoww" => IsoWeek,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use DatePart::*;
        match self {
            Year => "year",
            Quarter => "quarter",
            Month => "month",
            DayOfYear => "dayofyear",
            Day => "day",
            Week => "week",
            Weekday => "weekday",
            Hour => "hour",
            Minute => "minute",
            Second => "second",
            Millisecond => "millisecond",
            Microsecond => "microsecond",
            Nanosecond => "nanosecond",
            TzOffset => "tzoffset",
            IsoWeek => "iso_week",
        }
    }

    fn is_date_part(self) -> bool {
        use DatePart::*;
        matches!(
            self,
            Year | Quarter | Month | DayOfYear | Day | Week | Weekday | IsoWeek
        )
    }

    fn is_time_part(self) -> bool {
        use DatePart::*;
        matches!(
            self,
            Hour | Minute | Second | Millisecond | Microsecond | Nanosecond
        )
    }
}

/// 9810: the part does not exist in the type (hour of a date, day of a time).
pub fn check_part(part: DatePart, ty: &DataType, function: &str) -> SqlResult<()> {
    let bad = match ty {
        DataType::Date => part.is_time_part() || part == DatePart::TzOffset,
        DataType::Time { .. } => part.is_date_part() || part == DatePart::TzOffset,
        DataType::DateTimeOffset { .. } => false,
        _ => part == DatePart::TzOffset && function == "dateadd",
    };
    if bad {
        return Err(SqlError::new(
            9810,
            format!(
                "The datepart {} is not supported by date function {function} for data type {}.",
                part.name(),
                ty.name()
            ),
        ));
    }
    Ok(())
}

fn add_months(dt: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let total = i64::from(dt.year()) * 12 + i64::from(dt.month0()) + months;
    let year = i32::try_from(total.div_euclid(12)).ok()?;
    let month = total.rem_euclid(12) as u32 + 1;
    let last = last_day(year, month)?;
    NaiveDate::from_ymd_opt(year, month, dt.day().min(last)).map(|d| d.and_time(dt.time()))
}

/// The last day of a month (28..=31).
pub fn last_day(year: i32, month: u32) -> Option<u32> {
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    next.pred_opt().map(|d| d.day())
}

/// DATEADD on a local date-time; the caller rounds and range-checks for
/// the type. `None` on overflow (517).
pub fn add(part: DatePart, n: i64, dt: NaiveDateTime) -> Option<NaiveDateTime> {
    use DatePart::*;
    let dur = |d: Duration| dt.checked_add_signed(d);
    let out = match part {
        Year => add_months(dt, n.checked_mul(12)?),
        Quarter => add_months(dt, n.checked_mul(3)?),
        Month => add_months(dt, n),
        DayOfYear | Day | Weekday => dur(Duration::try_days(n)?),
        Week | IsoWeek => dur(Duration::try_weeks(n)?),
        Hour => dur(Duration::try_hours(n)?),
        Minute => dur(Duration::try_minutes(n)?),
        Second => dur(Duration::try_seconds(n)?),
        Millisecond => dur(Duration::try_milliseconds(n)?),
        Microsecond => dur(Duration::microseconds(n)),
        Nanosecond => dur(Duration::nanoseconds(n)),
        TzOffset => None,
    }?;
    // SQL Server's dates end at 9999-12-31.
    (1..=9999).contains(&out.year()).then_some(out)
}

/// Days since 0001-01-01 (a Monday).
fn day_number(d: NaiveDate) -> i128 {
    i128::from(d.num_days_from_ce() - 1)
}

fn nanos_since_ce(dt: NaiveDateTime) -> i128 {
    day_number(dt.date()) * 86_400_000_000_000
        + i128::from(dt.num_seconds_from_midnight()) * 1_000_000_000
        + i128::from(dt.nanosecond() % 1_000_000_000)
}

/// DATEDIFF: the number of `part` boundaries crossed from `a` to `b`
/// (both local, or both UTC for datetimeoffset). Weeks start on Sunday
/// whatever DATEFIRST says, as documented.
pub fn diff(part: DatePart, a: NaiveDateTime, b: NaiveDateTime) -> i128 {
    use DatePart::*;
    let ym = |d: &NaiveDateTime| i128::from(d.year()) * 12 + i128::from(d.month0());
    let q = |d: &NaiveDateTime| i128::from(d.year()) * 4 + i128::from(d.month0() / 3);
    // Day 0 is a Monday, so day + 1 puts the week boundary on Sunday.
    let week = |d: &NaiveDateTime| (day_number(d.date()) + 1).div_euclid(7);
    let floor =
        |unit: i128| nanos_since_ce(b).div_euclid(unit) - nanos_since_ce(a).div_euclid(unit);
    match part {
        Year => i128::from(b.year()) - i128::from(a.year()),
        Quarter => q(&b) - q(&a),
        Month => ym(&b) - ym(&a),
        DayOfYear | Day | Weekday => day_number(b.date()) - day_number(a.date()),
        Week | IsoWeek => week(&b) - week(&a),
        Hour => floor(3_600_000_000_000),
        Minute => floor(60_000_000_000),
        Second => floor(1_000_000_000),
        Millisecond => floor(1_000_000),
        Microsecond => floor(1_000),
        Nanosecond | TzOffset => floor(1),
    }
}

fn iso_week(d: NaiveDate) -> i64 {
    i64::from(d.iso_week().week())
}

/// DATEPART of a local date-time with its offset (for tzoffset), with
/// DATEFIRST 7 (us_english): Sunday is weekday 1, weeks start Sunday.
pub fn part(part: DatePart, dt: NaiveDateTime, offset: Option<FixedOffset>) -> i64 {
    use DatePart::*;
    let d = dt.date();
    match part {
        Year => i64::from(d.year()),
        Quarter => i64::from(d.month0() / 3 + 1),
        Month => i64::from(d.month()),
        DayOfYear => i64::from(d.ordinal()),
        Day => i64::from(d.day()),
        Week => {
            let jan1 = d.with_ordinal(1).unwrap_or(d);
            let jan1_dow = i64::from(jan1.weekday().num_days_from_sunday());
            (i64::from(d.ordinal0()) + jan1_dow) / 7 + 1
        }
        Weekday => i64::from(d.weekday().num_days_from_sunday()) + 1,
        Hour => i64::from(dt.hour()),
        Minute => i64::from(dt.minute()),
        Second => i64::from(dt.second()),
        Millisecond => i64::from(dt.nanosecond() / 1_000_000),
        Microsecond => i64::from(dt.nanosecond() / 1_000),
        Nanosecond => i64::from(dt.nanosecond() / 100 * 100),
        TzOffset => offset
            .map(|o| i64::from(o.local_minus_utc() / 60))
            .unwrap_or(0),
        IsoWeek => iso_week(d),
    }
}

/// DATENAME: month and weekday names, numbers otherwise.
pub fn name(p: DatePart, dt: NaiveDateTime, offset: Option<FixedOffset>) -> String {
    match p {
        DatePart::Month => MONTHS[dt.month0() as usize].to_string(),
        DatePart::Weekday => WEEKDAYS[dt.weekday().num_days_from_sunday() as usize].to_string(),
        DatePart::TzOffset => offset
            .map(|o| offset_text(&o))
            .unwrap_or_else(|| "+00:00".into()),
        other => part(other, dt, offset).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::dt;
    use super::*;

    #[test]
    fn datediff_counts_boundaries() {
        let cases = [
            (
                DatePart::Year,
                "2023-12-31 23:59:59.9999999",
                "2024-01-01",
                1,
            ),
            (DatePart::Quarter, "2024-03-31", "2024-04-01", 1),
            (DatePart::Month, "2024-01-31", "2024-02-01", 1),
            (DatePart::Day, "2024-01-01 23:59", "2024-01-02 00:01", 1),
            (DatePart::Day, "2024-01-02", "2024-01-01", -1),
            // 2024-01-06 is a Saturday, 2024-01-07 a Sunday.
            (DatePart::Week, "2024-01-06", "2024-01-07", 1),
            (DatePart::Week, "2024-01-07", "2024-01-13", 0),
            (
                DatePart::Hour,
                "2024-01-01 10:59:59",
                "2024-01-01 11:00:00",
                1,
            ),
            (
                DatePart::Minute,
                "2024-01-01 10:00:59",
                "2024-01-01 10:01:00",
                1,
            ),
            (
                DatePart::Second,
                "2024-01-01 10:00:00.9",
                "2024-01-01 10:00:01.1",
                1,
            ),
            (
                DatePart::Millisecond,
                "2024-01-01 00:00:00",
                "2024-01-01 00:00:01",
                1000,
            ),
            (
                DatePart::Year,
                "2005-12-31 23:59:59.9999999",
                "2006-01-01 00:00:00.0000000",
                1,
            ),
        ];
        for (p, a, b, want) in cases {
            assert_eq!(diff(p, dt(a), dt(b)), want, "{p:?} {a} {b}");
        }
    }

    #[test]
    fn dateadd_clamps_month_ends() {
        let a = |p, n, s: &str| add(p, n, dt(s)).map(|d| d.to_string());
        assert_eq!(
            a(DatePart::Month, 1, "2024-01-31").as_deref(),
            Some("2024-02-29 00:00:00")
        );
        assert_eq!(
            a(DatePart::Year, -1, "2024-02-29").as_deref(),
            Some("2023-02-28 00:00:00")
        );
        assert_eq!(
            a(DatePart::Quarter, 1, "2024-11-30").as_deref(),
            Some("2025-02-28 00:00:00")
        );
        assert_eq!(
            a(DatePart::Minute, 90, "2024-01-01 23:00").as_deref(),
            Some("2024-01-02 00:30:00")
        );
        assert_eq!(a(DatePart::Year, 10_000, "2024-01-01"), None);
    }

    #[test]
    fn dateparts_and_names() {
        let d = dt("2024-01-07 13:14:15.123456789");
        assert_eq!(part(DatePart::Weekday, d, None), 1);
        assert_eq!(part(DatePart::Week, d, None), 2);
        assert_eq!(part(DatePart::DayOfYear, d, None), 7);
        assert_eq!(part(DatePart::Quarter, d, None), 1);
        assert_eq!(part(DatePart::Millisecond, d, None), 123);
        assert_eq!(part(DatePart::Nanosecond, d, None), 123_456_700);
        assert_eq!(part(DatePart::IsoWeek, d, None), 1);
        assert_eq!(
            part(DatePart::TzOffset, d, FixedOffset::east_opt(-3600)),
            -60
        );
        assert_eq!(name(DatePart::Month, d, None), "January");
        assert_eq!(name(DatePart::Weekday, d, None), "Sunday");
        assert_eq!(DatePart::parse("MI"), Some(DatePart::Minute));
        assert_eq!(DatePart::parse("nope"), None);
    }
}
