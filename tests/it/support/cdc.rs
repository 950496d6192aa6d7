//! Change Data Capture helpers shared by the `sandbox_cdc_*` tests. They
//! only use documented procedures and functions, so they work the same on
//! the sandbox and on a real SQL Server with SQL Server Agent running.

use std::time::{Duration, Instant};

use super::server::{Client, TestServer, run};

/// How long a test waits for the capture job to pick up a commit. A real
/// SQL Server polls the log every 5 seconds by default; the first scan
/// after enabling CDC can take longer.
pub const CAPTURE_TIMEOUT: Duration = Duration::from_secs(60);

/// The pause between two polls of a condition (a wait always has a
/// deadline; the pause only keeps polling cheap).
const POLL: Duration = Duration::from_millis(50);

/// Enables CDC on the current database (idempotent on a real server).
pub async fn enable_db(client: &mut Client) {
    run(client, "EXEC sys.sp_cdc_enable_db")
        .await
        .expect("sys.sp_cdc_enable_db runs");
}

/// A scratch database with `create_table` run and CDC on `dbo.orders`
/// (capture instance `dbo_orders`, no gating role), with net changes when
/// asked. Returns the client, using that database, and its name.
pub async fn orders_with_cdc(
    server: &TestServer,
    create_table: &str,
    net_changes: bool,
) -> (Client, String) {
    let (mut client, db) = server.scratch_database().await;
    run(&mut client, create_table).await.expect("create table");
    enable_db(&mut client).await;
    let sql = format!(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
         @role_name = NULL, @supports_net_changes = {}",
        u8::from(net_changes)
    );
    run(&mut client, &sql)
        .await
        .expect("sys.sp_cdc_enable_table runs");
    (client, db)
}

/// `sys.fn_cdc_get_max_lsn()`, None when nothing was captured yet.
pub async fn max_lsn(client: &mut Client) -> Option<Vec<u8>> {
    binary(client, "SELECT sys.fn_cdc_get_max_lsn()").await
}

/// `sys.fn_cdc_get_min_lsn(ci)`.
pub async fn min_lsn(client: &mut Client, capture_instance: &str) -> Option<Vec<u8>> {
    binary(
        client,
        &format!("SELECT sys.fn_cdc_get_min_lsn(N'{capture_instance}')"),
    )
    .await
}

/// The single binary value of a one-row, one-column query.
pub async fn binary(client: &mut Client, sql: &str) -> Option<Vec<u8>> {
    let rows = run(client, sql).await.expect("query runs");
    let row = rows.into_iter().flatten().next().expect("a row");
    row.get::<&[u8], _>(0).map(<[u8]>::to_vec)
}

/// A binary(10) LSN as a T-SQL literal.
pub fn lsn_literal(lsn: &[u8]) -> String {
    let hex: String = lsn.iter().map(|b| format!("{b:02X}")).collect();
    format!("0x{hex}")
}

