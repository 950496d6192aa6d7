//! Runs one statement of a batch: dispatches on the AST, reports result
//! sets and DONE, and keeps @@ROWCOUNT. Anything not handled here fails
//! with an error naming the construct.

use std::time::{Duration, Instant};

use sqlparser::ast::{
    self, DeclareAssignment, Expr, ObjectType, Query, SchemaName, SelectItem, Set, SetExpr,
    Statement, WaitForType,
};

use super::context::Ctx;
use super::scope::RowScope;
use super::{admin, alter, ddl, dml, insert, query};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::{self, Typed, is_true};
use crate::sql::parse::StmtKind;
use crate::sql::request::{CancelToken, Output};
use crate::sql::session::Session;
use crate::sql::types::{DataType, Value};

fn done(out: &mut Vec<Output>, rows: Option<u64>) {
    out.push(Output::Done { rows });
}

/// The construct's leading words, for "not supported" errors.
fn construct(st: &Statement) -> String {
    st.to_string()
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn ident_text(name: &ast::ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.clone())
        .unwrap_or_else(|| name.to_string())
}

/// Runs one parsed statement.
pub fn run_statement(
    s: &mut Session,
    stmt: &StmtKind,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<()> {
    match stmt {
        StmtKind::Sql(st) => run_sql(s, st, cancel, out),
        StmtKind::CreateTable { name, elements } => {
            s.with_write(cancel, |w| ddl::create_table(w, name, elements))?;
            done(out, None);
            Ok(())
        }
        StmtKind::AlterTable { name, action } => {
            s.with_write(cancel, |w| alter::alter_table(w, name, action))?;
            done(out, None);
            Ok(())
        }
        StmtKind::CreateLogin { name, password } => {
            s.with_write(cancel, |w| admin::create_login(w, &name.value, password))?;
            done(out, None);
            Ok(())
        }
        StmtKind::CreateUser { name, login } => {
            s.with_write(cancel, |w| {
                admin::create_user(w, &name.value, login.as_ref().map(|l| l.value.as_str()))
            })?;
            done(out, None);
            Ok(())
        }
        StmtKind::Grant(g) => {
            s.with_write(cancel, |w| admin::grant(w, g))?;
            done(out, None);
            Ok(())
        }
    }
}

fn run_sql(
    s: &mut Session,
    st: &Statement,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<()> {
    let ddl_done = |out: &mut Vec<Output>| done(out, None);
    match st {
        Statement::Query(q) => select(s, q, cancel, out),
        Statement::Insert(i) => dml_statement(s, cancel, out, |w| insert::insert(w, i)),
        Statement::Update(u) => dml_statement(s, cancel, out, |w| dml::update(w, u)),
        Statement::Delete(d) => dml_statement(s, cancel, out, |w| dml::delete(w, d)),
        Statement::CreateDatabase { db_name, .. } => {
            let name = ident_text(db_name);
            s.with_write(cancel, |w| ddl::create_database(w, &name))?;
            ddl_done(out);
            Ok(())
        }
        Statement::CreateSchema { schema_name, .. } => {
            let name = match schema_name {
                SchemaName::Simple(n) | SchemaName::NamedAuthorization(n, _) => ident_text(n),
                SchemaName::UnnamedAuthorization(i) => i.value.clone(),
            };
            s.with_write(cancel, |w| ddl::create_schema(w, &name))?;
            ddl_done(out);
            Ok(())
        }
        Statement::Drop {
            object_type: ObjectType::Table,
            names,
            if_exists,
            ..
        } => {
            s.with_write(cancel, |w| ddl::drop_tables(w, names, *if_exists))?;
            ddl_done(out);
            Ok(())
        }
        Statement::Drop {
            object_type: ObjectType::Database,
            names,
            if_exists,
            ..
        } => {
            for n in names {
                let name = ident_text(n);
                s.with_write(cancel, |w| ddl::drop_database(w, &name, *if_exists))?;
            }
            ddl_done(out);
            Ok(())
        }
        Statement::CreateRole(cr) => {
            for n in &cr.names {
                let name = ident_text(n);
                s.with_write(cancel, |w| admin::create_role(w, &name))?;
            }
            ddl_done(out);
            Ok(())
        }
        Statement::AlterRole { name, operation } => {
            let (member, add) = match operation {
                ast::AlterRoleOperation::AddMember { member_name } => (member_name, true),
                ast::AlterRoleOperation::DropMember { member_name } => (member_name, false),
                _ => return Err(SqlError::unsupported("ALTER ROLE")),
            };
            s.with_write(cancel, |w| {
                admin::alter_role_member(w, &name.value, &member.value, add)
            })?;
            ddl_done(out);
            Ok(())
        }
        Statement::Use(u) => use_database(s, u, out),
        Statement::Declare { stmts } => declare(s, stmts, cancel),
        Statement::Set(set) => set_statement(s, set, cancel),
        Statement::StartTransaction { statements, .. } if statements.is_empty() => {
            s.begin(out);
            s.info.rowcount = 0;
            Ok(())
        }
        Statement::Commit { end: false, .. } => {
            s.commit(out)?;
            s.info.rowcount = 0;
            Ok(())
        }
        Statement::Rollback {
            savepoint: None, ..
        } => {
            s.rollback(out)?;
            s.info.rowcount = 0;
            Ok(())
        }
        Statement::WaitFor(w) => waitfor(s, w, cancel, out),
        Statement::Execute {
            name,
            parameters,
            immediate: false,
            ..
        } => crate::sql::procedures::exec_statement(s, name.as_ref(), parameters, cancel, out),
        Statement::Print(p) => {
            let v = s.with_read(cancel, |ctx| eval_const(ctx, &p.message))?;
            let text = match expr::convert(&v, DataType::NVarChar(crate::sql::types::Length::Max))?
            {
                Value::String(t) => t,
                _ => String::new(),
            };
            out.push(Output::Message(
                SqlError::new(0, text).with_class(0).with_state(1),
            ));
            s.info.rowcount = 0;
            Ok(())
        }
        Statement::If(ifs) => if_statement(s, ifs, cancel, out),
        Statement::Kill { modifier: None, id } => {
            crate::sql::faults::kill(s, *id, cancel)?;
            s.info.rowcount = 0;
            done(out, None);
            Ok(())
        }
        other => Err(SqlError::unsupported(&construct(other))),
    }
}

fn eval_const(ctx: &Ctx<'_>, e: &Expr) -> SqlResult<Typed> {
    expr::eval(e, &RowScope::new(ctx, &[], &[], None))
}

fn dml_statement(
    s: &mut Session,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
    f: impl FnOnce(&mut super::context::WriteCtx<'_>) -> SqlResult<dml::DmlOutcome>,
) -> SqlResult<()> {
    let outcome = s.with_write(cancel, f)?;
    s.info.rowcount = outcome.rows as i64;
    if outcome.identity.is_some() {
        s.info.scope_identity = outcome.identity;
    }
    done(out, Some(outcome.rows));
    Ok(())
}

/// `SELECT @a = x, @b = y ...`: the variables assigned, or None for a
/// data-retrieving SELECT; 141 when both are mixed.
fn assignment_targets(q: &Query) -> SqlResult<Option<Vec<String>>> {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Ok(None);
    };
    let targets: Vec<Option<String>> = sel
        .projection
        .iter()
        .map(|i| match i {
            SelectItem::ExprWithAlias { alias, .. } if alias.value.starts_with('@') => {
                Some(alias.value.clone())
            }
            _ => None,
        })
        .collect();
    if targets.iter().all(Option::is_none) {
        return Ok(None);
    }
    if targets.iter().any(Option::is_none) {
        return Err(SqlError::new(
            141,
            "A SELECT statement that assigns a value to a variable must not be combined with data-retrieval operations.",
        )
        .aborting_batch());
    }
    Ok(Some(targets.into_iter().flatten().collect()))
}

fn select(
    s: &mut Session,
    q: &Query,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<()> {
    let targets = assignment_targets(q)?;
    if let Some(t) = &targets {
        for name in t {
            if s.info.vars.get(name).is_none() {
                return Err(SqlError::undeclared_variable(name));
            }
        }
    }
    let rel = s.with_read(cancel, |ctx| query::run_query(ctx, q, None))?;
    let n = rel.rows.len();
    match targets {
        Some(names) => {
            if let Some(last) = rel.rows.last() {
                for (i, name) in names.iter().enumerate() {
                    let ty = s
                        .info
                        .vars
                        .get(name)
                        .map(|v| v.ty)
                        .ok_or_else(|| SqlError::undeclared_variable(name))?;
                    let value = last.get(i).cloned().unwrap_or(Value::Null);
                    let v =
                        expr::assign_collated(&Typed::new(value, rel.cols[i].ty), ty, None, name)?;
                    s.info.vars.set(name, v)?;
                }
            }
        }
        None => out.push(Output::ResultSet {
            columns: rel.columns(),
            rows: rel.rows,
        }),
    }
    s.info.rowcount = n as i64;
    done(out, Some(n as u64));
    Ok(())
}

fn use_database(s: &mut Session, u: &ast::Use, out: &mut Vec<Output>) -> SqlResult<()> {
    let name = match u {
        ast::Use::Object(n) | ast::Use::Database(n) => ident_text(n),
        other => return Err(SqlError::unsupported(&other.to_string())),
    };
    let (id, to) = {
        let shared = s.engine.shared.clone();
        let st = shared.read();
        let db = st.database(&name).ok_or_else(|| {
            SqlError::new(911, format!("Database '{name}' does not exist. Make sure that the name is entered correctly."))
                .aborting_batch()
        })?;
        let cancel = CancelToken::default();
        let ctx = Ctx {
            state: &st,
            shared: &shared,
            info: &s.info,
            cancel: &cancel,
        };
        ctx.user_in(db)?;
        (db.id, db.name.clone())
    };
    let from = s.database();
    s.info.db_id = id;
    s.engine.shared.connections.set_database(s.info.spid, id);
    s.info.rowcount = 0;
    out.push(Output::DatabaseChanged { from, to });
    Ok(())
}

fn declare(s: &mut Session, stmts: &[ast::Declare], cancel: &CancelToken) -> SqlResult<()> {
    for d in stmts {
        if d.declare_type.is_some() || d.for_query.is_some() {
            return Err(SqlError::unsupported("DECLARE CURSOR/TABLE"));
        }
        let ast_ty = d
            .data_type
            .as_ref()
            .ok_or_else(|| SqlError::syntax("DECLARE"))?;
        let ty = expr::data_type(ast_ty)?;
        let init = match &d.assignment {
            None => None,
            Some(DeclareAssignment::MsSqlAssignment(e))
            | Some(DeclareAssignment::Default(e))
            | Some(DeclareAssignment::Expr(e))
            | Some(DeclareAssignment::DuckAssignment(e))
            | Some(DeclareAssignment::For(e)) => Some(e),
        };
        for name in &d.names {
            let value = match init {
                Some(e) => {
                    let v = s.with_read(cancel, |ctx| eval_const(ctx, e))?;
                    expr::assign_collated(&v, ty, None, &name.value)?
                }
                None => Value::Null,
            };
            s.info.vars.declare(&name.value, ty, value)?;
        }
    }
    Ok(())
}

fn set_statement(s: &mut Session, set: &Set, cancel: &CancelToken) -> SqlResult<()> {
    match set {
        Set::SingleAssignment {
            variable, values, ..
        } => {
            let name = ident_text(variable);
            if !name.starts_with('@') {
                return Err(SqlError::unsupported(&format!("SET {name}")));
            }
            let ty = s
                .info
                .vars
                .get(&name)
                .map(|v| v.ty)
                .ok_or_else(|| SqlError::undeclared_variable(&name))?;
            let e = values.first().ok_or_else(|| SqlError::syntax("SET"))?;
            let v = s.with_read(cancel, |ctx| eval_const(ctx, e))?;
            let v = expr::assign_collated(&v, ty, None, &name)?;
            s.info.vars.set(&name, v)?;
            s.info.rowcount = 1;
            Ok(())
        }
        // Session options (NOCOUNT, XACT_ABORT, ANSI_*, TEXTSIZE...) and the
        // isolation level are accepted; the sandbox has one behaviour.
        Set::SetSessionParam(_) | Set::SetTransaction { .. } => {
            s.info.rowcount = 0;
            Ok(())
        }
        other => Err(SqlError::unsupported(&other.to_string())),
    }
}

/// Parses `hh:mm[:ss[.fff]]` as WAITFOR DELAY takes it
/// (<https://learn.microsoft.com/en-us/sql/t-sql/language-elements/waitfor-transact-sql>).
fn parse_delay(text: &str) -> SqlResult<Duration> {
    let bad = || {
        SqlError::new(
            148,
            "Incorrect time syntax in time string used with WAITFOR.",
        )
        .aborting_batch()
    };
    let parts: Vec<&str> = text.trim().split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return Err(bad());
    }
    let h: u64 = parts[0].trim().parse().map_err(|_| bad())?;
    let m: u64 = parts[1].trim().parse().map_err(|_| bad())?;
    let secs: f64 = match parts.get(2) {
        Some(p) => p.trim().parse().map_err(|_| bad())?,
        None => 0.0,
    };
    if h > 23 || m > 59 || !(0.0..60.0).contains(&secs) {
        return Err(bad());
    }
    Ok(Duration::from_secs(h * 3600 + m * 60) + Duration::from_secs_f64(secs))
}

fn waitfor(
    s: &mut Session,
    w: &ast::WaitForStatement,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<()> {
    if !matches!(w.wait_type, WaitForType::Delay) {
        return Err(SqlError::unsupported("WAITFOR TIME"));
    }
    let v = s.with_read(cancel, |ctx| eval_const(ctx, &w.expr))?;
    let text = match expr::convert(&v, DataType::NVarChar(crate::sql::types::Length::Fixed(64)))? {
        Value::String(t) => t,
        _ => {
            return Err(SqlError::new(
                148,
                "Incorrect time syntax in time string used with WAITFOR.",
            )
            .aborting_batch());
        }
    };
    let delay = parse_delay(&text)?;
    let end = Instant::now() + delay;
    loop {
        cancel.check()?;
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(10)));
    }
    done(out, None);
    Ok(())
}

/// IF cond stmt [ELSE stmt]; BEGIN...END blocks run their statements.
fn if_statement(
    s: &mut Session,
    ifs: &ast::IfStatement,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<()> {
    let blocks = std::iter::once(&ifs.if_block)
        .chain(ifs.elseif_blocks.iter())
        .chain(ifs.else_block.iter());
    for block in blocks {
        let take = match &block.condition {
            Some(c) => {
                let v = s.with_read(cancel, |ctx| eval_const(ctx, c))?;
                is_true(&v.value)
            }
            None => true,
        };
        if take {
            for st in block.statements() {
                run_sql(s, st, cancel, out)?;
            }
            return Ok(());
        }
    }
    Ok(())
}
