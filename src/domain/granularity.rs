//! The period a finalization verdict moves in: consumers wait for whole
//! periods, so `finalized_until` is always the start of one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The unit a finalization verdict moves in: consumers wait for whole
/// periods, so the verdict is the start of the period in progress.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// Whole minutes.
    Minute,
    /// Whole hours.
    #[default]
    Hour,
    /// Whole days (UTC).
    Day,
}

impl Granularity {
    /// The value stored in the control table's `granularity` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Minute => "minute",
            Granularity::Hour => "hour",
            Granularity::Day => "day",
        }
    }

    /// The length of one period.
    pub fn period(self) -> std::time::Duration {
        match self {
            Granularity::Minute => std::time::Duration::from_secs(60),
            Granularity::Hour => std::time::Duration::from_secs(3600),
            Granularity::Day => std::time::Duration::from_secs(86_400),
        }
    }
}

/// A `granularity` value that is not minute, hour or day (read back from a
/// control table).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("granularity {0:?} is not minute, hour or day")]
pub struct GranularityError(pub String);

impl std::str::FromStr for Granularity {
    type Err = GranularityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "minute" => Ok(Granularity::Minute),
            "hour" => Ok(Granularity::Hour),
            "day" => Ok(Granularity::Day),
            _ => Err(GranularityError(text.to_string())),
        }
    }
}

impl std::fmt::Display for Granularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
