//! The security catalog views: sys.server_principals,
//! sys.database_principals and sys.database_role_members, filtered by what
//! the session may see.

use super::{BIT, DATETIME, INT, SYSNAME, ViewDef, b, col, dt, i, nvarchar, opt_s, s};
use crate::sql::catalog::Database;
use crate::sql::error::SqlResult;
use crate::sql::executor::context::Ctx;
use crate::sql::request::Column;
use crate::sql::security::PrincipalKind;
use crate::sql::types::{DataType, Length, Value};

/// The principal and role-membership views.
pub fn views() -> Vec<ViewDef> {
    vec![
        ViewDef {
            schema: "sys",
            name: "server_principals",
            object_id: -409,
            columns: server_principals_cols,
            rows: server_principals_rows,
        },
        ViewDef {
            schema: "sys",
            name: "database_principals",
            object_id: -410,
            columns: database_principals_cols,
            rows: database_principals_rows,
        },
        ViewDef {
            schema: "sys",
            name: "database_role_members",
            object_id: -411,
            columns: role_members_cols,
            rows: role_members_rows,
        },
    ]
}

fn server_principals_cols() -> Vec<Column> {
    vec![
        col("name", SYSNAME, false),
        col("principal_id", INT, false),
        col("sid", DataType::VarBinary(Length::Fixed(85)), true),
        col("type", DataType::Char(1), false),
        col("type_desc", nvarchar(60), true),
        col("is_disabled", BIT, true),
        col("create_date", DATETIME, false),
        col("default_database_name", SYSNAME, true),
    ]
}

fn server_principals_rows(ctx: &Ctx<'_>, _: &Database) -> SqlResult<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    let epoch = ctx
        .state
        .database("master")
        .map(|d| d.create_date)
        .unwrap_or_else(|| ctx.now_utc());
    for (name, id) in [("public", 2), ("sysadmin", 3)] {
        out.push(vec![
            s(name),
            i(id),
            Value::Binary(vec![id as u8]),
            s("R"),
            s("SERVER_ROLE"),
            b(false),
            dt(epoch),
            Value::Null,
        ]);
    }
    for l in &ctx.state.security.logins {
        if !ctx.info.is_sysadmin && !l.name.eq_ignore_ascii_case(&ctx.info.login) {
            continue;
        }
        out.push(vec![
            s(&l.name),
            i(l.principal_id),
            Value::Binary(l.sid.clone()),
            s("S"),
            s("SQL_LOGIN"),
            b(false),
            dt(l.create_date),
            s("master"),
        ]);
    }
    Ok(out)
}

fn database_principals_cols() -> Vec<Column> {
    vec![
        col("name", SYSNAME, false),
        col("principal_id", INT, false),
        col("type", DataType::Char(1), false),
        col("type_desc", nvarchar(60), true),
        col("default_schema_name", SYSNAME, true),
        col("is_fixed_role", BIT, false),
    ]
}

fn database_principals_rows(_: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(db
        .security
        .principals
        .iter()
        .map(|p| {
            let (t, desc, schema) = match p.kind {
                PrincipalKind::User => ("S", "SQL_USER", Some("dbo")),
                PrincipalKind::Role => ("R", "DATABASE_ROLE", None),
            };
            vec![
                s(&p.name),
                i(p.id),
                s(t),
                s(desc),
                opt_s(schema),
                b(p.is_fixed_role),
            ]
        })
        .collect())
}

fn role_members_cols() -> Vec<Column> {
    vec![
        col("role_principal_id", INT, false),
        col("member_principal_id", INT, false),
    ]
}

fn role_members_rows(_: &Ctx<'_>, db: &Database) -> SqlResult<Vec<Vec<Value>>> {
    Ok(db
        .security
        .principals
        .iter()
        .flat_map(|r| r.members.iter().map(move |m| vec![i(r.id), i(*m)]))
        .collect())
}
