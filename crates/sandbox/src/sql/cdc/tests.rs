//! CDC tests: batches through `Session::execute`, time driven only by
//! `sandbox.sp_advance_clock` and `sys.sp_cdc_scan` (the clock is frozen
//! and the background scheduler effectively off).

use std::time::Instant;

use crate::sql::error::SqlError;
use crate::sql::request::{CancelToken, LoginRequest, Output, Request};
use crate::sql::types::Value;
use crate::sql::{Engine, EngineConfig, Session};

fn engine() -> Engine {
    Engine::new(EngineConfig {
        sa_password: "Sa_pass1".into(),
        clock_speed: 0.0,
        cdc_tick_ms: 3_600_000,
        ..EngineConfig::default()
    })
}

fn run(s: &mut Session, sql: &str) -> Vec<Output> {
    s.execute(Request::Batch { sql: sql.into() }, &CancelToken::default())
}

fn errors(out: &[Output]) -> Vec<SqlError> {
    out.iter()
        .filter_map(|o| match o {
            Output::Message(e) if e.class > 10 => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn error_numbers(s: &mut Session, sql: &str) -> Vec<i32> {
    errors(&run(s, sql)).iter().map(|e| e.number).collect()
}

fn sets(out: &[Output]) -> Vec<Vec<Vec<Value>>> {
    out.iter()
        .filter_map(|o| match o {
            Output::ResultSet { rows, .. } => Some(rows.clone()),
            _ => None,
        })
        .collect()
}

fn ok(s: &mut Session, sql: &str) -> Vec<Vec<Vec<Value>>> {
    let out = run(s, sql);
    let e = errors(&out);
    assert!(e.is_empty(), "{sql}: {e:?}");
    sets(&out)
}

fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let mut r = ok(s, sql);
    assert_eq!(r.len(), 1, "{sql}");
    r.remove(0)
}

fn scalar(s: &mut Session, sql: &str) -> Value {
    rows(s, sql)
        .first()
        .and_then(|r| r.first().cloned())
        .unwrap_or(Value::Null)
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => i64::from(*i),
        Value::BigInt(i) => *i,
        Value::SmallInt(i) => i64::from(*i),
        Value::TinyInt(i) => i64::from(*i),
        Value::Bit(b) => i64::from(*b),
        other => panic!("not an integer: {other:?}"),
    }
}

fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::Binary(b) => b.clone(),
        other => panic!("not binary: {other:?}"),
    }
}

/// Database `shop` with CDC on `dbo.orders` (capture instance dbo_orders,
/// net changes, gated by role `cdc_reader`).
fn shop() -> (Engine, Session) {
    let e = engine();
    let mut s = e.sa_session();
    ok(&mut s, "CREATE DATABASE shop");
    ok(&mut s, "USE shop");
    ok(
        &mut s,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, customer nvarchar(50) NULL, amount decimal(10,2) NULL)
         CREATE TABLE dbo.other (id int NOT NULL PRIMARY KEY)
         EXEC sys.sp_cdc_enable_db;
         EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = N'cdc_reader', @supports_net_changes = 1;",
    );
    (e, s)
}

/// [`shop`] with its capture job stopped, so the test runs each log scan
/// itself: like SQL Server, the sandbox refuses `sys.sp_cdc_scan` while the
/// job's own scan is active.
fn shop_scanned_by_hand() -> (Engine, Session) {
    let (e, mut s) = shop();
    ok(&mut s, "EXEC sys.sp_cdc_stop_job @job_type = N'capture'");
    (e, s)
}

const ALL: &str = "DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn('dbo_orders'), @t binary(10) = sys.fn_cdc_get_max_lsn()";

