//! Change-table cleanup: retention-based by the cleanup job, or on demand
//! with sys.sp_cdc_cleanup_change_table
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-cleanup-change-table-transact-sql>).
//! Cleanup deletes change rows below the new low water mark and moves the
//! capture instance's start_lsn (its min LSN) up to it; lsn_time_mapping
//! entries below every instance's start_lsn go too.

use chrono::{Duration, NaiveDateTime};

use super::Lsn;
use crate::sql::catalog::{Database, same_name};
use crate::sql::types::Value;

/// Moves one capture instance's low water mark to `lwm` and deletes its
/// change rows below it; how many rows went.
pub fn cleanup_instance(db: &mut Database, name: &str, lwm: Lsn) -> usize {
    let Some(ci) = db
        .cdc
        .instances
        .iter_mut()
        .find(|i| same_name(&i.name, name))
    else {
        return 0;
    };
    if lwm <= ci.start_lsn {
        return 0;
    }
    ci.start_lsn = lwm;
    let ct_id = ci.object_id;
    let mut removed = 0;
    if let Some(ct) = db.tables.get_mut(&ct_id) {
        let doomed: Vec<_> = ct
            .data
            .iter()
            .filter(|(_, r)| match r.first() {
                Some(Value::Binary(b)) => Lsn::from_bytes(b).is_some_and(|l| l < lwm),
                _ => false,
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            ct.data.remove(&k);
            removed += 1;
        }
    }
    trim_mapping(db);
    removed
}

/// Drops lsn_time_mapping rows below every capture instance's start_lsn,
/// keeping the newest entry so the max LSN stays mapped.
fn trim_mapping(db: &mut Database) {
    let Some(floor) = db.cdc.instances.iter().map(|i| i.start_lsn).min() else {
        return;
    };
    let newest = db.cdc.lsn_time_mapping.iter().map(|m| m.start_lsn).max();
    db.cdc
        .lsn_time_mapping
        .retain(|m| m.start_lsn >= floor || Some(m.start_lsn) == newest);
}

/// The retention-based low water mark: the first mapped LSN whose
/// transaction ended within the retention window (local times).
pub fn retention_mark(db: &Database, now_local: NaiveDateTime, retention_min: i64) -> Option<Lsn> {
    let threshold = now_local - Duration::minutes(retention_min);
    db.cdc
        .lsn_time_mapping
        .iter()
        .filter(|m| m.tran_end_time >= threshold)
        .map(|m| m.start_lsn)
        .min()
        .or(db.cdc.max_lsn)
}

/// One run of the cleanup job over every capture instance.
pub fn run(db: &mut Database, now_local: NaiveDateTime, retention_min: i64) -> usize {
    let Some(mark) = retention_mark(db, now_local, retention_min) else {
        return 0;
    };
    let names: Vec<String> = db.cdc.instances.iter().map(|i| i.name.clone()).collect();
    names.iter().map(|n| cleanup_instance(db, n, mark)).sum()
}
