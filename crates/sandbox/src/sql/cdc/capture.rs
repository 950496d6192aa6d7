//! The capture process: a log scan that turns committed transactions into
//! change-table rows and cdc.lsn_time_mapping entries, as described in
//! "About change data capture" (capture process, validity interval)
//! <https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/about-change-data-capture-sql-server>
//! and observed in cdc.<capture_instance>_CT
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-tables/cdc-capture-instance-ct-transact-sql>).

use chrono::NaiveDateTime;

use super::{CaptureInstance, DdlHistory, KEPT_SESSIONS, Lsn, LsnTime, ScanSession};
use crate::sql::catalog::Database;
use crate::sql::clock::Clock;
use crate::sql::expr::{self, Typed};
use crate::sql::storage::Row;
use crate::sql::transaction::{ChangeOp, DdlEvent, LogChange, LogRecord};
use crate::sql::types::{DataType, Value};

/// Limits of one capture run (sp_cdc_scan's parameters).
#[derive(Debug, Clone, Copy)]
pub struct ScanLimits {
    pub maxtrans: i32,
    pub maxscans: i32,
}

/// The server's local time at a UTC instant, by the zone's offset then.
pub fn local_at(clock: &dyn Clock, utc: NaiveDateTime) -> NaiveDateTime {
    local(utc, clock.offset_at(utc).local_minus_utc())
}

/// The server's local time for a UTC instant: `offset` is the zone's
/// offset in seconds.
/// A UTC instant as cdc.lsn_time_mapping stores it: server-local time in a
/// `datetime` column, so rounded to SQL Server's 1/300 s ticks.
pub fn local(utc: NaiveDateTime, offset_secs: i32) -> NaiveDateTime {
    let local = utc + chrono::Duration::seconds(i64::from(offset_secs));
    crate::sql::expr::datetime::round_datetime(local).unwrap_or(local)
}

/// The `__$update_mask` with the given captured ordinals set: one bit per
/// captured column, column 1 in the lowest bit of the LAST byte.
pub fn update_mask(columns: usize, set: impl Iterator<Item = usize>) -> Vec<u8> {
    let len = columns.div_ceil(8).max(1);
    let mut m = vec![0u8; len];
    for ordinal in set {
        if ordinal == 0 || ordinal > columns {
            continue;
        }
        let bit = ordinal - 1;
        m[len - 1 - bit / 8] |= 1 << (bit % 8);
    }
    m
}

/// Whether ordinal `position` is set in `mask` (sys.fn_cdc_is_bit_set).
pub fn bit_set(mask: &[u8], position: usize) -> bool {
    if position == 0 || position > mask.len() * 8 {
        return false;
    }
    let bit = position - 1;
    mask[mask.len() - 1 - bit / 8] & (1 << (bit % 8)) != 0
}

fn value_of(change: &LogChange, row: Option<&Row>, column_id: i32) -> Value {
    let Some(row) = row else {
        return Value::Null;
    };
    change
        .columns
        .iter()
        .position(|c| *c == column_id)
        .and_then(|p| row.get(p).cloned())
        .unwrap_or(Value::Null)
}

/// Change-table rows of one logged change for one capture instance.
fn rows_for(ci: &CaptureInstance, commit: Lsn, change: &LogChange) -> Vec<Vec<Value>> {
    let n = ci.captured.len();
    let image = |row: Option<&Row>, op: i32, seqval: Lsn, mask: &[u8]| {
        let mut r = vec![
            Value::Binary(commit.to_bytes()),
            Value::Null,
            Value::Binary(seqval.to_bytes()),
            Value::Int(op),
            Value::Binary(mask.to_vec()),
        ];
        r.extend(
            ci.captured
                .iter()
                .map(|c| value_of(change, row, c.column_id)),
        );
        r.push(Value::Int(change.command_id));
        r
    };
    let all = update_mask(n, 1..=n);
    match change.op {
        ChangeOp::Insert => vec![image(change.after.as_ref(), 2, change.seqval, &all)],
        ChangeOp::Delete => vec![image(change.before.as_ref(), 1, change.seqval, &all)],
        ChangeOp::Update => {
            let differs = |cid: i32| {
                value_of(change, change.before.as_ref(), cid)
                    != value_of(change, change.after.as_ref(), cid)
            };
            // An update of a unique-index (key) column is logged as a
            // delete and an insert, and captured that way (1 then 2).
            if ci.index_columns.iter().any(|(_, cid)| differs(*cid)) {
                return vec![
                    image(change.before.as_ref(), 1, change.seqval, &all),
                    image(change.after.as_ref(), 2, change.seqval.increment(), &all),
                ];
            }
            let mask = update_mask(
                n,
                ci.captured
                    .iter()
                    .filter(|c| differs(c.column_id))
                    .map(|c| c.ordinal as usize),
            );
            // Before and after images share one __$seqval.
            vec![
                image(change.before.as_ref(), 3, change.seqval, &mask),
                image(change.after.as_ref(), 4, change.seqval, &mask),
            ]
        }
    }
}