#[test]
fn one_commit_lsn_per_transaction_and_increasing_seqval() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(
        &mut s,
        "BEGIN TRAN INSERT INTO orders VALUES (1, N'a', 1), (2, N'b', 2) COMMIT",
    );
    ok(&mut s, "INSERT INTO orders VALUES (3, N'c', 3)");
    ok(
        &mut s,
        "BEGIN TRAN INSERT INTO orders VALUES (9, N'z', 9) ROLLBACK",
    );
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let r = rows(
        &mut s,
        "SELECT __$start_lsn, __$seqval, __$operation, id FROM cdc.dbo_orders_CT ORDER BY __$start_lsn, __$seqval",
    );
    assert_eq!(r.len(), 3, "the rolled-back insert produced nothing");
    assert_eq!(r[0][0], r[1][0]);
    assert!(bytes(&r[0][1]) < bytes(&r[1][1]));
    assert!(bytes(&r[1][0]) < bytes(&r[2][0]));
    assert!(r.iter().all(|x| int(&x[2]) == 2));
    let max = scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()");
    assert_eq!(bytes(&max), bytes(&r[2][0]));
    assert_eq!(bytes(&max).len(), 10);
}

#[test]
fn updates_capture_before_and_after_images() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(&mut s, "INSERT INTO orders VALUES (1, N'a', 1)");
    ok(&mut s, "UPDATE orders SET amount = 5 WHERE id = 1");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let old = rows(
        &mut s,
        &format!(
            "{ALL} SELECT __$operation, __$seqval, __$update_mask, amount FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all update old')"
        ),
    );
    let ops: Vec<i64> = old.iter().map(|r| int(&r[0])).collect();
    assert_eq!(ops, vec![2, 3, 4]);
    assert_eq!(old[1][1], old[2][1], "an update pair shares __$seqval");
    assert_eq!(bytes(&old[2][2]), vec![0b100], "only amount (ordinal 3)");
    let all = rows(
        &mut s,
        &format!(
            "{ALL} SELECT __$operation FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all')"
        ),
    );
    assert_eq!(all.len(), 2);
    let changed = scalar(
        &mut s,
        "SELECT sys.fn_cdc_has_column_changed('dbo_orders', 'amount', __$update_mask) FROM cdc.dbo_orders_CT WHERE __$operation = 4",
    );
    assert_eq!(changed, Value::Bit(true));
    let ord = scalar(
        &mut s,
        "SELECT sys.fn_cdc_get_column_ordinal('dbo_orders', 'customer')",
    );
    assert_eq!(int(&ord), 2);
}

#[test]
fn key_update_is_a_delete_and_an_insert() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(&mut s, "INSERT INTO orders VALUES (1, N'a', 1)");
    ok(&mut s, "UPDATE orders SET id = 10 WHERE id = 1");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let r = rows(
        &mut s,
        &format!(
            "{ALL} SELECT __$operation, id FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all update old')"
        ),
    );
    let got: Vec<(i64, i64)> = r.iter().map(|x| (int(&x[0]), int(&x[1]))).collect();
    assert_eq!(got, vec![(2, 1), (1, 1), (2, 10)]);
}

#[test]
fn net_changes_in_all_three_options() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(
        &mut s,
        "INSERT INTO orders VALUES (1, N'keep', 1), (2, N'gone', 2), (3, N'old', 3)",
    );
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let from = bytes(&scalar(
        &mut s,
        "SELECT sys.fn_cdc_increment_lsn(sys.fn_cdc_get_max_lsn())",
    ));
    ok(&mut s, "UPDATE orders SET amount = 10 WHERE id = 1");
    ok(&mut s, "UPDATE orders SET amount = 11 WHERE id = 1");
    ok(&mut s, "DELETE FROM orders WHERE id = 2");
    ok(&mut s, "INSERT INTO orders VALUES (4, N'new', 4)");
    ok(
        &mut s,
        "INSERT INTO orders VALUES (5, N'brief', 5) DELETE FROM orders WHERE id = 5",
    );
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let hex: String = from.iter().map(|b| format!("{b:02X}")).collect();
    let q = |opt: &str| {
        format!(
            "DECLARE @t binary(10) = sys.fn_cdc_get_max_lsn() SELECT id, __$operation, __$update_mask, amount FROM cdc.fn_cdc_get_net_changes_dbo_orders(0x{hex}, @t, N'{opt}') ORDER BY id"
        )
    };
    let net = rows(&mut s, &q("all"));
    let got: Vec<(i64, i64)> = net.iter().map(|r| (int(&r[0]), int(&r[1]))).collect();
    assert_eq!(got, vec![(1, 4), (2, 1), (4, 2)]);
    assert!(net.iter().all(|r| r[2] == Value::Null));
    let masked = rows(&mut s, &q("all with mask"));
    assert_eq!(bytes(&masked[0][2]), vec![0b100]);
    let merged = rows(&mut s, &q("all with merge"));
    let got: Vec<(i64, i64)> = merged.iter().map(|r| (int(&r[0]), int(&r[1]))).collect();
    assert_eq!(got, vec![(1, 5), (2, 1), (4, 5)]);
    assert_eq!(error_numbers(&mut s, &q("all update old")), vec![313]);
}

