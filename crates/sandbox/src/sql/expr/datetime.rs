//! Dates and times: parsing strings, formatting with CONVERT styles,
//! rounding to each type's precision, and the date-part arithmetic of
//! DATEADD, DATEDIFF and DATEPART.
//!
//! Styles: <https://learn.microsoft.com/sql/t-sql/functions/cast-and-convert-transact-sql#date-and-time-styles>
//! DATEADD: <https://learn.microsoft.com/sql/t-sql/functions/dateadd-transact-sql>
//! DATEDIFF: <https://learn.microsoft.com/sql/t-sql/functions/datediff-transact-sql>
//! DATEPART: <https://learn.microsoft.com/sql/t-sql/functions/datepart-transact-sql>

use chrono::{Datelike, Duration, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

use super::super::error::{SqlError, SqlResult};
use super::super::types::DataType;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// 1900-01-01, the date SQL Server gives times without a date.
pub fn base_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(1900, 1, 1).unwrap_or_default()
}

/// 1900-01-01 00:00:00, day zero of datetime arithmetic.
pub fn base_datetime() -> NaiveDateTime {
    base_date().and_time(NaiveTime::MIN)
}

/// What a date/time string said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Parts {
    pub date: Option<NaiveDate>,
    pub time: Option<NaiveTime>,
    pub offset: Option<FixedOffset>,
}

impl Parts {
    /// The local date and time, defaulting to 1900-01-01 and midnight.
    pub fn local(&self) -> NaiveDateTime {
        self.date
            .unwrap_or_else(base_date)
            .and_time(self.time.unwrap_or(NaiveTime::MIN))
    }
}

fn month_from_name(s: &str) -> Option<u32> {
    let s = s.to_ascii_lowercase();
    if s.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| m.to_ascii_lowercase().starts_with(&s))
        .map(|i| i as u32 + 1)
}