/// Waits until the capture job has moved `count` or more rows with a start
/// LSN above `after` into `cdc.<ci>_CT`, and `sys.fn_cdc_get_max_lsn()`
/// has passed the newest of them: the commit is visible to readers. Returns
/// that commit LSN.
pub async fn wait_for_capture(
    client: &mut Client,
    capture_instance: &str,
    after: Option<&[u8]>,
    count: i32,
) -> Vec<u8> {
    let after = after.map_or_else(|| "0x00000000000000000000".to_string(), lsn_literal);
    let sql = format!(
        "SELECT COUNT(*), MAX(__$start_lsn), sys.fn_cdc_get_max_lsn() \
         FROM cdc.[{capture_instance}_CT] WHERE __$start_lsn > {after}"
    );
    let deadline = Instant::now() + CAPTURE_TIMEOUT;
    loop {
        let rows = run(client, &sql).await.expect("change table query runs");
        let row = rows.into_iter().flatten().next().expect("a row");
        let seen = row.get::<i32, _>(0).unwrap_or(0);
        let newest = row.get::<&[u8], _>(1).map(<[u8]>::to_vec);
        let max = row.get::<&[u8], _>(2).map(<[u8]>::to_vec);
        if let (true, Some(newest), Some(max)) = (seen >= count, newest, max)
            && max >= newest
        {
            return newest;
        }
        assert!(
            Instant::now() < deadline,
            "capture of {count} change rows of {capture_instance} did not happen within {CAPTURE_TIMEOUT:?} (saw {seen})"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until `sys.fn_cdc_get_max_lsn()` is above `lsn` (None: until there
/// is one at all); returns it.
pub async fn wait_for_max_lsn_past(client: &mut Client, lsn: Option<&[u8]>) -> Vec<u8> {
    let deadline = Instant::now() + CAPTURE_TIMEOUT;
    loop {
        if let Some(max) = max_lsn(client).await
            && lsn.is_none_or(|l| max.as_slice() > l)
        {
            return max;
        }
        assert!(
            Instant::now() < deadline,
            "sys.fn_cdc_get_max_lsn() did not pass {:?} within {CAPTURE_TIMEOUT:?}",
            lsn.map(lsn_literal)
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until a query's first column, as an integer, satisfies `done`.
pub async fn wait_until_count(
    client: &mut Client,
    sql: &str,
    what: &str,
    done: impl Fn(i32) -> bool,
) -> i32 {
    let deadline = Instant::now() + CAPTURE_TIMEOUT;
    loop {
        let rows = run(client, sql).await.expect("query runs");
        let value = rows
            .into_iter()
            .flatten()
            .next()
            .and_then(|r| r.get::<i32, _>(0))
            .unwrap_or(0);
        if done(value) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {value} after {CAPTURE_TIMEOUT:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Moves the sandbox's clock forward (sandbox only: a real server's clock
/// cannot be moved, so callers return early there).
pub async fn advance_clock(client: &mut Client, seconds: i64) {
    run(
        client,
        &format!("EXEC sandbox.sp_advance_clock @seconds = {seconds}"),
    )
    .await
    .expect("sandbox.sp_advance_clock runs");
}

/// Enables CDC on the current database and on `dbo.<table>` (no gating
/// role), then waits until CDC has an LSN: the state a stream starts from.
pub async fn capture_table(client: &mut Client, table: &str) {
    enable_db(client).await;
    run(
        client,
        &format!(
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', @role_name = NULL"
        ),
    )
    .await
    .expect("sys.sp_cdc_enable_table runs");
    wait_for_max_lsn_past(client, None).await;
}

/// The change rows of `cdc.dbo_orders_CT` (a captured `dbo.orders` with an
/// `id` column), as bronze spells them: LSN, seqval, operation and id,
/// sorted. What a stream of it must hold exactly once.
pub async fn orders_changes(client: &mut Client) -> Vec<[String; 4]> {
    table_changes(client, "dbo_orders").await
}

/// [`orders_changes`] of any capture instance whose table has an `id int`.
pub async fn table_changes(client: &mut Client, capture_instance: &str) -> Vec<[String; 4]> {
    let rows = run(
        client,
        &format!(
            "SELECT __$start_lsn, __$seqval, __$operation, id FROM cdc.[{capture_instance}_CT]"
        ),
    )
    .await
    .expect("change table");
    let mut changes: Vec<[String; 4]> = rows
        .into_iter()
        .flatten()
        .map(|row| {
            let lsn: &[u8] = row.get(0).expect("lsn");
            let seqval: &[u8] = row.get(1).expect("seqval");
            let op: i32 = row.get(2).expect("operation");
            let id: i32 = row.get(3).expect("id");
            let op = match op {
                1 => "delete",
                2 => "insert",
                3 => "update_before",
                _ => "update_after",
            };
            [
                lsn_literal(lsn),
                lsn_literal(seqval),
                op.to_string(),
                id.to_string(),
            ]
        })
        .collect();
    changes.sort();
    changes
}
