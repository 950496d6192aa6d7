//! The UTC offset commit times are converted with. CDC's commit times
//! (`cdc.lsn_time_mapping`) are server-local `datetime` values without an
//! offset. An explicit `spec.source.sourceTimeZone` gives the zone; without
//! it the engine asks the server, at connect and before every batch, so a
//! daylight-saving change is noticed. On servers older than SQL Server 2022
//! the offset taken, and each change of it, is a warning; this module
//! words it.

use chrono::{DateTime, Offset, TimeZone, Utc};

/// SQL Server 2022's major version.
pub const SQL_SERVER_2022: u32 = 16;

/// Minutes `zone` is ahead of UTC at `now`.
pub fn zone_offset_minutes(zone: chrono_tz::Tz, now: DateTime<Utc>) -> i64 {
    i64::from(
        zone.offset_from_utc_datetime(&now.naive_utc())
            .fix()
            .local_minus_utc(),
    ) / 60
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
             server at {now} (SQL Server older than 2022; set spec.source.sourceTimeZone to \
             name the zone)",
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

/// `+HH:MM` / `-HH:MM`.
fn show(minutes: i64) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let minutes = minutes.abs();
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_show_as_hours_and_minutes() {
        assert_eq!(show(60), "+01:00");
        assert_eq!(show(-330), "-05:30");
        assert_eq!(show(0), "+00:00");
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
