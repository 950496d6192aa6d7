//! Date/time values as text: CAST's default format per type and
//! CONVERT's styles (0-14, 20-25, 100-114, 120, 121, 126, 127).
//!
//! <https://learn.microsoft.com/sql/t-sql/functions/cast-and-convert-transact-sql#date-and-time-styles>

use chrono::{Datelike, Duration, FixedOffset, NaiveDateTime, NaiveTime, Timelike};

use super::MONTHS;
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::types::DataType;

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

pub(super) fn offset_text(o: &FixedOffset) -> String {
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

#[cfg(test)]
mod tests {
    use super::super::dt;
    use super::*;

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
}
