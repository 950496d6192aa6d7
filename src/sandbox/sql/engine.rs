//! The engine: server-wide state shared by every session, and logins.
//!
//! All databases live in one [`ServerState`] behind a read/write lock;
//! statements take it for their duration only (see `transaction` for the
//! writer lock that spans explicit transactions).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::catalog::{Database, same_name};
use super::clock::{Clock, SystemClock};
use super::connections::{Connection, ConnectionRegistry};
use super::error::{SqlError, SqlResult};
use super::procedures::ProcedureRegistry;
use super::request::LoginRequest;
use super::security::ServerSecurity;
use super::session::Session;
use super::transaction::{LockManager, LogRecord};
use super::views::ViewRegistry;

/// How the server presents itself.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Password of the `sa` login (sysadmin).
    pub sa_password: String,
    /// @@SERVERNAME and SERVERPROPERTY('ServerName').
    pub server_name: String,
    /// SERVERPROPERTY('ProductVersion'), e.g. `16.0.4135.4`.
    pub product_version: String,
    /// SERVERPROPERTY('Edition').
    pub edition: String,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            sa_password: String::new(),
            server_name: "sandbox".into(),
            product_version: "16.0.4135.4".into(),
            edition: "Developer Edition (64-bit)".into(),
        }
    }
}

impl EngineConfig {
    /// @@VERSION text.
    pub fn version_text(&self) -> String {
        format!(
            "Microsoft SQL Server 2022 - {} (X64) (mssql-cdc sandbox)\n\t{} on Linux",
            self.product_version, self.edition
        )
    }
}

/// Every database and login of the server.
#[derive(Debug)]
pub struct ServerState {
    pub databases: BTreeMap<i32, Database>,
    pub security: ServerSecurity,
    next_object_id: i32,
    next_database_id: i32,
}

impl ServerState {
    fn new(sa_password: &str, clock: &dyn Clock) -> Self {
        let now = clock.now_utc();
        let mut state = Self {
            databases: BTreeMap::new(),
            security: ServerSecurity::new(sa_password, now),
            next_object_id: 901_578_250,
            next_database_id: 1,
        };
        for name in ["master", "tempdb", "model", "msdb"] {
            let id = state.create_database(name, now);
            if let Some(db) = state.databases.get_mut(&id) {
                db.security.guest_enabled = name != "model";
            }
        }
        state
    }

    /// Adds a database owned by sa; its id.
    pub fn create_database(&mut self, name: &str, now: chrono::NaiveDateTime) -> i32 {
        let id = self.next_database_id;
        self.next_database_id += 1;
        self.databases
            .insert(id, Database::new(id, name, now, "sa"));
        id
    }

    pub fn database(&self, name: &str) -> Option<&Database> {
        self.databases.values().find(|d| same_name(&d.name, name))
    }

    pub fn database_by_id(&self, id: i32) -> Option<&Database> {
        self.databases.get(&id)
    }

    pub fn database_by_id_mut(&mut self, id: i32) -> Option<&mut Database> {
        self.databases.get_mut(&id)
    }

    /// A new object id, unique across the server.
    pub fn allocate_object_id(&mut self) -> i32 {
        let id = self.next_object_id;
        self.next_object_id += 16;
        id
    }
}

/// State shared by the engine's handles and sessions.
pub struct Shared {
    pub config: EngineConfig,
    pub clock: Arc<dyn Clock>,
    pub state: RwLock<ServerState>,
    pub locks: LockManager,
    pub views: ViewRegistry,
    pub procedures: ProcedureRegistry,
    pub connections: ConnectionRegistry,
    next_spid: AtomicU16,
    next_transaction: AtomicU64,
}

impl Shared {
    pub fn read(&self) -> RwLockReadGuard<'_, ServerState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, ServerState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A transaction descriptor for ENVCHANGE.
    pub fn next_transaction_descriptor(&self) -> u64 {
        self.next_transaction.fetch_add(1, Ordering::Relaxed)
    }
}

/// The in-memory SQL Server: cheap to clone, shared by all sessions.
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("server_name", &self.shared.config.server_name)
            .finish()
    }
}

impl Engine {
    /// A server with master, tempdb, model, msdb and the `sa` login.
    pub fn new(config: EngineConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// As [`Engine::new`] with a given clock (tests and CDC control time).
    pub fn with_clock(config: EngineConfig, clock: Arc<dyn Clock>) -> Self {
        let state = ServerState::new(&config.sa_password, clock.as_ref());
        Self {
            shared: Arc::new(Shared {
                config,
                clock,
                state: RwLock::new(state),
                locks: LockManager::default(),
                views: ViewRegistry::with_catalog_views(),
                procedures: ProcedureRegistry::with_system_procedures(),
                connections: ConnectionRegistry::default(),
                next_spid: AtomicU16::new(51),
                next_transaction: AtomicU64::new(1),
            }),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.shared.config
    }

    /// Runs a T-SQL script as `sa`: batches separated by `GO` lines. Stops
    /// at the first error and returns it.
    pub fn run_script(&self, sql: &str) -> SqlResult<()> {
        super::script::run_script(self, sql)
    }

    /// Admits a client: 18456 for an unknown login or wrong password
    /// (never saying which), 4060 when the login cannot open the requested
    /// database (<https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/mssqlserver-4060-database-engine-error>).
    pub fn login(&self, request: &LoginRequest) -> SqlResult<Session> {
        let (is_sysadmin, db_id) = {
            let state = self.shared.read();
            let login = state
                .security
                .login(&request.user)
                .filter(|l| l.password_matches(&request.password))
                .ok_or_else(|| SqlError::login_failed(&request.user))?;
            let wanted = request
                .database
                .as_deref()
                .filter(|d| !d.is_empty())
                .unwrap_or("master");
            let cannot_open = || {
                SqlError::new(
                    4060,
                    format!("Cannot open database \"{wanted}\" requested by the login. The login failed."),
                )
                .with_class(11)
            };
            let db = state.database(wanted).ok_or_else(cannot_open)?;
            if db
                .security
                .user_for_login(&login.name, login.is_sysadmin)
                .is_none()
            {
                return Err(cannot_open());
            }
            (login.is_sysadmin, db.id)
        };
        let spid = self.shared.next_spid.fetch_add(1, Ordering::Relaxed);
        self.shared.connections.register(Connection {
            session_id: spid,
            login: request.user.clone(),
            connect_time: self.shared.clock.now_utc(),
            encrypted: request.encrypted,
            client_addr: request.client_addr,
            host_name: request.host_name.clone(),
            program_name: request.app_name.clone(),
        });
        Ok(Session::new(
            self.clone(),
            spid,
            request.user.clone(),
            is_sysadmin,
            db_id,
        ))
    }

    /// A session for `sa` in master (scripts, tests, the CLI).
    pub fn sa_session(&self) -> Session {
        let spid = self.shared.next_spid.fetch_add(1, Ordering::Relaxed);
        Session::new(self.clone(), spid, "sa".into(), true, 1)
    }

    /// The committed transactions of a database's log, oldest first.
    pub fn transaction_log(&self, database: &str) -> Option<Vec<LogRecord>> {
        let state = self.shared.read();
        state.database(database).map(|d| d.log.records.clone())
    }

    /// Sessions blocked on another session's transaction right now.
    pub fn blocked_sessions(&self) -> usize {
        self.shared.locks.waiting()
    }

    /// Runs `f` over the server state (read-only), e.g. for CDC capture.
    pub fn with_state<R>(&self, f: impl FnOnce(&ServerState) -> R) -> R {
        f(&self.shared.read())
    }
}
