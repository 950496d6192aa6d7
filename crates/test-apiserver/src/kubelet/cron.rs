//! Five-field cron schedules (`*`, lists, ranges, steps, `@hourly`-style macros).

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};

/// A parsed schedule: allowed values per field.
pub struct Schedule {
    minute: Vec<bool>,
    hour: Vec<bool>,
    dom: Vec<bool>,
    month: Vec<bool>,
    dow: Vec<bool>,
    dom_star: bool,
    dow_star: bool,
}

fn field(s: &str, lo: u32, hi: u32) -> Option<Vec<bool>> {
    let mut set = vec![false; hi as usize + 1];
    for part in s.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, st)) => (r, st.parse::<u32>().ok().filter(|s| *s > 0)?),
            None => (part, 1),
        };
        let (a, b) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                None => {
                    let v: u32 = r.parse().ok()?;
                    (v, if step > 1 { hi } else { v })
                }
            },
        };
        if a < lo || b > hi || a > b {
            return None;
        }
        for v in (a..=b).step_by(step as usize) {
            set[v as usize] = true;
        }
    }
    Some(set)
}

impl Schedule {
    /// Parses a cron expression; `None` if invalid.
    pub fn parse(expr: &str) -> Option<Self> {
        let expr = match expr.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            e => e,
        };
        let f: Vec<&str> = expr.split_whitespace().collect();
        if f.len() != 5 {
            return None;
        }
        let mut dow = field(&f[4].replace('7', "0"), 0, 6)?;
        dow.resize(7, false);
        Some(Self {
            minute: field(f[0], 0, 59)?,
            hour: field(f[1], 0, 23)?,
            dom: field(f[2], 1, 31)?,
            month: field(f[3], 1, 12)?,
            dow,
            dom_star: f[2] == "*",
            dow_star: f[4] == "*",
        })
    }

    fn matches(&self, t: DateTime<Utc>) -> bool {
        let dom = self.dom[t.day() as usize];
        let dow = self.dow[t.weekday().num_days_from_sunday() as usize];
        let day = match (self.dom_star, self.dow_star) {
            (false, false) => dom || dow,
            _ => dom && dow,
        };
        self.minute[t.minute() as usize]
            && self.hour[t.hour() as usize]
            && self.month[t.month() as usize]
            && day
    }

    /// The latest scheduled time in `(after, now]`, scanning at most a year back.
    pub fn latest_between(
        &self,
        after: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let mut t = now.with_second(0)?.with_nanosecond(0)?;
        for _ in 0..(366 * 24 * 60) {
            if t <= after {
                return None;
            }
            if self.matches(t) {
                return Some(t);
            }
            t -= Duration::minutes(1);
        }
        None
    }
}
