//! Transactions: the undo journal that rolls work back, the per-database
//! log of committed changes that CDC will read, and the writer lock.
//!
//! Locking model (deliberately simple, and deadlock-free):
//! * One session at a time owns the server's *writer lock*; any statement
//!   that changes data or the catalog acquires it first and an explicit
//!   transaction keeps it until COMMIT/ROLLBACK. Autocommit statements hold
//!   it for the statement only.
//! * Tables changed by the owner's open transaction are marked dirty;
//!   a reader from another session that touches one waits until the
//!   transaction ends (READ COMMITTED blocking) and then re-runs its
//!   statement (reads have no side effects before they finish).
//! * Nobody waits while holding the state lock, and the writer never
//!   waits for anyone (its own dirty tables are readable to it), so every
//!   wait points at the single writer: the wait-for graph is a star and
//!   can have no cycle. Waits poll the client's CancelToken.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use chrono::NaiveDateTime;

use super::catalog::Table;
use super::cdc::lsn::{Lsn, LsnAllocator};
use super::engine::ServerState;
use super::error::{SqlError, SqlResult};
use super::request::CancelToken;
use super::storage::{Row, RowKey};
use super::types::DataType;

/// How often waiting sessions look at their CancelToken.
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// The kind of a row change in the transaction log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    Insert,
    Delete,
    Update,
}

/// One row change of a committed transaction, in statement order.
#[derive(Debug, Clone, PartialEq)]
pub struct LogChange {
    pub object_id: i32,
    pub op: ChangeOp,
    /// Sequence value of the change inside its transaction (CDC's
    /// `__$seqval`); a key update split into delete+insert uses the next one.
    pub seqval: Lsn,
    /// 1-based statement number inside the transaction (`__$command_id`).
    pub command_id: i32,
    /// column_id of each row position, as the table was at commit, so a
    /// later reader maps values even after ALTER TABLE.
    pub columns: Arc<[i32]>,
    /// The row before (delete, update).
    pub before: Option<Row>,
    /// The row after (insert, update).
    pub after: Option<Row>,
}

/// A schema change of a committed transaction (CDC's cdc.ddl_history).
#[derive(Debug, Clone, PartialEq)]
pub struct DdlEvent {
    pub object_id: i32,
    /// The statement, as reconstructed from the AST.
    pub command: String,
    /// DROP TABLE (the capture instances go with the table).
    pub dropped: bool,
    /// Columns whose data type changed, with their new type: the capture
    /// process gives a capture instance's change table the new type too
    /// (required_column_update).
    pub retyped: Vec<(i32, DataType)>,
}

/// One committed transaction that changed user tables of a database.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// Position in the database's log, increasing from 1.
    pub sequence: u64,
    pub begin_time: NaiveDateTime,
    pub commit_time: NaiveDateTime,
    /// LSN of the transaction's begin record (lsn_time_mapping.tran_begin_lsn).
    pub begin_lsn: Lsn,
    /// LSN of its commit record (`__$start_lsn` of its change rows).
    pub commit_lsn: Lsn,
    /// The transaction descriptor (lsn_time_mapping.tran_id).
    pub tran_id: u64,
    pub changes: Vec<LogChange>,
    pub ddl: Vec<DdlEvent>,
}

/// A database's in-memory transaction log (committed work only).
#[derive(Debug, Clone, Default)]
pub struct TransactionLog {
    pub records: Vec<LogRecord>,
    /// LSNs of this database's log.
    pub lsns: LsnAllocator,
}

impl TransactionLog {
    /// The next log sequence number a record would get.
    pub fn next_sequence(&self) -> u64 {
        self.records.last().map_or(1, |r| r.sequence + 1)
    }
}

/// One changed row with its clustered keys, enough to undo it.
#[derive(Debug, Clone)]
pub struct RowUndo {
    pub op: ChangeOp,
    pub before: Option<(RowKey, Row)>,
    pub after: Option<(RowKey, Row)>,
}

