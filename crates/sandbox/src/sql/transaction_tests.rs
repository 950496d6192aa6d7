//! Transactions: rollback and commit, concurrent writers, readers waiting
//! for uncommitted changes, and the log CDC reads.

use std::thread;

use crate::sql::ChangeOp;
use crate::sql::test_support::{engine, int, ok, rows, shop, text};

#[test]
fn rollback_undoes_insert_update_delete_and_commit_keeps_them() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "BEGIN TRANSACTION
         UPDATE customers SET name = N'Zed' WHERE id = 1
         DELETE FROM customers WHERE id = 2
         INSERT INTO customers VALUES (9, N'New', NULL)
         UPDATE customers SET id = id + 10
         ROLLBACK",
    );
    let r = rows(&mut s, "SELECT id, name FROM customers ORDER BY id");
    assert_eq!(
        r,
        vec![
            vec![int(1), text("Ann")],
            vec![int(2), text("Bob")],
            vec![int(3), text("Cid")]
        ]
    );
    let r = rows(
        &mut s,
        "BEGIN TRAN UPDATE customers SET id = id + 1 COMMIT SELECT id FROM customers ORDER BY 1",
    );
    assert_eq!(r, vec![vec![int(2)], vec![int(3)], vec![int(4)]]);
    let r = rows(&mut s, "SELECT @@TRANCOUNT");
    assert_eq!(r, vec![vec![int(0)]]);
}

#[test]
fn concurrent_sessions_insert_consistently() {
    let e = engine();
    assert!(e.run_script("CREATE DATABASE c\nGO\nUSE c CREATE TABLE t (id int IDENTITY PRIMARY KEY, who int NOT NULL)").is_ok());
    let threads: Vec<_> = (0..8)
        .map(|w| {
            let e = e.clone();
            thread::spawn(move || {
                let mut s = e.sa_session();
                ok(&mut s, "USE c");
                for i in 0..25 {
                    let sql = if i % 5 == 0 {
                        format!("BEGIN TRAN INSERT INTO t (who) VALUES ({w}) INSERT INTO t (who) VALUES ({w}) COMMIT")
                    } else if i % 7 == 0 {
                        format!("BEGIN TRAN INSERT INTO t (who) VALUES ({w}) ROLLBACK")
                    } else {
                        format!("INSERT INTO t (who) VALUES ({w}); SELECT COUNT(*) FROM t")
                    };
                    ok(&mut s, &sql);
                }
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().is_ok());
    }
    let mut s = e.sa_session();
    ok(&mut s, "USE c");
    // Per worker: 5 x 2 (explicit) + 3 rolled back (i = 7, 14, 21) + 17 single.
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM t"),
        vec![vec![int(8 * 27)]]
    );
    assert_eq!(
        rows(&mut s, "SELECT COUNT(DISTINCT id) FROM t"),
        vec![vec![int(8 * 27)]]
    );
}

#[test]
fn reader_waits_for_uncommitted_changes() {
    let (e, mut writer) = shop();
    ok(
        &mut writer,
        "BEGIN TRAN UPDATE customers SET name = N'Changed' WHERE id = 1",
    );
    let e1 = e.clone();
    // A reader that finds the change waits for the writer to roll back and
    // then sees the committed value, never the uncommitted one.
    let first = thread::spawn(move || {
        let mut r = e1.sa_session();
        ok(&mut r, "USE shop");
        rows(&mut r, "SELECT name FROM customers WHERE id = 1")
    });
    while e.blocked_sessions() == 0 {
        thread::yield_now();
    }
    ok(&mut writer, "ROLLBACK");
    assert_eq!(first.join().unwrap_or_default(), vec![vec![text("Ann")]]);
    ok(
        &mut writer,
        "BEGIN TRAN UPDATE customers SET name = N'Changed' WHERE id = 1",
    );
    let e2 = e.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = thread::spawn(move || {
        let mut r = e2.sa_session();
        ok(&mut r, "USE shop");
        // Unchanged tables are readable meanwhile.
        let n = rows(&mut r, "SELECT COUNT(*) FROM orders");
        let _ = tx.send(n);
        rows(&mut r, "SELECT name FROM customers WHERE id = 1")
    });
    assert_eq!(rx.recv().ok(), Some(vec![vec![int(4)]]));
    ok(&mut writer, "COMMIT");
    let seen = reader.join().unwrap_or_default();
    assert_eq!(seen, vec![vec![text("Changed")]]);
}

#[test]
fn transaction_log_records_commits_only() {
    let (e, mut s) = shop();
    let before = e.transaction_log("shop").map(|l| l.len()).unwrap_or(0);
    ok(
        &mut s,
        "BEGIN TRAN UPDATE customers SET id = 10 WHERE id = 1 DELETE FROM customers WHERE id = 2 COMMIT",
    );
    ok(
        &mut s,
        "BEGIN TRAN INSERT INTO customers VALUES (50, N'x', NULL) ROLLBACK",
    );
    ok(&mut s, "INSERT INTO customers VALUES (60, N'y', NULL)");
    let log = e.transaction_log("shop").unwrap_or_default();
    assert_eq!(log.len(), before + 2);
    let rec = &log[before];
    assert!(rec.begin_time <= rec.commit_time);
    assert_eq!(rec.changes.len(), 2);
    assert_eq!(rec.changes[0].op, ChangeOp::Update);
    assert_eq!(
        rec.changes[0].before.as_deref().map(|r| r[0].clone()),
        Some(int(1))
    );
    assert_eq!(
        rec.changes[0].after.as_deref().map(|r| r[0].clone()),
        Some(int(10))
    );
    assert_eq!(rec.changes[1].op, ChangeOp::Delete);
    assert_eq!(log[before + 1].changes[0].op, ChangeOp::Insert);
    assert_eq!(log[before + 1].sequence, rec.sequence + 1);
}
