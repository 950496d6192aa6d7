//! DDL, DML, transactions and multi-statement batches, as a client sees them.

use crate::support::{TestServer, query, run, scalar};

#[tokio::test]
async fn ddl_and_dml_change_what_select_returns() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE SCHEMA sales; \
         CREATE TABLE sales.orders ( \
             id int IDENTITY(1,1) NOT NULL PRIMARY KEY, \
             customer nvarchar(40) NOT NULL, \
             qty int NOT NULL DEFAULT 1, \
             price decimal(10,2) NOT NULL, \
             total AS qty * price);",
    )
    .await
    .expect("DDL runs");

    let inserted = client
        .execute(
            "INSERT INTO sales.orders (customer, qty, price) VALUES (@P1, 2, 9.99), (@P2, 3, 1.50)",
            &[&"ada", &"grace"],
        )
        .await
        .expect("insert runs");
    assert_eq!(inserted.total(), 2);
    run(
        &mut client,
        "INSERT INTO sales.orders (customer, price) VALUES ('linus', 100)",
    )
    .await
    .expect("insert with default runs");

    let updated = client
        .execute(
            "UPDATE sales.orders SET qty = qty + 1 WHERE customer IN (@P1, @P2)",
            &[&"ada", &"linus"],
        )
        .await
        .expect("update runs");
    assert_eq!(updated.total(), 2);
    let deleted = client
        .execute("DELETE FROM sales.orders WHERE price < 5", &[])
        .await
        .expect("delete runs");
    assert_eq!(deleted.total(), 1);

    run(
        &mut client,
        "ALTER TABLE sales.orders ADD note varchar(100) NULL",
    )
    .await
    .expect("alter add runs");
    run(
        &mut client,
        "UPDATE sales.orders SET note = 'vip' WHERE id = 3",
    )
    .await
    .expect("update new column runs");

    let rows = query(
        &mut client,
        "SELECT id, customer, qty, total, note FROM sales.orders ORDER BY id",
        &[],
    )
    .await
    .expect("select runs");
    let seen: Vec<(i32, String, i32, String, Option<String>)> = rows
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>(0).expect("id"),
                r.get::<&str, _>(1).expect("customer").to_string(),
                r.get::<i32, _>(2).expect("qty"),
                r.get::<tiberius::numeric::Numeric, _>(3)
                    .expect("total")
                    .to_string(),
                r.get::<&str, _>(4).map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (1, "ada".into(), 3, "29.97".into(), None),
            (3, "linus".into(), 2, "200.00".into(), Some("vip".into())),
        ]
    );

    let columns: Vec<String> = query(
        &mut client,
        "SELECT c.name FROM sys.columns AS c WHERE c.object_id = OBJECT_ID('sales.orders') ORDER BY c.column_id",
        &[],
    )
    .await
    .expect("catalog query runs")
    .iter()
    .map(|r| r.get::<&str, _>(0).expect("name").to_string())
    .collect();
    assert_eq!(columns, ["id", "customer", "qty", "price", "total", "note"]);

    run(
        &mut client,
        "ALTER TABLE sales.orders DROP COLUMN note; DROP TABLE sales.orders;",
    )
    .await
    .expect("drop runs");
    let gone: Option<i32> = scalar(
        &mut client,
        "SELECT COUNT(*) FROM sys.tables WHERE name = 'orders'",
    )
    .await;
    assert_eq!(gone, Some(0));
}

#[tokio::test]
async fn rollback_undoes_and_commit_keeps() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    run(
        &mut client,
        "CREATE TABLE dbo.accounts (id int PRIMARY KEY, balance int NOT NULL); \
         INSERT INTO dbo.accounts VALUES (1, 100), (2, 100);",
    )
    .await
    .expect("setup runs");

    let trancount: Option<i32> = scalar(
        &mut client,
        "BEGIN TRANSACTION; \
         UPDATE dbo.accounts SET balance = balance - 30 WHERE id = 1; \
         DELETE FROM dbo.accounts WHERE id = 2; \
         INSERT INTO dbo.accounts VALUES (3, 5); \
         SELECT @@TRANCOUNT;",
    )
    .await;
    assert_eq!(trancount, Some(1));
    run(&mut client, "ROLLBACK TRANSACTION")
        .await
        .expect("rollback runs");
    let after_rollback = query(
        &mut client,
        "SELECT id, balance FROM dbo.accounts ORDER BY id",
        &[],
    )
    .await
    .expect("select runs")
    .iter()
    .map(|r| (r.get::<i32, _>(0), r.get::<i32, _>(1)))
    .collect::<Vec<_>>();
    assert_eq!(
        after_rollback,
        vec![(Some(1), Some(100)), (Some(2), Some(100))]
    );

    run(
        &mut client,
        "BEGIN TRAN; UPDATE dbo.accounts SET balance = 70 WHERE id = 1; COMMIT;",
    )
    .await
    .expect("commit runs");
    let balance: Option<i32> =
        scalar(&mut client, "SELECT balance FROM dbo.accounts WHERE id = 1").await;
    assert_eq!(balance, Some(70));
    let open: Option<i32> = scalar(&mut client, "SELECT @@TRANCOUNT").await;
    assert_eq!(open, Some(0));
}

