//! What the engine tests share: an engine, a `shop` database, running
//! batches through `Session::execute` and reading the Outputs.

use crate::sql::error::SqlError;
use crate::sql::request::{CancelToken, LoginRequest, Output, Request};
use crate::sql::types::Value;
use crate::sql::{Engine, EngineConfig, Session};

pub fn engine() -> Engine {
    Engine::new(EngineConfig {
        sa_password: "Sa_pass1".into(),
        ..EngineConfig::default()
    })
}

pub fn run(s: &mut Session, sql: &str) -> Vec<Output> {
    s.execute(Request::Batch { sql: sql.into() }, &CancelToken::default())
}

pub fn errors(out: &[Output]) -> Vec<SqlError> {
    out.iter()
        .filter_map(|o| match o {
            Output::Message(e) if e.class > 10 => Some(e.clone()),
            _ => None,
        })
        .collect()
}

pub fn error_numbers(out: &[Output]) -> Vec<i32> {
    errors(out).iter().map(|e| e.number).collect()
}

pub fn result_sets(out: &[Output]) -> Vec<(Vec<String>, Vec<Vec<Value>>)> {
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
pub fn ok(s: &mut Session, sql: &str) -> Vec<Vec<Vec<Value>>> {
    let out = run(s, sql);
    let e = errors(&out);
    assert!(e.is_empty(), "{sql}: {e:?}");
    result_sets(&out).into_iter().map(|(_, r)| r).collect()
}

/// The single result set of a batch.
pub fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let mut sets = ok(s, sql);
    assert_eq!(sets.len(), 1, "{sql}");
    sets.remove(0)
}

pub fn int(v: i32) -> Value {
    Value::Int(v)
}

pub fn text(v: &str) -> Value {
    Value::String(v.into())
}

pub fn int_of(v: &Value) -> i64 {
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
pub fn shop() -> (Engine, Session) {
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

pub fn login(
    e: &Engine,
    user: &str,
    password: &str,
    db: Option<&str>,
) -> Result<Session, SqlError> {
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
