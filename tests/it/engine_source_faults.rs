//! What SQL Server's faults do to a stream: each transient error of issue
//! 15 raised once on the change read and once on another query (retried,
//! every change in bronze once), errors that retrying cannot fix (the run
//! stops, nothing of the batch written), the engine's connection killed in
//! the middle of a read and between the bronze commit and the commit
//! marker, and a login redirected elsewhere. Errors and redirects come
//! from the sandbox's `sandbox.sp_inject_error` / `sp_route_logins`, so
//! those tests skip on a real SQL Server; `KILL` runs on both.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mssql_cdc::domain::{BatchId, FactRow};
use mssql_cdc::engine::{Backoff, EngineError, Observer, RunOptions};

use crate::support::cdc::{capture_table, max_lsn, orders_changes, wait_for_capture};
use crate::support::server::{Client, TRANSIENT_ERRORS, TestServer, run, scalar};
use crate::support::stream::StreamFixture;

/// A captured `dbo.orders` with three rows, streamed one commit per batch
/// and bootstrapped; `client` owns the database (injections it makes spare
/// its own requests).
struct Source {
    client: Client,
    database: String,
    stream: StreamFixture,
}

impl Source {
    async fn new(server: &TestServer) -> Self {
        let (mut client, database) = server.scratch_database().await;
        run(
            &mut client,
            "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(1000) NULL, qty int NULL)",
        )
        .await
        .expect("create table");
        run(
            &mut client,
            "INSERT INTO dbo.orders VALUES (1, N'a', 1), (2, N'b', 2), (3, N'c', 3)",
        )
        .await
        .expect("seed");
        capture_table(&mut client, "orders").await;
        let stream = StreamFixture::new(server, &database, "  maxCommitsPerBatch: 1\n");
        stream.run_once().await.expect("bootstrap");
        Source {
            client,
            database,
            stream,
        }
    }

    /// `count` single-row inserts, each its own transaction (so its own
    /// batch), captured.
    async fn insert(&mut self, count: i32) {
        let before = max_lsn(&mut self.client).await;
        let first: i32 = scalar(&mut self.client, "SELECT MAX(id) + 1 FROM dbo.orders")
            .await
            .expect("an id");
        for id in first..first + count {
            run(
                &mut self.client,
                &format!("INSERT INTO dbo.orders VALUES ({id}, N'new', {id})"),
            )
            .await
            .expect("insert");
        }
        wait_for_capture(&mut self.client, "dbo_orders", before.as_deref(), count).await;
    }

    /// Runs the stream until caught up, retrying within milliseconds, with
    /// `observer` watching (for two minutes at most).
    async fn run(&self, observer: Arc<Faults>) -> Result<(), EngineError> {
        let mut options: RunOptions = self.stream.options();
        options.observer = observer;
        options.backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(50));
        let running = mssql_cdc::engine::run(self.stream.config(), options);
        tokio::time::timeout(Duration::from_secs(120), running)
            .await
            .expect("the run ends within two minutes")
            .map(|_| ())
    }

    /// Bronze holds every change of the change table once, and the facts
    /// one row per batch.
    async fn assert_exactly_once(&mut self, what: &str) {
        assert_eq!(
            self.stream.bronze_changes().await,
            orders_changes(&mut self.client).await,
            "{what}: every change once"
        );
        let facts = self
            .stream
            .facts_query("SELECT COUNT(*), COUNT(DISTINCT batch_id) FROM t WHERE event IS NULL")
            .await;
        assert_eq!(facts[0][0], facts[0][1], "{what}: one facts row per batch");
    }
}

/// The engine's moments a fault can be raised at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// A batch is about to read its range.
    BatchStarted,
    /// A batch's read has handed rows over and goes on.
    BatchReading,
    /// A batch is in bronze and facts, its commit marker not yet written.
    EventsRecorded,
}