#[test]
fn range_below_min_lsn_after_cleanup_raises_313() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(&mut s, "INSERT INTO orders VALUES (1, N'a', 1)");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let old_min = bytes(&scalar(
        &mut s,
        "SELECT sys.fn_cdc_get_min_lsn('dbo_orders')",
    ));
    ok(&mut s, "INSERT INTO orders VALUES (2, N'b', 2)");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    ok(
        &mut s,
        "DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn() EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', @low_water_mark = @m",
    );
    let new_min = bytes(&scalar(&mut s, "SELECT start_lsn FROM cdc.change_tables"));
    assert!(new_min > old_min);
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        1
    );
    let hex: String = old_min.iter().map(|b| format!("{b:02X}")).collect();
    let out = run(
        &mut s,
        &format!(
            "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x{hex}, sys.fn_cdc_get_max_lsn(), N'all')"
        ),
    );
    let e = errors(&out);
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].number, e[0].state), (313, 3));
    assert!(e[0].message.ends_with("cdc.fn_cdc_get_all_changes_ ..."));
}

#[test]
fn idle_entries_and_other_tables_advance_max_lsn() {
    let (_e, mut s) = shop();
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 10");
    let first = bytes(&scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()"));
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 60");
    assert_eq!(
        bytes(&scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()")),
        first
    );
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 600");
    let idle = bytes(&scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()"));
    assert!(idle > first, "a quiet database still gets idle entries");
    let idle_rows = int(&scalar(
        &mut s,
        "SELECT COUNT(*) FROM cdc.lsn_time_mapping WHERE tran_id = 0x00000000000000000000",
    ));
    assert!(idle_rows >= 2);
    ok(&mut s, "INSERT INTO other VALUES (1)");
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 5");
    let after = bytes(&scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()"));
    assert!(
        after > idle,
        "a commit on an uncaptured table advances max LSN"
    );
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        0
    );
}

#[test]
fn a_scan_by_hand_is_refused_while_the_capture_job_runs() {
    let (_e, mut s) = shop();
    ok(&mut s, "INSERT INTO orders VALUES (1, N'a', 1)");
    assert_eq!(error_numbers(&mut s, "EXEC sys.sp_cdc_scan"), [22903]);
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        0,
        "the refused scan captured nothing"
    );
    ok(&mut s, "EXEC sys.sp_cdc_stop_job @job_type = N'capture'");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        1
    );
}

#[test]
fn stopped_capture_freezes_max_lsn() {
    let (_e, mut s) = shop();
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 1");
    ok(&mut s, "EXEC sys.sp_cdc_stop_job @job_type = N'capture'");
    let frozen = scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()");
    ok(&mut s, "INSERT INTO orders VALUES (1, N'a', 1)");
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 3600");
    assert_eq!(scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()"), frozen);
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        0
    );
    ok(&mut s, "EXEC sys.sp_cdc_start_job");
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        1
    );
    let sessions = rows(
        &mut s,
        "SELECT session_id, tran_count, latency FROM sys.dm_cdc_log_scan_sessions ORDER BY session_id",
    );
    assert_eq!(int(&sessions[0][0]), 0);
    let last = sessions.last().cloned().unwrap_or_default();
    assert_eq!(int(&last[1]), 1);
    assert!(
        int(&last[2]) >= 3600,
        "latency shows the stopped hour: {last:?}"
    );
}