/// Gives the change table of every capture instance of `event`'s table
/// the new type of each retyped column it captures, as the capture process
/// does ("the data type change is propagated to the change table to
/// ensure that the capture mechanism doesn't introduce data loss"). The
/// rows it holds are converted; when one cannot be (a narrowing change
/// older rows do not fit), the change table keeps its type and new rows
/// are converted to it as far as they go.
fn propagate_types(db: &mut Database, event: &DdlEvent, commit: Lsn) {
    for (column_id, new_ty) in &event.retyped {
        for ci in db
            .cdc
            .instances
            .iter_mut()
            .filter(|i| i.source_object_id == event.object_id && commit > i.start_lsn)
        {
            let Some(at) = ci.captured.iter().position(|c| c.column_id == *column_id) else {
                continue;
            };
            let position = ci.value_position(ci.captured[at].ordinal);
            let captured = &mut ci.captured[at];
            let Some(ct) = db.tables.get_mut(&ci.object_id) else {
                continue;
            };
            let old_ty = captured.ty;
            let rows = ct.data.take_all();
            let converted: Result<Vec<_>, _> = rows
                .iter()
                .map(|(key, row)| {
                    let mut values = row.to_vec();
                    if let Some(v) = values.get_mut(position) {
                        *v = expr::assign_collated(
                            &Typed::new(v.clone(), old_ty),
                            *new_ty,
                            captured.collation,
                            &captured.name,
                        )?;
                    }
                    Ok::<_, crate::sql::error::SqlError>((key.clone(), values.into_boxed_slice()))
                })
                .collect();
            match converted {
                Ok(rows) => {
                    ct.data.replace_all(rows.into_iter().collect());
                    if let Some(column) = ct.meta.columns.get_mut(position) {
                        column.ty = *new_ty;
                    }
                    captured.ty = *new_ty;
                }
                Err(_) => ct.data.replace_all(rows),
            }
        }
    }
}

/// `row` with each captured value, of its source column's type
/// (`source_type`), converted to its change table column's type: a value
/// of a widened source column into a change table kept narrower.
fn typed_for(
    ci: &CaptureInstance,
    mut row: Vec<Value>,
    source_type: impl Fn(i32) -> Option<DataType>,
) -> Vec<Value> {
    for c in &ci.captured {
        let position = ci.value_position(c.ordinal);
        let Some(from) = source_type(c.column_id).filter(|t| *t != c.ty) else {
            continue;
        };
        if let Some(v) = row.get_mut(position)
            && let Ok(converted) =
                expr::assign_collated(&Typed::new(v.clone(), from), c.ty, c.collation, &c.name)
        {
            *v = converted;
        }
    }
    row
}

/// Applies one committed transaction to the capture instances; whether it
/// touched any captured table (or its schema).
fn apply(db: &mut Database, rec: &LogRecord, clock: &dyn Clock, session: &mut ScanSession) -> bool {
    let mut captured = false;
    // A type change reaches the change tables before the transaction's rows
    // of the new type do.
    for ev in &rec.ddl {
        propagate_types(db, ev, rec.commit_lsn);
    }
    let instances = db.cdc.instances.clone();
    for ci in &instances {
        if rec.commit_lsn <= ci.start_lsn {
            continue;
        }
        let rows: Vec<Vec<Value>> = rec
            .changes
            .iter()
            .filter(|c| c.object_id == ci.source_object_id)
            .flat_map(|c| rows_for(ci, rec.commit_lsn, c))
            .collect();
        if rows.is_empty() {
            continue;
        }
        captured = true;
        session.command_count += rows.len() as i64;
        let source_types: Vec<(i32, DataType)> = db
            .tables
            .get(&ci.source_object_id)
            .map(|t| t.meta.columns.iter().map(|c| (c.column_id, c.ty)).collect())
            .unwrap_or_default();
        let source_type = |id: i32| source_types.iter().find(|(c, _)| *c == id).map(|(_, t)| *t);
        if let Some(ct) = db.tables.get_mut(&ci.object_id) {
            for r in rows {
                let key = ct.data.next_heap_key();
                ct.data
                    .insert(key, typed_for(ci, r, source_type).into_boxed_slice());
            }
        }
    }
    for ev in &rec.ddl {
        for ci in instances
            .iter()
            .filter(|i| i.source_object_id == ev.object_id)
        {
            if rec.commit_lsn <= ci.start_lsn {
                continue;
            }
            captured = true;
            session.schema_change_count += 1;
            db.cdc.ddl_history.push(DdlHistory {
                source_object_id: ci.source_object_id,
                object_id: ci.object_id,
                required_column_update: ci
                    .captured
                    .iter()
                    .any(|c| ev.retyped.iter().any(|(id, _)| *id == c.column_id)),
                ddl_command: ev.command.clone(),
                ddl_lsn: rec.commit_lsn,
                ddl_time: local_at(clock, rec.commit_time),
            });
            if ev.dropped {
                super::enable::drop_instance(db, &ci.name);
            }
        }
    }
    captured
}

