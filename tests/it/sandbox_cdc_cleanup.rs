//! Change Data Capture cleanup: the low water mark, reading below it, and
//! the retention-based cleanup job over simulated days.
//!
//! - sys.sp_cdc_cleanup_change_table:
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-cleanup-change-table-transact-sql>
//! - cdc.fn_cdc_get_all_changes_<capture_instance>, Remarks (an LSN range
//!   outside the capture instance's timeline is an error):
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/cdc-fn-cdc-get-all-changes-capture-instance-transact-sql>
//! - sys.sp_cdc_change_job (@retention, minutes) and sys.sp_cdc_start_job:
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-change-job-transact-sql>,
//!   <https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-start-job-transact-sql>

use std::time::Instant;

use crate::support::cdc::{
    advance_clock, lsn_literal, min_lsn, orders_with_cdc, wait_for_capture, wait_until_count,
};
use crate::support::{TestServer, run, scalar, server_error};

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, status nvarchar(20) NOT NULL)";

/// The documented remark says error 208 but quotes the text of error 313,
/// "An insufficient number of arguments were supplied for the procedure or
/// function cdc.fn_cdc_get_all_changes_ ..."; SQL Server raises 313
/// (level 16) with that text, which is what readers match on.
fn assert_out_of_range(error: &tiberius::error::Error) {
    assert_eq!(server_error(error).map(|e| e.0), Some(313), "{error}");
    assert!(
        error
            .to_string()
            .contains("An insufficient number of arguments were supplied for the procedure or function cdc.fn_cdc_get_all_changes"),
        "{error}"
    );
}

/// After cleanup moves the low water mark past a reader's @from_lsn, the
/// reader's next call fails instead of silently skipping the lost changes.
#[tokio::test]
async fn reading_below_the_low_water_mark_after_cleanup_is_error_313() {
    let server = TestServer::start().await;
    let mut client = orders_with_cdc(&server, ORDERS, false).await.0;
    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'old')")
        .await
        .expect("insert");
    let old = wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (2, N'new')")
        .await
        .expect("insert");
    let new = wait_for_capture(&mut client, "dbo_orders", Some(&old), 1).await;

    let read_from_old = format!(
        "SELECT COUNT(*) FROM cdc.fn_cdc_get_all_changes_dbo_orders({}, sys.fn_cdc_get_max_lsn(), N'all')",
        lsn_literal(&old)
    );
    let before: Option<i32> = scalar(&mut client, &read_from_old).await;
    assert_eq!(before, Some(2), "both changes readable before cleanup");

    run(
        &mut client,
        &format!(
            "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', \
             @low_water_mark = {}, @threshold = 5000",
            lsn_literal(&new)
        ),
    )
    .await
    .expect("cleanup runs");

    let low = min_lsn(&mut client, "dbo_orders")
        .await
        .expect("a low water mark");
    assert!(
        low > old && low <= new,
        "the low water mark moved to the new entry (or an earlier one with the same commit time)"
    );
    let left: Option<i32> = scalar(
        &mut client,
        &format!(
            "SELECT COUNT(*) FROM cdc.dbo_orders_CT WHERE __$start_lsn < {}",
            lsn_literal(&low)
        ),
    )
    .await;
    assert_eq!(
        left,
        Some(0),
        "entries below the low water mark are deleted"
    );

    let error = run(&mut client, &read_from_old)
        .await
        .expect_err("@from_lsn is below the capture instance's timeline");
    assert_out_of_range(&error);

    let from_low: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM cdc.fn_cdc_get_all_changes_dbo_orders(sys.fn_cdc_get_min_lsn(N'dbo_orders'), sys.fn_cdc_get_max_lsn(), N'all')",
    )
    .await;
    assert_eq!(from_low, Some(1), "reading from the new minimum works");
}