fn year_of(s: &str) -> Option<i32> {
    let y: i32 = s.parse().ok()?;
    match s.len() {
        // Two-digit years: the default cutoff 2049.
        1 | 2 => Some(if y < 50 { 2000 + y } else { 1900 + y }),
        4 => Some(y),
        _ => None,
    }
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Day-month order for numeric dates: mdy (us_english) unless a
/// CONVERT style says dmy.
fn dmy_style(style: Option<i32>) -> bool {
    matches!(
        style,
        Some(3 | 4 | 5 | 103 | 104 | 105 | 13 | 113 | 6 | 106)
    )
}

fn parse_date(tokens: &[&str], style: Option<i32>) -> Option<NaiveDate> {
    match tokens {
        [one] => {
            let t = one.trim_end_matches(',');
            if all_digits(t) && t.len() == 8 {
                let y = t[..4].parse().ok()?;
                return NaiveDate::from_ymd_opt(y, t[4..6].parse().ok()?, t[6..].parse().ok()?);
            }
            if all_digits(t) && t.len() == 6 {
                return NaiveDate::from_ymd_opt(
                    year_of(&t[..2])?,
                    t[2..4].parse().ok()?,
                    t[4..].parse().ok()?,
                );
            }
            let sep = t.chars().find(|c| matches!(c, '-' | '/' | '.'))?;
            let parts: Vec<&str> = t.split(sep).collect();
            if parts.len() != 3 {
                return None;
            }
            if parts[0].len() == 4 && all_digits(parts[0]) {
                // yyyy-mm-dd (also yyyy-mon-dd).
                let m = if all_digits(parts[1]) {
                    parts[1].parse().ok()?
                } else {
                    month_from_name(parts[1])?
                };
                if !all_digits(parts[2]) || parts[2].len() > 2 {
                    return None;
                }
                return NaiveDate::from_ymd_opt(parts[0].parse().ok()?, m, parts[2].parse().ok()?);
            }
            if !parts.iter().all(|p| all_digits(p)) || parts[0].len() > 2 || parts[1].len() > 2 {
                return None;
            }
            let (a, b): (u32, u32) = (parts[0].parse().ok()?, parts[1].parse().ok()?);
            let (m, d) = if dmy_style(style) { (b, a) } else { (a, b) };
            NaiveDate::from_ymd_opt(year_of(parts[2])?, m, d)
        }
        many => {
            // Alphabetic month: "Jan 2 2024", "2 Jan 2024", "January 2, 2024".
            let mut month = None;
            let mut nums = Vec::new();
            for t in many {
                let t = t.trim_end_matches(',');
                if all_digits(t) {
                    nums.push(t);
                } else if month.is_none() {
                    month = Some(month_from_name(t)?);
                } else {
                    return None;
                }
            }
            let month = month?;
            let (day, year) = match nums.as_slice() {
                [a, b] if b.len() == 4 || a.len() <= 2 => (a.parse().ok()?, year_of(b)?),
                [a, b] => (b.parse().ok()?, year_of(a)?),
                _ => return None,
            };
            NaiveDate::from_ymd_opt(year, month, day)
        }
    }
}

fn parse_time(text: &str, meridiem: Option<&str>) -> Option<NaiveTime> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() < 2 || parts.len() > 4 {
        return None;
    }
    let h: u32 = if all_digits(parts[0]) && parts[0].len() <= 2 {
        parts[0].parse().ok()?
    } else {
        return None;
    };
    let m: u32 = if all_digits(parts[1]) && parts[1].len() <= 2 {
        parts[1].parse().ok()?
    } else {
        return None;
    };
    let (mut s, mut nanos) = (0u32, 0u32);
    if let Some(sec) = parts.get(2) {
        let (whole, frac) = match sec.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (*sec, None),
        };
        if !all_digits(whole) || whole.len() > 2 {
            return None;
        }
        s = whole.parse().ok()?;
        if let Some(f) = frac {
            if f.len() > 9 || !(f.is_empty() || all_digits(f)) {
                return None;
            }
            nanos = format!("{f:0<9}").parse().ok()?;
        }
    }
    if let Some(ms) = parts.get(3) {
        // hh:mi:ss:mmm, the colon-separated milliseconds of style 114.
        if !all_digits(ms) || ms.len() > 3 || parts[2].contains('.') {
            return None;
        }
        nanos = format!("{ms:0<3}").parse::<u32>().ok()? * 1_000_000;
    }
    let h = match meridiem.map(|m| m.to_ascii_uppercase()) {
        None => h,
        Some(m) if m == "AM" && (1..=12).contains(&h) => h % 12,
        Some(m) if m == "PM" && (1..=12).contains(&h) => h % 12 + 12,
        Some(_) => return None,
    };
    NaiveTime::from_hms_nano_opt(h, m, s, nanos)
}

fn parse_offset(s: &str) -> Option<FixedOffset> {
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (h, m) = s[1..].split_once(':')?;
    if !all_digits(h) || !all_digits(m) || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    if h > 14 || m > 59 || (h == 14 && m > 0) {
        return None;
    }
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

/// Reads a date/time string in the formats SQL Server accepts for its
/// types: ISO 8601 (`2024-01-02`, `2024-01-02T03:04:05.1234567`,
/// `20240102`, with `Z` or `+01:00`), numeric mdy (`01/02/2024`, dmy
/// under styles 103/104/105), alphabetic months (`Jan 2 2024`) and times
/// alone (`03:04:05`, `3:04PM`).
pub fn parse(text: &str, style: Option<i32>) -> Option<Parts> {
    let mut s = text.trim().to_string();
    if s.is_empty() {
        // '' converts to 1900-01-01 00:00:00.
        return Some(Parts::default());
    }
    let mut offset = None;
    if s.ends_with(['Z', 'z']) && s.len() > 1 && s.as_bytes()[s.len() - 2].is_ascii_digit() {
        offset = FixedOffset::east_opt(0);
        s.pop();
    } else if s.len() > 6 {
        let cut = s.len() - 6;
        if s.is_char_boundary(cut)
            && let Some(o) = parse_offset(s[cut..].trim())
        {
            offset = Some(o);
            s.truncate(cut);
        } else if s.len() > 5 && s.is_char_boundary(s.len() - 5) {
            // +h:mm
            let cut = s.len() - 5;
            if let Some(o) = parse_offset(&s[cut..]).filter(|_| s.as_bytes()[cut - 1] == b' ') {
                offset = Some(o);
                s.truncate(cut);
            }
        }
    }
    // 2024-01-02T03:04:05: the T separates date and time.
    if let Some(i) = s.find(['T', 't'])
        && i > 0
        && s.as_bytes()[i - 1].is_ascii_digit()
        && s.as_bytes().get(i + 1).is_some_and(u8::is_ascii_digit)
    {
        s.replace_range(i..=i, " ");
    }
    // 3:04PM: split a glued meridiem.
    let upper = s.to_ascii_uppercase();
    if (upper.ends_with("AM") || upper.ends_with("PM"))
        && s.len() > 2
        && s.as_bytes()[s.len() - 3].is_ascii_digit()
    {
        s.insert(s.len() - 2, ' ');
    }
    let tokens: Vec<&str> = s.split_whitespace().collect();
    let mut date_tokens = Vec::new();
    let mut time = None;
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        if t.contains(':') {
            if time.is_some() {
                return None;
            }
            let meridiem = tokens
                .get(i + 1)
                .filter(|m| m.eq_ignore_ascii_case("AM") || m.eq_ignore_ascii_case("PM"));
            time = Some(parse_time(t, meridiem.copied())?);
            if meridiem.is_some() {
                i += 1;
            }
        } else {
            date_tokens.push(t);
        }
        i += 1;
    }
    let date = if date_tokens.is_empty() {
        None
    } else {
        Some(parse_date(&date_tokens, style)?)
    };
    if date.is_none() && time.is_none() {
        return None;
    }
    Some(Parts { date, time, offset })
}

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

