//! Stored procedures: one registry serves RPC calls and `EXEC` in batches.
//! The system procedures for parameterised and prepared execution live
//! here (<https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-executesql-transact-sql>);
//! later issues register more (e.g. `sys.sp_cdc_enable_db`).

use std::collections::HashMap;

use sqlparser::ast::{BinaryOperator, Expr, ObjectName};

use super::error::{SqlError, SqlResult};
use super::executor::context::Variables;
use super::executor::scope::RowScope;
use super::expr::{self, Typed};
use super::parse::parse_param_declarations;
use super::request::{CancelToken, Output, Param};
use super::session::{Prepared, Session};
use super::types::{DataType, Value};

/// What a procedure call returns besides its output stream.
#[derive(Debug, Default)]
pub struct ProcResult {
    pub status: i32,
    /// Output parameters, sent as RETURNVALUE.
    pub outputs: Vec<Param>,
}

/// A procedure implementation.
pub type ProcFn =
    fn(&mut Session, &[Param], &CancelToken, &mut Vec<Output>) -> SqlResult<ProcResult>;

/// Procedures by lower-case name (without schema: `sp_x` and `sys.sp_x`
/// are one entry, as system procedures resolve from any database).
#[derive(Default)]
pub struct ProcedureRegistry {
    procs: HashMap<String, ProcFn>,
}

impl ProcedureRegistry {
    pub fn with_system_procedures() -> Self {
        let mut r = Self::default();
        r.register("sp_executesql", sp_executesql);
        r.register("sp_prepare", sp_prepare);
        r.register("sp_prepexec", sp_prepexec);
        r.register("sp_execute", sp_execute);
        r.register("sp_unprepare", sp_unprepare);
        r
    }

    pub fn register(&mut self, name: &str, f: ProcFn) {
        self.procs.insert(name.to_lowercase(), f);
    }

    /// Looks `[db.][schema.]name` up by its last part.
    pub fn lookup(&self, name: &str) -> Option<ProcFn> {
        let last = name.rsplit('.').next().unwrap_or(name);
        let last = last.trim_matches(|c| c == '[' || c == ']');
        self.procs.get(&last.to_lowercase()).copied()
    }
}

fn not_found(name: &str) -> SqlError {
    SqlError::new(2812, format!("Could not find stored procedure '{name}'.")).with_state(62)
}

/// Calls a procedure by name.
pub fn call(
    s: &mut Session,
    name: &str,
    params: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let f = s
        .engine
        .shared
        .procedures
        .lookup(name)
        .ok_or_else(|| not_found(name))?;
    f(s, params, cancel, out)
}

/// An RPC request: the procedure's output, then RETURNSTATUS and the
/// output parameters (the TDS layer adds DONEPROC).
pub fn run_rpc(
    s: &mut Session,
    name: &str,
    params: Vec<Param>,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) {
    match call(s, name, &params, cancel, out) {
        Ok(r) => {
            out.push(Output::ReturnStatus(r.status));
            out.extend(r.outputs.into_iter().map(Output::ReturnValue));
        }
        Err(e) => {
            let cancelled = e.is_cancelled();
            out.push(Output::Message(e));
            if !cancelled {
                out.push(Output::ReturnStatus(0));
            }
        }
    }
}

/// `EXEC name @p = v, ...` or `EXEC ('sql')` in a batch.
pub fn exec_statement(
    s: &mut Session,
    name: Option<&ObjectName>,
    parameters: &[Expr],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<()> {
    let mut params = Vec::with_capacity(parameters.len());
    for p in parameters {
        let (pname, e) = match p {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => match left.as_ref() {
                Expr::Identifier(i) if i.value.starts_with('@') => {
                    (i.value.clone(), right.as_ref())
                }
                _ => (String::new(), p),
            },
            _ => (String::new(), p),
        };
        let v = s.with_read(cancel, |ctx| {
            expr::eval(e, &RowScope::new(ctx, &[], &[], None))
        })?;
        params.push(Param {
            name: pname,
            ty: v.ty,
            value: v.value,
            output: false,
        });
    }
    let Some(name) = name else {
        // EXEC ('dynamic sql'): a new scope without the caller's variables.
        let sql = param_text(params.first()).ok_or_else(|| SqlError::syntax("EXEC"))?;
        run_nested(s, &sql, Variables::default(), cancel, out);
        return Ok(());
    };
    call(s, &name.to_string(), &params, cancel, out)?;
    out.push(Output::Done { rows: None });
    Ok(())
}

fn param_text(p: Option<&Param>) -> Option<String> {
    match p.map(|p| &p.value) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A parameter by name, else by position. Clients may send a name with or
/// without its `@` (tiberius sends `stmt`), as SQL Server accepts both.
fn param<'p>(params: &'p [Param], name: &str, position: usize) -> Option<&'p Param> {
    let bare = |n: &str| n.trim_start_matches('@').to_ascii_lowercase();
    params
        .iter()
        .find(|p| !p.name.is_empty() && bare(&p.name) == bare(name))
        .or_else(|| params.get(position).filter(|p| p.name.is_empty()))
}

