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

#[cfg(test)]
pub use armed::{arm, hits};

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
