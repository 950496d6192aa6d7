//! Dates and times: parsing strings, formatting with CONVERT styles,
//! rounding to each type's precision, and the date parts of DATEADD,
//! DATEDIFF and DATEPART. One file per job; this one holds the calendar
//! constants they share.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

mod format;
mod parse;
mod parts;
mod round;

pub use format::format;
pub use parse::{Parts, parse};
pub use parts::{DatePart, add, check_part, diff, last_day, name, part};
pub use round::{round_datetime, round_fraction, round_smalldatetime, round_time};

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

/// A date/time string as its local date-time, for the tests.
#[cfg(test)]
fn dt(s: &str) -> NaiveDateTime {
    parse(s, None)
        .map(|p| p.local())
        .unwrap_or_else(|| panic!("parse {s}"))
}
