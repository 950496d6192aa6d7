//! `mssql-cdc run -f` on a file holding one CdcSource and its CdcStreams:
//! every table streams in one process with the source's connection and
//! defaults, and a table that cannot run fails alone, by name, while the
//! others complete. Running on, the source's rounds wake only the tables
//! that changed: a quiet table writes nothing while another one streams,
//! until its idle commit is due.

use crate::support::cdc::capture_table;
use crate::support::kube::eventually;
use crate::support::server::{Client, TestServer, run, scalar};
use crate::support::stream::{PASSWORD_ENV, StreamFixture, query_table};

/// Creates `dbo.{table}` with `rows` rows (ids from 1) and captures it.
pub async fn seeded_capture(client: &mut Client, table: &str, rows: i32) {
    run(
        client,
        &format!("CREATE TABLE dbo.{table} (id int NOT NULL PRIMARY KEY, note nvarchar(40) NULL)"),
    )
    .await
    .expect("create table");
    for id in 1..=rows {
        run(
            client,
            &format!("INSERT INTO dbo.{table} VALUES ({id}, N'seed')"),
        )
        .await
        .expect("seed");
    }
    capture_table(client, table).await;
}

pub fn stream_doc(name: &str, table: &str, lake: &std::path::Path) -> String {
    let path = |rel: &str| lake.join(rel).display().to_string();
    format!(
        r#"---
apiVersion: mssql-cdc.io/v1alpha1
kind: CdcStream
metadata: {{name: {name}}}
spec:
  appId: it-{name}
  sourceRef: {{name: shop}}
  source: {{table: {table}}}
  target: {{name: bronze.{name}, location: "{bronze}"}}
  checkpoint: "{checkpoint}"
"#,
        bronze = path(&format!("bronze/{name}")),
        checkpoint = path(&format!("checkpoints/{name}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_streams_each_table_and_a_broken_one_fails_alone() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for (table, rows) in [("orders", 5), ("items", 3)] {
        seeded_capture(&mut client, table, rows).await;
    }
    // The stream fixture's manifest gives the connection; the source
    // document is built from the same endpoint.
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    let mut file = source_doc(&server, &db, lake, "{availableNow: true}", "5m");
    for (name, table) in [
        ("orders", "dbo.orders"),
        ("items", "dbo.items"),
        ("missing", "dbo.missing"),
    ] {
        file.push_str(&stream_doc(name, table, lake));
    }
    let output = run_once_file(lake, &file, &fixture.password).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a failed table fails the run");
    assert!(
        stderr.contains("bronze.missing: failed:") && stderr.contains("dbo.missing"),
        "the broken table is named with its error: {stderr}"
    );
    assert!(
        stderr.contains("1 table(s) of source shop failed"),
        "{stderr}"
    );
    for (name, rows) in [("orders", "5"), ("items", "3")] {
        assert!(
            stdout.contains(&format!("bronze.{name}: stopped:")),
            "{name} ran to the end: {stdout}"
        );
        let count = query_table(
            &lake.join(format!("bronze/{name}")),
            "SELECT count(DISTINCT id) FROM t",
        )
        .await;
        assert_eq!(count, [[rows.to_string()]], "bronze.{name} holds its table");
    }
    // Both tables wrote their facts rows to the source's shared facts table.
    let targets = query_table(
        &lake.join("facts"),
        "SELECT DISTINCT target FROM t ORDER BY target",
    )
    .await;
    assert_eq!(
        targets,
        [["bronze.items".to_string()], ["bronze.orders".to_string()]]
    );
}

/// An availableNow source whose server does not answer looks once, for
/// all of its tables: none is run, and each says the source is down, in
/// the source's words, instead of one failed connection per table.
#[tokio::test]
async fn a_source_run_once_against_a_server_down_runs_no_table() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    seeded_capture(&mut client, "orders", 2).await;
    let fixture = StreamFixture::new(&server, &db, "");
    let lake = fixture.lake.path();
    // A loopback port nothing listens on: every connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let file = source_doc(&server, &db, lake, "{availableNow: true}", "5m");
    let mut file = file.replace(
        &format!("port: {}", server.endpoint().port),
        &format!("port: {closed}"),
    );
    file = file.replace(
        &format!("host: \"{}\"", server.endpoint().host),
        "host: \"127.0.0.1\"",
    );
    for name in ["orders", "items"] {
        file.push_str(&stream_doc(name, &format!("dbo.{name}"), lake));
    }
    let output = run_once_file(lake, &file, &fixture.password).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a source down fails the run");
    for name in ["orders", "items"] {
        assert!(
            stderr.contains(&format!(
                "bronze.{name}: failed: the source is down, so this table was not run"
            )),
            "{name}: {stderr}"
        );
    }
    assert!(
        stderr.contains("the source is down: none of its tables is run"),
        "{stderr}"
    );
    assert!(
        !lake.join("bronze/orders").exists(),
        "no table was run, so none wrote anything"
    );
}

/// `mssql-cdc run --once -f` of the multi-document `file`, written into
/// `lake`, with the password in the environment.
async fn run_once_file(lake: &std::path::Path, file: &str, password: &str) -> std::process::Output {
    let path = lake.join("source.yaml");
    std::fs::write(&path, file).expect("write the source file");
    tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["run", "--once", "-f"])
        .arg(&path)
        .env(PASSWORD_ENV, password)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the binary runs")
}

