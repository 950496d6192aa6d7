//! Faults at the engine: injected errors (which requests fail, with what,
//! and that they do not run), login routes, and KILL's permissions,
//! errors and effect. What a client sees on the wire is tested in
//! `tds/tests/faults.rs`.

use std::time::Duration;

use crate::sql::error::Abort;
use crate::sql::request::{CancelToken, Output, Param, Request};
use crate::sql::test_support::{error_numbers, errors, int_of, login, ok, rows, run, shop};
use crate::sql::types::{DataType, Length, Value};
use crate::sql::{Engine, Session};

/// A second client session of `sa` in `shop`, as a TDS login makes it.
fn client(e: &Engine) -> Session {
    login(e, "sa", "Sa_pass1", Some("shop")).expect("sa logs in")
}

fn count_orders(s: &mut Session) -> i64 {
    int_of(&rows(s, "SELECT COUNT(*) FROM dbo.orders")[0][0])
}

#[test]
fn injected_errors_fail_the_next_matching_requests_of_other_sessions() {
    let (e, mut admin) = shop();
    let mut other = client(&e);
    ok(
        &mut admin,
        "EXEC sandbox.sp_inject_error @number = 40613, @count = 2, @pattern = N'FROM DBO.ORDERS'",
    );
    // Not matching, and the injecting session itself: both run.
    ok(&mut other, "SELECT 1");
    assert_eq!(count_orders(&mut admin), 4);
    for _ in 0..2 {
        let out = run(&mut other, "SELECT COUNT(*) FROM dbo.orders");
        let errs = errors(&out);
        assert_eq!(errs.len(), 1, "{out:?}");
        assert_eq!(
            (errs[0].number, errs[0].class, errs[0].state),
            (40613, 16, 1)
        );
        assert!(
            errs[0]
                .message
                .starts_with("Database 'shop' on server 'sandbox' is not currently available."),
            "{}",
            errs[0].message
        );
        assert!(
            !out.iter().any(|o| matches!(o, Output::ResultSet { .. })),
            "the request did not run: {out:?}"
        );
    }
    assert_eq!(count_orders(&mut other), 4, "the count is used up");
}

#[test]
fn a_failed_request_does_not_run_and_any_request_matches_without_pattern() {
    let (e, mut admin) = shop();
    let mut other = client(&e);
    ok(
        &mut admin,
        "EXEC sandbox.sp_inject_error 1222, 1, NULL, 16, 56",
    );
    let out = run(
        &mut other,
        "INSERT INTO dbo.orders (customer_id, amount) VALUES (1, 1)",
    );
    let errs = errors(&out);
    assert_eq!(errs.len(), 1, "{out:?}");
    assert_eq!(
        (errs[0].number, errs[0].state, errs[0].message.as_str()),
        (1222, 56, "Lock request time out period exceeded.")
    );
    assert_eq!(count_orders(&mut other), 4, "nothing was inserted");
}

#[test]
fn an_rpc_matches_on_its_statement_and_unknown_numbers_get_a_plain_message() {
    let (e, mut admin) = shop();
    let mut other = client(&e);
    ok(
        &mut admin,
        "EXEC sandbox.sp_inject_error @number = 50123, @pattern = N'cdc.fn_cdc_get_all_changes', @severity = 17, @state = 3",
    );
    let statement = Param {
        name: "@stmt".into(),
        ty: DataType::NVarChar(Length::Max),
        value: Value::String("SELECT * FROM cdc.fn_cdc_get_all_changes_x(@P1, @P2, N'all')".into()),
        output: false,
    };
    let out = other.execute(
        Request::Rpc {
            procedure: "sp_executesql".into(),
            params: vec![statement],
        },
        &CancelToken::default(),
    );
    let errs = errors(&out);
    assert_eq!(errs.len(), 1, "{out:?}");
    assert_eq!(
        (
            errs[0].number,
            errs[0].class,
            errs[0].state,
            errs[0].message.as_str()
        ),
        (50123, 17, 3, "injected error 50123")
    );
    assert!(
        !out.iter().any(|o| matches!(o, Output::ReturnStatus(_))),
        "{out:?}"
    );
}

