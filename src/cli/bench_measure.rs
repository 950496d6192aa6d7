//! What a benchmark pass cost this process: wall time, CPU time (user and
//! system, from getrusage, so a sandbox in another process is not counted)
//! and peak RSS. The engine's own cost per row is the CPU figure: on a
//! machine where the source shares the cores, wall time mostly measures
//! the source.

use std::future::Future;
use std::time::{Duration, Instant};

/// The cost of one pass.
#[derive(Debug, Clone, Copy)]
pub struct Cost {
    /// Wall-clock time.
    pub wall: Duration,
    /// CPU time of this process (all threads, user and system).
    pub cpu: Duration,
    /// Peak resident set size during the pass, in MB (0 where unknown).
    pub peak_rss_mb: f64,
}

impl Cost {
    /// Rows per second of wall time.
    pub fn rate(&self, rows: u64) -> f64 {
        per_second(rows, self.wall)
    }

    /// Microseconds of CPU per row.
    pub fn cpu_us_per_row(&self, rows: u64) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / rows.max(1) as f64
    }

    /// The rate the process could reach with a core to itself: rows per
    /// CPU second.
    pub fn cpu_limited_rate(&self, rows: u64) -> f64 {
        per_second(rows, self.cpu)
    }
}

/// Runs `pass` and measures it.
pub async fn measure<T, F>(pass: F) -> (T, Cost)
where
    F: Future<Output = T>,
{
    reset_peak_rss();
    let cpu = cpu_time();
    let started = Instant::now();
    let out = pass.await;
    let cost = Cost {
        wall: started.elapsed(),
        cpu: cpu_time().saturating_sub(cpu),
        peak_rss_mb: peak_rss_mb(),
    };
    (out, cost)
}

fn per_second(rows: u64, took: Duration) -> f64 {
    rows as f64 / took.as_secs_f64().max(1e-9)
}

/// User plus system CPU time of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let of = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    of(usage.ru_utime) + of(usage.ru_stime)
}

/// Resets the kernel's peak-RSS counter for this process (Linux).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size in MB since the last reset (Linux; 0 elsewhere).
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pass_is_charged_the_cpu_it_spends_and_its_wall_time() {
        // A fixed amount of work, so a busy machine changes the wall time
        // but not the CPU time.
        let ((), busy) = measure(async {
            let mut x = 0u64;
            for _ in 0..50_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        })
        .await;
        assert!(busy.cpu >= Duration::from_millis(10), "{busy:?}");
        assert!(busy.wall >= busy.cpu / 2, "one thread worked: {busy:?}");
        // (Other tests' threads run in this process too, so an idle pass
        // cannot be asserted to cost nothing.)
        let ((), idle) = measure(tokio::time::sleep(Duration::from_millis(200))).await;
        assert!(idle.wall >= Duration::from_millis(200), "{idle:?}");
    }
}
