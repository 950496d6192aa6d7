//! The process groups of the containers a kubelet started, so that none
//! outlives its server. Stopping the server (`TestApiServer::shutdown`, or
//! dropping it) stops every group as a deleted pod's is stopped: SIGTERM,
//! then SIGKILL after the longest grace period, and it returns once no
//! live process is left in them. For a test process that ends without
//! running its destructors (killed, `process::exit`), a watchdog process
//! holds the read end of a pipe the kubelet writes each group to; when
//! the pipe closes with the test process, the watchdog does the same.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The watchdog: reads `+ PGID GRACE` and `- PGID` lines; at end of input
/// it sends SIGTERM to the groups left, waits for them up to the longest
/// grace period and sends SIGKILL to what remains.
const WATCHDOG: &str = r#"
groups=' '; grace=0
while read -r op pg secs; do
  case "$op" in
    +) groups="$groups$pg "; [ "$secs" -gt "$grace" ] && grace=$secs ;;
    -) case "$groups" in *" $pg "*) groups="${groups%% $pg *} ${groups#* $pg }" ;; esac ;;
  esac
done
for g in $groups; do kill -TERM "-$g" 2>/dev/null; done
i=0
while [ "$i" -lt "$((grace * 10))" ]; do
  alive=0
  for g in $groups; do kill -0 "-$g" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && exit 0
  sleep 0.1; i=$((i + 1))
done
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done
"#;

struct Inner {
    /// Live groups and their grace periods.
    live: BTreeMap<i32, Duration>,
    watchdog: Option<(Child, ChildStdin)>,
    stopped: bool,
}

/// The container process groups of one kubelet.
pub struct Groups {
    inner: Mutex<Inner>,
}

impl Default for Groups {
    fn default() -> Self {
        Self::new()
    }
}

impl Groups {
    /// No groups yet, and a watchdog for them (when `/bin/sh` can run it).
    pub fn new() -> Self {
        let watchdog = Command::new("/bin/sh")
            .args(["-c", WATCHDOG])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: a signal to the tests' group must not stop it.
            .process_group(0)
            .spawn()
            .map_err(|e| tracing::warn!(error = %e, "no watchdog for the kubelet's processes"))
            .ok()
            .and_then(|mut c| c.stdin.take().map(|s| (c, s)));
        Self {
            inner: Mutex::new(Inner {
                live: BTreeMap::new(),
                watchdog,
                stopped: false,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a container's group (its leader's pid); false when the
    /// kubelet is stopping, and the caller must kill the group itself.
    pub fn add(&self, pgid: i32, grace: Duration) -> bool {
        let mut g = self.lock();
        if g.stopped {
            return false;
        }
        g.live.insert(pgid, grace);
        if let Some((_, pipe)) = g.watchdog.as_mut() {
            let _ = writeln!(pipe, "+ {pgid} {}", grace.as_secs().max(1));
        }
        true
    }

    /// Forgets a group whose processes are gone.
    pub fn remove(&self, pgid: i32) {
        let mut g = self.lock();
        g.live.remove(&pgid);
        if let Some((_, pipe)) = g.watchdog.as_mut() {
            let _ = writeln!(pipe, "- {pgid}");
        }
    }

    /// Stops every group (SIGTERM, SIGKILL after the longest grace
    /// period) and returns once none has a live process; the watchdog is
    /// let go. Blocking; later `add`s are refused.
    pub fn stop_all(&self) {
        let (live, watchdog) = {
            let mut g = self.lock();
            g.stopped = true;
            (std::mem::take(&mut g.live), g.watchdog.take())
        };
        if let Some((mut child, pipe)) = watchdog {
            drop(pipe);
            let _ = child.kill();
            let _ = child.wait();
        }
        let grace = live.values().max().copied().unwrap_or_default();
        let groups: Vec<i32> = live.into_keys().collect();
        for &pg in &groups {
            signal(pg, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while groups.iter().any(|&pg| alive(pg)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for &pg in &groups {
            signal(pg, libc::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while groups.iter().any(|&pg| alive(pg)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn signal(pgid: i32, sig: i32) {
    // SAFETY: kill(2) of a process group the kubelet created.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Whether process group `pgid` has a process that is not a zombie.
pub fn alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parens.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        matches!((f.first(), f.get(2)), (Some(state), Some(pg))
            if !matches!(*state, "Z" | "X") && pg.parse() == Ok(pgid))
    })
}
