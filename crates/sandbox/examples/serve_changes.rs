//! How fast the sandbox serves `cdc.fn_cdc_get_all_changes_*`, without the
//! product: fills the narrow table `mssql-cdc bench` uses (bigint, int,
//! varchar(20)), then reads its changes with the query the engine's reader
//! sends (`changes_query` in `src/source/cdc.rs`: the change function
//! joined with `cdc.lsn_time_mapping`, ordered) over TLS, as plain tiberius
//! rows with every value decoded. Prints rows/s and the CPU µs per row of
//! the server and of the client thread. Linux only for the CPU figures.
//!
//! `cargo run --release -p mssql-cdc-sandbox --example serve_changes -- [ROWS] [PASSES]`

use std::error::Error;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use mssql_cdc_sandbox::{Sandbox, SandboxOptions};
use tiberius::{AuthMethod, Client, Config, EncryptionLevel, QueryItem};
use tokio::net::TcpStream;
use tokio_util::compat::TokioAsyncWriteCompatExt;

type BoxError = Box<dyn Error + Send + Sync>;

const PASSWORD: &str = "Bench-Pa55word!";
/// Rows per source transaction, as in `mssql-cdc bench`.
const ROWS_PER_COMMIT: u64 = 10_000;
/// The engine's change query for dbo.events (see `changes_query`).
const CHANGES: &str = "SELECT c.__$start_lsn, c.__$seqval, c.__$operation, m.tran_end_time, \
     c.[id], c.[v], c.[s] \
     FROM cdc.fn_cdc_get_all_changes_dbo_events(@P1, @P2, N'all update old') AS c \
     JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn \
     ORDER BY c.__$start_lsn, c.__$seqval, c.__$operation";

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let rows: u64 = args.next().map_or(Ok(300_000), |a| a.parse())?;
    let passes: u32 = args.next().map_or(Ok(3), |a| a.parse())?;
    if rows == 0 || !rows.is_multiple_of(ROWS_PER_COMMIT) {
        return Err(format!("ROWS must be a positive multiple of {ROWS_PER_COMMIT}").into());
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sandbox")
        .build()?;
    let sandbox = server.block_on(Sandbox::start(SandboxOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        sa_password: PASSWORD.into(),
        cdc_idle_interval_secs: 3600,
        ..SandboxOptions::default()
    }))?;
    let addr = sandbox.local_addr();
    let started = Instant::now();
    fill(&sandbox, rows)?;
    println!(
        "serve_changes: {rows} narrow change rows ready in {:.1} s (pid {})",
        started.elapsed().as_secs_f64(),
        std::process::id()
    );
    for pass in 1..=passes {
        let client = std::thread::Builder::new().name("client".into()).spawn(
            move || -> Result<(u64, Duration, Duration), BoxError> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let cpu = thread_cpu();
                let started = Instant::now();
                let read = rt.block_on(read_changes(addr))?;
                Ok((read, started.elapsed(), thread_cpu().saturating_sub(cpu)))
            },
        )?;
        let process = process_cpu();
        let (read, wall, client_cpu) = client.join().map_err(|_| "the client panicked")??;
        let total = process_cpu().saturating_sub(process);
        if read != rows {
            return Err(format!("read {read} rows, expected {rows}").into());
        }
        let per_row = |d: Duration| d.as_secs_f64() * 1e6 / rows as f64;
        println!(
            "pass {pass}: {:>9.0} rows/s | sandbox {:.2} µs CPU/row | client {:.2} µs CPU/row",
            rows as f64 / wall.as_secs_f64().max(1e-9),
            per_row(total.saturating_sub(client_cpu)),
            per_row(client_cpu),
        );
    }
    drop(sandbox);
    Ok(())
}

