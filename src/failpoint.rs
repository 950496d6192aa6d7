//! Crash points for the crash tests: with the `failpoints` feature, a point
//! named in `MSSQL_CDC_FAILPOINT` kills the process with SIGKILL, exactly
//! like `kill -9` or an OOM kill would. Without the feature every point is a
//! no-op the compiler removes.

/// Environment variable naming the point to crash at.
pub const ENV: &str = "MSSQL_CDC_FAILPOINT";

/// Crashes here if this point is armed.
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
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
pub fn hit(_name: &str) {}
