//! The engine as a whole: a million rows, and sharing it between threads.

use std::sync::Arc;

use crate::sql::Engine;
use crate::sql::test_support::{engine, int, ok, rows};

#[test]
fn a_million_narrow_rows() {
    let e = engine();
    assert!(e.run_script("CREATE DATABASE big\nGO\nUSE big CREATE TABLE t (id int NOT NULL PRIMARY KEY, v int NULL)").is_ok());
    let mut s = e.sa_session();
    ok(&mut s, "USE big");
    // Grow by doubling with INSERT ... SELECT: 2^20 rows.
    ok(&mut s, "INSERT INTO t VALUES (0, 0)");
    for k in 0..20 {
        let n = 1 << k;
        ok(
            &mut s,
            &format!("INSERT INTO t (id, v) SELECT id + {n}, v FROM t"),
        );
    }
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM t"),
        vec![vec![int(1 << 20)]]
    );
    assert_eq!(
        rows(&mut s, "SELECT v FROM t WHERE id = 777777"),
        vec![vec![int(0)]]
    );
}

#[test]
fn engine_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Engine>();
    let _ = Arc::new(engine());
}
