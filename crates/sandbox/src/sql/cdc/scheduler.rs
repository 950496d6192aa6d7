//! When capture and cleanup run: SQL Server Agent's role. The capture job
//! scans every `pollinginterval` seconds while continuous; the cleanup job
//! runs daily at 2:00 A.M. server time
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/administer-and-monitor-change-data-capture-sql-server>).
//! Both follow the server clock, so a controllable clock
//! (`sandbox.sp_advance_clock`) runs days of schedule in milliseconds; a
//! background thread per engine runs whatever falls due in real time.

use std::sync::{Arc, Weak};
use std::time::Duration as StdDuration;

use chrono::{Duration, NaiveDateTime, NaiveTime};

use super::capture::{self, ScanLimits, local};
use super::cleanup;
use crate::sql::engine::Shared;

/// The next 02:00 server-local time strictly after `now_utc`, in UTC.
pub fn next_cleanup(now_utc: NaiveDateTime, offset_secs: i32) -> NaiveDateTime {
    let now = local(now_utc, offset_secs);
    let two = NaiveTime::from_hms_opt(2, 0, 0).unwrap_or_default();
    let mut at = now.date().and_time(two);
    if at <= now {
        at += Duration::days(1);
    }
    at - Duration::seconds(i64::from(offset_secs))
}

fn offset_secs(shared: &Shared) -> i32 {
    shared.clock.offset().local_minus_utc()
}

/// Runs every capture and cleanup job that is due at the clock's now.
pub fn run_due(shared: &Shared) {
    let now = shared.clock.now_utc();
    let offset = offset_secs(shared);
    let idle = shared.config.cdc_idle_interval_secs.max(1);
    let mut st = shared.write();
    for db in st.databases.values_mut() {
        if !db.is_cdc_enabled {
            continue;
        }
        if let Some(job) = db.cdc.capture_job.clone()
            && job.running
            && job.next_run <= now
        {
            let limits = ScanLimits {
                maxtrans: job.maxtrans,
                maxscans: job.maxscans,
            };
            capture::scan(db, now, shared.clock.as_ref(), limits, idle);
            if let Some(j) = db.cdc.capture_job.as_mut() {
                if j.continuous {
                    let step = Duration::seconds(j.pollinginterval.max(1));
                    j.next_run = (j.next_run + step).max(now);
                    if j.next_run <= now {
                        j.next_run = now + step;
                    }
                } else {
                    j.running = false;
                }
            }
        }
        if let Some(job) = db.cdc.cleanup_job.clone()
            && job.running
            && job.next_run <= now
        {
            cleanup::run(db, local(now, offset), job.retention);
            if let Some(j) = db.cdc.cleanup_job.as_mut() {
                j.next_run = next_cleanup(now, offset);
            }
        }
    }
}

/// The earliest time any job is due, server UTC.
fn next_due(shared: &Shared) -> Option<NaiveDateTime> {
    let st = shared.read();
    st.databases
        .values()
        .filter(|d| d.is_cdc_enabled)
        .flat_map(|d| {
            let c = d
                .cdc
                .capture_job
                .as_ref()
                .filter(|j| j.running)
                .map(|j| j.next_run);
            let k = d
                .cdc
                .cleanup_job
                .as_ref()
                .filter(|j| j.running)
                .map(|j| j.next_run);
            [c, k]
        })
        .flatten()
        .min()
}

/// Moves the server clock forward by `seconds`, running every job that
/// falls due on the way, in time order, before returning. False when the
/// engine's clock cannot be moved.
pub fn advance(shared: &Shared, seconds: f64) -> bool {
    let total = Duration::microseconds((seconds.max(0.0) * 1e6) as i64);
    let target = shared.clock.now_utc() + total;
    loop {
        run_due(shared);
        let now = shared.clock.now_utc();
        match next_due(shared) {
            Some(due) if due <= target => {
                if due > now && !shared.clock.advance(due - now) {
                    return false;
                }
            }
            _ => break,
        }
    }
    let now = shared.clock.now_utc();
    if target > now && !shared.clock.advance(target - now) {
        return false;
    }
    run_due(shared);
    true
}

/// Starts the engine's background scheduler thread; it stops when the
/// engine is dropped.
pub fn spawn_background(shared: &Arc<Shared>) {
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let tick = StdDuration::from_millis(shared.config.cdc_tick_ms.max(10));
    let spawned = std::thread::Builder::new()
        .name("sandbox-cdc".into())
        .spawn(move || {
            loop {
                std::thread::sleep(tick);
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                run_due(&shared);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("sandbox CDC scheduler not started: {e}");
    }
}