#[tokio::test]
async fn one_batch_returns_several_result_sets_in_order() {
    let server = TestServer::start().await;
    let (mut client, _db) = server.scratch_database().await;
    let results = run(
        &mut client,
        "CREATE TABLE dbo.n (v int PRIMARY KEY); \
         INSERT INTO dbo.n VALUES (1), (2), (3), (4); \
         SELECT v FROM dbo.n WHERE v % 2 = 0 ORDER BY v; \
         DECLARE @total int; \
         SELECT @total = SUM(v) FROM dbo.n; \
         SELECT @total AS total, @@ROWCOUNT AS rc; \
         SELECT COUNT(*) AS c, MAX(v) AS m FROM dbo.n GROUP BY v % 2 ORDER BY m;",
    )
    .await
    .expect("batch runs");
    assert_eq!(results.len(), 3, "three result sets");
    let evens: Vec<i32> = results[0]
        .iter()
        .filter_map(|r| r.get::<i32, _>(0))
        .collect();
    assert_eq!(evens, [2, 4]);
    assert_eq!(results[1][0].get::<i32, _>("total"), Some(10));
    assert_eq!(results[1][0].get::<i32, _>("rc"), Some(1));
    let groups: Vec<(i32, i32)> = results[2]
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>("c").expect("c"),
                r.get::<i32, _>("m").expect("m"),
            )
        })
        .collect();
    assert_eq!(groups, [(2, 3), (2, 4)]);
}

#[tokio::test]
async fn joins_subqueries_and_builtins_evaluate_like_sql_server() {
    let server = TestServer::start().await;
    let (mut client, db) = server.scratch_database().await;
    let results = run(
        &mut client,
        "CREATE TABLE dbo.customers (id int PRIMARY KEY, name varchar(20) NOT NULL); \
         CREATE TABLE dbo.orders (id int PRIMARY KEY, customer_id int NOT NULL, total decimal(9,2) NOT NULL); \
         INSERT INTO dbo.customers VALUES (1, 'Ada'), (2, 'Grace'), (3, 'Linus'); \
         INSERT INTO dbo.orders VALUES (10, 1, 5.00), (11, 1, 7.50), (12, 2, 1.25); \
         SELECT c.name, COUNT(o.id) AS n, ISNULL(SUM(o.total), 0) AS s \
           FROM dbo.customers AS c LEFT JOIN dbo.orders AS o ON o.customer_id = c.id \
           GROUP BY c.name ORDER BY c.name; \
         SELECT TOP (1) name FROM dbo.customers AS c \
           WHERE EXISTS (SELECT 1 FROM dbo.orders AS o WHERE o.customer_id = c.id AND o.total > 6) \
             AND name LIKE 'a%' AND id BETWEEN 1 AND 2; \
         SELECT (SELECT MAX(total) FROM dbo.orders) AS biggest, DB_NAME() AS db, \
           DATEDIFF(day, '2024-01-01', DATEADD(month, 1, '2024-01-31')) AS days, \
           COALESCE(NULL, CONVERT(varchar(10), 42)) AS answer;",
    )
    .await
    .expect("batch runs");
    assert_eq!(results.len(), 3);
    let summary: Vec<(String, i32, String)> = results[0]
        .iter()
        .map(|r| {
            (
                r.get::<&str, _>(0).expect("name").to_string(),
                r.get::<i32, _>(1).expect("n"),
                r.get::<tiberius::numeric::Numeric, _>(2)
                    .expect("s")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("Ada".to_string(), 2, "12.50".to_string()),
            ("Grace".to_string(), 1, "1.25".to_string()),
            ("Linus".to_string(), 0, "0.00".to_string()),
        ]
    );
    assert_eq!(results[1][0].get::<&str, _>(0), Some("Ada"));
    let last = &results[2][0];
    assert_eq!(
        last.get::<tiberius::numeric::Numeric, _>("biggest")
            .map(|n| n.to_string()),
        Some("7.50".into())
    );
    assert_eq!(last.get::<&str, _>("db"), Some(db.as_str()));
    assert_eq!(last.get::<i32, _>("days"), Some(59));
    assert_eq!(last.get::<&str, _>("answer"), Some("42"));
}