#[test]
fn two_capture_instances_with_different_columns_and_no_third() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(&mut s, "ALTER TABLE orders ADD region nvarchar(10) NULL");
    ok(
        &mut s,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL, @capture_instance = N'orders_v2', @captured_column_list = N'id, region'",
    );
    ok(&mut s, "INSERT INTO orders VALUES (1, N'a', 1, N'north')");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        1
    );
    let v2 = rows(&mut s, "SELECT * FROM cdc.orders_v2_CT");
    assert_eq!(v2[0].len(), 5 + 2 + 1);
    assert_eq!(v2[0][6], Value::String("north".into()));
    let cols = rows(
        &mut s,
        "SELECT column_name FROM cdc.captured_columns c JOIN cdc.change_tables t ON c.object_id = t.object_id WHERE t.capture_instance = 'dbo_orders' ORDER BY column_ordinal",
    );
    assert_eq!(cols.len(), 3, "the added column is not in the old instance");
    let third = "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL, @capture_instance = N'orders_v3'";
    assert_eq!(error_numbers(&mut s, third), vec![22962]);
    assert_eq!(
        scalar(
            &mut s,
            "SELECT is_tracked_by_cdc FROM sys.tables WHERE name = 'orders'"
        ),
        Value::Bit(true)
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT is_cdc_enabled FROM sys.databases WHERE name = 'shop'"
        ),
        Value::Bit(true)
    );
    let help = ok(&mut s, "EXEC sys.sp_cdc_help_change_data_capture");
    assert_eq!(help[0].len(), 2);
}

#[test]
fn ddl_history_and_dropped_columns() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(&mut s, "ALTER TABLE orders ADD note nvarchar(20) NULL");
    ok(&mut s, "ALTER TABLE orders DROP COLUMN customer");
    ok(
        &mut s,
        "INSERT INTO orders (id, amount, note) VALUES (1, 2, N'x')",
    );
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let h = rows(
        &mut s,
        "SELECT ddl_command, ddl_lsn, ddl_time FROM cdc.ddl_history ORDER BY ddl_lsn",
    );
    assert_eq!(h.len(), 2);
    assert!(matches!(&h[0][0], Value::String(t) if t.contains("ADD note")));
    assert!(matches!(&h[1][0], Value::String(t) if t.contains("DROP COLUMN customer")));
    let r = rows(&mut s, "SELECT id, customer, amount FROM cdc.dbo_orders_CT");
    assert_eq!(r[0][1], Value::Null, "a dropped column stays, as NULL");
    let n = int(&scalar(
        &mut s,
        "SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('cdc.dbo_orders_CT') AND name = 'note'",
    ));
    assert_eq!(n, 0);
}

