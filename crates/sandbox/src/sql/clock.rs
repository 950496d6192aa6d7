//! The server clock, in one place so the sandbox can control it: CDC
//! scenarios span days of retention and must run in milliseconds.
//! Everything that stamps a time (create_date, transaction begin/commit,
//! GETDATE, capture and cleanup schedules) asks the engine's [`Clock`].

use std::sync::Mutex;
use std::time::Instant;

use chrono::{Duration, FixedOffset, NaiveDateTime, Offset, TimeZone, Utc};

/// Source of the server's notion of "now".
pub trait Clock: Send + Sync + 'static {
    /// Current time in UTC.
    fn now_utc(&self) -> NaiveDateTime;

    /// The server's time-zone offset (GETDATE = now_utc + offset).
    fn offset(&self) -> FixedOffset {
        Utc.fix()
    }

    /// The zone's offset at a UTC instant: what a time stamped then reads
    /// as locally (a commit before a daylight-saving change keeps its
    /// local time when read after it).
    fn offset_at(&self, _utc: NaiveDateTime) -> FixedOffset {
        self.offset()
    }

    /// Moves the clock forward; false when this clock cannot be moved
    /// (the machine's clock).
    fn advance(&self, _by: Duration) -> bool {
        false
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

/// The server's time zone: an IANA name (via chrono-tz) or UTC.
#[derive(Debug, Clone, Copy)]
pub enum ServerZone {
    Utc,
    Iana(chrono_tz::Tz),
}

impl ServerZone {
    /// Parses `UTC` or an IANA name such as `Europe/Oslo`; None otherwise.
    pub fn parse(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("utc") || name.is_empty() {
            return Some(Self::Utc);
        }
        name.parse::<chrono_tz::Tz>().ok().map(Self::Iana)
    }

    /// The zone's offset at a UTC instant (daylight saving included).
    pub fn offset_at(&self, utc: NaiveDateTime) -> FixedOffset {
        match self {
            Self::Utc => Utc.fix(),
            Self::Iana(tz) => tz.offset_from_utc_datetime(&utc).fix(),
        }
    }
}

/// A controllable clock: real time scaled by `speed` (0 = frozen) plus
/// whatever [`Clock::advance`] added. Starts at the machine's time.
#[derive(Debug)]
pub struct SandboxClock {
    zone: ServerZone,
    speed: f64,
    state: Mutex<(Instant, NaiveDateTime)>,
}

impl SandboxClock {
    /// A clock in `zone` running at `speed` times real time.
    pub fn new(zone: ServerZone, speed: f64) -> Self {
        Self::starting_at(zone, speed, Utc::now().naive_utc())
    }

    /// As [`SandboxClock::new`], starting at a given UTC time (tests).
    pub fn starting_at(zone: ServerZone, speed: f64, start: NaiveDateTime) -> Self {
        Self {
            zone,
            speed: if speed.is_finite() && speed >= 0.0 {
                speed
            } else {
                1.0
            },
            state: Mutex::new((Instant::now(), start)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Instant, NaiveDateTime)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn scaled(&self, since: Instant) -> Duration {
        let real = since.elapsed().as_secs_f64() * self.speed;
        Duration::microseconds((real * 1e6) as i64)
    }
}

impl Clock for SandboxClock {
    fn now_utc(&self) -> NaiveDateTime {
        let st = self.lock();
        st.1 + self.scaled(st.0)
    }

    fn offset(&self) -> FixedOffset {
        self.zone.offset_at(self.now_utc())
    }

    fn offset_at(&self, utc: NaiveDateTime) -> FixedOffset {
        self.zone.offset_at(utc)
    }

    fn advance(&self, by: Duration) -> bool {
        let mut st = self.lock();
        let now = st.1 + self.scaled(st.0);
        *st = (Instant::now(), now + by.max(Duration::zero()));
        true
    }
}