/// Runs `sql` in a scope of its own, restoring the caller's variables.
fn run_nested(
    s: &mut Session,
    sql: &str,
    vars: Variables,
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> Variables {
    let saved = std::mem::replace(&mut s.info.vars, vars);
    let _ = s.run_text(sql, cancel, out);
    std::mem::replace(&mut s.info.vars, saved)
}

/// Binds values to declared parameters (by name, else in order) and runs
/// the statement; output parameters come back as RETURNVALUEs.
fn execute_parameterised(
    s: &mut Session,
    declarations: &str,
    statement: &str,
    values: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<Vec<Param>> {
    let decls = parse_param_declarations(declarations)?;
    let mut vars = Variables::default();
    let mut outputs = Vec::new();
    for (i, (name, ast_ty, is_output)) in decls.iter().enumerate() {
        let ty: DataType = expr::data_type(ast_ty)?;
        let given = values
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .or_else(|| values.get(i).filter(|p| p.name.is_empty()));
        let Some(p) = given else {
            return Err(SqlError::new(
                8178,
                format!(
                    "The parameterized query '({declarations}){statement}' expects the parameter '{name}', which was not supplied."
                ),
            ));
        };
        let value = expr::assign(&Typed::new(p.value.clone(), p.ty), ty, name)?;
        vars.declare(name, ty, value)?;
        if *is_output && p.output {
            outputs.push((p.name.clone(), name.clone(), ty));
        }
    }
    let vars = run_nested(s, statement, vars, cancel, out);
    Ok(outputs
        .into_iter()
        .map(|(sent_as, name, ty)| Param {
            name: if sent_as.is_empty() {
                name.clone()
            } else {
                sent_as
            },
            ty,
            value: vars
                .get(&name)
                .map(|v| v.value.clone())
                .unwrap_or(Value::Null),
            output: true,
        })
        .collect())
}

fn sp_executesql(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    // The documented name is @stmt; SQL Server names it @statement itself
    // (its error 214 does), accepts both, and tedious sends @statement.
    let statement = param(params, "@stmt", 0).or_else(|| param(params, "@statement", 0));
    let stmt = param_text(statement).ok_or_else(|| {
        SqlError::new(
            214,
            "Procedure expects parameter '@statement' of type 'ntext/nchar/nvarchar'.",
        )
    })?;
    let decl = param_text(param(params, "@params", 1)).unwrap_or_default();
    let values: Vec<Param> = params
        .iter()
        .skip(if decl.is_empty() && params.len() < 2 {
            1
        } else {
            2
        })
        .cloned()
        .collect();
    let outputs = execute_parameterised(s, &decl, &stmt, &values, cancel, out)?;
    Ok(ProcResult { status: 0, outputs })
}

fn handle_param(params: &[Param], name: &str, position: usize) -> Option<Param> {
    param(params, name, position).cloned()
}

fn prepare(s: &mut Session, declarations: String, statement: String) -> i32 {
    let handle = s.next_handle;
    s.next_handle += 1;
    s.prepared.insert(
        handle,
        Prepared {
            declarations,
            statement,
        },
    );
    handle
}

fn handle_output(sent: Option<Param>, handle: i32) -> Param {
    Param {
        name: sent
            .map(|p| p.name)
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "@handle".into()),
        ty: DataType::Int,
        value: Value::Int(handle),
        output: true,
    }
}

/// sp_prepare @handle OUTPUT, @params, @stmt [, @options]
fn sp_prepare(
    s: &mut Session,
    params: &[Param],
    _: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let decl = param_text(param(params, "@params", 1)).unwrap_or_default();
    let stmt = param_text(param(params, "@stmt", 2)).ok_or_else(|| {
        SqlError::new(
            201,
            "Procedure or function 'sp_prepare' expects parameter '@stmt', which was not supplied.",
        )
    })?;
    parse_param_declarations(&decl)?;
    let handle = prepare(s, decl, stmt);
    Ok(ProcResult {
        status: 0,
        outputs: vec![handle_output(handle_param(params, "@handle", 0), handle)],
    })
}

/// sp_prepexec @handle OUTPUT, @params, @stmt, values...
fn sp_prepexec(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let decl = param_text(param(params, "@params", 1)).unwrap_or_default();
    let stmt = param_text(param(params, "@stmt", 2)).ok_or_else(|| SqlError::new(201, "Procedure or function 'sp_prepexec' expects parameter '@stmt', which was not supplied."))?;
    let handle = prepare(s, decl.clone(), stmt.clone());
    let values: Vec<Param> = params.iter().skip(3).cloned().collect();
    let mut outputs = vec![handle_output(handle_param(params, "@handle", 0), handle)];
    outputs.extend(execute_parameterised(
        s, &decl, &stmt, &values, cancel, out,
    )?);
    Ok(ProcResult { status: 0, outputs })
}

fn handle_value(params: &[Param]) -> Option<i32> {
    match param(params, "@handle", 0).map(|p| &p.value) {
        Some(Value::Int(h)) => Some(*h),
        Some(Value::BigInt(h)) => i32::try_from(*h).ok(),
        Some(Value::SmallInt(h)) => Some(i32::from(*h)),
        _ => None,
    }
}

/// sp_execute @handle, values...
fn sp_execute(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let h = handle_value(params).unwrap_or(-1);
    let p = s.prepared.get(&h).cloned().ok_or_else(|| {
        SqlError::new(
            8179,
            format!("Could not find prepared statement with handle {h}."),
        )
    })?;
    let values: Vec<Param> = params.iter().skip(1).cloned().collect();
    let outputs = execute_parameterised(s, &p.declarations, &p.statement, &values, cancel, out)?;
    Ok(ProcResult { status: 0, outputs })
}

/// sp_unprepare @handle
fn sp_unprepare(
    s: &mut Session,
    params: &[Param],
    _: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    if let Some(h) = handle_value(params) {
        s.prepared.remove(&h);
    }
    Ok(ProcResult::default())
}

#[cfg(test)]
#[path = "procedures_tests.rs"]
mod tests;
