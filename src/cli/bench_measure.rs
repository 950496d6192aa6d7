//! What a benchmark pass cost this process: wall time, CPU time (user and
//! system, from getrusage, so a sandbox in another process is not counted)
//! and peak RSS. The engine's own cost per row is the CPU figure: on a
//! machine where the source shares the cores, wall time mostly measures
//! the source, and the source's own CPU (read from /proc for its pid) says
//! how much of the machine it took.

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
    /// CPU time the source process (the sandbox) spent during the pass,
    /// where it runs on this machine and /proc can tell.
    pub source_cpu: Option<Duration>,
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

    /// Microseconds of the source's CPU per row, where known.
    pub fn source_cpu_us_per_row(&self, rows: u64) -> Option<f64> {
        self.source_cpu
            .map(|cpu| cpu.as_secs_f64() * 1e6 / rows.max(1) as f64)
    }

    /// The rate `cores` could reach if they did nothing but run this
    /// process and the source: rows per second of both processes' CPU,
    /// times the cores. Where the wall-clock rate is close to it, the
    /// cores were the limit, not waiting.
    pub fn cores_limited_rate(&self, rows: u64, cores: usize) -> Option<f64> {
        self.source_cpu
            .map(|source| per_second(rows, self.cpu + source) * cores as f64)
    }
}

/// Runs `pass` and measures it, and the CPU of the process `source`
/// (the sandbox serving it) over the same time.
pub async fn measure<T, F>(source: Option<u32>, pass: F) -> (T, Cost)
where
    F: Future<Output = T>,
{
    reset_peak_rss();
    let cpu = cpu_time();
    let source_before = source.and_then(process_cpu_time);
    let started = Instant::now();
    let out = pass.await;
    let source_after = source.and_then(process_cpu_time);
    let cost = Cost {
        wall: started.elapsed(),
        cpu: cpu_time().saturating_sub(cpu),
        peak_rss_mb: peak_rss_mb(),
        source_cpu: source_before
            .zip(source_after)
            .map(|(before, after)| after.saturating_sub(before)),
    };
    (out, cost)
}

fn per_second(rows: u64, took: Duration) -> f64 {
    rows as f64 / took.as_secs_f64().max(1e-9)
}

/// User plus system CPU time of this process so far.
pub fn cpu_time() -> Duration {
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

/// User plus system CPU time of process `pid` so far, all its threads
/// (Linux: `/proc/<pid>/stat`; None elsewhere or once it has exited).
fn process_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = cpu_ticks(&stat)?;
    let per_second = u64::try_from(ticks_per_second).ok().filter(|t| *t > 0)?;
    Some(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// utime plus stime, in clock ticks, from a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may itself hold spaces
/// and parentheses, so the fields are counted from the last `)`.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Fields 3 onwards; utime and stime are fields 14 and 15.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
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
        let ((), busy) = measure(None, async {
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
        let ((), idle) = measure(None, tokio::time::sleep(Duration::from_millis(200))).await;
        assert!(idle.wall >= Duration::from_millis(200), "{idle:?}");
        assert_eq!(idle.source_cpu, None);
    }

    #[test]
    fn a_stat_line_gives_user_plus_system_ticks_whatever_the_command_name() {
        // Field 2 with spaces and a closing parenthesis of its own; utime
        // 1234 and stime 56 are fields 14 and 15.
        let line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 500 0 0 0 1234 56 0 0 20 0 3 0 100 1000 200";
        assert_eq!(cpu_ticks(line), Some(1290));
        assert_eq!(cpu_ticks("4242 (cut short) S 1 2"), None);
        assert_eq!(cpu_ticks("no name at all"), None);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_source_process_is_charged_the_cpu_it_spends_during_the_pass() {
        // This process stands in for the source: its busy loop is CPU the
        // source spent while the pass ran.
        let pid = std::process::id();
        let ((), cost) = measure(Some(pid), async {
            let mut x = 0u64;
            for _ in 0..100_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        })
        .await;
        let source = cost.source_cpu.expect("this process's /proc/<pid>/stat");
        // /proc counts in ticks of 10 ms; getrusage in microseconds.
        assert!(source + Duration::from_millis(20) >= cost.cpu, "{cost:?}");
        let both = cost.cores_limited_rate(1_000, 2).expect("source measured");
        let alone = cost.cpu_limited_rate(1_000) * 2.0;
        assert!(
            both < alone,
            "two processes' CPU allow fewer rows than one's: {cost:?}"
        );
    }
}
