//! Change Data Capture: what the capture job writes and what the query
//! functions return, as learn.microsoft.com documents them.
//!
//! - cdc.fn_cdc_get_all_changes_<capture_instance>:
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/cdc-fn-cdc-get-all-changes-capture-instance-transact-sql>
//! - cdc.fn_cdc_get_net_changes_<capture_instance>:
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/cdc-fn-cdc-get-net-changes-capture-instance-transact-sql>
//! - sys.sp_cdc_enable_table:
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-enable-table-transact-sql>

use tiberius::Row;

use crate::support::cdc::{enable_db, lsn_literal, orders_with_cdc, wait_for_capture};
use crate::support::server::Client;
use crate::support::{TestServer, run};

const ORDERS: &str = "CREATE TABLE dbo.orders (\
     id int NOT NULL PRIMARY KEY, \
     status nvarchar(20) NOT NULL, \
     amount int NOT NULL)";

fn lsn(row: &Row, column: &str) -> Vec<u8> {
    row.get::<&[u8], _>(column)
        .unwrap_or_else(|| panic!("{column} is not NULL"))
        .to_vec()
}

fn int(row: &Row, column: &str) -> i32 {
    row.get::<i32, _>(column)
        .unwrap_or_else(|| panic!("{column} is not NULL"))
}

async fn rows(client: &mut Client, sql: &str) -> Vec<Row> {
    run(client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .flatten()
        .collect()
}

/// "Changes committed in the same transaction share the same commit LSN
/// value" and `__$seqval` "orders changes to a row within a transaction";
/// a later transaction commits at a higher LSN.
#[tokio::test]
async fn changes_of_one_transaction_share_the_commit_lsn_and_order_by_seqval() {
    let server = TestServer::start().await;
    let mut client = orders_with_cdc(&server, ORDERS, true).await.0;
    run(
        &mut client,
        "BEGIN TRAN; \
         INSERT INTO dbo.orders VALUES (1, N'new', 10); \
         INSERT INTO dbo.orders VALUES (2, N'new', 20); \
         UPDATE dbo.orders SET status = N'paid' WHERE id = 1; \
         DELETE FROM dbo.orders WHERE id = 2; \
         COMMIT;",
    )
    .await
    .expect("transaction commits");
    let first = wait_for_capture(&mut client, "dbo_orders", None, 5).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (3, N'new', 30)")
        .await
        .expect("insert");
    let second = wait_for_capture(&mut client, "dbo_orders", Some(&first), 1).await;
    assert!(second > first, "a later commit has a higher LSN");

    let changes = rows(
        &mut client,
        "SELECT __$start_lsn, __$seqval, __$operation, id, status \
         FROM cdc.fn_cdc_get_all_changes_dbo_orders(sys.fn_cdc_get_min_lsn(N'dbo_orders'), sys.fn_cdc_get_max_lsn(), N'all') \
         ORDER BY __$start_lsn, __$seqval",
    )
    .await;
    let ops: Vec<(i32, i32)> = changes
        .iter()
        .map(|r| (int(r, "__$operation"), int(r, "id")))
        .collect();
    assert_eq!(
        ops,
        vec![(2, 1), (2, 2), (4, 1), (1, 2), (2, 3)],
        "insert, insert, update (new values only with N'all'), delete, then the next transaction"
    );
    let in_txn: Vec<Vec<u8>> = changes[..4]
        .iter()
        .map(|r| lsn(r, "__$start_lsn"))
        .collect();
    assert!(
        in_txn.iter().all(|l| *l == first),
        "one commit LSN for the whole transaction"
    );
    assert_eq!(lsn(&changes[4], "__$start_lsn"), second);
    let seqvals: Vec<Vec<u8>> = changes[..4].iter().map(|r| lsn(r, "__$seqval")).collect();
    assert!(
        seqvals.windows(2).all(|w| w[0] < w[1]),
        "__$seqval grows in statement order within the transaction: {seqvals:?}"
    );
    assert_eq!(
        changes[2].get::<&str, _>("status"),
        Some("paid"),
        "the update row carries the new value"
    );
}

/// With N'all update old' an update is two rows: operation 3 with the
/// values before and operation 4 with the values after; `__$update_mask`
/// has the bits of the changed columns set.
#[tokio::test]
async fn all_update_old_returns_before_and_after_images() {
    let server = TestServer::start().await;
    let mut client = orders_with_cdc(&server, ORDERS, true).await.0;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'new', 10)")
        .await
        .expect("insert");
    let inserted = wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    run(
        &mut client,
        "UPDATE dbo.orders SET status = N'paid', amount = 12 WHERE id = 1",
    )
    .await
    .expect("update");
    let updated = wait_for_capture(&mut client, "dbo_orders", Some(&inserted), 2).await;

    let from = lsn_literal(&updated);
    let pairs = rows(
        &mut client,
        &format!(
            "SELECT __$start_lsn, __$seqval, __$operation, id, status, amount, \
               sys.fn_cdc_is_bit_set(sys.fn_cdc_get_column_ordinal(N'dbo_orders', N'id'), __$update_mask) AS id_changed, \
               sys.fn_cdc_is_bit_set(sys.fn_cdc_get_column_ordinal(N'dbo_orders', N'status'), __$update_mask) AS status_changed, \
               sys.fn_cdc_is_bit_set(sys.fn_cdc_get_column_ordinal(N'dbo_orders', N'amount'), __$update_mask) AS amount_changed \
             FROM cdc.fn_cdc_get_all_changes_dbo_orders({from}, {from}, N'all update old') \
             ORDER BY __$seqval, __$operation"
        ),
    )
    .await;
    assert_eq!(pairs.len(), 2, "one update, two rows");
    let (before, after) = (&pairs[0], &pairs[1]);
    assert_eq!(int(before, "__$operation"), 3);
    assert_eq!(int(after, "__$operation"), 4);
    assert_eq!(lsn(before, "__$seqval"), lsn(after, "__$seqval"));
    assert_eq!(lsn(before, "__$start_lsn"), updated);
    assert_eq!(
        (
            before.get::<&str, _>("status"),
            before.get::<i32, _>("amount")
        ),
        (Some("new"), Some(10))
    );
    assert_eq!(
        (
            after.get::<&str, _>("status"),
            after.get::<i32, _>("amount")
        ),
        (Some("paid"), Some(12))
    );
    for row in [before, after] {
        assert_eq!(row.get::<bool, _>("id_changed"), Some(false));
        assert_eq!(row.get::<bool, _>("status_changed"), Some(true));
        assert_eq!(row.get::<bool, _>("amount_changed"), Some(true));
    }

    let only_new = rows(
        &mut client,
        &format!(
            "SELECT __$operation FROM cdc.fn_cdc_get_all_changes_dbo_orders({from}, {from}, N'all')"
        ),
    )
    .await;
    assert_eq!(
        only_new
            .iter()
            .map(|r| int(r, "__$operation"))
            .collect::<Vec<_>>(),
        vec![4],
        "N'all' returns the new values only"
    );
}