#[test]
fn a_deadlock_victim_loses_its_transaction_and_severity_20_ends_the_connection() {
    let (e, mut admin) = shop();
    let mut other = client(&e);
    ok(
        &mut other,
        "BEGIN TRANSACTION INSERT INTO dbo.orders (customer_id, amount) VALUES (1, 1)",
    );
    ok(
        &mut admin,
        "EXEC sandbox.sp_inject_error @number = 1205, @severity = 13",
    );
    let out = run(&mut other, "SELECT @@TRANCOUNT");
    assert_eq!(error_numbers(&out), vec![1205]);
    assert!(
        out.iter().any(|o| matches!(o, Output::Transaction(_))),
        "the rollback is reported: {out:?}"
    );
    assert_eq!(int_of(&rows(&mut other, "SELECT @@TRANCOUNT")[0][0]), 0);
    assert_eq!(count_orders(&mut admin), 4, "the victim's insert is undone");

    ok(
        &mut admin,
        "EXEC sandbox.sp_inject_error @number = 40197, @severity = 20",
    );
    let out = run(&mut other, "SELECT 1");
    let errs = errors(&out);
    assert_eq!(errs[0].number, 40197);
    assert_eq!(
        errs[0].abort,
        Abort::Connection,
        "class 20 closes the connection"
    );
}

#[test]
fn the_fault_procedures_belong_to_sysadmin_and_check_their_arguments() {
    let (e, mut admin) = shop();
    ok(
        &mut admin,
        "USE master CREATE LOGIN tester WITH PASSWORD = 'Te5ter!pw'",
    );
    let mut tester = login(&e, "tester", "Te5ter!pw", None).expect("tester logs in");
    for call in [
        "EXEC sandbox.sp_inject_error @number = 1205",
        "EXEC sandbox.sp_route_logins @server = N'x', @port = 1",
        "EXEC sandbox.sp_clear_injections",
    ] {
        assert_eq!(error_numbers(&run(&mut tester, call)), vec![229], "{call}");
    }
    for (call, number) in [
        ("EXEC sandbox.sp_inject_error", 201),
        ("EXEC sandbox.sp_inject_error @number = 0", 50000),
        (
            "EXEC sandbox.sp_inject_error @number = 1205, @count = 0",
            50000,
        ),
        (
            "EXEC sandbox.sp_inject_error @number = 1205, @severity = 10",
            50000,
        ),
        (
            "EXEC sandbox.sp_inject_error @number = 1205, @state = 256",
            50000,
        ),
        (
            "EXEC sandbox.sp_inject_error @number = 1205, @bogus = 1",
            8145,
        ),
        ("EXEC sandbox.sp_route_logins @server = N'x'", 201),
        (
            "EXEC sandbox.sp_route_logins @server = N'', @port = 1433",
            50000,
        ),
        (
            "EXEC sandbox.sp_route_logins @server = N'x', @port = 70000",
            50000,
        ),
    ] {
        assert_eq!(
            error_numbers(&run(&mut admin, call)),
            vec![number],
            "{call}"
        );
    }
}

#[test]
fn routes_are_taken_in_order_and_clear_forgets_everything() {
    let (e, mut admin) = shop();
    let faults = &e.shared.faults;
    ok(
        &mut admin,
        "EXEC sandbox.sp_route_logins @server = N'replica-a', @port = 11000, @count = 2
         EXEC sandbox.sp_route_logins N'replica-b', 11001",
    );
    let taken: Vec<_> = std::iter::from_fn(|| faults.take_route()).collect();
    assert_eq!(
        taken,
        vec![
            ("replica-a".to_string(), 11000),
            ("replica-a".to_string(), 11000),
            ("replica-b".to_string(), 11001),
        ]
    );
    ok(
        &mut admin,
        "EXEC sandbox.sp_route_logins N'replica-c', 1
         EXEC sandbox.sp_inject_error @number = 1205, @count = 5
         EXEC sandbox.sp_clear_injections",
    );
    assert_eq!(faults.take_route(), None);
    let mut other = client(&e);
    ok(&mut other, "SELECT 1");
}