#[test]
fn a_column_type_change_reaches_the_change_table_with_every_value() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(
        &mut s,
        "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL, d nvarchar(10) NULL, m decimal(10,2) NULL)",
    );
    ok(
        &mut s,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL",
    );
    ok(&mut s, "INSERT INTO dbo.t VALUES (1, 7, N'a', 1.25)");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    // Widened in one transaction, and a value only the new types hold in
    // the next; the scan meets both together.
    ok(
        &mut s,
        "BEGIN TRAN ALTER TABLE dbo.t ALTER COLUMN v bigint NULL; ALTER TABLE dbo.t ALTER COLUMN d nvarchar(100) NULL; ALTER TABLE dbo.t ALTER COLUMN m decimal(18,2) NULL COMMIT",
    );
    ok(
        &mut s,
        "INSERT INTO dbo.t VALUES (2, 1099511627776, REPLICATE(N'x', 60), 1234567890123.45)",
    );
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let r = rows(
        &mut s,
        "SELECT id, v, LEN(d), m FROM cdc.dbo_t_CT ORDER BY __$start_lsn",
    );
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(int(&r[0][1]), 7, "the row from before keeps its value");
    assert_eq!(
        int(&r[1][1]),
        1_099_511_627_776,
        "the new value is held whole"
    );
    assert_eq!(int(&r[1][2]), 60);
    assert_eq!(
        rows(
            &mut s,
            "SELECT CAST(m AS nvarchar(40)) FROM cdc.dbo_t_CT WHERE id = 2"
        )[0][0],
        Value::String("1234567890123.45".into())
    );
    // The change table's columns and the captured columns carry the new types.
    let types = rows(
        &mut s,
        "SELECT c.name, c.system_type_id, c.max_length, c.precision FROM sys.columns c \
         WHERE c.object_id = OBJECT_ID('cdc.dbo_t_CT') AND c.name IN ('v', 'd', 'm') ORDER BY c.column_id",
    );
    let types: Vec<(String, i64, i64, i64)> = types
        .iter()
        .map(|r| (text(&r[0]), int(&r[1]), int(&r[2]), int(&r[3])))
        .collect();
    // system_type_id: bigint 127, nvarchar 231, decimal 106.
    assert_eq!(
        types,
        [
            ("v".into(), 127, 8, 19),
            ("d".into(), 231, 200, 0),
            ("m".into(), 106, 9, 18),
        ]
    );
    let captured = rows(
        &mut s,
        "SELECT column_name, column_type FROM cdc.captured_columns WHERE column_name = 'v'",
    );
    assert_eq!(text(&captured[0][1]), "bigint");
    let history = rows(
        &mut s,
        "SELECT ddl_command, required_column_update FROM cdc.ddl_history \
         WHERE object_id = OBJECT_ID('cdc.dbo_t_CT') ORDER BY ddl_lsn",
    );
    assert_eq!(history.len(), 3, "{history:?}");
    assert!(
        text(&history[0][0])
            .to_lowercase()
            .contains("alter column v bigint"),
        "{history:?}"
    );
    assert!(history.iter().all(|h| int(&h[1]) == 1), "{history:?}");
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn login(e: &Engine, user: &str) -> Session {
    let r = e.login(&LoginRequest {
        user: user.into(),
        password: "Pw_12345".into(),
        database: Some("shop".into()),
        app_name: "test".into(),
        host_name: "host".into(),
        encrypted: false,
        client_addr: None,
    });
    match r {
        Ok(s) => s,
        Err(e) => panic!("login {user}: {e}"),
    }
}

#[test]
fn dmvs_need_view_database_state() {
    let (e, mut s) = shop();
    ok(
        &mut s,
        "CREATE LOGIN lp WITH PASSWORD = 'Pw_12345'
         CREATE USER lp FOR LOGIN lp",
    );
    let mut lp = login(&e, "lp");
    let out = run(&mut lp, "SELECT * FROM sys.dm_cdc_log_scan_sessions");
    let err = errors(&out);
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].number, 300);
    assert!(err[0].message.contains("VIEW DATABASE PERFORMANCE STATE"));
    assert_eq!(
        error_numbers(&mut lp, "SELECT * FROM sys.dm_cdc_errors"),
        vec![300]
    );
    ok(&mut s, "GRANT VIEW DATABASE STATE TO lp");
    assert_eq!(
        rows(
            &mut lp,
            "SELECT session_id FROM sys.dm_cdc_log_scan_sessions"
        )
        .len(),
        1
    );
}

#[test]
fn gating_role_guards_change_data() {
    let (e, mut s) = shop_scanned_by_hand();
    ok(
        &mut s,
        "INSERT INTO orders VALUES (1, N'a', 1) EXEC sys.sp_cdc_scan",
    );
    ok(
        &mut s,
        "CREATE LOGIN rd WITH PASSWORD = 'Pw_12345'
         CREATE USER rd FOR LOGIN rd
         GRANT SELECT ON dbo.orders TO rd",
    );
    let mut rd = login(&e, "rd");
    let q = format!("{ALL} SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all')");
    let out = run(&mut rd, &q);
    let err = errors(&out);
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].number, 229);
    assert!(err[0].message.contains("fn_cdc_get_all_changes_dbo_orders"));
    assert_eq!(
        error_numbers(&mut rd, "SELECT * FROM cdc.dbo_orders_CT"),
        vec![229]
    );
    ok(&mut s, "ALTER ROLE cdc_reader ADD MEMBER rd");
    assert_eq!(rows(&mut rd, &q).len(), 1);
}

