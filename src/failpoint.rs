//! Crash points for the crash tests: with the `failpoints` feature, a point
//! named in `MSSQL_CDC_FAILPOINT` kills the process with SIGKILL, exactly
//! like `kill -9` or an OOM kill would. Without the feature every point is a
//! no-op the compiler removes. The library's own unit tests arm a point on
//! their thread instead (`arm`): it then panics there, once, and the test
//! drops everything the "process" held, as a crash would, and runs again.

/// Environment variable naming the point to crash at.
pub const ENV: &str = "MSSQL_CDC_FAILPOINT";

/// Crashes here if this point is armed.
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    #[cfg(test)]
    armed::hit(name);
    if std::env::var(ENV).is_ok_and(|armed| armed == name) {
        eprintln!("failpoint {name}: killing the process");
        // SAFETY: kill(2) on our own pid with a valid signal number.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// Crashes here if this point is armed (compiled out: no `failpoints`).
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {
    #[cfg(test)]
    armed::hit(_name);
}

/// Environment variable naming a point and a table at which that point
/// panics, every time it is passed, as `POINT@TABLE` (`TABLE` is matched
/// within the table's location): one table's pipeline panics while the
/// other tables of its source go on.
pub const PANIC_ENV: &str = "MSSQL_CDC_PANIC_AT";

/// Panics here if this point is armed for `table` in [`PANIC_ENV`] (the
/// panic's location is the caller's, as a real panic there would be).
#[cfg(feature = "failpoints")]
#[track_caller]
pub fn panic_at(name: &str, table: &str) {
    if armed_in(PANIC_ENV, name, table) {
        panic!("failpoint {name}: panicking in {table}");
    }
}

/// Whether variable `env` arms point `name` for `table` (`POINT@TABLE`,
/// `TABLE` matched within the table's name or location).
#[cfg(feature = "failpoints")]
fn armed_in(env: &str, name: &str, table: &str) -> bool {
    let armed = std::env::var(env).ok();
    armed
        .as_deref()
        .and_then(|a| a.split_once('@'))
        .is_some_and(|(point, at)| point == name && table.contains(at))
}

/// Environment variable naming a point and a table whose rows fail there
/// as rows that cannot be encoded would, every time, as `POINT@TABLE`:
/// one table's write fails while the other tables' writes go on.
pub const POISON_ENV: &str = "MSSQL_CDC_POISON_AT";

/// Whether `table`'s rows are poisoned at this point ([`POISON_ENV`], or
/// a unit test's [`poison`]).
#[cfg(any(test, feature = "failpoints"))]
pub fn poisoned(name: &str, table: &str) -> bool {
    #[cfg(test)]
    if armed::poisoned(name, table) {
        return true;
    }
    #[cfg(feature = "failpoints")]
    if armed_in(POISON_ENV, name, table) {
        return true;
    }
    false
}

/// Whether `table`'s rows are poisoned (compiled out: never).
#[cfg(not(any(test, feature = "failpoints")))]
#[inline(always)]
pub fn poisoned(_name: &str, _table: &str) -> bool {
    false
}

/// Panics here if this point is armed (compiled out: no `failpoints`).
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn panic_at(_name: &str, _table: &str) {}

#[cfg(test)]
pub use armed::{arm, hits, poison};

/// Points armed by unit tests, per thread (a test's current-thread runtime
/// runs its tasks on its own thread, so tests in parallel do not meet).
#[cfg(test)]
mod armed {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    thread_local! {
        static ARMED: RefCell<Option<String>> = const { RefCell::new(None) };
        static HITS: RefCell<BTreeMap<String, u32>> = const { RefCell::new(BTreeMap::new()) };
    }

    thread_local! {
        static POISONED: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
    }

    /// Poisons the rows of one table at one point on this thread, every
    /// time (`POINT@TABLE`), or nothing.
    pub fn poison(at: Option<&str>) {
        let at = at.and_then(|a| a.split_once('@'));
        POISONED.with(|p| *p.borrow_mut() = at.map(|(n, t)| (n.to_string(), t.to_string())));
    }

    pub(super) fn poisoned(name: &str, table: &str) -> bool {
        POISONED.with(|p| {
            p.borrow()
                .as_ref()
                .is_some_and(|(point, at)| point == name && table.contains(at.as_str()))
        })
    }

    /// Arms `name` (or nothing) on this thread: its next hit panics once.
    pub fn arm(name: Option<&str>) {
        ARMED.with(|armed| *armed.borrow_mut() = name.map(str::to_string));
    }

    /// How often each point was passed on this thread since the last call.
    pub fn hits() -> BTreeMap<String, u32> {
        HITS.with(|hits| std::mem::take(&mut *hits.borrow_mut()))
    }

    pub(super) fn hit(name: &str) {
        HITS.with(|hits| *hits.borrow_mut().entry(name.to_string()).or_default() += 1);
        let fire = ARMED.with(|armed| {
            let mut armed = armed.borrow_mut();
            let fire = armed.as_deref() == Some(name);
            if fire {
                *armed = None;
            }
            fire
        });
        if fire {
            panic!("failpoint {name}: crashing here (unit test)");
        }
    }
}