/// The CdcSource document of `db` on `server` with `trigger` and
/// `idleCommitInterval`, its facts table in `lake`.
pub fn source_doc(
    server: &TestServer,
    db: &str,
    lake: &std::path::Path,
    trigger: &str,
    idle: &str,
) -> String {
    let endpoint = server.endpoint();
    format!(
        r#"apiVersion: mssql-cdc.io/v1alpha1
kind: CdcSource
metadata: {{name: shop}}
spec:
  connection:
    host: "{host}"
    port: {port}
    database: {db}
    credentials: {{username: "{user}", passwordFrom: {{env: {PASSWORD_ENV}}}}}
    encrypt: required
    trustServerCertificate: true
  trigger: {trigger}
  idleCommitInterval: "{idle}"
  defaults:
    facts: {{name: ops.facts, location: "{facts}"}}
"#,
        host = endpoint.host,
        port = endpoint.port,
        user = endpoint.user,
        facts = lake.join("facts").display(),
    )
}

/// Each target's batch rows in the source's facts table, by name.
pub async fn batches(lake: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    if !lake.join("facts/_delta_log").exists() {
        return Default::default();
    }
    query_table(
        &lake.join("facts"),
        "SELECT target, count(*) FROM t WHERE event IS NULL GROUP BY target",
    )
    .await
    .into_iter()
    .map(|row| (row[0].clone(), row[1].parse().expect("a count")))
    .collect()
}

/// The newest batch's end LSN of `target`, as the facts table holds it.
async fn last_end_lsn(lake: &std::path::Path, target: &str) -> Option<String> {
    query_table(
        &lake.join("facts"),
        &format!("SELECT max(end_lsn) FROM t WHERE event IS NULL AND target = '{target}'"),
    )
    .await
    .into_iter()
    .next()
    .and_then(|row| row.into_iter().next())
    .filter(|lsn| lsn != "NULL" && !lsn.is_empty())
}

/// Rows of bronze `name` (change and snapshot rows alike).
async fn bronze_rows(lake: &std::path::Path, name: &str) -> u64 {
    if !lake.join(format!("bronze/{name}/_delta_log")).exists() {
        return 0;
    }
    let rows = query_table(
        &lake.join(format!("bronze/{name}")),
        "SELECT count(*) FROM t",
    )
    .await;
    rows.first()
        .and_then(|row| row.first())
        .and_then(|count| count.parse().ok())
        .unwrap_or(0)
}

