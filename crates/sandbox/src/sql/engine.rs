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
use super::clock::{SandboxClock, ServerZone};
use super::connections::{Connection, ConnectionRegistry};
use super::error::{SqlError, SqlResult};
use super::faults::FaultInjector;
use super::procedures::ProcedureRegistry;
use super::request::LoginRequest;
use super::security::ServerSecurity;
use super::session::Session;
use super::transaction::{LockManager, LogRecord};
use super::views::{TableFunctionRegistry, ViewRegistry};

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
    /// The SQL Server release emulated (version strings, and the 2019/2022
    /// differences such as DMV permission names). Default 2022.
    pub sql_version: SqlVersion,
    /// The server's time zone: `UTC` (default) or an IANA name such as
    /// `Europe/Oslo`. GETDATE and cdc.lsn_time_mapping use it.
    pub time_zone: String,
    /// Server clock speed: 1.0 = real time (default), 0 = frozen (time
    /// moves only with sandbox.sp_advance_clock), 60 = a minute a second.
    pub clock_speed: f64,
    /// Seconds of quiet after which the capture job writes an idle entry
    /// to cdc.lsn_time_mapping (default 300, as observed on SQL Server).
    pub cdc_idle_interval_secs: i64,
    /// How often (real milliseconds) the background CDC scheduler looks
    /// for due capture/cleanup work (default 200).
    pub cdc_tick_ms: u64,
}

/// The SQL Server release the sandbox reports and behaves as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqlVersion {
    /// SQL Server 2019 (15.x).
    Sql2019,
    /// SQL Server 2022 (16.x).
    #[default]
    Sql2022,
}

impl SqlVersion {
    /// `2019` / `2022` (CLI values); None for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "2019" | "15" => Some(Self::Sql2019),
            "2022" | "16" => Some(Self::Sql2022),
            _ => None,
        }
    }

    pub fn year(self) -> u16 {
        match self {
            Self::Sql2019 => 2019,
            Self::Sql2022 => 2022,
        }
    }

    /// A released build of that version (SERVERPROPERTY('ProductVersion')).
    pub fn default_build(self) -> &'static str {
        match self {
            Self::Sql2019 => "15.0.4355.3",
            Self::Sql2022 => "16.0.4135.4",
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            sa_password: String::new(),
            server_name: "sandbox".into(),
            product_version: SqlVersion::Sql2022.default_build().into(),
            edition: "Developer Edition (64-bit)".into(),
            sql_version: SqlVersion::Sql2022,
            time_zone: "UTC".into(),
            clock_speed: 1.0,
            cdc_idle_interval_secs: 300,
            cdc_tick_ms: 200,
        }
    }
}

impl EngineConfig {
    /// @@VERSION text.
    pub fn version_text(&self) -> String {
        format!(
            "Microsoft SQL Server {} - {} (X64) (mssql-cdc sandbox)\n\t{} on Linux",
            self.sql_version.year(),
            self.product_version,
            self.edition
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
    pub table_functions: TableFunctionRegistry,
    pub connections: ConnectionRegistry,
    /// Errors and login routes injected by the sandbox-only procedures.
    pub faults: FaultInjector,
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
    /// Its clock is a [`SandboxClock`] in the configured zone and speed
    /// (an unknown zone name falls back to UTC).
    pub fn new(config: EngineConfig) -> Self {
        let zone = ServerZone::parse(&config.time_zone).unwrap_or(ServerZone::Utc);
        let clock = Arc::new(SandboxClock::new(zone, config.clock_speed));
        Self::with_clock(config, clock)
    }

    /// The machine's clock, uncontrollable (kept for embedders).
    pub fn with_system_clock(config: EngineConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// As [`Engine::new`] with a given clock (tests and CDC control time).
    /// Starts the background CDC scheduler, which ends with the engine.
    pub fn with_clock(mut config: EngineConfig, clock: Arc<dyn Clock>) -> Self {
        if config.sql_version == SqlVersion::Sql2019 && config.product_version.starts_with("16.") {
            config.product_version = SqlVersion::Sql2019.default_build().into();
        }
        let state = ServerState::new(&config.sa_password, clock.as_ref());
        let mut views = ViewRegistry::with_catalog_views();
        let mut procedures = ProcedureRegistry::with_system_procedures();
        let mut table_functions = TableFunctionRegistry::default();
        super::cdc::register(&mut procedures, &mut views, &mut table_functions);
        super::faults::register(&mut procedures);
        let engine = Self {
            shared: Arc::new(Shared {
                config,
                clock,
                state: RwLock::new(state),
                locks: LockManager::default(),
                views,
                procedures,
                table_functions,
                connections: ConnectionRegistry::default(),
                faults: FaultInjector::default(),
                next_spid: AtomicU16::new(51),
                next_transaction: AtomicU64::new(1),
            }),
        };
        super::cdc::scheduler::spawn_background(&engine.shared);
        engine
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
        let kill = self.shared.connections.register(Connection {
            session_id: spid,
            login: request.user.clone(),
            connect_time: self.shared.clock.now_utc(),
            encrypted: request.encrypted,
            client_addr: request.client_addr,
            host_name: request.host_name.clone(),
            program_name: request.app_name.clone(),
            database_id: db_id,
        });
        let mut session =
            Session::new(self.clone(), spid, request.user.clone(), is_sysadmin, db_id);
        session.kill = Some(kill);
        Ok(session)
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

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