/// Milliseconds of a datetime as SQL Server shows them (.003, .007).
fn millis(t: &NaiveTime) -> u32 {
    (t.nanosecond() + 500_000) / 1_000_000
}

fn fraction(t: &NaiveTime, scale: u8) -> String {
    if scale == 0 {
        return String::new();
    }
    let digits = format!("{:09}", t.nanosecond());
    format!(".{}", &digits[..usize::from(scale.min(9))])
}

fn hour12(h: u32) -> (u32, &'static str) {
    let ampm = if h < 12 { "AM" } else { "PM" };
    let h = h % 12;
    (if h == 0 { 12 } else { h }, ampm)
}

fn offset_text(o: &FixedOffset) -> String {
    let secs = o.local_minus_utc();
    let sign = if secs < 0 { '-' } else { '+' };
    let m = secs.abs() / 60;
    format!("{sign}{:02}:{:02}", m / 60, m % 60)
}

/// The fractional digits a type shows (datetime: 3 milliseconds).
fn type_scale(ty: &DataType) -> u8 {
    match ty {
        DataType::DateTime => 3,
        DataType::SmallDateTime | DataType::Date => 0,
        DataType::Time { scale }
        | DataType::DateTime2 { scale }
        | DataType::DateTimeOffset { scale } => *scale,
        _ => 0,
    }
}

