//! Sessions: result sets and DONE, USE and identity scope, variables,
//! SQL Server's error-unwinding rules, and cancelling a running batch.

use std::thread;

use crate::sql::request::{CancelToken, Output, Request};
use crate::sql::test_support::{
    engine, error_numbers, errors, int, int_of, ok, result_sets, rows, run, shop, text,
};

#[test]
fn select_without_from_and_several_result_sets() {
    let e = engine();
    let mut s = e.sa_session();
    let out = run(
        &mut s,
        "SELECT 1 AS a, N'x' AS b; SELECT 2 SELECT DB_NAME()",
    );
    let sets = result_sets(&out);
    assert_eq!(sets.len(), 3);
    assert_eq!(sets[0].0, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(sets[0].1, vec![vec![int(1), text("x")]]);
    assert_eq!(sets[2].1, vec![vec![text("master")]]);
    let dones = out
        .iter()
        .filter(|o| matches!(o, Output::Done { rows: Some(1) }))
        .count();
    assert_eq!(dones, 3);
}

#[test]
fn use_reports_database_change_and_identity_scope() {
    let (_e, mut s) = shop();
    let out = run(&mut s, "USE master");
    assert!(out.contains(&Output::DatabaseChanged {
        from: "shop".into(),
        to: "master".into()
    }));
    assert_eq!(s.database(), "master");
    ok(&mut s, "USE shop");
    let r = rows(
        &mut s,
        "INSERT INTO orders (customer_id, amount) VALUES (2, 1); SELECT SCOPE_IDENTITY(), @@ROWCOUNT",
    );
    assert_eq!(int_of(&r[0][0]), 5);
    assert_eq!(int_of(&r[0][1]), 1);
}

#[test]
fn variables_assignment_select_and_update_from() {
    let (_e, mut s) = shop();
    let out = run(
        &mut s,
        "DECLARE @n int = 2, @name nvarchar(50)
         SET @n = @n + 1
         SELECT @name = name FROM customers WHERE id = @n
         SELECT @n AS n, @name AS name",
    );
    let sets = result_sets(&out);
    assert!(errors(&out).is_empty(), "{out:?}");
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].1, vec![vec![int(3), text("Cid")]]);
    ok(
        &mut s,
        "UPDATE o SET note = 'big' FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.name = N'Ann'",
    );
    let r = rows(&mut s, "SELECT COUNT(*) FROM orders WHERE note = 'big'");
    assert_eq!(r, vec![vec![int(2)]]);
    ok(
        &mut s,
        "DELETE o FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.city IS NULL",
    );
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM orders"),
        vec![vec![int(3)]]
    );
}

#[test]
fn error_numbers_and_abort_semantics() {
    let (_e, mut s) = shop();
    // 2627 ends the statement only: the next statement runs.
    let out = run(
        &mut s,
        "INSERT INTO customers VALUES (1, N'Dup', NULL) SELECT COUNT(*) FROM customers",
    );
    assert_eq!(error_numbers(&out), vec![2627]);
    assert_eq!(result_sets(&out)[0].1, vec![vec![int(3)]]);
    // A multi-row insert failing half-way leaves nothing behind.
    let out = run(
        &mut s,
        "INSERT INTO customers VALUES (7, N'x', NULL), (3, N'y', NULL)",
    );
    assert_eq!(error_numbers(&out), vec![2627]);
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM customers WHERE id = 7"),
        vec![vec![int(0)]]
    );
    // 515 ends the statement.
    let out = run(
        &mut s,
        "INSERT INTO customers (id, name) VALUES (8, NULL) SELECT 1",
    );
    assert_eq!(error_numbers(&out), vec![515]);
    assert_eq!(result_sets(&out).len(), 1);
    // 8134 ends the statement.
    let out = run(&mut s, "SELECT 1/0 SELECT 2");
    assert_eq!(error_numbers(&out), vec![8134]);
    assert_eq!(result_sets(&out).len(), 1);
    // 208 and 207 end the batch.
    for sql in [
        "SELECT * FROM nope SELECT 1",
        "SELECT nope FROM customers SELECT 1",
    ] {
        let out = run(&mut s, sql);
        assert_eq!(result_sets(&out).len(), 0, "{sql}");
        assert_eq!(errors(&out).len(), 1);
    }
    assert_eq!(error_numbers(&run(&mut s, "SELECT * FROM nope")), vec![208]);
    assert_eq!(
        error_numbers(&run(&mut s, "SELECT nope FROM customers")),
        vec![207]
    );
    // 102: nothing of the batch runs.
    let out = run(
        &mut s,
        "INSERT INTO customers VALUES (20, N'a', NULL) SELEC 1",
    );
    assert_eq!(error_numbers(&out), vec![102]);
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM customers WHERE id = 20"),
        vec![vec![int(0)]]
    );
    // 137: undeclared variable.
    assert_eq!(error_numbers(&run(&mut s, "SELECT @nope")), vec![137]);
    // Unsupported statements name the construct.
    let e = errors(&run(&mut s, "CREATE VIEW v AS SELECT 1"));
    assert!(e[0].message.contains("CREATE VIEW"), "{e:?}");
}

#[test]
fn waitfor_is_cancelled_from_another_thread() {
    let e = engine();
    let mut s = e.sa_session();
    let cancel = CancelToken::default();
    let c2 = cancel.clone();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let handle = thread::spawn(move || {
        let _ = started_tx.send(());
        let out = s.execute(
            Request::Batch {
                sql: "WAITFOR DELAY '00:10:00' SELECT 1".into(),
            },
            &c2,
        );
        (out, s)
    });
    let _ = started_rx.recv();
    cancel.cancel();
    let (out, _s) = handle.join().unwrap_or_else(|_| panic!("thread panicked"));
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Message(m) if m.is_cancelled())),
        "{out:?}"
    );
    assert!(result_sets(&out).is_empty());
}