/// What the test does at that moment, from a connection of its own.
enum Fault {
    /// Runs T-SQL (e.g. `sandbox.sp_inject_error`).
    Sql(String),
    /// Finds the engine's session in the stream's database and KILLs it.
    KillEngine,
}

/// An observer that raises one queued fault per batch at its moment
/// (blocking the engine in place meanwhile) and records each retry.
struct Faults {
    moment: Moment,
    control: Mutex<Client>,
    database: String,
    queue: Mutex<VecDeque<Fault>>,
    /// Batches a fault was raised in (None at `EventsRecorded`, which
    /// does not name its batch).
    raised_in: Mutex<Vec<Option<BatchId>>>,
    /// Each retry's SQL Server error number (if any) and text.
    retries: Mutex<Vec<(Option<u32>, String)>>,
}

impl Faults {
    async fn new(
        server: &TestServer,
        source: &Source,
        moment: Moment,
        queue: Vec<Fault>,
    ) -> Arc<Self> {
        Arc::new(Faults {
            moment,
            control: Mutex::new(server.connect_to(&source.database).await),
            database: source.database.clone(),
            queue: Mutex::new(queue.into()),
            raised_in: Mutex::new(Vec::new()),
            retries: Mutex::new(Vec::new()),
        })
    }

    fn at(&self, moment: Moment, batch: Option<BatchId>) {
        if moment != self.moment {
            return;
        }
        let fault = {
            let mut raised_in = self.raised_in.lock().expect("lock");
            if batch.is_some() && raised_in.contains(&batch) {
                return; // the retry of a batch that had its fault
            }
            let Some(fault) = self.queue.lock().expect("lock").pop_front() else {
                return;
            };
            raised_in.push(batch);
            fault
        };
        let mut control = self.control.lock().expect("lock");
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(raise(&mut control, &self.database, fault));
        });
    }

    fn retried_codes(&self) -> Vec<u32> {
        let retries = self.retries.lock().expect("lock");
        retries.iter().filter_map(|(code, _)| *code).collect()
    }

    fn raised(&self) -> usize {
        self.raised_in.lock().expect("lock").len()
    }
}

impl Observer for Faults {
    fn batch_started(&self, batch_id: BatchId) {
        self.at(Moment::BatchStarted, Some(batch_id));
    }
    fn batch_reading(&self, batch_id: BatchId, _rows: u64) {
        self.at(Moment::BatchReading, Some(batch_id));
    }
    fn events_recorded(&self, _rows: &[FactRow]) {
        self.at(Moment::EventsRecorded, None);
    }
    fn retrying(&self, error: &EngineError, _attempt: u32, _delay: Duration) {
        let code = match error {
            EngineError::Source(e) => e.server_code(),
            _ => None,
        };
        self.retries
            .lock()
            .expect("lock")
            .push((code, error.to_string()));
    }
}

async fn raise(control: &mut Client, database: &str, fault: Fault) {
    match fault {
        Fault::Sql(sql) => {
            run(control, &sql).await.expect("the fault is raised");
        }
        Fault::KillEngine => {
            let engine: Option<i16> = scalar(
                control,
                &format!(
                    "SELECT session_id FROM sys.dm_exec_sessions \
                     WHERE program_name = N'mssql-cdc' AND database_id = DB_ID(N'{database}')"
                ),
            )
            .await;
            let engine = engine.expect("the engine's session");
            run(control, &format!("KILL {engine}"))
                .await
                .expect("KILL runs");
        }
    }
}

/// The injection of `number` at `severity` on the next request of
/// another session that contains `pattern`.
fn injection(number: u32, severity: u8, pattern: &str) -> String {
    format!(
        "EXEC sandbox.sp_inject_error @number = {number}, @severity = {severity}, @pattern = N'{pattern}'"
    )
}