#[test]
fn kill_needs_alter_any_connection_a_live_target_and_not_oneself() {
    let (e, mut admin) = shop();
    ok(
        &mut admin,
        "USE master
         CREATE LOGIN plain WITH PASSWORD = 'Pl4in!pw'
         CREATE LOGIN operator WITH PASSWORD = 'Op3rator!pw'
         GRANT ALTER ANY CONNECTION TO operator",
    );
    let mut plain = login(&e, "plain", "Pl4in!pw", None).expect("plain logs in");
    let target = client(&e);
    let target_id = target.session_id();
    let kill_target = format!("KILL {target_id}");
    let out = run(&mut plain, &kill_target);
    assert_eq!(error_numbers(&out), vec![6102]);
    assert_eq!(errors(&out)[0].class, 14);
    assert!(!target.kill_signal().expect("a client session").is_killed());

    let mut operator = login(&e, "operator", "Op3rator!pw", None).expect("operator logs in");
    let own = format!("KILL {}", operator.session_id());
    assert_eq!(error_numbers(&run(&mut operator, &own)), vec![6104]);
    let out = run(&mut operator, "KILL 999");
    assert_eq!(error_numbers(&out), vec![6106]);
    assert_eq!(
        errors(&out)[0].message,
        "Process ID 999 is not an active process ID."
    );
    assert_eq!(
        errors(&run(&mut operator, "KILL CONNECTION 52"))[0].number,
        40517,
        "MySQL's KILL CONNECTION is not T-SQL"
    );
    // The script's session has no client to close: it cannot be killed.
    assert_eq!(
        error_numbers(&run(&mut operator, &format!("KILL {}", admin.session_id()))),
        vec![6106]
    );
    drop(target);
}

#[test]
fn kill_raises_the_target_signal_and_returns_once_its_work_is_rolled_back() {
    let (e, mut admin) = shop();
    let mut target = client(&e);
    ok(
        &mut target,
        "BEGIN TRANSACTION INSERT INTO dbo.orders (customer_id, amount) VALUES (1, 1)",
    );
    let target_id = target.session_id();
    let signal = target.kill_signal().expect("a client session");
    // What the TDS layer does for a killed session: close it.
    let closer = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let killed = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), signal.killed()).await
        });
        assert!(killed.is_ok(), "the kill signal came");
        drop(target);
    });
    ok(&mut admin, &format!("KILL {target_id}"));
    closer.join().expect("the closer");
    let sessions = rows(
        &mut admin,
        &format!("SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE session_id = {target_id}"),
    );
    assert_eq!(
        int_of(&sessions[0][0]),
        0,
        "the session is gone when KILL returns"
    );
    assert_eq!(
        count_orders(&mut admin),
        4,
        "its transaction was rolled back"
    );
}

#[test]
fn sessions_report_their_database() {
    let (e, mut admin) = shop();
    let mut other = client(&e);
    let id = other.session_id();
    let db = |admin: &mut Session| {
        int_of(
            &rows(
                admin,
                &format!("SELECT database_id FROM sys.dm_exec_sessions WHERE session_id = {id}"),
            )[0][0],
        )
    };
    let shop_id = int_of(&rows(&mut admin, "SELECT DB_ID('shop')")[0][0]);
    assert_eq!(db(&mut admin), shop_id);
    ok(&mut other, "USE master");
    assert_eq!(db(&mut admin), 1);
}
