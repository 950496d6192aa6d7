//! The UTC offset commit times are converted with. CDC's commit times
//! (`cdc.lsn_time_mapping`) are server-local `datetime` values without an
//! offset. An explicit `spec.source.sourceTimeZone` gives the zone; without
//! it the engine asks the server (`SYSDATETIME()` against
//! `SYSUTCDATETIME()`), at start and again before every batch, so a
//! daylight-saving change is noticed. On servers older than SQL Server 2022
//! the offset taken, and each change of it, is a warning.

use chrono::{Offset, TimeZone, Utc};

use super::EngineError;
use super::stream::StreamRun;
use crate::source::cdc;

/// SQL Server 2022's major version.
const SQL_SERVER_2022: u32 = 16;

impl StreamRun {
    /// Takes the offset (the first time) or re-checks it.
    pub(super) async fn refresh_utc_offset(&mut self) -> Result<(), EngineError> {
        let offset = match self.config.source.source_time_zone {
            Some(zone) => {
                let now = Utc::now().naive_utc();
                i64::from(zone.offset_from_utc_datetime(&now).fix().local_minus_utc()) / 60
            }
            None => cdc::utc_offset_minutes(self.client()?).await?,
        };
        let previous = self.utc_offset.replace(offset);
        if previous == Some(offset) || self.config.source.source_time_zone.is_some() {
            return Ok(());
        }
        let major = match self.server_major_version {
            Some(major) => major,
            None => {
                let major = cdc::product_major_version(self.client()?).await?;
                self.server_major_version = Some(major);
                major
            }
        };
        if major >= SQL_SERVER_2022 {
            return Ok(());
        }
        let now = Utc::now().format("%Y-%m-%d %H:%M:%S UTC");
        let text = match previous {
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
        };
        self.warn(text);
        Ok(())
    }

    /// Minutes the server's clock is ahead of UTC (0 until taken).
    pub(super) fn utc_offset_minutes(&self) -> i64 {
        self.utc_offset.unwrap_or(0)
    }
}

/// `+HH:MM` / `-HH:MM`.
fn show(minutes: i64) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let minutes = minutes.abs();
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn offsets_show_as_hours_and_minutes() {
        assert_eq!(super::show(60), "+01:00");
        assert_eq!(super::show(-330), "-05:30");
        assert_eq!(super::show(0), "+00:00");
    }
}