#[test]
fn three_simulated_days_of_retention_drop_the_oldest_day() {
    let (_e, mut s) = shop();
    let started = Instant::now();
    ok(&mut s, "INSERT INTO orders VALUES (1, N'day0', 1)");
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 86400");
    ok(&mut s, "INSERT INTO orders VALUES (2, N'day1', 2)");
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 86400");
    ok(&mut s, "INSERT INTO orders VALUES (3, N'day2', 3)");
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 86400");
    assert_eq!(
        int(&scalar(&mut s, "SELECT COUNT(*) FROM cdc.dbo_orders_CT")),
        3
    );
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 86400");
    let left = rows(&mut s, "SELECT id FROM cdc.dbo_orders_CT ORDER BY id");
    assert_eq!(
        left.len(),
        2,
        "day 0 is past the 4320-minute retention: {left:?}"
    );
    assert_eq!(int(&left[0][0]), 2);
    let min = bytes(&scalar(
        &mut s,
        "SELECT sys.fn_cdc_get_min_lsn('dbo_orders')",
    ));
    let oldest = bytes(&scalar(
        &mut s,
        "SELECT MIN(__$start_lsn) FROM cdc.dbo_orders_CT",
    ));
    assert!(min <= oldest);
    let at = scalar(
        &mut s,
        "SELECT sys.fn_cdc_map_time_to_lsn('largest less than or equal', \
         sys.fn_cdc_map_lsn_to_time(sys.fn_cdc_get_max_lsn()))",
    );
    assert_eq!(at, scalar(&mut s, "SELECT sys.fn_cdc_get_max_lsn()"));
    let first = scalar(
        &mut s,
        "SELECT sys.fn_cdc_map_time_to_lsn('smallest greater than', '1900-01-01')",
    );
    assert!(!first.is_null());
    // Performance is not asserted in tests; the figure shows the clock
    // control keeps a multi-day scenario fast.
    println!("three simulated days took {:?}", started.elapsed());
}

/// A frozen server in `zone` with `dbo.orders` captured, its capture job
/// stopped (scans by hand).
fn shop_in(zone: &str) -> (Engine, Session) {
    let e = Engine::new(EngineConfig {
        sa_password: "Sa_pass1".into(),
        clock_speed: 0.0,
        cdc_tick_ms: 3_600_000,
        time_zone: zone.into(),
        ..EngineConfig::default()
    });
    let mut s = e.sa_session();
    ok(
        &mut s,
        "CREATE DATABASE shop; USE shop;
         CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY);
         EXEC sys.sp_cdc_enable_db;
         EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;
         EXEC sys.sp_cdc_stop_job;",
    );
    (e, s)
}

#[test]
fn lsn_time_mapping_is_in_the_server_time_zone() {
    // A zone without daylight saving, so the offset is the same all year.
    let (_e, mut s) = shop_in("Asia/Kolkata");
    ok(&mut s, "INSERT INTO dbo.orders VALUES (1)");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let minutes = scalar(
        &mut s,
        "SELECT DATEDIFF(minute, SYSUTCDATETIME(), MAX(tran_end_time)) FROM cdc.lsn_time_mapping",
    );
    assert_eq!(int(&minutes), 330, "IST is UTC+05:30");
    assert_eq!(
        int(&scalar(
            &mut s,
            "SELECT DATEDIFF(minute, GETUTCDATE(), GETDATE())"
        )),
        330
    );
}

#[test]
fn a_commit_keeps_the_local_time_of_its_own_instant_across_a_clock_change() {
    let (_e, mut s) = shop_in("America/New_York");
    assert_eq!(
        scalar(&mut s, "SELECT CURRENT_TIMEZONE_ID()"),
        Value::String("Eastern Standard Time".into())
    );
    // To 20 minutes before the 2027 spring-forward change (07:00 UTC).
    let now = scalar(
        &mut s,
        "SELECT DATEDIFF_BIG(second, SYSUTCDATETIME(), '2027-03-14T06:40:00')",
    );
    ok(
        &mut s,
        &format!("EXEC sandbox.sp_advance_clock @seconds = {}", int(&now)),
    );
    ok(&mut s, "INSERT INTO dbo.orders VALUES (1)");
    // Captured after the change: the commit keeps its EST local time.
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 1800");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let local = scalar(
        &mut s,
        "SELECT TOP (1) CONVERT(varchar(19), tran_end_time, 126) FROM cdc.lsn_time_mapping \
         ORDER BY start_lsn DESC",
    );
    assert_eq!(local, Value::String("2027-03-14T01:40:00".into()));
    assert_eq!(
        int(&scalar(
            &mut s,
            "SELECT DATEDIFF(minute, GETUTCDATE(), GETDATE())"
        )),
        -240,
        "EDT after the change"
    );
}