/// The cleanup job removes change rows older than @retention minutes and
/// moves `sys.fn_cdc_get_min_lsn` forward.
#[tokio::test]
async fn cleanup_job_honours_retention() {
    let server = TestServer::start().await;
    if !server.is_sandbox() {
        return; // needs hours to pass: only the sandbox's clock can be moved
    }
    let mut client = orders_with_cdc(&server, ORDERS, false).await.0;
    run(
        &mut client,
        "EXEC sys.sp_cdc_change_job @job_type = N'cleanup', @retention = 60",
    )
    .await
    .expect("retention set");
    let retention: Option<i64> = scalar(
        &mut client,
        "SELECT retention FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID() AND job_type = N'cleanup'",
    )
    .await;
    assert_eq!(retention, Some(60));

    run(&mut client, "INSERT INTO dbo.orders VALUES (1, N'old')")
        .await
        .expect("insert");
    let old = wait_for_capture(&mut client, "dbo_orders", None, 1).await;
    advance_clock(&mut client, 2 * 3600).await;
    run(&mut client, "INSERT INTO dbo.orders VALUES (2, N'new')")
        .await
        .expect("insert");
    let new = wait_for_capture(&mut client, "dbo_orders", Some(&old), 1).await;

    run(
        &mut client,
        "EXEC sys.sp_cdc_start_job @job_type = N'cleanup'",
    )
    .await
    .expect("cleanup job starts");
    wait_until_count(
        &mut client,
        &format!(
            "SELECT COUNT(*) FROM cdc.dbo_orders_CT WHERE __$start_lsn <= {}",
            lsn_literal(&old)
        ),
        "change rows older than the retention",
        |n| n == 0,
    )
    .await;
    let low = min_lsn(&mut client, "dbo_orders").await.expect("min LSN");
    assert!(
        low > old && low <= new,
        "the low water mark moved past the old change"
    );
    let kept: Option<i32> = scalar(&mut client, "SELECT COUNT(*) FROM cdc.dbo_orders_CT").await;
    assert_eq!(kept, Some(1), "the change inside the retention stays");
}

/// Three simulated days of traffic with a one-day retention: each day's
/// cleanup drops the day before yesterday's changes, keeps the rest, and a
/// reader still holding the first day's LSN gets error 313. The elapsed
/// time is printed, not asserted.
#[tokio::test]
async fn three_simulated_days_with_daily_cleanup() {
    const CHANGES_PER_DAY: i32 = 20;
    let server = TestServer::start().await;
    if !server.is_sandbox() {
        return; // three days of clock: sandbox only
    }
    let started = Instant::now();
    let mut client = orders_with_cdc(&server, ORDERS, false).await.0;
    run(
        &mut client,
        "EXEC sys.sp_cdc_change_job @job_type = N'cleanup', @retention = 1440",
    )
    .await
    .expect("one-day retention");

    let mut day_starts: Vec<Vec<u8>> = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    for day in 0..3usize {
        let values: Vec<String> = (0..CHANGES_PER_DAY)
            .map(|i| format!("({}, N'day{day}')", day as i32 * 1000 + i))
            .collect();
        run(
            &mut client,
            &format!("INSERT INTO dbo.orders VALUES {}", values.join(", ")),
        )
        .await
        .expect("the day's inserts");
        run(
            &mut client,
            &format!(
                "UPDATE dbo.orders SET status = N'shipped' WHERE id >= {}",
                day * 1000
            ),
        )
        .await
        .expect("the day's updates");
        // One polling interval of clock: the capture job runs now rather
        // than up to five real seconds later.
        advance_clock(&mut client, 5).await;
        // One insert transaction (20 rows) and one update (2 rows each).
        let newest = wait_for_capture(
            &mut client,
            "dbo_orders",
            last.as_deref(),
            3 * CHANGES_PER_DAY,
        )
        .await;
        let first_today = crate::support::cdc::binary(
            &mut client,
            &format!(
                "SELECT MIN(__$start_lsn) FROM cdc.dbo_orders_CT WHERE __$start_lsn > {}",
                last.as_deref()
                    .map_or_else(|| "0x00".to_string(), lsn_literal)
            ),
        )
        .await
        .expect("today's first LSN");
        day_starts.push(first_today);
        last = Some(newest);

        if day > 0 {
            run(
                &mut client,
                "EXEC sys.sp_cdc_start_job @job_type = N'cleanup'",
            )
            .await
            .expect("cleanup job starts");
            let yesterday = lsn_literal(&day_starts[day - 1]);
            wait_until_count(
                &mut client,
                &format!(
                    "SELECT COUNT(*) FROM cdc.dbo_orders_CT WHERE __$start_lsn < {}",
                    lsn_literal(&day_starts[day])
                ),
                "yesterday's changes after cleanup",
                |n| n == 0,
            )
            .await;
            let low = min_lsn(&mut client, "dbo_orders").await.expect("min LSN");
            assert!(
                low > day_starts[day - 1],
                "day {day}: the low water mark passed {yesterday}"
            );
            let today: Option<i32> =
                scalar(&mut client, "SELECT COUNT(*) FROM cdc.dbo_orders_CT").await;
            assert_eq!(
                today,
                Some(3 * CHANGES_PER_DAY),
                "day {day}: today's changes stay"
            );
        }
        // A day and an hour later: past the one-day retention.
        advance_clock(&mut client, 25 * 3600).await;
    }

    let error = run(
        &mut client,
        &format!(
            "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders({}, sys.fn_cdc_get_max_lsn(), N'all')",
            lsn_literal(&day_starts[0])
        ),
    )
    .await
    .expect_err("day 0 is gone");
    assert_out_of_range(&error);
    println!(
        "three simulated days with cleanup took {:?}",
        started.elapsed()
    );
}