/// Net changes return one row per source row with its final content: an
/// insert then update is an insert with the new values, an insert then
/// delete is nothing, an existing row's updates are one update and its
/// delete is a delete. With N'all', `__$update_mask` is NULL.
#[tokio::test]
async fn net_changes_collapse_each_row_to_its_final_state() {
    let server = TestServer::start().await;
    let mut client = orders_with_cdc(&server, ORDERS, true).await.0;
    run(
        &mut client,
        "INSERT INTO dbo.orders VALUES (3, N'new', 30); INSERT INTO dbo.orders VALUES (4, N'new', 40);",
    )
    .await
    .expect("seed rows");
    let seeded = wait_for_capture(&mut client, "dbo_orders", None, 2).await;

    for sql in [
        "INSERT INTO dbo.orders VALUES (1, N'new', 10)",
        "UPDATE dbo.orders SET status = N'paid' WHERE id = 1",
        "INSERT INTO dbo.orders VALUES (2, N'new', 20)",
        "DELETE FROM dbo.orders WHERE id = 2",
        "UPDATE dbo.orders SET amount = 31 WHERE id = 3",
        "UPDATE dbo.orders SET amount = 32 WHERE id = 3",
        "DELETE FROM dbo.orders WHERE id = 4",
    ] {
        run(&mut client, sql).await.expect(sql);
    }
    // Row changes: 1 + 2 + 1 + 1 + 2 + 2 + 1 = 10 change-table rows.
    let last = wait_for_capture(&mut client, "dbo_orders", Some(&seeded), 10).await;

    let from = format!("sys.fn_cdc_increment_lsn({})", lsn_literal(&seeded));
    let net = rows(
        &mut client,
        &format!(
            "SELECT __$start_lsn, __$operation, __$update_mask, id, status, amount \
             FROM cdc.fn_cdc_get_net_changes_dbo_orders({from}, {}, N'all') ORDER BY id",
            lsn_literal(&last)
        ),
    )
    .await;
    let summary: Vec<(i32, i32, Option<&str>, Option<i32>)> = net
        .iter()
        .map(|r| {
            (
                int(r, "id"),
                int(r, "__$operation"),
                r.get::<&str, _>("status"),
                r.get::<i32, _>("amount"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, 2, Some("paid"), Some(10)),
            (3, 4, Some("new"), Some(32)),
            (4, 1, Some("new"), Some(40)),
        ]
    );
    assert!(
        net.iter()
            .all(|r| r.get::<&[u8], _>("__$update_mask").is_none()),
        "N'all' leaves __$update_mask NULL"
    );
    assert_eq!(
        lsn(&net[2], "__$start_lsn"),
        last,
        "the LSN of the row's final change (the delete of row 4 came last)"
    );
    assert!(
        lsn(&net[1], "__$start_lsn") < last && lsn(&net[1], "__$start_lsn") > seeded,
        "row 3's final update came before the last delete"
    );
}

/// A table can have two capture instances with different captured
/// columns; each function returns only its own columns and both see the
/// same change at the same commit LSN.
#[tokio::test]
async fn two_capture_instances_capture_different_columns() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    run(&mut client, ORDERS).await.expect("create table");
    enable_db(&mut client).await;
    run(
        &mut client,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
           @role_name = NULL, @capture_instance = N'orders_full'; \
         EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', \
           @role_name = NULL, @capture_instance = N'orders_narrow', \
           @captured_column_list = N'id, status';",
    )
    .await
    .expect("two capture instances");
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'new', 10)")
        .await
        .expect("insert");
    let full = wait_for_capture(&mut client, "orders_full", None, 1).await;
    let narrow = wait_for_capture(&mut client, "orders_narrow", None, 1).await;
    assert_eq!(full, narrow, "one change, one commit LSN");

    let instances = rows(
        &mut client,
        "SELECT ct.capture_instance, COUNT(cc.column_name) AS captured \
         FROM cdc.change_tables AS ct JOIN cdc.captured_columns AS cc ON cc.object_id = ct.object_id \
         WHERE ct.source_object_id = OBJECT_ID(N'dbo.orders') \
         GROUP BY ct.capture_instance ORDER BY ct.capture_instance",
    )
    .await;
    let instances: Vec<(String, i32)> = instances
        .iter()
        .map(|r| {
            (
                r.get::<&str, _>("capture_instance")
                    .unwrap_or_default()
                    .to_string(),
                int(r, "captured"),
            )
        })
        .collect();
    assert_eq!(
        instances,
        vec![
            ("orders_full".to_string(), 3),
            ("orders_narrow".to_string(), 2)
        ]
    );

    let at = lsn_literal(&full);
    for (ci, expected) in [
        ("orders_full", vec!["id", "status", "amount"]),
        ("orders_narrow", vec!["id", "status"]),
    ] {
        let result = rows(
            &mut client,
            &format!("SELECT * FROM cdc.fn_cdc_get_all_changes_{ci}({at}, {at}, N'all')"),
        )
        .await;
        assert_eq!(result.len(), 1, "{ci}");
        let names: Vec<&str> = result[0].columns().iter().map(|c| c.name()).collect();
        let captured: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !n.starts_with("__$"))
            .collect();
        assert_eq!(captured, expected, "{ci} returns its captured columns");
        assert_eq!(
            &names[..4],
            [
                "__$start_lsn",
                "__$seqval",
                "__$operation",
                "__$update_mask"
            ],
            "{ci}: the four metadata columns come first"
        );
    }
}
