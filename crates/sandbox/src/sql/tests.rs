//! Engine tests: batches through `Session::execute`, asserting Outputs.

use std::sync::Arc;
use std::thread;

use super::error::SqlError;
use super::request::{CancelToken, LoginRequest, Output, Param, Request, TransactionEvent};
use super::types::{DataType, Length, Value};
use super::{ChangeOp, Engine, EngineConfig, Session};

fn engine() -> Engine {
    Engine::new(EngineConfig {
        sa_password: "Sa_pass1".into(),
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

fn error_numbers(out: &[Output]) -> Vec<i32> {
    errors(out).iter().map(|e| e.number).collect()
}

fn result_sets(out: &[Output]) -> Vec<(Vec<String>, Vec<Vec<Value>>)> {
    out.iter()
        .filter_map(|o| match o {
            Output::ResultSet { columns, rows } => Some((
                columns.iter().map(|c| c.name.clone()).collect(),
                rows.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// Runs a batch that must succeed; returns its result sets' rows.
fn ok(s: &mut Session, sql: &str) -> Vec<Vec<Vec<Value>>> {
    let out = run(s, sql);
    let e = errors(&out);
    assert!(e.is_empty(), "{sql}: {e:?}");
    result_sets(&out).into_iter().map(|(_, r)| r).collect()
}

/// The single result set of a batch.
fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let mut sets = ok(s, sql);
    assert_eq!(sets.len(), 1, "{sql}");
    sets.remove(0)
}

fn int(v: i32) -> Value {
    Value::Int(v)
}

fn text(v: &str) -> Value {
    Value::String(v.into())
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(i) => i64::from(*i),
        Value::BigInt(i) => *i,
        Value::SmallInt(i) => i64::from(*i),
        Value::TinyInt(i) => i64::from(*i),
        Value::Decimal(d) => d.value as i64,
        Value::Bit(b) => i64::from(*b),
        other => panic!("not an integer: {other:?}"),
    }
}

/// An engine with database `shop`, a table of orders and a customer table.
fn shop() -> (Engine, Session) {
    let e = engine();
    let r = e.run_script(
        "CREATE DATABASE shop
GO
USE shop
CREATE TABLE dbo.customers (id int NOT NULL PRIMARY KEY, name nvarchar(50) NOT NULL, city nvarchar(30) NULL)
CREATE TABLE dbo.orders (
    id int IDENTITY(1,1) NOT NULL,
    customer_id int NOT NULL,
    amount decimal(10,2) NOT NULL DEFAULT 0,
    note varchar(20) NULL,
    doubled AS amount * 2,
    CONSTRAINT PK_orders PRIMARY KEY CLUSTERED (id))
INSERT INTO customers VALUES (1, N'Ann', N'Oslo'), (2, N'Bob', NULL), (3, N'Cid', N'Rome')
INSERT INTO orders (customer_id, amount) VALUES (1, 10.50), (1, 20), (2, 5), (3, 7.25)
GO",
    );
    assert!(r.is_ok(), "{r:?}");
    let mut s = e.sa_session();
    ok(&mut s, "USE shop");
    (e, s)
}

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
fn defaults_identity_and_computed_columns() {
    let (_e, mut s) = shop();
    ok(&mut s, "INSERT INTO orders (customer_id) VALUES (3)");
    let r = rows(
        &mut s,
        "SELECT id, amount, doubled FROM orders WHERE customer_id = 3 ORDER BY id",
    );
    assert_eq!(r.len(), 2);
    assert_eq!(int_of(&r[1][0]), 5);
    assert_eq!(r[1][1], Value::Decimal(super::types::Decimal::new(0, 2)));
    let r = rows(&mut s, "SELECT doubled FROM orders WHERE id = 1");
    let d = super::expr::convert(
        &super::expr::Typed::new(
            r[0][0].clone(),
            DataType::Decimal {
                precision: 38,
                scale: 2,
            },
        ),
        DataType::Float,
    );
    assert_eq!(d.ok(), Some(Value::Float(21.0)));
}

#[test]
fn identity_values_are_not_reused_after_rollback() {
    let (_e, mut s) = shop();
    let out = run(
        &mut s,
        "BEGIN TRAN INSERT INTO orders (customer_id) VALUES (1) ROLLBACK",
    );
    assert!(errors(&out).is_empty());
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Transaction(TransactionEvent::Begin { .. })))
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Transaction(TransactionEvent::Rollback { .. })))
    );
    ok(&mut s, "INSERT INTO orders (customer_id) VALUES (1)");
    let r = rows(&mut s, "SELECT MAX(id), COUNT(*) FROM orders");
    assert_eq!(int_of(&r[0][0]), 6);
    assert_eq!(int_of(&r[0][1]), 5);
}

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
fn equality_joins_on_key_columns_match_the_nested_loop_results() {
    let (_e, mut s) = shop();
    ok(
        &mut s,
        "CREATE TABLE l (k bigint NULL, b varbinary(10) NULL, tag int);
         CREATE TABLE r (k int NULL, b binary(2) NULL, tag int);
         INSERT INTO l VALUES (1, 0x0001, 1), (2, 0x0002, 2), (2, NULL, 3), (NULL, 0x0003, 4), (9, 0x0009, 5);
         INSERT INTO r VALUES (2, 0x0002, 10), (2, 0x0001, 11), (1, NULL, 12), (NULL, 0x0003, 13), (7, 0x0007, 14);",
    );
    // Each join on one column equality (hash join) must give what the same
    // join written as `x + 0 = y` (a nested loop) gives.
    for (kind, hashed, looped) in [
        ("INNER", "l.k = r.k", "l.k + 0 = r.k"),
        ("LEFT", "r.k = l.k", "l.k + 0 = r.k"),
        ("RIGHT", "l.k = r.k", "l.k + 0 = r.k"),
        ("FULL", "l.k = r.k", "l.k + 0 = r.k"),
        ("INNER", "l.b = r.b", "l.b + 0x = r.b"),
        ("LEFT", "(l.b = r.b)", "l.b + 0x = r.b"),
    ] {
        let sql = |on: &str| {
            format!("SELECT l.tag, r.tag FROM l {kind} JOIN r ON {on} ORDER BY l.tag, r.tag")
        };
        let expected = rows(&mut s, &sql(looped));
        assert!(!expected.is_empty(), "{kind} {looped}");
        assert_eq!(
            rows(&mut s, &sql(hashed)),
            expected,
            "{kind} JOIN ON {hashed}"
        );
    }
    // NULL keys never match: 1-1, and 2-2 twice for each of the two 2s.
    let r = rows(&mut s, "SELECT COUNT(*) FROM l JOIN r ON l.k = r.k");
    assert_eq!(r, vec![vec![int(5)]]);
    // A binary(2) value pads to its length, so 0x0001 matches only 0x0001.
    let r = rows(
        &mut s,
        "SELECT l.tag, r.tag FROM l JOIN r ON l.b = r.b ORDER BY 1",
    );
    assert_eq!(
        r,
        vec![
            vec![int(1), int(11)],
            vec![int(2), int(10)],
            vec![int(4), int(13)]
        ]
    );
}

#[test]
fn queries_join_group_order_top_distinct_subqueries() {
    let (_e, mut s) = shop();
    let r = rows(
        &mut s,
        "SELECT c.name, COUNT(*) AS n, SUM(o.amount) AS total
         FROM customers c INNER JOIN orders o ON o.customer_id = c.id
         GROUP BY c.name HAVING COUNT(*) >= 1 ORDER BY total DESC",
    );
    assert_eq!(r.len(), 3);
    assert_eq!(r[0][0], text("Ann"));
    assert_eq!(int_of(&r[0][1]), 2);
    let r = rows(
        &mut s,
        "SELECT c.id, o.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.amount > 8 ORDER BY c.id, 2",
    );
    assert_eq!(r.len(), 4);
    assert_eq!(r[2], vec![int(2), Value::Null]);
    let r = rows(&mut s, "SELECT TOP (2) id FROM customers ORDER BY id DESC");
    assert_eq!(r, vec![vec![int(3)], vec![int(2)]]);
    let r = rows(
        &mut s,
        "SELECT DISTINCT customer_id FROM orders ORDER BY customer_id",
    );
    assert_eq!(r.len(), 3);
    let r = rows(
        &mut s,
        "SELECT name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.amount > 6) ORDER BY name",
    );
    assert_eq!(r, vec![vec![text("Ann")], vec![text("Cid")]]);
    let r = rows(
        &mut s,
        "SELECT name, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS cnt FROM customers c ORDER BY cnt DESC, name",
    );
    assert_eq!(r[0], vec![text("Ann"), int(2)]);
    let r = rows(
        &mut s,
        "SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE amount < 8) ORDER BY 1",
    );
    assert_eq!(r, vec![vec![int(2)], vec![int(3)]]);
    let r = rows(
        &mut s,
        "SELECT x.n FROM (SELECT name AS n, city FROM customers) AS x WHERE x.city IS NULL",
    );
    assert_eq!(r, vec![vec![text("Bob")]]);
    let r = rows(&mut s, "SELECT c.* FROM customers c WHERE c.name = 'ann'");
    assert_eq!(r, vec![vec![int(1), text("Ann"), text("Oslo")]]);
    let r = rows(
        &mut s,
        "SELECT COUNT(*), MIN(id), MAX(name) FROM customers WHERE 1 = 0",
    );
    assert_eq!(r[0][0], int(0));
    assert_eq!(r[0][1], Value::Null);
    let r = rows(
        &mut s,
        "SELECT id FROM customers UNION ALL SELECT id FROM customers WHERE id = 1 ORDER BY 1",
    );
    assert_eq!(r.len(), 4);
    let r = rows(
        &mut s,
        "SELECT a.id, b.id FROM customers a CROSS JOIN customers b WHERE a.id = 1",
    );
    assert_eq!(r.len(), 3);
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
fn catalog_views_describe_tables() {
    let (_e, mut s) = shop();
    let r = rows(
        &mut s,
        "SELECT c.name, c.column_id, c.system_type_id, c.max_length, c.precision, c.scale, c.is_nullable, c.is_identity, c.is_computed
         FROM sys.columns c JOIN sys.tables t ON t.object_id = c.object_id
         WHERE t.name = 'orders' ORDER BY c.column_id",
    );
    assert_eq!(r.len(), 5);
    assert_eq!(r[0][0], text("id"));
    assert_eq!(r[0][2], Value::TinyInt(56));
    assert_eq!(r[0][7], Value::Bit(true));
    assert_eq!(r[2][2], Value::TinyInt(106));
    assert_eq!(r[2][4], Value::TinyInt(10));
    assert_eq!(r[2][5], Value::TinyInt(2));
    assert_eq!(r[4][8], Value::Bit(true));
    let r = rows(
        &mut s,
        "SELECT i.name, i.is_primary_key, ic.key_ordinal, col.name FROM sys.indexes i
         JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id
         JOIN sys.columns col ON col.object_id = ic.object_id AND col.column_id = ic.column_id
         WHERE i.object_id = OBJECT_ID('dbo.orders')",
    );
    assert_eq!(
        r,
        vec![vec![
            text("PK_orders"),
            Value::Bit(true),
            Value::TinyInt(1),
            text("id")
        ]]
    );
    let r = rows(
        &mut s,
        "SELECT definition FROM sys.computed_columns WHERE name = 'doubled'",
    );
    assert_eq!(r.len(), 1);
    let r = rows(
        &mut s,
        "SELECT DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, IS_NULLABLE, ORDINAL_POSITION
         FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'customers' ORDER BY ORDINAL_POSITION",
    );
    assert_eq!(
        r[1],
        vec![text("nvarchar"), int(50), Value::Null, text("NO"), int(2)]
    );
    assert_eq!(r[0][2], Value::TinyInt(10));
    let r = rows(
        &mut s,
        "SELECT name, is_cdc_enabled FROM sys.databases WHERE name = 'shop'",
    );
    assert_eq!(r, vec![vec![text("shop"), Value::Bit(false)]]);
    let r = rows(
        &mut s,
        "SELECT COUNT(*) FROM sys.types WHERE name IN ('int', 'sysname', 'datetime2')",
    );
    assert_eq!(r, vec![vec![int(3)]]);
    let r = rows(
        &mut s,
        "SELECT s.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id WHERE t.name = 'orders'",
    );
    assert_eq!(r, vec![vec![text("dbo")]]);
}

#[test]
fn ddl_alter_and_drop() {
    let (_e, mut s) = shop();
    ok(&mut s, "CREATE SCHEMA sales");
    ok(
        &mut s,
        "CREATE TABLE sales.t (a int NOT NULL PRIMARY KEY CLUSTERED, b varchar(5))",
    );
    ok(
        &mut s,
        "INSERT INTO shop.sales.t (a, b) VALUES (1, 'x'), (2, NULL)",
    );
    ok(
        &mut s,
        "ALTER TABLE sales.t ADD c int NOT NULL DEFAULT 7, d AS a + 1",
    );
    let r = rows(&mut s, "SELECT a, b, c, d FROM sales.t ORDER BY a");
    assert_eq!(r[1], vec![int(2), Value::Null, int(7), int(3)]);
    ok(
        &mut s,
        "ALTER TABLE sales.t ALTER COLUMN b nvarchar(10) NULL",
    );
    ok(&mut s, "ALTER TABLE sales.t DROP COLUMN c");
    let r = rows(
        &mut s,
        "SELECT name FROM sys.columns WHERE object_id = OBJECT_ID('sales.t') ORDER BY column_id",
    );
    assert_eq!(r, vec![vec![text("a")], vec![text("b")], vec![text("d")]]);
    ok(&mut s, "BEGIN TRAN DROP TABLE sales.t ROLLBACK");
    assert_eq!(
        rows(&mut s, "SELECT COUNT(*) FROM sales.t"),
        vec![vec![int(2)]]
    );
    ok(&mut s, "DROP TABLE sales.t");
    assert_eq!(
        error_numbers(&run(&mut s, "SELECT * FROM sales.t")),
        vec![208]
    );
    assert_eq!(
        error_numbers(&run(&mut s, "CREATE TABLE customers (x int)")),
        vec![2714]
    );
}

#[test]
fn sp_executesql_and_prepared_statements() {
    let (_e, mut s) = shop();
    let p = |name: &str, ty: DataType, value: Value| Param {
        name: name.into(),
        ty,
        value,
        output: false,
    };
    let nv = DataType::NVarChar(Length::Fixed(4000));
    let out = s.execute(
        Request::Rpc {
            procedure: "sp_executesql".into(),
            params: vec![
                p(
                    "",
                    nv,
                    text("SELECT name FROM customers WHERE id = @P1 OR name = @P2"),
                ),
                p("", nv, text("@P1 int, @P2 nvarchar(4000)")),
                p("@P1", DataType::Int, int(1)),
                p("@P2", nv, text("Cid")),
            ],
        },
        &CancelToken::default(),
    );
    assert!(errors(&out).is_empty(), "{out:?}");
    assert_eq!(
        result_sets(&out)[0].1,
        vec![vec![text("Ann")], vec![text("Cid")]]
    );
    assert_eq!(out.last(), Some(&Output::ReturnStatus(0)));

    let mut handle = p("@handle", DataType::Int, Value::Null);
    handle.output = true;
    let out = s.execute(
        Request::Rpc {
            procedure: "sp_prepexec".into(),
            params: vec![
                handle,
                p("", nv, text("@id int")),
                p("", nv, text("SELECT name FROM customers WHERE id = @id")),
                p("", DataType::Int, int(2)),
            ],
        },
        &CancelToken::default(),
    );
    assert_eq!(result_sets(&out)[0].1, vec![vec![text("Bob")]]);
    let h = out
        .iter()
        .find_map(|o| match o {
            Output::ReturnValue(p) => Some(p.value.clone()),
            _ => None,
        })
        .unwrap_or(Value::Null);
    let out = s.execute(
        Request::Rpc {
            procedure: "sp_execute".into(),
            params: vec![
                p("", DataType::Int, h.clone()),
                p("", DataType::Int, int(3)),
            ],
        },
        &CancelToken::default(),
    );
    assert_eq!(result_sets(&out)[0].1, vec![vec![text("Cid")]]);
    s.execute(
        Request::Rpc {
            procedure: "sp_unprepare".into(),
            params: vec![p("", DataType::Int, h.clone())],
        },
        &CancelToken::default(),
    );
    let out = s.execute(
        Request::Rpc {
            procedure: "sp_execute".into(),
            params: vec![p("", DataType::Int, h)],
        },
        &CancelToken::default(),
    );
    assert_eq!(error_numbers(&out), vec![8179]);

    // EXEC in a batch takes the same path.
    let r = rows(
        &mut s,
        "EXEC sp_executesql N'SELECT @x + 1 AS y', N'@x int', @x = 41",
    );
    assert_eq!(r, vec![vec![int(42)]]);
    assert_eq!(
        error_numbers(&run(&mut s, "EXEC dbo.no_such_proc @a = 1")),
        vec![2812]
    );
}

fn login(e: &Engine, user: &str, password: &str, db: Option<&str>) -> Result<Session, SqlError> {
    e.login(&LoginRequest {
        user: user.into(),
        password: password.into(),
        database: db.map(str::to_string),
        app_name: "test".into(),
        host_name: "host".into(),
        encrypted: false,
        client_addr: None,
    })
}

#[test]
fn least_privilege_reader() {
    let (e, mut s) = shop();
    ok(
        &mut s,
        "USE master
         CREATE LOGIN reader WITH PASSWORD = 'R3ader!'
         CREATE LOGIN stranger WITH PASSWORD = 'S3cret!'
         GRANT VIEW SERVER STATE TO reader
         USE shop
         CREATE USER reader FOR LOGIN reader
         CREATE ROLE cdc_readers
         ALTER ROLE cdc_readers ADD MEMBER reader
         GRANT SELECT ON OBJECT::dbo.customers TO cdc_readers
         GRANT VIEW DATABASE STATE TO reader",
    );
    assert_eq!(
        login(&e, "reader", "wrong", None).err().map(|e| e.number),
        Some(18456)
    );
    assert_eq!(
        login(&e, "nobody", "x", None).err().map(|e| e.number),
        Some(18456)
    );
    assert_eq!(
        login(&e, "stranger", "S3cret!", Some("shop"))
            .err()
            .map(|e| e.number),
        Some(4060)
    );
    assert!(login(&e, "stranger", "S3cret!", None).is_ok());
    let mut r = match login(&e, "reader", "R3ader!", Some("shop")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(r.database(), "shop");
    assert_eq!(
        rows(&mut r, "SELECT COUNT(*) FROM customers"),
        vec![vec![int(3)]]
    );
    let out = run(&mut r, "SELECT * FROM orders");
    let errs = errors(&out);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].number, 229);
    assert_eq!(
        errs[0].message,
        "The SELECT permission was denied on the object 'orders', database 'shop', schema 'dbo'."
    );
    assert_eq!(
        error_numbers(&run(&mut r, "DELETE FROM customers")),
        vec![229]
    );
    assert_eq!(
        error_numbers(&run(&mut r, "CREATE TABLE x (a int)")),
        vec![262]
    );
    // Metadata visibility: only the granted table is listed.
    assert_eq!(
        rows(&mut r, "SELECT name FROM sys.tables"),
        vec![vec![text("customers")]]
    );
    ok(&mut s, "ALTER ROLE db_datareader ADD MEMBER reader");
    assert_eq!(
        rows(&mut r, "SELECT COUNT(*) FROM orders"),
        vec![vec![int(4)]]
    );
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

#[test]
fn exec_statements_need_no_semicolon_between_them() {
    let (_e, mut s) = shop();
    let sets = ok(
        &mut s,
        "EXEC sp_executesql N'SELECT 1 AS a' \
         EXEC sp_executesql N'SELECT @x AS b', N'@x int', @x = 2 \
         SELECT 3 AS c",
    );
    let values: Vec<Value> = sets.iter().map(|set| set[0][0].clone()).collect();
    assert_eq!(values, vec![Value::Int(1), Value::Int(2), Value::Int(3)]);
}
