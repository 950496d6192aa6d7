//! A client session: runs batches and RPCs statement by statement, keeps
//! variables, the current database, the open transaction and prepared
//! statements, and applies SQL Server's error-unwinding rules: an error
//! with `Abort::Statement` undoes that statement only and the batch goes
//! on; `Abort::Batch` also skips the rest of the batch.

use std::collections::HashMap;

use super::engine::Engine;
use super::error::{Abort, SqlError, SqlResult};
use super::executor::context::{Ctx, SessionInfo, Variables, WriteCtx, is_blocked};
use super::executor::statement::run_statement;
use super::parse::{Stmt, parse_batch};
use super::request::{CancelToken, KillSignal, Output, Request, TransactionEvent};
use super::transaction::{self, Transaction};

/// A statement prepared with sp_prepare / sp_prepexec.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub declarations: String,
    pub statement: String,
}

/// One client's session.
pub struct Session {
    pub(crate) engine: Engine,
    pub(crate) info: SessionInfo,
    /// The open transaction: explicit (trancount > 0), or the implicit one
    /// of the statement being run.
    pub(crate) txn: Option<Transaction>,
    pub(crate) prepared: HashMap<i32, Prepared>,
    pub(crate) next_handle: i32,
    /// Raised by another session's `KILL` (client sessions only).
    pub(crate) kill: Option<KillSignal>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("spid", &self.info.spid)
            .field("login", &self.info.login)
            .finish()
    }
}

impl Session {
    pub(crate) fn new(
        engine: Engine,
        spid: u16,
        login: String,
        is_sysadmin: bool,
        db_id: i32,
    ) -> Self {
        Self {
            engine,
            info: SessionInfo {
                spid,
                login,
                is_sysadmin,
                db_id,
                vars: Variables::default(),
                rowcount: 0,
                scope_identity: None,
                trancount: 0,
            },
            txn: None,
            prepared: HashMap::new(),
            next_handle: 1,
            kill: None,
        }
    }

    /// The SPID.
    pub fn session_id(&self) -> u16 {
        self.info.spid
    }

    /// The current database's name.
    pub fn database(&self) -> String {
        self.engine
            .shared
            .read()
            .database_by_id(self.info.db_id)
            .map(|d| d.name.clone())
            .unwrap_or_else(|| "master".into())
    }

    /// What `KILL` raises for this session (None for scripts' sessions,
    /// which no client can reach).
    pub fn kill_signal(&self) -> Option<KillSignal> {
        self.kill.clone()
    }

    /// Runs one request to completion. A request that an injected error
    /// (`sandbox.sp_inject_error`) matches fails without running.
    pub fn execute(&mut self, request: Request, cancel: &CancelToken) -> Vec<Output> {
        let mut out = Vec::new();
        if let Some(error) = super::faults::injected_error(self, &request) {
            super::faults::fail_request(self, error, &mut out);
            return out;
        }
        match request {
            Request::Batch { sql } => {
                self.info.vars.clear();
                let _ = self.run_text(&sql, cancel, &mut out);
            }
            Request::Rpc { procedure, params } => {
                self.info.vars.clear();
                super::procedures::run_rpc(self, &procedure, params, cancel, &mut out);
            }
        }
        out
    }

    /// Rolls back an open transaction and releases locks.
    pub fn close(&mut self) {
        if let Some(txn) = self.txn.take() {
            let shared = self.engine.shared.clone();
            let mut st = shared.write();
            transaction::rollback(&mut st, txn, self.info.spid);
        }
        self.info.trancount = 0;
        self.engine.shared.locks.release_writer(self.info.spid);
        self.engine.shared.connections.unregister(self.info.spid);
    }

    /// Parses and runs T-SQL text in the current variable scope. Errors
    /// are reported into `out`; Err when the batch was aborted.
    pub(crate) fn run_text(
        &mut self,
        sql: &str,
        cancel: &CancelToken,
        out: &mut Vec<Output>,
    ) -> Result<(), Abort> {
        match parse_batch(sql) {
            Ok(stmts) => self.run_statements(&stmts, cancel, out),
            Err(e) => {
                out.push(Output::Message(e));
                out.push(Output::Done { rows: None });
                Err(Abort::Batch)
            }
        }
    }

