//! Arguments shared by the commands that query Delta tables (`sql`,
//! `health`, `freshness`): the clock, storage options, opening a session.

use anyhow::{Context, anyhow};
use chrono::{DateTime, NaiveDateTime, Utc};
use mssql_cdc::lake::StorageLocation;
use mssql_cdc::query::{QueryClock, SparkSession, TableRef};

use super::StorageOptionArgs;

/// The clock and storage flags of every query command.
#[derive(clap::Args, Clone)]
pub struct QueryClockArgs {
    /// Evaluate as if it were this UTC instant (`2026-11-29T12:00:00Z` or
    /// `2026-11-29 12:00:00`): fixes localtimestamp(), current_timestamp()
    /// and every age. Default: the local clock.
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Spark's session time zone: what localtimestamp() and
    /// convert_timezone's default source zone use (a region or +HH:MM).
    #[arg(long, default_value = "UTC")]
    pub session_time_zone: String,
    #[command(flatten)]
    pub storage: StorageOptionArgs,
}

impl QueryClockArgs {
    /// A session with the Spark functions, its clock set from the flags.
    pub fn session(&self) -> anyhow::Result<SparkSession> {
        let zone = self
            .session_time_zone
            .parse()
            .map_err(|e: String| anyhow!("--session-time-zone: {e}"))?;
        let clock = QueryClock::new(self.now.unwrap_or_else(Utc::now), zone);
        Ok(SparkSession::new(clock)?)
    }

    /// The instant ages are measured at.
    pub fn now(&self) -> DateTime<Utc> {
        self.now.unwrap_or_else(Utc::now)
    }

    /// Opens the Delta table at `uri` in `session` as `name`.
    pub async fn register(
        &self,
        session: &SparkSession,
        name: &str,
        uri: &str,
    ) -> anyhow::Result<()> {
        let table: TableRef = name.parse()?;
        let location = StorageLocation::parse(uri)?;
        let options = self.storage.for_location(&location);
        session
            .register_delta(&table, &location, &options)
            .await
            .with_context(|| format!("table {name}"))
    }
}

/// `--now`: RFC 3339, or a zone-less date-time read as UTC.
pub fn parse_now(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.to_utc());
    }
    for format in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc());
        }
    }
    Err(format!(
        "{text:?} is not a timestamp such as 2026-11-29T12:00:00Z"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_accepts_rfc3339_and_plain_utc() {
        let expected = parse_now("2026-11-29T12:00:00Z").unwrap();
        for text in [
            "2026-11-29 12:00:00",
            "2026-11-29T12:00:00",
            "2026-11-29T13:00:00+01:00",
            "2026-11-29 12:00",
        ] {
            assert_eq!(parse_now(text).unwrap(), expected, "{text}");
        }
        assert!(parse_now("yesterday").is_err());
    }
}
