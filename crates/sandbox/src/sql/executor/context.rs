//! What a statement sees while it evaluates: the server state (read-only),
//! the session (variables, current database, identity) and the cancel
//! token; plus the built-ins that need them (`Scope::system_function`).

use std::collections::HashMap;

use chrono::NaiveDateTime;

use crate::sql::catalog::Database;
use crate::sql::clock::ServerZone;
use crate::sql::engine::{ServerState, Shared, SqlVersion};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::expr::Typed;
use crate::sql::request::CancelToken;
use crate::sql::types::{DataType, Decimal, Length, Value};

/// A declared variable or parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub ty: DataType,
    pub value: Value,
}

/// Variables of one batch or procedure scope, keyed by lower-case name
/// with its `@`.
#[derive(Debug, Clone, Default)]
pub struct Variables(HashMap<String, Variable>);

impl Variables {
    pub fn get(&self, name: &str) -> Option<&Variable> {
        self.0.get(&name.to_lowercase())
    }

    pub fn declare(&mut self, name: &str, ty: DataType, value: Value) -> SqlResult<()> {
        let key = name.to_lowercase();
        if self.0.contains_key(&key) {
            return Err(SqlError::new(
                134,
                format!("The variable name '{name}' has already been declared. Variable names must be unique within a query batch or stored procedure."),
            )
            .aborting_batch());
        }
        self.0.insert(key, Variable { ty, value });
        Ok(())
    }

    /// Sets a declared variable; 137 when undeclared.
    pub fn set(&mut self, name: &str, value: Value) -> SqlResult<()> {
        match self.0.get_mut(&name.to_lowercase()) {
            Some(v) => {
                v.value = value;
                Ok(())
            }
            None => Err(SqlError::undeclared_variable(name)),
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// The parts of a session that evaluation reads.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub spid: u16,
    pub login: String,
    pub is_sysadmin: bool,
    pub db_id: i32,
    pub vars: Variables,
    /// @@ROWCOUNT of the previous statement.
    pub rowcount: i64,
    /// SCOPE_IDENTITY(): last identity value inserted in this scope.
    pub scope_identity: Option<i128>,
    /// @@TRANCOUNT.
    pub trancount: u32,
}

/// Evaluation context of one statement.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub state: &'a ServerState,
    pub shared: &'a Shared,
    pub info: &'a SessionInfo,
    pub cancel: &'a CancelToken,
}

/// The internal "this read must wait for another session's transaction"
/// marker; the session waits and re-runs the statement.
pub fn blocked() -> SqlError {
    SqlError::new(-1, "blocked by an open transaction").aborting_batch()
}

pub fn is_blocked(e: &SqlError) -> bool {
    e.number == -1
}

fn sysname(s: &str) -> Typed {
    Typed::new(Value::String(s.to_string()), DataType::SYSNAME)
}

fn int(v: i64) -> Typed {
    Typed::new(
        Value::Int(i32::try_from(v).unwrap_or(i32::MAX)),
        DataType::Int,
    )
}

impl<'a> Ctx<'a> {
    /// The session's current database.
    pub fn current_db(&self) -> SqlResult<&'a Database> {
        self.state.database_by_id(self.info.db_id).ok_or_else(|| {
            SqlError::new(911, "The current database no longer exists.").aborting_batch()
        })
    }

    /// The session's user in `db`; 916 when the login has none there.
    pub fn user_in(&self, db: &Database) -> SqlResult<i32> {
        db.security.user_for_login(&self.info.login, self.info.is_sysadmin).ok_or_else(|| {
            SqlError::new(
                916,
                format!(
                    "The server principal \"{}\" is not able to access the database \"{}\" under the current security context.",
                    self.info.login, db.name
                ),
            )
            .with_class(14)
            .aborting_batch()
        })
    }

    pub fn now_utc(&self) -> NaiveDateTime {
        self.shared.clock.now_utc()
    }

    pub fn variable(&self, name: &str) -> SqlResult<Typed> {
        self.info
            .vars
            .get(name)
            .map(|v| Typed::new(v.value.clone(), v.ty))
            .ok_or_else(|| SqlError::undeclared_variable(name))
    }

