//! The server clock, in one place so the sandbox can later make it
//! controllable (CDC tests want to move time). Everything that stamps a
//! time (create_date, transaction begin/commit, GETDATE) asks the engine's
//! [`Clock`].

use chrono::{FixedOffset, NaiveDateTime, Offset, Utc};

/// Source of the server's notion of "now".
pub trait Clock: Send + Sync + 'static {
    /// Current time in UTC.
    fn now_utc(&self) -> NaiveDateTime;

    /// The server's time-zone offset (GETDATE = now_utc + offset).
    fn offset(&self) -> FixedOffset {
        Utc.fix()
    }
}

/// The machine's clock, UTC offset zero.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_utc(&self) -> NaiveDateTime {
        Utc::now().naive_utc()
    }
}
