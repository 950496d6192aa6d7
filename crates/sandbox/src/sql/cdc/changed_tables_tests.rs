//! The statement a worker of many tables asks which change tables have
//! rows in their windows: `SELECT <i> WHERE EXISTS (SELECT 1 FROM
//! [cdc].[<instance>_CT] WHERE __$start_lsn > @after AND __$start_lsn <=
//! @upto)` per table, joined with UNION ALL, with LSNs bound as
//! varbinary parameters (as tiberius binds byte slices). SQL Server's
//! answers: the indexes of the branches whose EXISTS holds, in branch
//! order; a change table the user may not read fails the statement with
//! 229 naming it, one that does not exist with 208.

use crate::sql::request::{CancelToken, LoginRequest, Output, Param, Request};
use crate::sql::test_support::{errors, int_of, ok, result_sets, rows};
use crate::sql::types::{DataType, Length, Value};
use crate::sql::{Engine, EngineConfig, Session};

/// A frozen-clock engine with database `shop` and CDC on `dbo.a`, `dbo.b`
/// and `dbo.c`, the capture job stopped: each test scans by hand (the
/// sandbox, as SQL Server, refuses `sys.sp_cdc_scan` while the job runs).
fn three_tables() -> (Engine, Session) {
    let e = Engine::new(EngineConfig {
        sa_password: "Sa_pass1".into(),
        clock_speed: 0.0,
        cdc_tick_ms: 3_600_000,
        ..EngineConfig::default()
    });
    let mut s = e.sa_session();
    ok(&mut s, "CREATE DATABASE shop");
    ok(&mut s, "USE shop");
    ok(&mut s, "EXEC sys.sp_cdc_enable_db");
    for t in ["a", "b", "c"] {
        ok(
            &mut s,
            &format!(
                "CREATE TABLE dbo.{t} (id int NOT NULL PRIMARY KEY) \
                 EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{t}', @role_name = NULL"
            ),
        );
    }
    ok(&mut s, "EXEC sys.sp_cdc_stop_job @job_type = N'capture'");
    (e, s)
}

/// Inserts a row into `dbo.<table>`, scans, and returns the max LSN.
fn change(s: &mut Session, table: &str) -> Vec<u8> {
    ok(s, &format!("INSERT INTO dbo.{table} VALUES (1)"));
    ok(s, "EXEC sys.sp_cdc_scan");
    max_lsn(s)
}

fn max_lsn(s: &mut Session) -> Vec<u8> {
    match rows(s, "SELECT sys.fn_cdc_get_max_lsn()")
        .remove(0)
        .remove(0)
    {
        Value::Binary(b) => b,
        other => panic!("not an LSN: {other:?}"),
    }
}