#[test]
fn sql_server_2019_does_not_name_its_time_zone() {
    let e = Engine::new(EngineConfig {
        sa_password: "Sa_pass1".into(),
        sql_version: crate::sql::engine::SqlVersion::Sql2019,
        time_zone: "America/New_York".into(),
        ..EngineConfig::default()
    });
    let mut s = e.sa_session();
    assert_eq!(error_numbers(&mut s, "SELECT CURRENT_TIMEZONE_ID()"), [195]);
}

#[test]
fn map_time_to_lsn_with_each_relational_operator() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(&mut s, "INSERT INTO orders VALUES (1, N'a', 1)");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    ok(&mut s, "EXEC sandbox.sp_advance_clock @seconds = 60");
    ok(&mut s, "INSERT INTO orders VALUES (2, N'b', 2)");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let lsns = rows(
        &mut s,
        "SELECT DISTINCT __$start_lsn FROM cdc.dbo_orders_CT ORDER BY __$start_lsn",
    );
    let (first, second) = (bytes(&lsns[0][0]), bytes(&lsns[1][0]));
    let at = |op: &str, s: &mut Session| {
        scalar(
            s,
            &format!(
                "DECLARE @t datetime = sys.fn_cdc_map_lsn_to_time(0x{}) \
                 SELECT sys.fn_cdc_map_time_to_lsn('{op}', @t)",
                second
                    .iter()
                    .map(|b| format!("{b:02X}"))
                    .collect::<String>()
            ),
        )
    };
    assert_eq!(bytes(&at("largest less than or equal", &mut s)), second);
    assert_eq!(bytes(&at("smallest greater than or equal", &mut s)), second);
    assert_eq!(bytes(&at("largest less than", &mut s)), first);
    assert!(at("smallest greater than", &mut s).is_null());
    let next = scalar(
        &mut s,
        &format!(
            "SELECT sys.fn_cdc_increment_lsn(0x{})",
            first.iter().map(|b| format!("{b:02X}")).collect::<String>()
        ),
    );
    assert!(bytes(&next) > first && bytes(&next) <= second);
    let back = scalar(
        &mut s,
        &format!(
            "SELECT sys.fn_cdc_decrement_lsn(sys.fn_cdc_increment_lsn(0x{}))",
            first.iter().map(|b| format!("{b:02X}")).collect::<String>()
        ),
    );
    assert_eq!(bytes(&back), first);
}

#[test]
fn the_engines_change_query_reads_what_select_star_reads() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(
        &mut s,
        "BEGIN TRAN INSERT INTO orders VALUES (2, N'b', 2), (1, N'a', 1) COMMIT",
    );
    ok(&mut s, "UPDATE orders SET amount = 7 WHERE id = 2");
    ok(&mut s, "DELETE FROM orders WHERE id = 1");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    // The reader's query: the change function joined with the mapping,
    // ordered; it names only some columns, so the rest are not copied.
    let narrow = rows(
        &mut s,
        &format!(
            "{ALL} SELECT c.__$start_lsn, c.__$seqval, c.__$operation, m.tran_end_time, c.[id], c.[amount] \
             FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all update old') AS c \
             JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn \
             ORDER BY c.__$start_lsn, c.__$seqval, c.__$operation"
        ),
    );
    let star = rows(
        &mut s,
        &format!(
            "{ALL} SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all update old') AS c \
             JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn \
             ORDER BY c.__$start_lsn, c.__$seqval, c.__$operation"
        ),
    );
    assert_eq!(narrow.len(), 5);
    assert_eq!(star.len(), 5);
    for (n, full) in narrow.iter().zip(&star) {
        // star: start_lsn, seqval, operation, update_mask, id, customer,
        // amount, then the mapping's start_lsn, tran_begin_time,
        // tran_end_time, tran_id.
        let picked = [&full[0], &full[1], &full[2], &full[9], &full[4], &full[6]];
        assert_eq!(n.iter().collect::<Vec<_>>(), picked.to_vec());
        assert!(
            !full[3].is_null(),
            "the update mask is there when asked for"
        );
        assert!(!full[10].is_null(), "so is tran_id");
    }
    let ops: Vec<i64> = narrow.iter().map(|r| int(&r[2])).collect();
    assert_eq!(ops, vec![2, 2, 3, 4, 1]);
}

