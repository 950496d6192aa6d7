//! `x-kubernetes-validations` rules: CEL expressions evaluated with `self`
//! (and `oldSelf` for transition rules) bound to the JSON value at the
//! schema node that declares the rule.

use cel::{Context, Env, Program, Value as Cv};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Why a rule did not pass.
#[derive(Debug, thiserror::Error)]
pub enum CelError {
    /// The expression does not parse.
    #[error("compilation failed: {0}")]
    Compile(String),
    /// Evaluation failed (no such key, type mismatch...).
    #[error("{0}")]
    Eval(String),
    /// The rule returned something other than a bool.
    #[error("rule did not evaluate to a bool")]
    NotBool,
}

fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        Arc::new(env)
    })
    .clone()
}

/// Converts JSON to a CEL value (integers stay `int`, as Kubernetes does).
pub fn to_cel(v: &Value) -> Cv {
    match v {
        Value::Null => Cv::Null,
        Value::Bool(b) => Cv::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cv::Int(i),
            None => Cv::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cv::String(Arc::new(s.clone())),
        Value::Array(a) => Cv::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, Cv> = m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cv::Map(map.into())
        }
    }
}

/// A rule compiled once per process: a CRD's rules are evaluated on every
/// write of every object of its kind, and parsing them again each time
/// made each write cost far more than the rest of its validation.
fn compile(rule: &str) -> Result<Arc<Program>, CelError> {
    static COMPILED: OnceLock<Mutex<HashMap<String, Arc<Program>>>> = OnceLock::new();
    let compiled = COMPILED.get_or_init(Mutex::default);
    if let Some(program) = compiled.lock().unwrap_or_else(|e| e.into_inner()).get(rule) {
        return Ok(Arc::clone(program));
    }
    let program = Arc::new(
        env()
            .compile(rule)
            .map_err(|e| CelError::Compile(e.to_string()))?,
    );
    compiled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(rule.to_string(), Arc::clone(&program));
    Ok(program)
}

/// Checks that a rule compiles (used when a CRD is written).
pub fn check(rule: &str) -> Result<(), CelError> {
    compile(rule).map(|_| ())
}

/// Whether the rule mentions `oldSelf`, i.e. is a transition rule.
pub fn is_transition_rule(rule: &str) -> bool {
    rule.contains("oldSelf")
}

/// Evaluates a rule; `Ok(false)` means the rule failed.
pub fn eval(rule: &str, this: &Value, old: Option<&Value>) -> Result<bool, CelError> {
    let program = compile(rule)?;
    let mut ctx = Context::with_env(env());
    ctx.add_variable_from_value("self", to_cel(this));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    match program.execute(&ctx) {
        Ok(Cv::Bool(b)) => Ok(b),
        Ok(_) => Err(CelError::NotBool),
        Err(e) => Err(CelError::Eval(e.to_string())),
    }
}

/// Evaluates a `messageExpression` to a string, if it yields one.
pub fn eval_message(expr: &str, this: &Value, old: Option<&Value>) -> Option<String> {
    let program = compile(expr).ok()?;
    let mut ctx = Context::with_env(env());
    ctx.add_variable_from_value("self", to_cel(this));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    match program.execute(&ctx) {
        Ok(Cv::String(s)) => Some(s.to_string()),
        _ => None,
    }
}
