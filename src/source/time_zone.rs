//! How commit times become UTC. CDC's commit times (`cdc.lsn_time_mapping`)
//! are server-local `datetime` values without an offset, so each is
//! converted by its zone's rules at its own instant, never by the offset
//! of the moment it is read: a change committed an hour before a
//! daylight-saving change and read after it keeps its true instant.
//!
//! The zone is `spec.source.sourceTimeZone` when set, else the server's own
//! (`CURRENT_TIMEZONE_ID()`, SQL Server 2022 and later, a Windows zone name
//! mapped to IANA rules by CLDR's table). Older servers do not name their
//! zone: their offset is taken from the server before every batch and each
//! change of it is a warning ([`offset_warning`]).
//!
//! The hour a fall-back change repeats is the one place local time cannot
//! say the instant. A watermark takes its earlier reading, so it never
//! claims a moment not yet read; a change takes the later one from the
//! repeated hour's second pass on ([`RepeatedHour`]), which the commits in
//! LSN order show: their local time steps back there.

use chrono::{DateTime, Duration, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use crate::domain::Lsn;

/// SQL Server 2022's major version.
pub const SQL_SERVER_2022: u32 = 16;

/// How a server-local commit time becomes UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitClock {
    /// The zone's rules at each commit's own instant.
    Zone(Tz),
    /// One offset in minutes ahead of UTC: a server older than 2022
    /// without `sourceTimeZone`, whose zone is unknown.
    Fixed(i64),
}

/// What a local time stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalTime {
    /// One instant.
    Exact(DateTime<Utc>),
    /// A time of the hour a fall-back change repeats: both instants.
    Repeated {
        /// Its first pass (before the change).
        earlier: DateTime<Utc>,
        /// Its second pass (after the change).
        later: DateTime<Utc>,
    },
}

/// A fall-back change: the local hour `[first, end)` happens twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fold {
    /// The first repeated local time.
    pub first: NaiveDateTime,
    /// The local time the repetition ends at (not repeated itself).
    pub end: NaiveDateTime,
    /// The UTC instant of the change (the second pass starts).
    pub at: DateTime<Utc>,
    /// The UTC instant the second pass ends.
    pub ends_at: DateTime<Utc>,
}

/// A fold with where its second pass starts among the commits: the first
/// commit whose local time steps back below an earlier commit's in the
/// repeated hour. `None`: no commit shows the second pass (yet), so every
/// repeated time read is of the first pass, or indistinguishable from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatedHour {
    /// The change.
    pub fold: Fold,
    /// The first commit of the second pass.
    pub second_pass_from: Option<Lsn>,
}

impl CommitClock {
    /// What `local` stands for.
    pub fn resolve(self, local: NaiveDateTime) -> LocalTime {
        let zone = match self {
            Self::Fixed(minutes) => {
                return LocalTime::Exact((local - Duration::minutes(minutes)).and_utc());
            }
            Self::Zone(zone) => zone,
        };
        match zone.from_local_datetime(&local) {
            chrono::LocalResult::Single(t) => LocalTime::Exact(t.with_timezone(&Utc)),
            chrono::LocalResult::Ambiguous(a, b) => {
                let (a, b) = (a.with_timezone(&Utc), b.with_timezone(&Utc));
                LocalTime::Repeated {
                    earlier: a.min(b),
                    later: a.max(b),
                }
            }
            // A local time the zone skips: no clock of it shows one, but
            // a server whose rules differ from ours may. The offset just
            // before the gap reads it.
            chrono::LocalResult::None => {
                let before = zone
                    .offset_from_utc_datetime(&(local - Duration::hours(3)))
                    .fix()
                    .local_minus_utc();
                LocalTime::Exact((local - Duration::seconds(i64::from(before))).and_utc())
            }
        }
    }

    /// A watermark's instant: the earlier reading in a repeated hour, so a
    /// watermark never claims a moment not yet read.
    pub fn watermark(self, local: NaiveDateTime) -> DateTime<Utc> {
        match self.resolve(local) {
            LocalTime::Exact(t) | LocalTime::Repeated { earlier: t, .. } => t,
        }
    }

    /// A change's commit time: the later reading in a repeated hour from
    /// its second pass on, so commit times never step back with the LSN.
    pub fn commit(
        self,
        local: NaiveDateTime,
        lsn: Lsn,
        repeated: Option<&RepeatedHour>,
    ) -> DateTime<Utc> {
        match self.resolve(local) {
            LocalTime::Exact(t) => t,
            LocalTime::Repeated { earlier, later } => {
                let second_pass = repeated.is_some_and(|hour| {
                    hour.second_pass_from.is_some_and(|from| lsn >= from)
                        && hour.fold.first <= local
                        && local < hour.fold.end
                });
                if second_pass { later } else { earlier }
            }
        }
    }