#[test]
fn order_by_the_change_functions_own_order_keeps_it_and_any_other_sorts() {
    let (_e, mut s) = shop_scanned_by_hand();
    ok(
        &mut s,
        "BEGIN TRAN INSERT INTO orders VALUES (5, N'e', 5), (3, N'c', 3) COMMIT",
    );
    ok(&mut s, "UPDATE orders SET amount = 1 WHERE id = 5");
    ok(&mut s, "DELETE FROM orders WHERE id = 3");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let query = |order: &str| {
        format!(
            "{ALL} SELECT c.__$operation, c.id FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all update old') AS c \
             JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn ORDER BY {order}"
        )
    };
    let pairs = |s: &mut Session, order: &str| -> Vec<(i64, i64)> {
        rows(s, &query(order))
            .iter()
            .map(|r| (int(&r[0]), int(&r[1])))
            .collect()
    };
    let ascending = vec![(2, 5), (2, 3), (3, 5), (4, 5), (1, 3)];
    assert_eq!(
        pairs(&mut s, "c.__$start_lsn, c.__$seqval, c.__$operation"),
        ascending
    );
    assert_eq!(pairs(&mut s, "c.__$start_lsn, c.__$seqval"), ascending);
    let mut descending = ascending.clone();
    descending.reverse();
    assert_eq!(
        pairs(
            &mut s,
            "c.__$start_lsn DESC, c.__$seqval DESC, c.__$operation DESC"
        ),
        descending
    );
    // Not a prefix of the function's order: sorted.
    assert_eq!(
        pairs(&mut s, "c.__$operation, c.id"),
        vec![(1, 3), (2, 3), (2, 5), (3, 5), (4, 5)]
    );
    assert_eq!(
        pairs(&mut s, "c.__$seqval, c.__$operation DESC"),
        vec![(2, 5), (2, 3), (4, 5), (3, 5), (1, 3)]
    );
    assert_eq!(
        pairs(&mut s, "c.id, c.__$operation"),
        vec![(1, 3), (2, 3), (2, 5), (3, 5), (4, 5)]
    );
}

#[test]
fn changes_grouped_by_commit_count_each_commit_once() {
    // The engine's parallel-read planner counts changes per commit with
    // GROUP BY __$start_lsn over the change function (`counts_query` in
    // src/source/lsn_parts.rs): an update counts twice, before and after.
    let (_e, mut s) = shop_scanned_by_hand();
    ok(
        &mut s,
        "INSERT INTO orders VALUES (1, N'a', 1), (2, N'b', 2), (3, N'c', 3)",
    );
    ok(&mut s, "UPDATE orders SET amount = 9 WHERE id <= 2");
    ok(&mut s, "DELETE FROM orders WHERE id = 3");
    ok(&mut s, "EXEC sys.sp_cdc_scan");
    let r = rows(
        &mut s,
        &format!(
            "{ALL} SELECT c.__$start_lsn, COUNT_BIG(*) FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all update old') AS c GROUP BY c.__$start_lsn ORDER BY c.__$start_lsn"
        ),
    );
    let commits: Vec<Vec<u8>> = r.iter().map(|x| bytes(&x[0])).collect();
    assert!(commits.is_sorted() && commits.len() == 3, "{commits:?}");
    let counts: Vec<i64> = r.iter().map(|x| int(&x[1])).collect();
    assert_eq!(counts, vec![3, 4, 1]);
}