    pub(crate) fn run_statements(
        &mut self,
        stmts: &[Stmt],
        cancel: &CancelToken,
        out: &mut Vec<Output>,
    ) -> Result<(), Abort> {
        for stmt in stmts {
            if cancel.is_cancelled() {
                out.push(Output::Message(SqlError::cancelled()));
                return Err(Abort::Batch);
            }
            if let Err(e) = run_statement(self, &stmt.kind, cancel, out) {
                let abort = e.abort;
                let cancelled = e.is_cancelled();
                let e = if e.line <= 1 {
                    e.with_line(stmt.line)
                } else {
                    e
                };
                out.push(Output::Message(e));
                if cancelled {
                    return Err(Abort::Batch);
                }
                out.push(Output::Done { rows: None });
                if abort != Abort::Statement {
                    return Err(abort);
                }
            }
        }
        Ok(())
    }

    /// Runs a read-only evaluation; when it meets rows changed by another
    /// session's open transaction, waits for that transaction to end and
    /// runs it again (READ COMMITTED).
    pub(crate) fn with_read<R>(
        &self,
        cancel: &CancelToken,
        f: impl Fn(&Ctx<'_>) -> SqlResult<R>,
    ) -> SqlResult<R> {
        let shared = &self.engine.shared;
        loop {
            let st = shared.read();
            let ctx = Ctx {
                state: &st,
                shared,
                info: &self.info,
                cancel,
            };
            match f(&ctx) {
                Err(e) if is_blocked(&e) => {
                    let generation = shared.locks.generation();
                    drop(st);
                    shared.locks.wait_for_release(generation, cancel)?;
                }
                r => return r,
            }
        }
    }

    /// Runs a change under the writer lock, in the open transaction or an
    /// autocommit one; a failed statement is undone.
    pub(crate) fn with_write<R>(
        &mut self,
        cancel: &CancelToken,
        f: impl FnOnce(&mut WriteCtx<'_>) -> SqlResult<R>,
    ) -> SqlResult<R> {
        let shared = self.engine.shared.clone();
        let spid = self.info.spid;
        shared.locks.acquire_writer(spid, cancel)?;
        let autocommit = self.txn.is_none();
        let mut txn = match self.txn.take() {
            Some(t) => t,
            None => Transaction::new(shared.next_transaction_descriptor(), shared.clock.now_utc()),
        };
        let mut st = shared.write();
        let mark = txn.mark();
        let result = {
            let mut w = WriteCtx {
                state: &mut st,
                shared: &shared,
                info: &mut self.info,
                txn: &mut txn,
                cancel,
            };
            f(&mut w)
        };
        if result.is_err() {
            transaction::undo_to(&mut st, &mut txn, mark);
        }
        if autocommit {
            if result.is_ok() {
                transaction::commit(&mut st, txn, spid, shared.clock.now_utc());
            } else {
                transaction::rollback(&mut st, txn, spid);
            }
            drop(st);
            shared.locks.release_writer(spid);
        } else {
            self.txn = Some(txn);
        }
        result
    }

    /// BEGIN TRANSACTION (nesting only counts).
    pub(crate) fn begin(&mut self, out: &mut Vec<Output>) {
        self.info.trancount += 1;
        if self.txn.is_none() {
            let shared = &self.engine.shared;
            let t = Transaction::new(shared.next_transaction_descriptor(), shared.clock.now_utc());
            out.push(Output::Transaction(TransactionEvent::Begin {
                descriptor: t.descriptor,
            }));
            self.txn = Some(t);
        }
    }

    /// COMMIT: the outermost one makes the work durable.
    pub(crate) fn commit(&mut self, out: &mut Vec<Output>) -> SqlResult<()> {
        if self.info.trancount == 0 {
            return Err(SqlError::new(
                3902,
                "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
            ));
        }
        self.info.trancount -= 1;
        if self.info.trancount > 0 {
            return Ok(());
        }
        if let Some(txn) = self.txn.take() {
            let descriptor = txn.descriptor;
            let shared = self.engine.shared.clone();
            let mut st = shared.write();
            transaction::commit(&mut st, txn, self.info.spid, shared.clock.now_utc());
            drop(st);
            shared.locks.release_writer(self.info.spid);
            out.push(Output::Transaction(TransactionEvent::Commit { descriptor }));
        }
        Ok(())
    }

    /// ROLLBACK: undoes everything since the outermost BEGIN.
    pub(crate) fn rollback(&mut self, out: &mut Vec<Output>) -> SqlResult<()> {
        if self.info.trancount == 0 {
            return Err(SqlError::new(
                3903,
                "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.",
            ));
        }
        self.info.trancount = 0;
        if let Some(txn) = self.txn.take() {
            let descriptor = txn.descriptor;
            let shared = self.engine.shared.clone();
            let mut st = shared.write();
            transaction::rollback(&mut st, txn, self.info.spid);
            drop(st);
            shared.locks.release_writer(self.info.spid);
            out.push(Output::Transaction(TransactionEvent::Rollback {
                descriptor,
            }));
        }
        Ok(())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
