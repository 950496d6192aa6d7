//! Date and time layouts (MS-TDS 2.2.5.5.1.8 and 2.2.5.5.1.9 for DATETIME
//! and SMALLDATETIME; DATEN, TIMEN, DATETIME2N, DATETIMEOFFSETN).

use chrono::{Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

use crate::sql::types::time_extra_bytes;

const NANOS_PER_DAY: u128 = 86_400 * 1_000_000_000;
/// DATETIME counts 1/300 s ticks.
const TICKS_PER_DAY: u64 = 86_400 * 300;

fn epoch_0001() -> NaiveDate {
    NaiveDate::from_ymd_opt(1, 1, 1).unwrap_or(NaiveDate::MIN)
}

fn epoch_1900() -> NaiveDate {
    NaiveDate::from_ymd_opt(1900, 1, 1).unwrap_or(NaiveDate::MIN)
}

/// Days since 0001-01-01 (DATEN), `None` outside 0001..=9999.
pub(crate) fn date_to_days(date: NaiveDate) -> Option<u32> {
    u32::try_from((date - epoch_0001()).num_days())
        .ok()
        .filter(|d| *d <= 3_652_058)
}

pub(crate) fn days_to_date(days: u32) -> Option<NaiveDate> {
    epoch_0001().checked_add_signed(Duration::days(days as i64))
}

/// Nanoseconds since midnight (a leap second is folded into :59).
fn nanos_of_day(time: NaiveTime) -> u128 {
    let nanos = time.nanosecond().min(999_999_999) as u128;
    time.num_seconds_from_midnight() as u128 * 1_000_000_000 + nanos
}

fn scale_divisor(scale: u8) -> u128 {
    10u128.pow(9 - scale.min(7) as u32)
}

/// Time of day in units of 10^-scale s, rounded to the scale (truncated
/// if rounding would reach midnight).
pub(crate) fn time_to_increments(time: NaiveTime, scale: u8) -> u64 {
    let div = scale_divisor(scale);
    let nanos = nanos_of_day(time);
    let rounded = (nanos + div / 2) / div;
    let per_day = NANOS_PER_DAY / div;
    (if rounded >= per_day {
        nanos / div
    } else {
        rounded
    }) as u64
}

pub(crate) fn increments_to_time(increments: u64, scale: u8) -> Option<NaiveTime> {
    let nanos = increments as u128 * scale_divisor(scale);
    if nanos >= NANOS_PER_DAY {
        return None;
    }
    NaiveTime::from_num_seconds_from_midnight_opt(
        (nanos / 1_000_000_000) as u32,
        (nanos % 1_000_000_000) as u32,
    )
}

/// Bytes of a TIMEN value of this scale.
pub(crate) fn time_len(scale: u8) -> usize {
    time_extra_bytes(scale) as usize
}

/// DATETIME: days since 1900-01-01 and 1/300 s ticks, rounded to the tick.
pub(crate) fn datetime_to_parts(dt: NaiveDateTime) -> Option<(i32, u32)> {
    let mut days = (dt.date() - epoch_1900()).num_days();
    let mut ticks = ((nanos_of_day(dt.time()) * 300 + 500_000_000) / 1_000_000_000) as u64;
    if ticks >= TICKS_PER_DAY {
        ticks -= TICKS_PER_DAY;
        days += 1;
    }
    let days = i32::try_from(days).ok()?;
    // 1753-01-01 ..= 9999-12-31
    (-53_690..=2_958_463)
        .contains(&days)
        .then_some((days, ticks as u32))
}

pub(crate) fn parts_to_datetime(days: i32, ticks: u32) -> Option<NaiveDateTime> {
    if ticks as u64 >= TICKS_PER_DAY {
        return None;
    }
    let date = epoch_1900().checked_add_signed(Duration::days(days as i64))?;
    let nanos = (ticks as u128 * 1_000_000_000 + 150) / 300;
    let time = NaiveTime::from_num_seconds_from_midnight_opt(
        (nanos / 1_000_000_000) as u32,
        (nanos % 1_000_000_000) as u32,
    )?;
    Some(date.and_time(time))
}

/// SMALLDATETIME: days since 1900-01-01 and minutes, rounded to the minute.
pub(crate) fn smalldatetime_to_parts(dt: NaiveDateTime) -> Option<(u16, u16)> {
    let mut days = (dt.date() - epoch_1900()).num_days();
    let mut minutes = ((nanos_of_day(dt.time()) + 30_000_000_000) / 60_000_000_000) as i64;
    if minutes >= 1440 {
        minutes -= 1440;
        days += 1;
    }
    Some((u16::try_from(days).ok()?, minutes as u16))
}

pub(crate) fn smalldatetime_from_parts(days: u16, minutes: u16) -> Option<NaiveDateTime> {
    if minutes >= 1440 {
        return None;
    }
    let date = epoch_1900().checked_add_signed(Duration::days(days as i64))?;
    let time = NaiveTime::from_num_seconds_from_midnight_opt(minutes as u32 * 60, 0)?;
    Some(date.and_time(time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_from_year_one() {
        let d = NaiveDate::from_ymd_opt(1, 1, 1).unwrap();
        assert_eq!(date_to_days(d), Some(0));
        let d = NaiveDate::from_ymd_opt(9999, 12, 31).unwrap();
        assert_eq!(date_to_days(d), Some(3_652_058));
        assert_eq!(days_to_date(3_652_058), Some(d));
    }

    #[test]
    fn time_scales_round_trip() {
        let t = NaiveTime::from_hms_nano_opt(23, 59, 59, 999_999_900).unwrap();
        assert_eq!(increments_to_time(time_to_increments(t, 7), 7), Some(t));
        // Rounding to scale 0 would reach midnight: truncate instead.
        assert_eq!(time_to_increments(t, 0), 86_399);
        let t = NaiveTime::from_hms_milli_opt(1, 2, 3, 456).unwrap();
        assert_eq!(time_to_increments(t, 3), 3_723_456);
        assert!(increments_to_time(864_000_000_000, 7).is_none());
    }

    #[test]
    fn legacy_datetime_ticks() {
        let dt = NaiveDate::from_ymd_opt(2024, 2, 29)
            .unwrap()
            .and_hms_milli_opt(13, 45, 30, 500)
            .unwrap();
        let (days, ticks) = datetime_to_parts(dt).unwrap();
        assert_eq!(ticks, (13 * 3600 + 45 * 60 + 30) * 300 + 150);
        assert_eq!(parts_to_datetime(days, ticks), Some(dt));
        let (d, m) = smalldatetime_to_parts(dt).unwrap();
        assert_eq!(m, 13 * 60 + 46);
        assert!(smalldatetime_from_parts(d, m).is_some());
        let early = NaiveDate::from_ymd_opt(1700, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        assert!(datetime_to_parts(early).is_none());
    }
}
