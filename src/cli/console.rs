//! How `run` and `demo` show progress: one line per batch on stdout, and a
//! snapshot progress line that redraws itself on a terminal (or one line per
//! chunk when output goes to a file or a log collector).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use mssql_cdc::domain::FactRow;
use mssql_cdc::engine::{EngineError, Observer, SnapshotProgress};

/// Prints the engine's progress for people.
pub struct Console {
    terminal: bool,
}

impl Console {
    /// Redraws progress in place when stdout is a terminal.
    pub fn new() -> Self {
        Console {
            terminal: std::io::stdout().is_terminal(),
        }
    }
}

impl Observer for Console {
    fn snapshot_progress(&self, p: &SnapshotProgress) {
        let line = snapshot_line(p);
        let mut out = std::io::stdout().lock();
        if self.terminal {
            let _ = write!(out, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }

    fn snapshot_done(&self, row: &FactRow) {
        let mut out = std::io::stdout().lock();
        if self.terminal {
            let _ = write!(out, "\r\x1b[2K");
        }
        let _ = writeln!(
            out,
            "snapshot done: {} rows at LSN {} in {}",
            row.rows.unwrap_or(0),
            row.end_lsn.map(|l| l.to_string()).unwrap_or_default(),
            short_duration(Duration::from_millis(
                u64::try_from(row.duration_ms.unwrap_or(0)).unwrap_or(0)
            ))
        );
    }

    fn batch_done(&self, row: &FactRow) {
        println!("{}", batch_line(row));
    }

    fn retrying(&self, error: &EngineError, attempt: u32, delay: Duration) {
        eprintln!(
            "retrying in {} (attempt {attempt}): {error}",
            short_duration(delay)
        );
    }
}

/// `snapshot: 1200 rows of ~5000 (24%), 800 rows/s, ETA 4.8s`
pub fn snapshot_line(p: &SnapshotProgress) -> String {
    let of = p
        .estimated_rows
        .map(|total| {
            let percent = if total == 0 {
                100.0
            } else {
                (p.rows as f64 / total as f64 * 100.0).min(100.0)
            };
            format!(" of ~{total} ({percent:.0}%)")
        })
        .unwrap_or_default();
    let eta = p
        .eta
        .map(|eta| format!(", ETA {}", short_duration(eta)))
        .unwrap_or_default();
    format!(
        "snapshot: {} rows{of}, {:.0} rows/s{eta}",
        p.rows, p.rows_per_second
    )
}

/// `batch 7: 12 rows, LSN 0x…→0x…, lag 1.2 s, headroom 71.9 h`
pub fn batch_line(row: &FactRow) -> String {
    let lsn =
        |l: Option<mssql_cdc::domain::Lsn>| l.map(|l| l.to_string()).unwrap_or_else(|| "-".into());
    let lag = row
        .ingestion_lag_seconds
        .map_or_else(|| "-".into(), |s| format!("{s:.1} s"));
    let headroom = row
        .retention_headroom_hours
        .map_or_else(|| "-".into(), |h| format!("{h:.1} h"));
    format!(
        "batch {}: {} rows, LSN {}..{}, lag {lag}, headroom {headroom}, {} ms",
        row.batch_id.map(|b| b.to_string()).unwrap_or_default(),
        row.rows.unwrap_or(0),
        lsn(row.min_lsn),
        lsn(row.end_lsn),
        row.duration_ms.unwrap_or(0)
    )
}

fn short_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, (secs / 60) % 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