/// `mssql-cdc run -f file`, running on until it is stopped; what it prints
/// goes to `file` with the extension `log`.
pub fn run_on(file: &std::path::Path, password: &str) -> tokio::process::Child {
    let log = std::fs::File::create(file.with_extension("log")).expect("the run's log");
    tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"))
        .args(["run", "-f"])
        .arg(file)
        .env(PASSWORD_ENV, password)
        .stdout(log.try_clone().expect("the log again"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts")
}

/// SIGTERM, then the exit: a clean stop that leaves the leases free.
async fn stop(child: tokio::process::Child) {
    let status = terminate(child).await;
    assert!(status.success(), "a stopped run exits 0: {status}");
}

/// SIGTERM; how the run exited.
async fn terminate(mut child: tokio::process::Child) -> std::process::ExitStatus {
    let pid = child.id().expect("running").to_string();
    let sent = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("kill runs");
    assert!(sent.success());
    tokio::time::timeout(std::time::Duration::from_secs(120), child.wait())
        .await
        .expect("the run stops within 2 minutes of SIGTERM")
        .expect("wait")
}

/// A scratch database with `dbo.orders`, `items` and `notes`, one row
/// each, captured; and a stream fixture of it (for its lake and password).
async fn three_tables() -> (TestServer, Client, String, StreamFixture) {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    for table in ["orders", "items", "notes"] {
        seeded_capture(&mut client, table, 1).await;
    }
    let fixture = StreamFixture::new(&server, &db, "");
    (server, client, db, fixture)
}

/// Runs the three tables as one source (trigger 1 s, idle commits
/// `idle` apart) until each has its snapshot; the worker and its file.
async fn run_three_tables(
    server: &TestServer,
    db: &str,
    fixture: &StreamFixture,
    idle: &str,
) -> (tokio::process::Child, std::path::PathBuf) {
    let lake = fixture.lake.path();
    let mut file = source_doc(server, db, lake, "{processingTime: 1s}", idle);
    for table in ["orders", "items", "notes"] {
        file.push_str(&stream_doc(table, &format!("dbo.{table}"), lake));
    }
    let path = lake.join("source.yaml");
    std::fs::write(&path, file).expect("write the source file");
    let worker = run_on(&path, &fixture.password);
    snapshots_taken(lake).await;
    (worker, path)
}

/// Waits until each of the three tables' bronze holds its snapshot row.
async fn snapshots_taken(lake: &std::path::Path) {
    eventually("every table's snapshot", || async {
        let snapshots = ["items", "notes", "orders"].map(|t| bronze_rows(lake, t));
        let rows = futures::future::join_all(snapshots).await;
        rows.iter().all(|n| *n == 1).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_tables_write_nothing_while_another_streams_until_their_idle_commit() {
    let (server, mut client, db, fixture) = three_tables().await;
    let lake = fixture.lake.path();
    let write = |idle: &str| {
        let mut file = source_doc(&server, &db, lake, "{processingTime: 1s}", idle);
        for table in ["orders", "items", "notes"] {
            file.push_str(&stream_doc(table, &format!("dbo.{table}"), lake));
        }
        let path = lake.join(format!("source-{idle}.yaml"));
        std::fs::write(&path, file).expect("write the source file");
        path
    };

    // Idle commits an hour apart: only a change wakes a table.
    let worker = run_on(&write("1h"), &fixture.password);
    let mut next_id = 2;
    let mut insert_and_await = async |client: &mut Client| {
        let before = bronze_rows(lake, "orders").await;
        run(
            client,
            &format!("INSERT INTO dbo.orders VALUES ({next_id}, N'hot')"),
        )
        .await
        .expect("insert");
        next_id += 1;
        eventually("the change in bronze.orders", || async {
            (bronze_rows(lake, "orders").await > before).then_some(())
        })
        .await;
    };
    // Every table has its snapshot; then orders streams.
    snapshots_taken(lake).await;
    insert_and_await(&mut client).await;
    insert_and_await(&mut client).await;
    let quiet_before = batches(lake).await;
    for _ in 0..3 {
        insert_and_await(&mut client).await;
    }
    // A change is in bronze before its facts row: the source's facts rows
    // are committed together after the round's bronze commits.
    let orders_before = quiet_before.get("bronze.orders").copied().unwrap_or(0);
    let after = eventually("a facts row for each of orders' changes", || async {
        let after = batches(lake).await;
        (after.get("bronze.orders").copied().unwrap_or(0) >= orders_before + 3).then_some(after)
    })
    .await;
    for quiet in ["bronze.items", "bronze.notes"] {
        assert_eq!(
            after.get(quiet).copied().unwrap_or(0),
            quiet_before.get(quiet).copied().unwrap_or(0),
            "{quiet} wrote no batch while only orders changed: {after:?}"
        );
    }
    stop(worker).await;

    // Idle commits a second apart: the quiet tables' next batches move them
    // up to the last commit of the database, orders' change.
    let orders_end = last_end_lsn(lake, "bronze.orders")
        .await
        .expect("orders' end");
    let worker = run_on(&write("1s"), &fixture.password);
    for quiet in ["bronze.items", "bronze.notes"] {
        eventually(
            &format!("{quiet}'s idle commit up to orders' change"),
            || async {
                let end = last_end_lsn(lake, quiet).await?;
                (end >= orders_end).then_some(())
            },
        )
        .await;
    }
    stop(worker).await;
    // Nothing of the quiet tables was read twice or lost: one row each.
    for table in ["items", "notes"] {
        let count = query_table(
            &lake.join(format!("bronze/{table}")),
            "SELECT count(DISTINCT id) FROM t",
        )
        .await;
        assert_eq!(count, [["1".to_string()]], "bronze.{table}");
    }
}

/// Waits until only the rounds' session of the worker is open on `db`:
/// the tables' sessions are parked. Gives `client` back.
async fn sessions_parked(client: Client, db: &str) -> Client {
    let client = std::sync::Arc::new(tokio::sync::Mutex::new(client));
    let sessions = format!(
        "SELECT count(*) FROM sys.dm_exec_sessions \
         WHERE program_name = N'mssql-cdc' AND database_id = DB_ID(N'{db}')"
    );
    eventually("the tables' sessions parked", || {
        let (client, sessions) = (std::sync::Arc::clone(&client), sessions.clone());
        async move {
            let open: i32 = scalar(&mut *client.lock().await, &sessions).await?;
            (open <= 1).then_some(())
        }
    })
    .await;
    match std::sync::Arc::try_unwrap(client) {
        Ok(client) => client.into_inner(),
        Err(_) => panic!("the client is no longer shared"),
    }
}

/// A source's quiet tables close their SQL Server sessions while they wait
/// (after a fifth of the idle interval), so only the rounds' session stays
/// open; a change still wakes a parked table, which connects again and
/// reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_tables_hold_no_session_while_they_wait_and_a_change_still_wakes_them() {
    let (server, client, db, fixture) = three_tables().await;
    let lake = fixture.lake.path();
    let (worker, _) = run_three_tables(&server, &db, &fixture, "10s").await;
    let mut client = sessions_parked(client, &db).await;
    run(
        &mut client,
        "INSERT INTO dbo.items VALUES (2, N'after parking')",
    )
    .await
    .expect("insert");
    eventually("the change in bronze.items", || async {
        (bronze_rows(lake, "items").await == 2).then_some(())
    })
    .await;
    stop(worker).await;
}

/// The logins the server has served so far.
async fn logins(client: &mut Client) -> i64 {
    scalar(
        client,
        "SELECT cntr_value FROM sys.dm_os_performance_counters WHERE counter_name = N'Logins/sec'",
    )
    .await
    .expect("the login counter")
}

/// A source's quiet tables commit their idle batches from what the rounds
/// read once for all of them (`source::round_marks`): a parked table does
/// not log in again for its idle commit, and asks SQL Server nothing of
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_tables_commit_their_idle_batches_from_the_rounds_without_logging_in() {
    let (server, mut client, db, fixture) = three_tables().await;
    // A table of the database no stream reads: its commits move the max
    // LSN while every table of the source stays quiet.
    seeded_capture(&mut client, "other", 0).await;
    let lake = fixture.lake.path();
    let (worker, _) = run_three_tables(&server, &db, &fixture, "2s").await;
    let mut client = sessions_parked(client, &db).await;
    let logins_before = logins(&mut client).await;
    let batches_before = batches(lake).await;
    let targets = ["bronze.items", "bronze.notes", "bronze.orders"];
    for id in 1..=2 {
        let mut ends = Vec::new();
        for target in targets {
            ends.push(last_end_lsn(lake, target).await);
        }
        run(
            &mut client,
            &format!("INSERT INTO dbo.other VALUES ({id}, N'x')"),
        )
        .await
        .expect("insert");
        for (target, end) in targets.iter().zip(&ends) {
            eventually(
                &format!("{target}'s idle commit past the insert"),
                || async {
                    let now = last_end_lsn(lake, target).await;
                    (now > *end).then_some(())
                },
            )
            .await;
        }
    }
    let logins_after = logins(&mut client).await;
    stop(worker).await;
    let batches_after = batches(lake).await;
    for target in targets {
        let made = batches_after.get(target).copied().unwrap_or(0)
            - batches_before.get(target).copied().unwrap_or(0);
        assert!(made >= 2, "{target}: {made} idle batches");
    }
    assert_eq!(
        logins_after - logins_before,
        0,
        "no table logged in again for its idle commits"
    );
    // Each table's snapshot row once, nothing more.
    for table in ["orders", "items", "notes"] {
        assert_eq!(bronze_rows(lake, table).await, 1, "bronze.{table}");
    }
}

/// The facts commits whose rows came from more than one table (their
/// commitInfo lists the checkpoints: `mssql_cdc.checkpoints`).
async fn grouped_facts_commits(lake: &std::path::Path) -> usize {
    use futures::TryStreamExt;
    let table = crate::support::stream::open_table(&lake.join("facts")).await;
    let history: Vec<_> = table
        .history(None)
        .try_collect()
        .await
        .expect("the facts table's history");
    history
        .iter()
        .filter(|commit| {
            commit
                .info
                .get("mssql_cdc.checkpoints")
                .and_then(|ids| ids.as_array())
                .is_some_and(|ids| ids.len() > 1)
        })
        .count()
}

/// Tables that change in the same round write their facts rows in one
/// commit of the shared facts table, not one commit each, and each
/// table's rows are there once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_changed_in_one_round_write_their_facts_in_one_commit() {
    let (server, mut client, db, fixture) = three_tables().await;
    let lake = fixture.lake.path();
    let (worker, _) = run_three_tables(&server, &db, &fixture, "1h").await;
    assert_eq!(
        grouped_facts_commits(lake).await,
        0,
        "only snapshots so far"
    );
    // One transaction changes all three: the same round finds each. A
    // group waits up to half a trigger for the round's slowest table, so
    // a machine too busy for that gets another round to show it.
    let mut id = 2;
    let grouped = loop {
        run(
            &mut client,
            &format!(
                "BEGIN TRANSACTION; INSERT INTO dbo.orders VALUES ({id}, N'x'); \
                 INSERT INTO dbo.items VALUES ({id}, N'x'); \
                 INSERT INTO dbo.notes VALUES ({id}, N'x'); COMMIT"
            ),
        )
        .await
        .expect("insert");
        eventually("the round's changes in every bronze", || async {
            let rows = ["items", "notes", "orders"].map(|t| bronze_rows(lake, t));
            let rows = futures::future::join_all(rows).await;
            rows.iter().all(|n| *n == id as u64).then_some(())
        })
        .await;
        let grouped = grouped_facts_commits(lake).await;
        if grouped > 0 || id == 6 {
            break grouped;
        }
        id += 1;
    };
    stop(worker).await;
    assert!(
        grouped > 0,
        "no facts commit held more than one table's rows"
    );
    // Each table's rows once: its snapshot's row, then one row per batch
    // at most, never a batch twice.
    let twice = query_table(
        &lake.join("facts"),
        "SELECT target, batch_id, count(*) FROM t WHERE event IS NULL \
         GROUP BY target, batch_id HAVING count(*) > 1",
    )
    .await;
    assert!(twice.is_empty(), "facts rows twice: {twice:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_instance_disabled_mid_run_holds_its_table_alone() {
    let (server, mut client, db, fixture) = three_tables().await;
    let lake = fixture.lake.path();
    let (worker, path) = run_three_tables(&server, &db, &fixture, "1h").await;

    run(
        &mut client,
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'items', \
         @capture_instance = N'dbo_items'",
    )
    .await
    .expect("disable the capture instance of items");
    let log = path.with_extension("log");
    for id in 2..=3 {
        for table in ["orders", "items", "notes"] {
            run(
                &mut client,
                &format!("INSERT INTO dbo.{table} VALUES ({id}, N'after')"),
            )
            .await
            .expect("insert");
        }
        for table in ["orders", "notes"] {
            eventually(&format!("{table} streams on (id {id})"), || async {
                (bronze_rows(lake, table).await == id as u64).then_some(())
            })
            .await;
        }
    }
    // No instance is left for items: it waits for one (a DBA between
    // disabling and enabling, as for a rename), retrying with backoff and
    // naming its instance, and writes nothing meanwhile.
    let said = eventually("items' wait in the log, by name", || async {
        let text = std::fs::read_to_string(&log).ok()?;
        text.lines()
            .find(|line| line.starts_with("bronze.items: retrying"))
            .map(str::to_string)
    })
    .await;
    assert!(
        said.contains("dbo_items") && said.contains("was disabled"),
        "the wait names the instance: {said}"
    );
    assert_eq!(
        bronze_rows(lake, "items").await,
        1,
        "items wrote nothing more"
    );

    let status = terminate(worker).await;
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(
        status.success(),
        "a waiting table is no failure of the source: {text}"
    );
    assert!(!text.contains("bronze.items: failed:"), "{text}");
    assert!(
        text.contains("bronze.orders: stopped:") && text.contains("bronze.notes: stopped:"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_added_later_snapshots_alone_without_holding_up_the_others() {
    let (server, mut client, db, fixture) = three_tables().await;
    let lake = fixture.lake.path();
    // One read slot: the new table's snapshot must not keep it.
    let write = |name: &str, tables: &[&str]| {
        let mut file = source_doc(&server, &db, lake, "{processingTime: 1s}", "1h").replace(
            "  defaults:\n",
            "  concurrency: {reads: 1, snapshots: 1}\n  defaults:\n",
        );
        file.push_str("    snapshot: {mode: initial, chunkRows: 25}\n");
        for table in tables {
            file.push_str(&stream_doc(table, &format!("dbo.{table}"), lake));
        }
        let path = lake.join(name);
        std::fs::write(&path, file).expect("write the source file");
        path
    };
    let three = write("three.yaml", &["orders", "items", "notes"]);
    let worker = run_on(&three, &fixture.password);
    snapshots_taken(lake).await;
    stop(worker).await;

    // A large table joins the source.
    run(
        &mut client,
        "CREATE TABLE dbo.archive (id int NOT NULL PRIMARY KEY, note nvarchar(40) NULL)",
    )
    .await
    .expect("create archive");
    for block in 0..12 {
        let values: Vec<String> = (1..=500)
            .map(|i| format!("({}, N'old')", block * 500 + i))
            .collect();
        run(
            &mut client,
            &format!("INSERT INTO dbo.archive VALUES {}", values.join(", ")),
        )
        .await
        .expect("fill archive");
    }
    crate::support::cdc::capture_table(&mut client, "archive").await;

    // The archive first: it takes the read slot before the others.
    let four = write("four.yaml", &["archive", "orders", "items", "notes"]);
    let worker = run_on(&four, &fixture.password);
    // While it copies, orders changes.
    eventually("the archive's snapshot under way", || async {
        (bronze_rows(lake, "archive").await > 0).then_some(())
    })
    .await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (2, N'while')")
        .await
        .expect("orders changes");
    eventually("orders' change", || async {
        (bronze_rows(lake, "orders").await == 2).then_some(())
    })
    .await;
    // 240 chunks, each its own commit: longer than one wait on a debug
    // build beside other tests, so bounded by the work, not by WAIT.
    let copied = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        crate::support::kube::poll(|| async {
            (bronze_rows(lake, "archive").await == 6000).then_some(())
        }),
    )
    .await;
    assert!(
        copied.is_ok(),
        "the archive's snapshot did not end: {} of 6000 rows",
        bronze_rows(lake, "archive").await
    );
    stop(worker).await;

    // Orders' batch was written while the archive was still copying.
    let when = |sql: String| async move {
        query_table(&lake.join("facts"), &sql)
            .await
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next())
            .unwrap_or_default()
    };
    let orders_batch = when(
        "SELECT CAST(min(written_at) AS STRING) FROM t WHERE target = 'bronze.orders' \
         AND event IS NULL AND rows > 0"
            .to_string(),
    )
    .await;
    let archive_done = when(
        "SELECT CAST(max(written_at) AS STRING) FROM t WHERE target = 'bronze.archive' \
         AND event = 'bootstrap'"
            .to_string(),
    )
    .await;
    assert!(
        !orders_batch.is_empty() && !archive_done.is_empty() && orders_batch < archive_done,
        "orders' change ({orders_batch}) landed before the archive's snapshot ended ({archive_done})"
    );
    // Only the new table took a snapshot.
    let bootstraps = query_table(
        &lake.join("facts"),
        "SELECT target, count(*) FROM t WHERE event = 'bootstrap' GROUP BY target ORDER BY target",
    )
    .await;
    assert_eq!(
        bootstraps,
        [
            ["bronze.archive", "1"],
            ["bronze.items", "1"],
            ["bronze.notes", "1"],
            ["bronze.orders", "1"]
        ]
        .map(|r| r.map(String::from))
        .to_vec(),
    );
}