    /// The latest fall-back change whose repeated hour overlaps
    /// `[around - lookback, around]` (widened by the hour a watermark may
    /// lag in it): the one a read ending at `around` may cross.
    pub fn fold_near(self, around: DateTime<Utc>, lookback: Duration) -> Option<Fold> {
        let Self::Zone(zone) = self else {
            return None;
        };
        let offset = |t: DateTime<Utc>| {
            zone.offset_from_utc_datetime(&t.naive_utc())
                .fix()
                .local_minus_utc()
        };
        // Offsets change at most a few times a year and no fold is shorter
        // than 15 minutes: stepping by that finds every change, bisection
        // then its second.
        let step = Duration::minutes(15);
        let from = around - lookback - Duration::hours(3);
        let mut to = around + Duration::hours(3);
        while to > from {
            let before = to - step;
            let (old, new) = (offset(before), offset(to));
            if new < old {
                let (mut lo, mut hi) = (before, to);
                while hi - lo > Duration::seconds(1) {
                    let mid = lo + (hi - lo) / 2;
                    if offset(mid) == old {
                        lo = mid
                    } else {
                        hi = mid
                    }
                }
                let at = hi;
                let local = at.naive_utc();
                return Some(Fold {
                    first: local + Duration::seconds(i64::from(new)),
                    end: local + Duration::seconds(i64::from(old)),
                    at,
                    ends_at: at + Duration::seconds(i64::from(old - new)),
                });
            }
            to = before;
        }
        None
    }
}

/// The IANA zone of the server's zone name (`CURRENT_TIMEZONE_ID()`): a
/// Windows name by CLDR's world-wide default mapping, or an IANA name
/// as it is.
pub fn windows_zone(name: &str) -> Option<Tz> {
    match localzone::win_zone_to_iana(name, Some("001")) {
        Some(iana) => iana.parse().ok(),
        None => name.parse().ok(),
    }
}

/// Where a repeated hour's second pass starts among `commits` (LSN order,
/// local times inside the fold), continuing a scan that had seen local
/// times up to `seen`: the first commit whose time steps back.
pub fn second_pass_start(
    commits: &[(Lsn, NaiveDateTime)],
    seen: &mut Option<NaiveDateTime>,
) -> Option<Lsn> {
    for (lsn, local) in commits {
        if seen.is_some_and(|top| *local < top) {
            return Some(*lsn);
        }
        *seen = Some(seen.map_or(*local, |top| top.max(*local)));
    }
    None
}

/// The warning a newly taken server offset deserves: none on SQL Server
/// 2022 and later, or when it did not change.
pub fn offset_warning(
    previous: Option<i64>,
    offset: i64,
    server_major_version: u32,
    now: DateTime<Utc>,
) -> Option<String> {
    if previous == Some(offset) || server_major_version >= SQL_SERVER_2022 {
        return None;
    }
    let now = now.format("%Y-%m-%d %H:%M:%S UTC");
    Some(match previous {
        None => format!(
            "commit times are converted to UTC with the server's offset {}, taken from the \
             server at {now} (SQL Server older than 2022 does not name its zone; set \
             spec.source.sourceTimeZone so each commit is converted by its zone's rules)",
            show(offset)
        ),
        Some(before) => format!(
            "the server's UTC offset changed from {} to {} at {now}; commit times from now \
             on are converted with the new one",
            show(before),
            show(offset)
        ),
    })
}

/// The warning for a 2022 server whose zone CLDR's table does not name.
pub fn unknown_zone_warning(name: &str, offset: i64) -> String {
    format!(
        "the server's time zone {name:?} has no IANA equivalent known here: commit times are \
         converted with its current offset {} (set spec.source.sourceTimeZone to name the zone)",
        show(offset)
    )
}