/// Formats a date/time value of type `ty` as CAST (style `None`) or
/// CONVERT with `style` would. 281 for styles that do not apply.
pub fn format(
    dt: NaiveDateTime,
    offset: Option<FixedOffset>,
    ty: &DataType,
    style: Option<i32>,
) -> SqlResult<String> {
    let (d, t) = (dt.date(), dt.time());
    let (y, m, day) = (d.year(), d.month(), d.day());
    let mon = &MONTHS[(m - 1) as usize][..3];
    let yy = y.rem_euclid(100);
    let scale = type_scale(ty);
    let frac = |t: &NaiveTime| {
        if *ty == DataType::DateTime {
            format!(".{:03}", millis(t))
        } else {
            fraction(t, scale)
        }
    };
    let off = offset
        .map(|o| format!(" {}", offset_text(&o)))
        .unwrap_or_default();
    let ms_colon = |t: &NaiveTime| {
        if *ty == DataType::DateTime || scale <= 3 {
            format!("{:03}", millis(t).min(999))
        } else {
            format!("{:09}", t.nanosecond())[..usize::from(scale)].to_string()
        }
    };
    let hms = format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second());
    let default = match ty {
        DataType::DateTime | DataType::SmallDateTime => 0,
        DataType::Date => 23,
        DataType::Time { .. } => 8,
        _ => 121,
    };
    if style.is_none() && matches!(ty, DataType::Time { .. }) {
        return Ok(format!("{hms}{}", fraction(&t, scale)));
    }
    let s = style.unwrap_or(default);
    let text = match s {
        0 | 100 => {
            let (h, ap) = hour12(t.hour());
            format!("{mon} {day:>2} {y} {h:>2}:{:02}{ap}", t.minute())
        }
        1 => format!("{m:02}/{day:02}/{yy:02}"),
        101 => format!("{m:02}/{day:02}/{y:04}"),
        2 => format!("{yy:02}.{m:02}.{day:02}"),
        102 => format!("{y:04}.{m:02}.{day:02}"),
        3 => format!("{day:02}/{m:02}/{yy:02}"),
        103 => format!("{day:02}/{m:02}/{y:04}"),
        4 => format!("{day:02}.{m:02}.{yy:02}"),
        104 => format!("{day:02}.{m:02}.{y:04}"),
        5 => format!("{day:02}-{m:02}-{yy:02}"),
        105 => format!("{day:02}-{m:02}-{y:04}"),
        6 => format!("{day:02} {mon} {yy:02}"),
        106 => format!("{day:02} {mon} {y:04}"),
        7 => format!("{mon} {day:02}, {yy:02}"),
        107 => format!("{mon} {day:02}, {y:04}"),
        8 | 108 | 24 => hms.clone(),
        9 | 109 => {
            let (h, ap) = hour12(t.hour());
            format!(
                "{mon} {day:>2} {y} {h:>2}:{:02}:{:02}:{}{ap}",
                t.minute(),
                t.second(),
                ms_colon(&t)
            )
        }
        10 => format!("{m:02}-{day:02}-{yy:02}"),
        110 => format!("{m:02}-{day:02}-{y:04}"),
        11 => format!("{yy:02}/{m:02}/{day:02}"),
        111 => format!("{y:04}/{m:02}/{day:02}"),
        12 => format!("{yy:02}{m:02}{day:02}"),
        112 => format!("{y:04}{m:02}{day:02}"),
        13 | 113 => format!("{day:02} {mon} {y:04} {hms}:{}", ms_colon(&t)),
        14 | 114 => format!("{hms}:{}", ms_colon(&t)),
        20 | 120 => format!("{y:04}-{m:02}-{day:02} {hms}{off}"),
        21 | 25 | 121 => {
            let f = match ty {
                DataType::Date | DataType::SmallDateTime => ".000".to_string(),
                _ => frac(&t),
            };
            format!("{y:04}-{m:02}-{day:02} {hms}{f}{off}")
        }
        22 => {
            let (h, ap) = hour12(t.hour());
            format!(
                "{m:02}/{day:02}/{yy:02} {h:>2}:{:02}:{:02} {ap}",
                t.minute(),
                t.second()
            )
        }
        23 => format!("{y:04}-{m:02}-{day:02}"),
        126 | 127 => {
            let f = frac(&t);
            let f = if f.trim_start_matches('.').bytes().all(|b| b == b'0') {
                String::new()
            } else {
                f
            };
            match (s, offset) {
                (127, Some(o)) => {
                    let utc = dt - Duration::seconds(i64::from(o.local_minus_utc()));
                    let ut = utc.time();
                    let uf = fraction(&ut, scale);
                    let uf = if uf.trim_start_matches('.').bytes().all(|b| b == b'0') {
                        String::new()
                    } else {
                        uf
                    };
                    format!(
                        "{}T{:02}:{:02}:{:02}{uf}Z",
                        utc.date().format("%Y-%m-%d"),
                        ut.hour(),
                        ut.minute(),
                        ut.second()
                    )
                }
                (_, Some(o)) => format!("{y:04}-{m:02}-{day:02}T{hms}{f}{}", offset_text(&o)),
                _ => format!("{y:04}-{m:02}-{day:02}T{hms}{f}"),
            }
        }
        other => {
            return Err(SqlError::new(
                281,
                format!(
                    "{other} is not a valid style number when converting from {} to a character string.",
                    ty.name()
                ),
            ));
        }
    };
    Ok(text)
}

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
    use super::*;

    fn dt(s: &str) -> NaiveDateTime {
        parse(s, None)
            .map(|p| p.local())
            .unwrap_or_else(|| panic!("parse {s}"))
    }

    #[test]
    fn parses_iso_and_us_formats() {
        let cases = [
            ("2024-01-02", "2024-01-02 00:00:00"),
            ("20240102", "2024-01-02 00:00:00"),
            (
                "2024-01-02 03:04:05.1234567",
                "2024-01-02 03:04:05.123456700",
            ),
            ("2024-01-02T03:04:05", "2024-01-02 03:04:05"),
            ("01/02/2024", "2024-01-02 00:00:00"),
            ("1/2/24 3:04PM", "2024-01-02 15:04:00"),
            ("Jan 2 2024 12:00AM", "2024-01-02 00:00:00"),
            ("2 January 2024", "2024-01-02 00:00:00"),
            ("03:04:05", "1900-01-01 03:04:05"),
            ("2024-01-02 03:04:05:123", "2024-01-02 03:04:05.123"),
        ];
        for (input, want) in cases {
            let got = dt(input);
            assert_eq!(
                got.format("%Y-%m-%d %H:%M:%S%.f").to_string(),
                want,
                "{input}"
            );
        }
        let p = parse("2024-01-02T03:04:05+01:30", None).unwrap_or_else(|| panic!("offset"));
        assert_eq!(p.offset.map(|o| o.local_minus_utc()), Some(5400));
        assert_eq!(
            parse("2024-01-02 10:00 -05:00", None)
                .and_then(|p| p.offset)
                .map(|o| o.local_minus_utc()),
            Some(-18000)
        );
        assert_eq!(
            parse("2024-01-02Z", None)
                .and_then(|p| p.offset)
                .map(|o| o.local_minus_utc()),
            Some(0)
        );
        assert_eq!(
            parse("02/01/2024", Some(103)).and_then(|p| p.date),
            NaiveDate::from_ymd_opt(2024, 1, 2)
        );
        for bad in [
            "2024-13-01",
            "abc",
            "2024-02-30",
            "25:00",
            "2024-01-02 03:04:05.1234567891",
        ] {
            assert_eq!(parse(bad, None), None, "{bad}");
        }
    }

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

    #[test]
    fn formats_styles() {
        let d = dt("2024-01-02 15:04:05.1234567");
        let dt2 = DataType::DateTime2 { scale: 7 };
        let cases: &[(DataType, Option<i32>, &str)] = &[
            (dt2, None, "2024-01-02 15:04:05.1234567"),
            (
                DataType::DateTime2 { scale: 0 },
                None,
                "2024-01-02 15:04:05",
            ),
            (DataType::DateTime, None, "Jan  2 2024  3:04PM"),
            (DataType::DateTime, Some(120), "2024-01-02 15:04:05"),
            (DataType::DateTime, Some(121), "2024-01-02 15:04:05.123"),
            (dt2, Some(126), "2024-01-02T15:04:05.1234567"),
            (DataType::DateTime, Some(112), "20240102"),
            (DataType::DateTime, Some(23), "2024-01-02"),
            (DataType::DateTime, Some(1), "01/02/24"),
            (DataType::DateTime, Some(101), "01/02/2024"),
            (DataType::DateTime, Some(103), "02/01/2024"),
            (DataType::DateTime, Some(108), "15:04:05"),
            (DataType::Date, None, "2024-01-02"),
            (DataType::Time { scale: 3 }, None, "15:04:05.123"),
        ];
        for (ty, style, want) in cases {
            assert_eq!(
                format(d, None, ty, *style).as_deref(),
                Ok(*want),
                "{ty:?} {style:?}"
            );
        }
        let o = FixedOffset::east_opt(3600);
        let dto = DataType::DateTimeOffset { scale: 3 };
        let d3 = dt("2024-01-02 00:30:00");
        assert_eq!(
            format(d3, o, &dto, None).as_deref(),
            Ok("2024-01-02 00:30:00.000 +01:00")
        );
        assert_eq!(
            format(d3, o, &dto, Some(127)).as_deref(),
            Ok("2024-01-01T23:30:00Z")
        );
        assert_eq!(
            format(d3, None, &DataType::DateTime, Some(126)).as_deref(),
            Ok("2024-01-02T00:30:00")
        );
        assert_eq!(
            format(d3, None, &DataType::DateTime, Some(999)).map_err(|e| e.number),
            Err(281)
        );
    }

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
