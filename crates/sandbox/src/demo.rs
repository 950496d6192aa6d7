//! `mssql-cdc sandbox --demo`: the `shop` database with CDC on
//! `dbo.customers` and `dbo.orders`, and a steady stream of inserts,
//! updates and deletes so that a CDC reader always has something to read.
//!
//! The generator runs T-SQL through an engine session (the same path a
//! client's batch takes, so CDC sees ordinary transactions) on a thread of
//! its own. Its choices come from a seeded xorshift generator: the same
//! seed gives the same sequence of statements.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sql::{CancelToken, Engine, Output, Request, Session, SqlError};

/// The demo's schema, also usable as a script on a real server.
pub const SHOP_CDC_SCRIPT: &str = include_str!("../../../examples/sandbox/shop-cdc.sql");

/// Customers the script inserts (ids 1..=SEEDED_CUSTOMERS).
const SEEDED_CUSTOMERS: i64 = 3;

/// How the generator runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemoOptions {
    /// Changes (statements) per second of real time.
    pub rate: f64,
    /// Seed of the statement choices.
    pub seed: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self { rate: 3.0, seed: 1 }
    }
}

/// Why the demo could not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("--demo-rate must be a positive number of changes per second, got {0}")]
    Rate(f64),
    #[error("creating the demo's shop database failed: {0}")]
    Setup(#[source] SqlError),
    #[error("the demo generator thread could not start: {0}")]
    Spawn(#[source] std::io::Error),
}

/// A running generator. Dropping it stops the generator without waiting.
pub struct DemoHandle {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    changes: Arc<AtomicU64>,
}

impl DemoHandle {
    /// Statements the generator has run successfully so far.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// Stops the generator and waits for its current statement to end.
    pub fn stop(mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for DemoHandle {
    fn drop(&mut self) {
        // Dropping the sender wakes the generator, which then ends.
        self.stop.take();
    }
}

/// Creates the demo database (fails if `shop` already exists) and starts
/// the generator.
pub fn start(engine: &Engine, options: DemoOptions) -> Result<DemoHandle, DemoError> {
    if !(options.rate.is_finite() && options.rate > 0.0) {
        return Err(DemoError::Rate(options.rate));
    }
    engine
        .run_script(SHOP_CDC_SCRIPT)
        .map_err(DemoError::Setup)?;
    let mut session = engine.sa_session();
    let cancel = CancelToken::default();
    let use_shop = Request::Batch {
        sql: "USE shop".into(),
    };
    if let Some(e) = first_error(session.execute(use_shop, &cancel)) {
        return Err(DemoError::Setup(e));
    }
    // The first change is made and captured before any client connects,
    // so a stream started at once finds the database's first LSN instead
    // of retrying. The log is scanned by hand, with the capture job paused
    // for it, as SQL Server allows no explicit scan beside the job's own.
    let mut shop = Shop::new(options.seed);
    let capture_now = "EXEC sys.sp_cdc_stop_job @job_type = N'capture'; \
                       EXEC sys.sp_cdc_scan; \
                       EXEC sys.sp_cdc_start_job @job_type = N'capture'";
    for sql in [shop.next_statement(), capture_now.to_string()] {
        if let Some(e) = first_error(session.execute(Request::Batch { sql }, &cancel)) {
            return Err(DemoError::Setup(e));
        }
    }
    let (stop, stopped) = mpsc::channel::<()>();
    let changes = Arc::new(AtomicU64::new(1));
    let counter = changes.clone();
    let interval = Duration::from_secs_f64(1.0 / options.rate);
    let thread = std::thread::Builder::new()
        .name("sandbox-demo".into())
        .spawn(move || {
            let mut next = Instant::now();
            loop {
                let sql = shop.next_statement();
                match first_error(session.execute(Request::Batch { sql: sql.clone() }, &cancel)) {
                    None => {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(e) => tracing::warn!(error = %e, %sql, "a demo statement failed"),
                }
                next += interval;
                // Catch up without bursts after a stall.
                let now = Instant::now();
                if next < now {
                    next = now;
                }
                match stopped.recv_timeout(next - now) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            drop::<Session>(session);
        })
        .map_err(DemoError::Spawn)?;
    Ok(DemoHandle {
        stop: Some(stop),
        thread: Some(thread),
        changes,
    })
}

/// The first error (class > 10) of a request's outputs.
fn first_error(outputs: Vec<Output>) -> Option<SqlError> {
    outputs.into_iter().find_map(|o| match o {
        Output::Message(e) if e.class > 10 => Some(e),
        _ => None,
    })
}

/// xorshift64*: tiny, seedable, good enough to pick statements.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // Zero is xorshift's one fixed point.
        Self(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const STATUSES: [&str; 3] = ["paid", "shipped", "delivered"];
const NAMES: [&str; 6] = [
    "Katherine Johnson",
    "Alan Turing",
    "Margaret Hamilton",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
];

/// What the generator knows of the shop: which ids exist, so updates and
/// deletes always hit a row.
#[derive(Debug)]
struct Shop {
    rng: XorShift,
    customers: i64,
    next_order: i64,
    open_orders: Vec<i64>,
}

impl Shop {
    fn new(seed: u64) -> Self {
        Self {
            rng: XorShift::new(seed),
            customers: SEEDED_CUSTOMERS,
            next_order: 1,
            open_orders: Vec::new(),
        }
    }

    /// One statement: mostly new orders, then status updates, some
    /// deletes, now and then a new customer or a changed e-mail.
    fn next_statement(&mut self) -> String {
        let roll = self.rng.below(100);
        if roll < 45 || self.open_orders.is_empty() {
            let id = self.next_order;
            self.next_order += 1;
            self.open_orders.push(id);
            let customer = 1 + self.rng.below(self.customers as u64) as i64;
            let cents = 100 + self.rng.below(50_000);
            format!(
                "INSERT INTO dbo.orders (id, customer_id, total) VALUES ({id}, {customer}, {}.{:02})",
                cents / 100,
                cents % 100
            )
        } else if roll < 80 {
            let id = self.open_orders[self.rng.below(self.open_orders.len() as u64) as usize];
            let status = STATUSES[self.rng.below(STATUSES.len() as u64) as usize];
            format!(
                "UPDATE dbo.orders SET status = '{status}', updated_at = SYSUTCDATETIME() WHERE id = {id}"
            )
        } else if roll < 92 {
            let at = self.rng.below(self.open_orders.len() as u64) as usize;
            let id = self.open_orders.swap_remove(at);
            format!("DELETE FROM dbo.orders WHERE id = {id}")
        } else if roll < 96 {
            self.customers += 1;
            let id = self.customers;
            let name = NAMES[self.rng.below(NAMES.len() as u64) as usize];
            format!(
                "INSERT INTO dbo.customers (id, name, email) VALUES ({id}, N'{name}', 'c{id}@example.com')"
            )
        } else {
            let id = 1 + self.rng.below(self.customers as u64) as i64;
            let n = self.rng.below(1000);
            format!(
                "UPDATE dbo.customers SET email = 'c{id}.{n}@example.com', updated_at = SYSUTCDATETIME() WHERE id = {id}"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::EngineConfig;

    #[test]
    fn the_same_seed_gives_the_same_statements() {
        let a: Vec<String> = {
            let mut s = Shop::new(7);
            (0..50).map(|_| s.next_statement()).collect()
        };
        let b: Vec<String> = {
            let mut s = Shop::new(7);
            (0..50).map(|_| s.next_statement()).collect()
        };
        let c: Vec<String> = {
            let mut s = Shop::new(8);
            (0..50).map(|_| s.next_statement()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        for kind in [
            "INSERT INTO dbo.orders",
            "UPDATE dbo.orders",
            "DELETE FROM dbo.orders",
        ] {
            assert!(a.iter().any(|s| s.starts_with(kind)), "{kind} in {a:#?}");
        }
    }

    #[test]
    fn statements_run_on_the_engine_and_the_generator_stops() {
        let engine = Engine::new(EngineConfig::default());
        let demo = start(
            &engine,
            DemoOptions {
                rate: 500.0,
                seed: 3,
            },
        )
        .expect("the demo starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while demo.changes() < 20 {
            assert!(Instant::now() < deadline, "the generator makes progress");
            std::thread::sleep(Duration::from_millis(10));
        }
        demo.stop();
        let tracked = engine.with_state(|st| {
            st.database("shop")
                .map(|db| db.is_cdc_enabled)
                .unwrap_or(false)
        });
        assert!(tracked, "shop has CDC enabled");
    }

    #[test]
    fn a_rate_of_zero_is_refused() {
        let engine = Engine::new(EngineConfig::default());
        let err = start(&engine, DemoOptions { rate: 0.0, seed: 1 })
            .err()
            .expect("refused");
        assert!(matches!(err, DemoError::Rate(_)));
    }
}