/// `+HH:MM` / `-HH:MM`.
fn show(minutes: i64) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let minutes = minutes.abs();
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    fn local(d: (i32, u32, u32), t: (u32, u32, u32)) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(d.0, d.1, d.2)
            .and_then(|d| d.and_hms_opt(t.0, t.1, t.2))
            .unwrap_or_default()
    }

    fn utc(d: (i32, u32, u32), t: (u32, u32, u32)) -> DateTime<Utc> {
        local(d, t).and_utc()
    }

    #[test]
    fn offsets_show_as_hours_and_minutes() {
        assert_eq!(show(60), "+01:00");
        assert_eq!(show(-330), "-05:30");
        assert_eq!(show(0), "+00:00");
    }

    #[test]
    fn each_commit_is_converted_by_the_rules_of_its_own_instant() {
        let clock = CommitClock::Zone(chrono_tz::America::New_York);
        // 20 minutes before the 2027 spring-forward change (07:00 UTC) and
        // after it, whenever read.
        assert_eq!(
            clock.watermark(local((2027, 3, 14), (1, 40, 0))),
            utc((2027, 3, 14), (6, 40, 0))
        );
        assert_eq!(
            clock.watermark(local((2027, 3, 14), (3, 10, 0))),
            utc((2027, 3, 14), (7, 10, 0))
        );
        assert_eq!(
            CommitClock::Fixed(-300).watermark(local((2027, 3, 14), (1, 40, 0))),
            utc((2027, 3, 14), (6, 40, 0))
        );
    }

    #[test]
    fn the_repeated_hour_is_read_by_where_its_second_pass_starts() {
        let clock = CommitClock::Zone(chrono_tz::America::New_York);
        // 2027-11-07: 02:00 EDT becomes 01:00 EST at 06:00 UTC.
        let fold = clock
            .fold_near(utc((2027, 11, 7), (7, 30, 0)), Duration::days(3))
            .expect("a fold");
        assert_eq!(fold.first, local((2027, 11, 7), (1, 0, 0)));
        assert_eq!(fold.end, local((2027, 11, 7), (2, 0, 0)));
        assert_eq!(fold.at, utc((2027, 11, 7), (6, 0, 0)));
        assert_eq!(fold.ends_at, utc((2027, 11, 7), (7, 0, 0)));
        assert_eq!(
            clock.fold_near(utc((2027, 11, 1), (0, 0, 0)), Duration::days(3)),
            None
        );

        // Commits at 01:40 EDT, 01:50 EDT, then 01:10 EST and 01:45 EST.
        let commits = [
            (Lsn::from_low_byte(1), local((2027, 11, 7), (1, 40, 0))),
            (Lsn::from_low_byte(2), local((2027, 11, 7), (1, 50, 0))),
            (Lsn::from_low_byte(3), local((2027, 11, 7), (1, 10, 0))),
            (Lsn::from_low_byte(4), local((2027, 11, 7), (1, 45, 0))),
        ];
        let mut seen = None;
        let from = second_pass_start(&commits[..2], &mut seen);
        assert_eq!(from, None, "no step back yet");
        let from = second_pass_start(&commits[2..], &mut seen);
        assert_eq!(from, Some(Lsn::from_low_byte(3)));
        let hour = RepeatedHour {
            fold,
            second_pass_from: from,
        };
        let times: Vec<_> = commits
            .iter()
            .map(|(lsn, t)| clock.commit(*t, *lsn, Some(&hour)))
            .collect();
        assert_eq!(
            times,
            [
                utc((2027, 11, 7), (5, 40, 0)),
                utc((2027, 11, 7), (5, 50, 0)),
                utc((2027, 11, 7), (6, 10, 0)),
                utc((2027, 11, 7), (6, 45, 0)),
            ]
        );
        // A watermark in the hour claims its first pass.
        assert_eq!(
            clock.watermark(local((2027, 11, 7), (1, 45, 0))),
            utc((2027, 11, 7), (5, 45, 0))
        );
    }

    #[test]
    fn windows_zone_names_map_to_iana_rules() {
        assert_eq!(
            windows_zone("Eastern Standard Time"),
            Some(chrono_tz::America::New_York)
        );
        assert_eq!(windows_zone("UTC"), Some(chrono_tz::Etc::UTC));
        assert_eq!(
            windows_zone("Europe/Oslo"),
            Some(chrono_tz::Europe::Oslo),
            "an IANA name as it is"
        );
        assert_eq!(windows_zone("Mars Standard Time"), None);
    }

    #[test]
    fn older_servers_warn_when_the_offset_is_taken_or_changes() {
        let now = Utc::now();
        let cases = [
            ("first offset, 2019", None, 60, 15, Some("offset +01:00")),
            ("unchanged, 2019", Some(60), 60, 15, None),
            (
                "changed, 2019",
                Some(60),
                120,
                15,
                Some("from +01:00 to +02:00"),
            ),
            ("first offset, 2022", None, 60, 16, None),
            ("changed, 2022", Some(60), 120, 16, None),
        ];
        for (case, previous, offset, major, expected) in cases {
            let warning = offset_warning(previous, offset, major, now);
            match expected {
                Some(text) => assert!(
                    warning.as_deref().is_some_and(|w| w.contains(text)),
                    "{case}: {warning:?}"
                ),
                None => assert_eq!(warning, None, "{case}"),
            }
        }
    }
}
