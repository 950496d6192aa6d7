//! sp_executesql, prepared statements and EXEC in batches.

use crate::sql::request::{CancelToken, Output, Param, Request};
use crate::sql::test_support::{
    error_numbers, errors, int, ok, result_sets, rows, run, shop, text,
};
use crate::sql::types::{DataType, Length, Value};

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

#[test]
fn sp_executesql_takes_its_statement_named_statement_as_tedious_sends_it() {
    let (_e, mut s) = shop();
    let nv = DataType::NVarChar(Length::Max);
    let p = |name: &str, ty: DataType, value: Value| Param {
        name: name.into(),
        ty,
        value,
        output: false,
    };
    for statement in ["@statement", "@stmt"] {
        let out = s.execute(
            Request::Rpc {
                procedure: "sp_executesql".into(),
                params: vec![
                    p(
                        statement,
                        nv,
                        text("SELECT name FROM customers WHERE id = @id"),
                    ),
                    p("@params", nv, text("@id int")),
                    p("@id", DataType::Int, int(2)),
                ],
            },
            &CancelToken::default(),
        );
        assert!(errors(&out).is_empty(), "{statement}: {out:?}");
        assert_eq!(
            result_sets(&out)[0].1,
            vec![vec![text("Bob")]],
            "{statement}"
        );
    }
    // Without a statement, SQL Server's own error 214.
    let out = s.execute(
        Request::Rpc {
            procedure: "sp_executesql".into(),
            params: vec![p("@params", nv, text("@id int"))],
        },
        &CancelToken::default(),
    );
    assert_eq!(error_numbers(&out), vec![214]);
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
