//! How `run` and `demo` show progress: one line per batch on stdout, and a
//! snapshot progress line that redraws itself on a terminal (or one line per
//! chunk when output goes to a file or a log collector).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use mssql_cdc::domain::{CopyShare, FactRow};
use mssql_cdc::engine::{EngineError, Observer, SnapshotProgress, StoreDown};

/// Prints the engine's progress for people.
pub struct Console {
    terminal: bool,
    /// `orders: ` before every line when several tables print at once.
    tag: String,
}

impl Console {
    /// One line per event, each tagged with `table`: several tables of one
    /// source print to the same terminal, so none redraws in place.
    pub fn for_table(table: &str) -> Self {
        Console {
            terminal: false,
            tag: format!("{table}: "),
        }
    }
}

impl Console {
    /// Redraws progress in place when stdout is a terminal.
    pub fn new() -> Self {
        Console {
            terminal: std::io::stdout().is_terminal(),
            tag: String::new(),
        }
    }
}

impl Observer for Console {
    fn snapshot_progress(&self, p: &SnapshotProgress) {
        let line = format!("{}{}", self.tag, snapshot_line(p));
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
            "{}snapshot done: {} rows at LSN {} in {}",
            self.tag,
            row.rows.unwrap_or(0),
            row.end_lsn.map(|l| l.to_string()).unwrap_or_default(),
            short_duration(Duration::from_millis(
                u64::try_from(row.duration_ms.unwrap_or(0)).unwrap_or(0)
            ))
        );
    }

    fn batch_done(&self, row: &FactRow) {
        println!("{}{}", self.tag, batch_line(row));
    }

    fn retrying(&self, error: &EngineError, attempt: u32, delay: Duration) {
        eprintln!(
            "{}retrying in {} (attempt {attempt}): {error}",
            self.tag,
            short_duration(delay)
        );
    }

    fn store_outage(&self, down: Option<&StoreDown>) {
        match down {
            Some(down) => eprintln!(
                "{}StoreUnavailable: the store has failed every attempt since {}; retrying \
                 until it answers (nothing is lost): {}",
                self.tag,
                down.since.format("%H:%M:%S UTC"),
                down.answer
            ),
            None => eprintln!("{}the store answers again", self.tag),
        }
    }
}

/// `snapshot: 1200 rows of ~5000 (24%), 800 rows/s, ETA 4.8s`. The
/// estimate comes from table statistics, which can lag the table: a copy
/// that has passed it says so instead of claiming 100 % before it is done
/// (and the engine reports no ETA for it).
pub fn snapshot_line(p: &SnapshotProgress) -> String {
    let of = match CopyShare::of(p.rows, p.estimated_rows) {
        CopyShare::Of { percent, estimate } => format!(" of ~{estimate} ({percent:.0}%)"),
        CopyShare::PastEstimate { estimate } => format!(" (past the estimate of ~{estimate})"),
        CopyShare::Unknown => String::new(),
    };
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::Utc;
    use mssql_cdc::domain::CopyShare;
    use mssql_cdc::engine::SnapshotProgress;

    use super::snapshot_line;

    fn progress(rows: u64, estimated_rows: Option<u64>) -> SnapshotProgress {
        SnapshotProgress {
            rows,
            estimated_rows,
            rows_per_second: 800.0,
            // The engine reports no ETA once a copy passes the estimate.
            eta: match CopyShare::of(rows, estimated_rows) {
                CopyShare::PastEstimate { .. } => None,
                CopyShare::Of { .. } | CopyShare::Unknown => Some(Duration::from_secs(5)),
            },
            chunks: 1,
            started_at: Utc::now(),
        }
    }

    #[test]
    fn a_snapshot_line_never_claims_the_copy_is_done() {
        let cases = [
            (
                1200,
                Some(5000),
                "1200 rows of ~5000 (24%), 800 rows/s, ETA 5.0s",
            ),
            (
                4998,
                Some(5000),
                "4998 rows of ~5000 (99%), 800 rows/s, ETA 5.0s",
            ),
            (4, Some(3), "4 rows (past the estimate of ~3), 800 rows/s"),
            (0, Some(0), "0 rows (past the estimate of ~0), 800 rows/s"),
            (7, None, "7 rows, 800 rows/s, ETA 5.0s"),
        ];
        for (rows, estimate, expected) in cases {
            assert_eq!(
                snapshot_line(&progress(rows, estimate)),
                format!("snapshot: {expected}")
            );
        }
    }
}