/// One undoable step of a transaction.
#[derive(Debug, Clone)]
pub enum UndoEntry {
    /// The row changes one statement made to one table. Undone as a set
    /// (remove every new row, then restore every old one), so updates of
    /// key columns that shift keys undo cleanly.
    Rows {
        db: i32,
        object_id: i32,
        changes: Vec<RowUndo>,
    },
    CreateTable {
        db: i32,
        object_id: i32,
    },
    /// DROP TABLE and ALTER TABLE keep the whole previous table.
    RestoreTable {
        db: i32,
        table: Box<Table>,
    },
    /// A schema change to log at commit (nothing to undo).
    Ddl {
        db: i32,
        event: DdlEvent,
    },
}

/// A session's open transaction.
#[derive(Debug, Clone)]
pub struct Transaction {
    pub descriptor: u64,
    pub begin_time: NaiveDateTime,
    pub entries: Vec<UndoEntry>,
}

impl Transaction {
    pub fn new(descriptor: u64, begin_time: NaiveDateTime) -> Self {
        Self {
            descriptor,
            begin_time,
            entries: Vec::new(),
        }
    }

    /// A savepoint for statement-level rollback.
    pub fn mark(&self) -> usize {
        self.entries.len()
    }
}

/// Undoes journal entries newer than `mark`, newest first.
pub fn undo_to(state: &mut ServerState, txn: &mut Transaction, mark: usize) {
    while txn.entries.len() > mark {
        let Some(entry) = txn.entries.pop() else {
            break;
        };
        undo_entry(state, entry);
    }
}

fn undo_entry(state: &mut ServerState, entry: UndoEntry) {
    match entry {
        UndoEntry::Rows {
            db,
            object_id,
            changes,
        } => {
            let Some(table) = state
                .database_by_id_mut(db)
                .and_then(|d| d.tables.get_mut(&object_id))
            else {
                return;
            };
            for c in changes.iter().rev() {
                if let Some((k, _)) = &c.after {
                    table.data.remove(k);
                }
            }
            for c in changes.into_iter().rev() {
                if let Some((k, row)) = c.before {
                    table.data.insert(k, row);
                }
            }
        }
        UndoEntry::CreateTable { db, object_id } => {
            if let Some(d) = state.database_by_id_mut(db) {
                d.tables.remove(&object_id);
            }
        }
        UndoEntry::RestoreTable { db, table } => {
            if let Some(d) = state.database_by_id_mut(db) {
                d.tables.insert(table.meta.object_id, *table);
            }
        }
        UndoEntry::Ddl { .. } => {}
    }
}

/// Row changes and schema changes of one database inside a transaction.
#[derive(Default)]
struct DbWork {
    rows: Vec<(i32, Vec<RowUndo>)>,
    ddl: Vec<DdlEvent>,
}

/// Makes a transaction durable: appends one log record per database whose
/// user tables or schema it changed, with LSNs (begin, one sequence value
/// per change, commit), then clears its dirty marks.
pub fn commit(state: &mut ServerState, txn: Transaction, spid: u16, commit_time: NaiveDateTime) {
    let mut per_db: Vec<(i32, DbWork)> = Vec::new();
    fn slot(db: i32, per_db: &mut Vec<(i32, DbWork)>) -> usize {
        match per_db.iter().position(|(d, _)| *d == db) {
            Some(i) => i,
            None => {
                per_db.push((db, DbWork::default()));
                per_db.len() - 1
            }
        }
    }
    for entry in txn.entries {
        match entry {
            UndoEntry::Rows {
                db,
                object_id,
                changes,
            } => {
                let i = slot(db, &mut per_db);
                per_db[i].1.rows.push((object_id, changes));
            }
            UndoEntry::Ddl { db, event } => {
                let i = slot(db, &mut per_db);
                per_db[i].1.ddl.push(event);
            }
            _ => {}
        }
    }
    for (db, work) in per_db {
        if work.ddl.is_empty() && work.rows.iter().all(|(_, c)| c.is_empty()) {
            continue;
        }
        let Some(d) = state.database_by_id_mut(db) else {
            continue;
        };
        let begin_lsn = d.log.lsns.begin_block();
        let mut changes = Vec::new();
        for (command, (object_id, rows)) in work.rows.into_iter().enumerate() {
            let columns: Arc<[i32]> = d
                .tables
                .get(&object_id)
                .map(|t| t.meta.columns.iter().map(|c| c.column_id).collect())
                .unwrap_or_else(|| Arc::from(Vec::new()));
            for c in rows {
                let seqval = d.log.lsns.take();
                d.log.lsns.take();
                changes.push(LogChange {
                    object_id,
                    op: c.op,
                    seqval,
                    command_id: command as i32 + 1,
                    columns: columns.clone(),
                    before: c.before.map(|(_, r)| r),
                    after: c.after.map(|(_, r)| r),
                });
            }
        }
        let commit_lsn = d.log.lsns.take();
        let sequence = d.log.next_sequence();
        d.log.records.push(LogRecord {
            sequence,
            begin_time: txn.begin_time,
            commit_time,
            begin_lsn,
            commit_lsn,
            tran_id: txn.descriptor,
            changes,
            ddl: work.ddl,
        });
    }
    clear_dirty(state, spid);
}

