//! Connects the T-SQL engine to the TDS server: the engine admits logins
//! and its sessions run requests.

use std::time::Duration;

use super::sql::{
    CancelToken, Engine, KillSignal, LoginRequest, Output, Request, Session, SqlError,
};
use super::tds::{Backend, BackendSession};

impl Backend for Engine {
    type Session = Session;

    fn login(&self, request: &LoginRequest) -> Result<Session, SqlError> {
        let session = Engine::login(self, request)?;
        self.shared.connections.count_login();
        Ok(session)
    }

    /// `sandbox.sp_route_logins`.
    fn route_login(&self) -> Option<(String, u16)> {
        self.shared.faults.take_route()
    }
}

impl BackendSession for Session {
    fn session_id(&self) -> u16 {
        Session::session_id(self)
    }

    fn database(&self) -> String {
        Session::database(self)
    }

    /// Counted in `sys.dm_os_performance_counters` (a client's round trip;
    /// scripts and the server's own jobs do not come this way).
    fn execute(&mut self, request: Request, cancel: &CancelToken) -> Vec<Output> {
        self.engine.shared.connections.count_request();
        Session::execute(self, request, cancel)
    }

    /// Feeds ASYNC_NETWORK_IO in `sys.dm_exec_session_wait_stats`.
    fn record_network_wait(&mut self, waited: Duration) {
        self.engine
            .shared
            .connections
            .record_network_wait(self.info.spid, waited);
    }

    /// `KILL`.
    fn kill_signal(&self) -> Option<KillSignal> {
        Session::kill_signal(self)
    }

    fn close(&mut self) {
        Session::close(self)
    }
}