/// The sandbox-only procedures have no counterpart on SQL Server.
fn sandbox_only(server: &TestServer, test: &str) -> bool {
    if !server.is_sandbox() {
        println!(
            "skipped on a real SQL Server: {test} needs sandbox.sp_inject_error / sp_route_logins"
        );
    }
    server.is_sandbox()
}

/// Each of `errors` (number, severity) once, in its own batch, on the
/// first request that contains `pattern`: the run retries each and ends
/// with every change once.
async fn each_error_is_retried(errors: &[(u32, u8)], pattern: &str) {
    let server = TestServer::start().await;
    if !sandbox_only(&server, pattern) {
        return;
    }
    let mut source = Source::new(&server).await;
    source.insert(errors.len() as i32 + 1).await;
    let queue = errors
        .iter()
        .map(|(number, severity)| Fault::Sql(injection(*number, *severity, pattern)))
        .collect();
    let faults = Faults::new(&server, &source, Moment::BatchStarted, queue).await;
    source
        .run(faults.clone())
        .await
        .expect("the run goes through every transient error");
    let expected: Vec<u32> = errors.iter().map(|(n, _)| *n).collect();
    assert_eq!(faults.raised(), expected.len(), "one error per batch");
    assert_eq!(faults.retried_codes(), expected, "each error was retried");
    source.assert_exactly_once(pattern).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transient_errors_on_the_change_read_are_retried_and_every_change_lands_once() {
    each_error_is_retried(&TRANSIENT_ERRORS, "fn_cdc_get_all_changes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transient_errors_on_the_max_lsn_query_are_retried_and_every_change_lands_once() {
    each_error_is_retried(&TRANSIENT_ERRORS, "sys.fn_cdc_get_max_lsn").await;
}

/// What SQL Server may send a session KILLed while it runs a request,
/// before it closes the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_failing_with_596_of_a_killed_session_is_retried() {
    each_error_is_retried(&[(596, 21)], "fn_cdc_get_all_changes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn errors_that_retrying_cannot_fix_stop_the_run_before_anything_of_the_batch_is_written() {
    let server = TestServer::start().await;
    if !sandbox_only(&server, "errors_that_retrying_cannot_fix") {
        return;
    }
    let mut source = Source::new(&server).await;
    source.insert(2).await;
    let facts_before = source.stream.facts_query("SELECT COUNT(*) FROM t").await;
    // Permission denied on the read, no such object on the max LSN.
    for (number, pattern) in [
        (229, "fn_cdc_get_all_changes"),
        (208, "sys.fn_cdc_get_max_lsn"),
    ] {
        let faults = Faults::new(&server, &source, Moment::BatchStarted, Vec::new()).await;
        // From the test's own session, which the injection spares.
        run(&mut source.client, &injection(number, 16, pattern))
            .await
            .expect("injected");
        let stopped = source.run(faults.clone()).await;
        match stopped {
            Err(EngineError::Source(e)) => assert_eq!(e.server_code(), Some(number), "{e}"),
            other => panic!("error {number}: expected the run to stop with it, got {other:?}"),
        }
        assert!(
            faults.retried_codes().is_empty(),
            "error {number} was retried"
        );
        assert!(
            source.stream.bronze_changes().await.is_empty(),
            "error {number}: bronze changed"
        );
        assert_eq!(
            source.stream.facts_query("SELECT COUNT(*) FROM t").await,
            facts_before,
            "error {number}: facts changed"
        );
    }
    let faults = Faults::new(&server, &source, Moment::BatchStarted, Vec::new()).await;
    source.run(faults).await.expect("a run without faults");
    source.assert_exactly_once("after the stopped runs").await;
}

/// One batch of 16,384 rows of 2 KB: the read hands rows over long before
/// SQL Server has sent them all (more than the socket buffers hold), so a
/// KILL at the first handover cuts the read in the middle.
async fn insert_a_big_transaction(source: &mut Source) {
    let before = max_lsn(&mut source.client).await;
    let digits = "(VALUES (0),(1),(2),(3))";
    let tables: Vec<String> = (0..7).map(|i| format!("{digits} AS d{i}(n)")).collect();
    let id: Vec<String> = (0..7)
        .map(|i| format!("{} * d{i}.n", 4i32.pow(i)))
        .collect();
    run(
        &mut source.client,
        &format!(
            "INSERT INTO dbo.orders (id, note, qty) SELECT 1000 + {}, REPLICATE(N'x', 1000), 1 FROM {}",
            id.join(" + "),
            tables.join(" CROSS JOIN ")
        ),
    )
    .await
    .expect("the big insert");
    wait_for_capture(&mut source.client, "dbo_orders", before.as_deref(), 16_384).await;
}

/// Runs the stream, KILLing the engine's connection once at `moment`:
/// the run must reconnect and go on, retrying once. Returns that retry's
/// error text.
async fn killed_once_at(server: &TestServer, source: &Source, moment: Moment) -> String {
    let faults = Faults::new(server, source, moment, vec![Fault::KillEngine]).await;
    source
        .run(faults.clone())
        .await
        .expect("the run reconnects and goes on");
    assert_eq!(
        faults.raised(),
        1,
        "the engine's connection was killed once"
    );
    let retries = faults.retries.lock().expect("lock").clone();
    assert_eq!(retries.len(), 1, "one retry: {retries:?}");
    println!("killed at {moment:?}, retried after: {}", retries[0].1);
    retries[0].1.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_killed_in_the_middle_of_a_read_is_replayed_once() {
    let server = TestServer::start().await;
    let mut source = Source::new(&server).await;
    insert_a_big_transaction(&mut source).await;
    let retried_after = killed_once_at(&server, &source, Moment::BatchReading).await;
    if server.is_sandbox() {
        // The sandbox breaks the connection under the read; SQL Server may
        // end the cut result otherwise (docs/sandbox.md), and then the next
        // query on the closed connection fails instead.
        assert!(retried_after.contains("reading changes"), "{retried_after}");
    }
    source.assert_exactly_once("killed mid-read").await;
    let rows = source
        .stream
        .bronze_query("SELECT COUNT(*) FROM t WHERE _operation = 'insert'")
        .await;
    assert_eq!(rows, [["16384"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_killed_between_the_bronze_commit_and_the_commit_marker_is_survived() {
    let server = TestServer::start().await;
    let mut source = Source::new(&server).await;
    source.insert(3).await;
    killed_once_at(&server, &source, Moment::EventsRecorded).await;
    source.assert_exactly_once("killed mid-commit").await;
    let batches = source
        .stream
        .facts_query("SELECT COUNT(*) FROM t WHERE event IS NULL AND rows > 0")
        .await;
    assert_eq!(batches, [["3"]], "three batches, one row each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redirected_login_is_followed() {
    let server = TestServer::start().await;
    if !sandbox_only(&server, "a_redirected_login_is_followed") {
        return;
    }
    let mut source = Source::new(&server).await;
    source.insert(2).await;
    let faults = Faults::new(&server, &source, Moment::BatchStarted, Vec::new()).await;
    let endpoint = server.endpoint();
    // Twice: the gateway's answer, then (as Always On read-only routing
    // may) once more; both to this sandbox itself.
    run(
        &mut source.client,
        &format!(
            "EXEC sandbox.sp_route_logins @server = N'{}', @port = {}, @count = 2",
            endpoint.host, endpoint.port
        ),
    )
    .await
    .expect("routes set");
    source
        .run(faults.clone())
        .await
        .expect("the run follows the redirect");
    let retries = faults.retries.lock().expect("lock").clone();
    assert!(retries.is_empty(), "followed, not retried: {retries:?}");
    // Both routes were used by the engine: the next login is not routed.
    let mut next = server.connect_to(&source.database).await;
    run(&mut next, "SELECT 1").await.expect("a plain login");
    source.assert_exactly_once("redirected").await;
}