/// Rolls the whole transaction back and clears its dirty marks.
pub fn rollback(state: &mut ServerState, mut txn: Transaction, spid: u16) {
    undo_to(state, &mut txn, 0);
    clear_dirty(state, spid);
}

fn clear_dirty(state: &mut ServerState, spid: u16) {
    for db in state.databases.values_mut() {
        for t in db.tables.values_mut() {
            if t.dirty_by == Some(spid) {
                t.dirty_by = None;
            }
        }
    }
}

#[derive(Debug, Default)]
struct LockState {
    writer: Option<u16>,
    /// Bumped whenever a writer lets go; readers wait for it to move.
    generation: u64,
}

/// The server's single writer lock and the "a transaction ended" signal.
#[derive(Debug, Default)]
pub struct LockManager {
    state: Mutex<LockState>,
    changed: Condvar,
    /// Sessions currently waiting (for the writer lock or for a
    /// transaction to end); later shown by sys.dm_exec_requests.
    waiting: AtomicUsize,
}

impl LockManager {
    fn lock(&self) -> MutexGuard<'_, LockState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many sessions are blocked right now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Waits (cancellably) until `spid` owns the writer lock.
    pub fn acquire_writer(&self, spid: u16, cancel: &CancelToken) -> SqlResult<()> {
        let _waiting = WaitGuard::new(&self.waiting);
        let mut st = self.lock();
        loop {
            match st.writer {
                None => {
                    st.writer = Some(spid);
                    return Ok(());
                }
                Some(owner) if owner == spid => return Ok(()),
                Some(_) => {
                    if cancel.is_cancelled() {
                        return Err(SqlError::cancelled());
                    }
                    st = self
                        .changed
                        .wait_timeout(st, WAIT_SLICE)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    /// Lets go of the writer lock if `spid` holds it, waking waiters.
    pub fn release_writer(&self, spid: u16) {
        let mut st = self.lock();
        if st.writer == Some(spid) {
            st.writer = None;
            st.generation += 1;
            self.changed.notify_all();
        }
    }

    pub fn writer(&self) -> Option<u16> {
        self.lock().writer
    }

    /// Read while still holding the state lock, before waiting.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Waits (cancellably) until some writer lets go after `since`.
    pub fn wait_for_release(&self, since: u64, cancel: &CancelToken) -> SqlResult<()> {
        let _waiting = WaitGuard::new(&self.waiting);
        let mut st = self.lock();
        while st.generation == since {
            if cancel.is_cancelled() {
                return Err(SqlError::cancelled());
            }
            st = self
                .changed
                .wait_timeout(st, WAIT_SLICE)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Ok(())
    }
}

/// Counts a session as waiting while alive.
struct WaitGuard<'a>(&'a AtomicUsize);

impl<'a> WaitGuard<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
#[path = "transaction_tests.rs"]
mod tests;