/// The statement for `instances`: @P1 the window's end, @P<i + 2> the
/// start of branch i.
fn statement(instances: &[&str]) -> String {
    instances
        .iter()
        .enumerate()
        .map(|(i, ci)| {
            format!(
                "SELECT {i} WHERE EXISTS (SELECT 1 FROM [cdc].[{ci}_CT] \
                 WHERE __$start_lsn > @P{} AND __$start_lsn <= @P1)",
                i + 2
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

/// Runs `statement(instances)` through sp_executesql with every window
/// starting after `after` and ending at `upto`.
fn ask(s: &mut Session, instances: &[&str], after: &[u8], upto: &[u8]) -> Vec<Output> {
    let binary = |v: &[u8]| {
        (
            DataType::VarBinary(Length::Fixed(8000)),
            Value::Binary(v.to_vec()),
        )
    };
    let lsns: Vec<(DataType, Value)> = std::iter::once(binary(upto))
        .chain(instances.iter().map(|_| binary(after)))
        .collect();
    let declared: Vec<String> = (1..=lsns.len())
        .map(|i| format!("@P{i} varbinary(8000)"))
        .collect();
    let text = |t: String| Param {
        name: String::new(),
        ty: DataType::NVarChar(Length::Max),
        value: Value::String(t),
        output: false,
    };
    let mut params = vec![text(statement(instances)), text(declared.join(", "))];
    params.extend(lsns.into_iter().enumerate().map(|(i, (ty, value))| Param {
        name: format!("@P{}", i + 1),
        ty,
        value,
        output: false,
    }));
    s.execute(
        Request::Rpc {
            procedure: "sp_executesql".into(),
            params,
        },
        &CancelToken::default(),
    )
}

fn indexes(out: &[Output]) -> Vec<i64> {
    assert!(errors(out).is_empty(), "{:?}", errors(out));
    let sets = result_sets(out);
    assert_eq!(sets.len(), 1, "one result set, also when empty: {out:?}");
    sets[0].1.iter().map(|r| int_of(&r[0])).collect()
}

const ZERO: [u8; 10] = [0; 10];

#[test]
fn changed_tables_union_of_exists_returns_the_branches_with_a_change() {
    let (_e, mut s) = three_tables();
    let at_a = change(&mut s, "a");
    let at_c = change(&mut s, "c");
    let all = ["dbo_a", "dbo_b", "dbo_c"];
    assert_eq!(indexes(&ask(&mut s, &all, &ZERO, &at_c)), [0, 2]);
    assert_eq!(
        indexes(&ask(&mut s, &all, &ZERO, &at_a)),
        [0],
        "end is inclusive"
    );
    assert_eq!(
        indexes(&ask(&mut s, &all, &at_a, &at_c)),
        [2],
        "start is exclusive"
    );
    assert_eq!(indexes(&ask(&mut s, &all, &at_c, &at_c)), Vec::<i64>::new());
}

#[test]
fn changed_tables_branch_without_from_is_one_row_when_where_holds() {
    let (_e, mut s) = three_tables();
    assert_eq!(
        rows(
            &mut s,
            "SELECT 7 WHERE EXISTS (SELECT 1 FROM dbo.a) UNION ALL SELECT 8 WHERE 1 = 1"
        ),
        vec![vec![Value::Int(8)]]
    );
    ok(&mut s, "INSERT INTO dbo.a VALUES (1), (2)");
    assert_eq!(
        rows(
            &mut s,
            "SELECT 7 WHERE EXISTS (SELECT 1 FROM dbo.a) UNION ALL SELECT 8 WHERE 1 = 0"
        ),
        vec![vec![Value::Int(7)]],
        "EXISTS is one row however many rows match"
    );
}

fn login(e: &Engine, s: &mut Session, grants: &str) -> Session {
    ok(
        s,
        &format!("CREATE LOGIN rd WITH PASSWORD = 'Pw_12345' CREATE USER rd FOR LOGIN rd {grants}"),
    );
    let login = e.login(&LoginRequest {
        user: "rd".into(),
        password: "Pw_12345".into(),
        database: Some("shop".into()),
        app_name: "test".into(),
        host_name: "host".into(),
        encrypted: false,
        client_addr: None,
    });
    match login {
        Ok(session) => session,
        Err(e) => panic!("login rd: {e}"),
    }
}

#[test]
fn changed_tables_denied_change_table_fails_the_statement_with_229_naming_it() {
    let (e, mut s) = three_tables();
    let at_a = change(&mut s, "a");
    let mut rd = login(
        &e,
        &mut s,
        "GRANT SELECT ON SCHEMA::cdc TO rd DENY SELECT ON cdc.dbo_b_CT TO rd",
    );
    let out = ask(&mut rd, &["dbo_a", "dbo_b", "dbo_c"], &ZERO, &at_a);
    let err = errors(&out);
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!((err[0].number, err[0].class, err[0].state), (229, 14, 5));
    assert_eq!(
        err[0].message,
        "The SELECT permission was denied on the object 'dbo_b_CT', database 'shop', schema 'cdc'."
    );
    assert!(
        result_sets(&out).is_empty(),
        "no rows of the other branches"
    );
    assert_eq!(
        indexes(&ask(&mut rd, &["dbo_a", "dbo_c"], &ZERO, &at_a)),
        [0]
    );
    // Permission is checked on the object, whatever its rows.
    let empty = ask(&mut rd, &["dbo_b"], &at_a, &at_a);
    assert_eq!(
        errors(&empty).iter().map(|e| e.number).collect::<Vec<_>>(),
        [229]
    );
}

#[test]
fn changed_tables_missing_change_table_fails_the_statement_with_208() {
    let (_e, mut s) = three_tables();
    let at_a = change(&mut s, "a");
    let out = ask(&mut s, &["dbo_a", "dbo_gone"], &ZERO, &at_a);
    let err = errors(&out);
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!(err[0].number, 208);
    assert_eq!(err[0].message, "Invalid object name 'cdc.dbo_gone_CT'.");
    assert!(result_sets(&out).is_empty());
    // The session goes on.
    assert_eq!(indexes(&ask(&mut s, &["dbo_a"], &ZERO, &at_a)), [0]);
}