    /// Built-ins that need the catalog or the session.
    pub fn system_function(&self, name: &str, args: &[Typed]) -> Option<SqlResult<Typed>> {
        let arg_str = |i: usize| match args.get(i).map(|a| &a.value) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let arg_int = |i: usize| match args.get(i).map(|a| &a.value) {
            Some(Value::Int(v)) => Some(i64::from(*v)),
            Some(Value::SmallInt(v)) => Some(i64::from(*v)),
            Some(Value::TinyInt(v)) => Some(i64::from(*v)),
            Some(Value::BigInt(v)) => Some(*v),
            _ => None,
        };
        let null_sysname = || Typed::null(DataType::SYSNAME);
        let r = match name {
            "@@ROWCOUNT" => int(self.info.rowcount),
            "ROWCOUNT_BIG" => Typed::new(Value::BigInt(self.info.rowcount), DataType::BigInt),
            "@@TRANCOUNT" => int(i64::from(self.info.trancount)),
            "@@SPID" => Typed::new(Value::SmallInt(self.info.spid as i16), DataType::SmallInt),
            "SCOPE_IDENTITY" | "@@IDENTITY" => {
                let ty = DataType::Decimal {
                    precision: 38,
                    scale: 0,
                };
                match self.info.scope_identity {
                    Some(v) => Typed::new(Value::Decimal(Decimal::new(v, 0)), ty),
                    None => Typed::null(ty),
                }
            }
            "@@VERSION" => Typed::new(
                Value::String(self.shared.config.version_text()),
                DataType::NVarChar(Length::Fixed(300)),
            ),
            "@@SERVERNAME" => sysname(&self.shared.config.server_name),
            "@@LANGUAGE" => sysname("us_english"),
            "@@MAX_PRECISION" => Typed::new(Value::TinyInt(38), DataType::TinyInt),
            "DB_NAME" => match args.first() {
                None => match self.current_db() {
                    Ok(db) => sysname(&db.name),
                    Err(e) => return Some(Err(e)),
                },
                Some(_) => match arg_int(0).and_then(|id| self.state.database_by_id(id as i32)) {
                    Some(db) => sysname(&db.name),
                    None => null_sysname(),
                },
            },
            "DB_ID" => match args.first() {
                None => int(i64::from(self.info.db_id)),
                Some(_) => match arg_str(0).and_then(|n| self.state.database(&n)) {
                    Some(db) => int(i64::from(db.id)),
                    None => Typed::null(DataType::Int),
                },
            },
            "OBJECT_ID" => match arg_str(0) {
                Some(n) => match super::resolve::object_id(self, &n) {
                    Some(id) => int(i64::from(id)),
                    None => Typed::null(DataType::Int),
                },
                None => Typed::null(DataType::Int),
            },
            "SCHEMA_NAME" => {
                let id = if args.is_empty() { Some(1) } else { arg_int(0) };
                match (self.current_db(), id) {
                    (Ok(db), Some(id)) => db
                        .schema_name(id as i32)
                        .map(sysname)
                        .unwrap_or_else(null_sysname),
                    _ => null_sysname(),
                }
            }
            "SCHEMA_ID" => {
                let name = if args.is_empty() {
                    Some("dbo".to_string())
                } else {
                    arg_str(0)
                };
                match (self.current_db(), name) {
                    (Ok(db), Some(n)) => db
                        .schema_by_name(&n)
                        .map(|s| int(i64::from(s.id)))
                        .unwrap_or(Typed::null(DataType::Int)),
                    _ => Typed::null(DataType::Int),
                }
            }
            "SUSER_NAME" | "SUSER_SNAME" | "SYSTEM_USER" | "ORIGINAL_LOGIN" => {
                sysname(&self.info.login)
            }
            "USER_NAME" | "CURRENT_USER" | "SESSION_USER" | "USER" => {
                let name = self
                    .current_db()
                    .ok()
                    .and_then(|db| {
                        let id = self.user_in(db).ok()?;
                        db.security.principal_by_id(id).map(|p| p.name.clone())
                    })
                    .unwrap_or_default();
                sysname(&name)
            }
            "IS_SRVROLEMEMBER" => {
                let role = arg_str(0).unwrap_or_default();
                int(i64::from(
                    role.eq_ignore_ascii_case("sysadmin") && self.info.is_sysadmin
                        || role.eq_ignore_ascii_case("public"),
                ))
            }
            "IS_MEMBER" | "IS_ROLEMEMBER" => {
                let role = arg_str(0).unwrap_or_default();
                let v = self.current_db().ok().and_then(|db| {
                    let user = self.user_in(db).ok()?;
                    let r = db.security.principal(&role)?;
                    Some(db.security.is_member(user, r.id))
                });
                match v {
                    Some(b) => int(i64::from(b)),
                    None => Typed::null(DataType::Int),
                }
            }
            "SERVERPROPERTY" => self.server_property(&arg_str(0).unwrap_or_default()),
            // SQL Server 2022's (older releases do not know the name).
            "CURRENT_TIMEZONE_ID" if self.shared.config.sql_version != SqlVersion::Sql2019 => {
                Typed::new(
                    Value::String(windows_zone_name(&self.shared.config.time_zone)),
                    DataType::NVarChar(Length::Fixed(128)),
                )
            }
            _ => return crate::sql::cdc::functions::call(self, name, args),
        };
        Some(Ok(r))
    }