/// The bench's source: a seed doubled into place, then ROWS / 10 000
/// captured transactions of 10 000 inserts; waits for the capture job.
fn fill(sandbox: &Sandbox, rows: u64) -> Result<(), BoxError> {
    let engine = sandbox.engine();
    let mut script = String::from(
        "CREATE DATABASE bench\nGO\nUSE bench\n\
         CREATE TABLE dbo.seed (id bigint NOT NULL PRIMARY KEY, v int NOT NULL, s varchar(20) NOT NULL);\n\
         CREATE TABLE dbo.events (id bigint NOT NULL PRIMARY KEY, v int NOT NULL, s varchar(20) NOT NULL)\nGO\n\
         USE bench\nEXEC sys.sp_cdc_enable_db\nGO\n\
         USE bench\nEXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events', @role_name = NULL\nGO\n\
         USE bench\nINSERT INTO dbo.seed VALUES (0, 0, 'event-0')\nGO\n",
    );
    let mut have = 1u64;
    while have < ROWS_PER_COMMIT {
        let add = have.min(ROWS_PER_COMMIT - have);
        script.push_str(&format!(
            "USE bench\nINSERT INTO dbo.seed SELECT TOP ({add}) id + {have}, v + 1, 'event-' + CAST(id + {have} AS varchar(12)) FROM dbo.seed ORDER BY id\nGO\n"
        ));
        have += add;
    }
    for commit in 0..rows / ROWS_PER_COMMIT {
        let offset = commit * ROWS_PER_COMMIT;
        script.push_str(&format!(
            "USE bench\nINSERT INTO dbo.events SELECT id + {offset}, v, s FROM dbo.seed\nGO\n"
        ));
    }
    engine.run_script(&script)?;
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let captured = engine.with_state(|st| {
            st.database("bench")
                .and_then(|db| {
                    db.tables
                        .values()
                        .find(|t| t.meta.name.eq_ignore_ascii_case("dbo_events_CT"))
                })
                .map_or(0, |t| t.data.len() as u64)
        });
        if captured >= rows {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("captured only {captured} of {rows} rows").into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One read of every change, each value decoded; the row count.
async fn read_changes(addr: SocketAddr) -> Result<u64, BoxError> {
    let mut config = Config::new();
    config.host("127.0.0.1");
    config.port(addr.port());
    config.authentication(AuthMethod::sql_server("sa", PASSWORD));
    config.encryption(EncryptionLevel::Required);
    config.trust_cert();
    config.database("bench");
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let mut client = Client::connect(config, tcp.compat_write()).await?;
    let lsn = |row: Option<tiberius::Row>| -> Result<Vec<u8>, BoxError> {
        row.and_then(|r| r.get::<&[u8], _>(0).map(<[u8]>::to_vec))
            .ok_or_else(|| "no LSN".into())
    };
    let min = lsn(client
        .simple_query("SELECT sys.fn_cdc_get_min_lsn('dbo_events')")
        .await?
        .into_row()
        .await?)?;
    let max = lsn(client
        .simple_query("SELECT sys.fn_cdc_get_max_lsn()")
        .await?
        .into_row()
        .await?)?;
    let mut stream = client
        .query(CHANGES, &[&min.as_slice(), &max.as_slice()])
        .await?;
    let mut rows = 0u64;
    let mut checksum = 0i64;
    while let Some(item) = stream.try_next().await? {
        if let QueryItem::Row(row) = item {
            let id: Option<i64> = row.get(4);
            let v: Option<i32> = row.get(5);
            let s: Option<&str> = row.get(6);
            let t: Option<chrono::NaiveDateTime> = row.get(3);
            checksum = checksum
                .wrapping_add(id.unwrap_or(0))
                .wrapping_add(i64::from(v.unwrap_or(0)))
                .wrapping_add(s.map_or(0, |s| s.len() as i64))
                .wrapping_add(i64::from(t.is_some()));
            rows += 1;
        }
    }
    std::hint::black_box(checksum);
    Ok(rows)
}

/// This thread's CPU time (Linux; zero elsewhere).
fn thread_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// The process's CPU time, user and system (Linux; zero elsewhere).
fn process_cpu() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let fields: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some(utime + stime)
        })
        .unwrap_or(0);
    // USER_HZ is 100 on every Linux we run.
    Duration::from_millis(ticks * 10)
}