fn map(db: &mut Database, rec: &LogRecord, clock: &dyn Clock) {
    db.cdc.lsn_time_mapping.push(LsnTime {
        start_lsn: rec.commit_lsn,
        tran_begin_time: local_at(clock, rec.begin_time),
        tran_end_time: local_at(clock, rec.commit_time),
        tran_id: rec.tran_id,
        tran_begin_lsn: rec.begin_lsn,
    });
    db.cdc.max_lsn = Some(rec.commit_lsn);
    db.cdc.last_mapping_time = Some(rec.commit_time);
}

/// Runs one log scan session over the database's unread log: up to
/// `maxscans` cycles of `maxtrans` transactions. Writes an idle entry to
/// lsn_time_mapping when nothing was read for `idle_secs`. Returns the
/// number of transactions read.
pub fn scan(
    db: &mut Database,
    now_utc: NaiveDateTime,
    clock: &dyn Clock,
    limits: ScanLimits,
    idle_secs: i64,
) -> usize {
    let offset = clock.offset_at(now_utc).local_minus_utc();
    if super::errors::fail_pending_scan(db, now_utc, offset) {
        return 0;
    }
    let first = db.cdc.next_sequence;
    let start_index = db.log.records.partition_point(|r| r.sequence < first);
    let budget = (limits.maxtrans.max(1) as usize).saturating_mul(limits.maxscans.max(1) as usize);
    let end_index = db.log.records.len().min(start_index.saturating_add(budget));
    let now = local(now_utc, offset);
    if start_index >= end_index {
        db.cdc.aggregate.empty_scan_count += 1;
        let quiet = db
            .cdc
            .last_mapping_time
            .is_none_or(|t| (now_utc - t).num_seconds() >= idle_secs);
        if quiet && !db.cdc.instances.is_empty() {
            let lsn = db.log.lsns.begin_block();
            db.cdc.lsn_time_mapping.push(LsnTime {
                start_lsn: lsn,
                tran_begin_time: now,
                tran_end_time: now,
                tran_id: 0,
                tran_begin_lsn: lsn,
            });
            db.cdc.max_lsn = Some(lsn);
            db.cdc.last_mapping_time = Some(now_utc);
        }
        return 0;
    }
    db.cdc.next_session_id += 1;
    let mut session = ScanSession {
        session_id: db.cdc.next_session_id,
        start_time: Some(now),
        ..ScanSession::default()
    };
    let records: Vec<LogRecord> = db.log.records[start_index..end_index].to_vec();
    for rec in &records {
        session.start_lsn.get_or_insert(rec.begin_lsn);
        session.log_record_count += 2 + rec.changes.len() as i64 + rec.ddl.len() as i64;
        session.last_commit_lsn = Some(rec.commit_lsn);
        session.last_commit_time = Some(local_at(clock, rec.commit_time));
        if apply(db, rec, clock, &mut session) {
            session.tran_count += 1;
            session.first_begin_cdc_lsn.get_or_insert(rec.begin_lsn);
            session.last_commit_cdc_lsn = Some(rec.commit_lsn);
            session.last_commit_cdc_time = Some(local_at(clock, rec.commit_time));
            map(db, rec, clock);
        }
        db.cdc.next_sequence = rec.sequence + 1;
    }
    // The log's end advances the validity interval even when the last
    // transactions touched no captured table.
    if let Some(last) = records.last()
        && db.cdc.max_lsn.is_none_or(|m| m < last.commit_lsn)
    {
        map(db, last, clock);
    }
    session.end_lsn = session.last_commit_lsn;
    session.end_time = Some(now);
    if let Some(t) = session.last_commit_cdc_time {
        session.latency = (now - t).num_seconds().clamp(0, i64::from(i32::MAX)) as i32;
        session.duration = 0;
    }
    record_session(db, session);
    records.len()
}

fn record_session(db: &mut Database, session: ScanSession) {
    let agg = &mut db.cdc.aggregate;
    agg.start_time
        .get_or_insert(session.start_time.unwrap_or_default());
    agg.end_time = session.end_time;
    agg.duration += session.duration;
    agg.start_lsn = session.start_lsn;
    agg.end_lsn = session.end_lsn;
    agg.tran_count += session.tran_count;
    agg.last_commit_lsn = session.last_commit_lsn.or(agg.last_commit_lsn);
    agg.last_commit_time = session.last_commit_time.or(agg.last_commit_time);
    agg.log_record_count += session.log_record_count;
    agg.schema_change_count += session.schema_change_count;
    agg.command_count += session.command_count;
    if agg.first_begin_cdc_lsn.is_none() {
        agg.first_begin_cdc_lsn = session.first_begin_cdc_lsn;
    }
    agg.last_commit_cdc_lsn = session.last_commit_cdc_lsn.or(agg.last_commit_cdc_lsn);
    agg.last_commit_cdc_time = session.last_commit_cdc_time.or(agg.last_commit_cdc_time);
    if session.latency != 0 || session.last_commit_cdc_time.is_some() {
        agg.latency = session.latency;
    }
    agg.empty_scan_count = 0;
    db.cdc.sessions.push_back(session);
    while db.cdc.sessions.len() > KEPT_SESSIONS {
        db.cdc.sessions.pop_front();
    }
}
