//! Date/time strings in the formats SQL Server accepts: ISO 8601,
//! numeric mdy (dmy under some CONVERT styles), alphabetic months, times
//! alone, with an optional offset.
//!
//! <https://learn.microsoft.com/sql/t-sql/functions/cast-and-convert-transact-sql#date-and-time-styles>

use chrono::{FixedOffset, NaiveDate, NaiveDateTime, NaiveTime};

use super::{MONTHS, base_date};

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

#[cfg(test)]
mod tests {
    use super::super::dt;
    use super::*;

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
}