    /// SERVERPROPERTY, typed as the property's underlying type
    /// (<https://learn.microsoft.com/en-us/sql/t-sql/functions/serverproperty-transact-sql>).
    fn server_property(&self, property: &str) -> Typed {
        let text = |s: &str| {
            Typed::new(
                Value::String(s.to_string()),
                DataType::NVarChar(Length::Fixed(128)),
            )
        };
        let cfg = &self.shared.config;
        match property.to_lowercase().as_str() {
            "productversion" => text(&cfg.product_version),
            "productmajorversion" => text(cfg.product_version.split('.').next().unwrap_or("16")),
            "productlevel" => text("RTM"),
            "edition" => text(&cfg.edition),
            "engineedition" => int(3),
            "servername" | "machinename" | "instancename" => text(&cfg.server_name),
            "collation" => text(crate::sql::catalog::DEFAULT_COLLATION),
            "isintegratedsecurityonly" | "ishadrenabled" | "isclustered" => int(0),
            _ => Typed::null(DataType::NVarChar(Length::Fixed(128))),
        }
    }
}

/// Context of a statement that changes data: exclusive access to the
/// server state (under the writer lock) and the session's transaction.
pub struct WriteCtx<'a> {
    pub state: &'a mut ServerState,
    pub shared: &'a Shared,
    pub info: &'a mut SessionInfo,
    pub txn: &'a mut crate::sql::transaction::Transaction,
    pub cancel: &'a CancelToken,
}

impl WriteCtx<'_> {
    /// A read-only view for the evaluation phase of a change.
    pub fn read(&self) -> Ctx<'_> {
        Ctx {
            state: self.state,
            shared: self.shared,
            info: self.info,
            cancel: self.cancel,
        }
    }

    /// Whether the session is sysadmin or in db_owner/`role` of `db`.
    pub fn require_db_role(&self, db_id: i32, role: i32, permission: &str) -> SqlResult<()> {
        if self.info.is_sysadmin {
            return Ok(());
        }
        let ctx = self.read();
        let db = self
            .state
            .database_by_id(db_id)
            .ok_or_else(|| SqlError::new(911, "Database does not exist.").aborting_batch())?;
        let user = ctx.user_in(db)?;
        let sec = &db.security;
        if sec.is_member(user, crate::sql::security::ROLE_DB_OWNER) || sec.is_member(user, role) {
            return Ok(());
        }
        Err(SqlError::new(
            262,
            format!("{permission} permission denied in database '{}'.", db.name),
        )
        .with_class(14))
    }
}

/// The Windows name of the server's zone, as `CURRENT_TIMEZONE_ID()`
/// answers on SQL Server (CLDR's mapping; `UTC` for UTC).
fn windows_zone_name(zone: &str) -> String {
    match ServerZone::parse(zone) {
        Some(ServerZone::Iana(tz)) => localzone::iana_to_win_zone(tz.name())
            .map_or_else(|| tz.name().to_string(), |(windows, _)| windows.to_string()),
        _ => "UTC".to_string(),
    }
}
