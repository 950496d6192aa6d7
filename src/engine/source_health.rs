//! The source of a `CdcSource` as its rounds last found it: up, down (and
//! why), or not asked yet. One place decides it for all of the source's
//! tables (the rounds' own session, `pacer.rs`), so a source that is down
//! costs one connection attempt per backoff, not one per table, and every
//! table reports the same reason (`SourceUnavailable`) while its own
//! errors stay its own.

use chrono::{DateTime, Utc};

use crate::source::SourceOutage;

/// What the source's last look found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceHealth {
    /// Not asked yet (or the rounds do not run: an availableNow source).
    #[default]
    Unknown,
    /// The rounds' session reads the database's max LSN.
    Up {
        /// Since when (UTC).
        since: DateTime<Utc>,
    },
    /// No table of the source can be read.
    Down(SourceDown),
}

/// Why no table of the source can be read, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDown {
    /// Which way the source is down.
    pub outage: SourceOutage,
    /// What the last attempt met, in words (names the server and login,
    /// never a password).
    pub error: String,
    /// Since when (UTC): the first attempt that met this outage.
    pub since: DateTime<Utc>,
}

impl SourceDown {
    /// One line for a status: the outage, what was met, what to check.
    pub fn message(&self) -> String {
        format!(
            "{}: {}; {}",
            self.outage.reason(),
            self.error,
            self.outage.remedy()
        )
    }
}

impl SourceHealth {
    /// The health after a look at `now` found `found` (`Ok`: the max LSN
    /// was read; `Err`: the outage and the error's words). A source that
    /// stays up or stays down the same way keeps its `since`, so only a
    /// change of state is a change at all (and a status write).
    pub fn after(&self, found: Result<(), (SourceOutage, String)>, now: DateTime<Utc>) -> Self {
        match (self, found) {
            (SourceHealth::Up { since }, Ok(())) => SourceHealth::Up { since: *since },
            (_, Ok(())) => SourceHealth::Up { since: now },
            (SourceHealth::Down(down), Err((outage, error))) if down.outage == outage => {
                SourceHealth::Down(SourceDown {
                    outage,
                    error,
                    since: down.since,
                })
            }
            (_, Err((outage, error))) => SourceHealth::Down(SourceDown {
                outage,
                error,
                since: now,
            }),
        }
    }

    /// The outage, while down.
    pub fn down(&self) -> Option<&SourceDown> {
        match self {
            SourceHealth::Down(down) => Some(down),
            _ => None,
        }
    }

    /// Whether `other` is the same state (up, down the same way, or
    /// unknown): the error's words may differ between attempts.
    pub fn same_state(&self, other: &SourceHealth) -> bool {
        match (self, other) {
            (SourceHealth::Unknown, SourceHealth::Unknown)
            | (SourceHealth::Up { .. }, SourceHealth::Up { .. }) => true,
            (SourceHealth::Down(a), SourceHealth::Down(b)) => a.outage == b.outage,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("a time")
    }

    fn refused() -> Result<(), (SourceOutage, String)> {
        Err((SourceOutage::LoginFailed, "login reader refused".into()))
    }

    #[test]
    fn a_source_keeps_its_since_while_its_state_stays_and_moves_it_on_a_change() {
        let up = SourceHealth::Unknown.after(Ok(()), at(0));
        assert_eq!(up, SourceHealth::Up { since: at(0) });
        assert_eq!(up.after(Ok(()), at(10)), up, "still up: nothing changed");

        let down = up.after(refused(), at(20));
        let first = down.down().expect("down").clone();
        assert_eq!(first.since, at(20));
        assert!(!down.same_state(&up));
        let still = down.after(refused(), at(30));
        assert_eq!(still.down().map(|d| d.since), Some(at(20)));
        assert!(still.same_state(&down));

        let other = still.after(
            Err((SourceOutage::Unreachable, "connection refused".into())),
            at(40),
        );
        assert_eq!(other.down().map(|d| d.since), Some(at(40)));
        assert!(!other.same_state(&still), "down another way is news");

        let back = other.after(Ok(()), at(50));
        assert_eq!(back, SourceHealth::Up { since: at(50) });
    }

    #[test]
    fn the_message_says_which_outage_and_what_to_check() {
        let down = SourceDown {
            outage: SourceOutage::LoginFailed,
            error: "SQL Server refused login reader".into(),
            since: at(0),
        };
        let message = down.message();
        assert!(message.starts_with("LoginFailed: SQL Server refused login reader"));
        assert!(message.contains("password"), "{message}");
    }
}
