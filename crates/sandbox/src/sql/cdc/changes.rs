//! The change-table functions created with each capture instance:
//! cdc.fn_cdc_get_all_changes_<capture_instance>
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/cdc-fn-cdc-get-all-changes-capture-instance-transact-sql>)
//! and cdc.fn_cdc_get_net_changes_<capture_instance>
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/cdc-fn-cdc-get-net-changes-capture-instance-transact-sql>),
//! as table-valued functions in FROM. A range outside the validity
//! interval, a NULL bound or a bad row filter raises Msg 313 state 3, as
//! "Work with change data" documents
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/work-with-change-data-sql-server>).

use std::collections::HashMap;

use super::functions::lsn_arg;
use super::{CaptureInstance, Lsn};
use crate::sql::catalog::{Database, same_name};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::executor::context::Ctx;
use crate::sql::expr::Typed;
use crate::sql::request::Column;
use crate::sql::security::ROLE_DB_OWNER;
use crate::sql::storage::KeyPart;
use crate::sql::types::{DataType, Length, Value};
use crate::sql::views::{RowsWanted, TableFnResult, TableFnRows};

const ALL: &str = "fn_cdc_get_all_changes_";
const NET: &str = "fn_cdc_get_net_changes_";

/// Permission to read a capture instance's changes: sysadmin or
/// db_owner, else SELECT on the source table and membership in the gating
/// role; 229 naming the function otherwise.
pub fn may_read(ctx: &Ctx<'_>, db: &Database, ci: &CaptureInstance) -> SqlResult<()> {
    may_call(ctx, db, ci, &format!("{ALL}{}", ci.name))
}

fn may_call(ctx: &Ctx<'_>, db: &Database, ci: &CaptureInstance, function: &str) -> SqlResult<()> {
    if ctx.info.is_sysadmin {
        return Ok(());
    }
    let user = ctx.user_in(db)?;
    let sec = &db.security;
    if sec.is_member(user, ROLE_DB_OWNER) {
        return Ok(());
    }
    let source_ok = db.tables.get(&ci.source_object_id).is_some_and(|t| {
        sec.has_object_permission(user, "SELECT", t.meta.schema_id, Some(t.meta.object_id))
    });
    let role_ok = ci.role_name.as_deref().is_none_or(|r| {
        sec.principal(r)
            .is_some_and(|role| sec.is_member(user, role.id))
    });
    if source_ok && role_ok {
        return Ok(());
    }
    Err(SqlError::new(
        229,
        format!(
            "The SELECT permission was denied on the object '{function}', database '{}', schema 'cdc'.",
            db.name
        ),
    )
    .with_class(14)
    .with_state(5))
}

/// Msg 313 state 3, whose text ends in " ..." on SQL Server.
fn msg313(kind: &str) -> SqlError {
    SqlError::new(
        313,
        format!(
            "An insufficient number of arguments were supplied for the procedure or function cdc.{kind} ..."
        ),
    )
    .with_state(3)
}

/// The table-function resolver registered with the engine.
pub fn resolve(
    ctx: &Ctx<'_>,
    db: &Database,
    schema: &str,
    name: &str,
    args: &[Typed],
    wanted: &RowsWanted<'_>,
) -> Option<TableFnResult> {
    if !same_name(schema, "cdc") || !db.is_cdc_enabled {
        return None;
    }
    let lower = name.to_lowercase();
    let (net, ci_name) = if let Some(rest) = lower.strip_prefix(ALL) {
        (false, &name[name.len() - rest.len()..])
    } else if let Some(rest) = lower.strip_prefix(NET) {
        (true, &name[name.len() - rest.len()..])
    } else {
        return None;
    };
    let ci = db.cdc.instance(ci_name)?;
    if net && !ci.supports_net_changes {
        return None;
    }
    Some(run(ctx, db, ci, net, name, args, wanted))
}

fn run(
    ctx: &Ctx<'_>,
    db: &Database,
    ci: &CaptureInstance,
    net: bool,
    function: &str,
    args: &[Typed],
    wanted: &RowsWanted<'_>,
) -> TableFnResult {
    may_call(ctx, db, ci, function)?;
    let kind = if net { NET } else { ALL };
    if args.len() != 3 {
        return Err(msg313(kind));
    }
    let (Some(from), Some(to)) = (lsn_arg(args.first())?, lsn_arg(args.get(1))?) else {
        return Err(msg313(kind));
    };
    let option = match args.get(2).map(|a| &a.value) {
        Some(Value::String(s)) => s.trim().to_lowercase(),
        _ => return Err(msg313(kind)),
    };
    let max = db.cdc.max_lsn.ok_or_else(|| msg313(kind))?;
    if from < ci.start_lsn || to > max || from > to {
        return Err(msg313(kind));
    }
    let mut rows: Vec<&[Value]> = Vec::new();
    if let Some(t) = db.tables.get(&ci.object_id) {
        rows.reserve(t.data.len());
        rows.extend(
            t.data
                .iter()
                .map(|(_, r)| &r[..])
                .filter(|r| lsn_at(r, 0).is_some_and(|l| l >= from && l <= to)),
        );
    }
    // (start_lsn, seqval, operation), binary compared bytewise as ORDER BY
    // compares it. The change table is kept in capture order, which is
    // already this order: the check is one pass.
    let order = |a: &&[Value], b: &&[Value]| {
        (bytes_at(a, 0), bytes_at(a, 2), op_of(a)).cmp(&(bytes_at(b, 0), bytes_at(b, 2), op_of(b)))
    };
    if !rows.is_sorted_by(|a, b| order(a, b).is_le()) {
        rows.sort_by(order);
    }
    if net {
        net_changes(ci, rows, &option).ok_or_else(|| msg313(kind))
    } else {
        all_changes(ci, rows, &option, wanted).ok_or_else(|| msg313(kind))
    }
}

fn bytes_at(r: &[Value], i: usize) -> Option<&[u8]> {
    match r.get(i) {
        Some(Value::Binary(b)) => Some(b),
        _ => None,
    }
}

fn lsn_at(r: &[Value], i: usize) -> Option<Lsn> {
    match r.get(i) {
        Some(Value::Binary(b)) => Lsn::from_bytes(b),
        _ => None,
    }
}

fn op_of(r: &[Value]) -> i32 {
    match r.get(3) {
        Some(Value::Int(o)) => *o,
        _ => 0,
    }
}

fn captured_columns(ci: &CaptureInstance) -> Vec<Column> {
    ci.captured
        .iter()
        .map(|c| Column::new(c.name.clone(), c.ty, true).collated(c.collation))
        .collect()
}

/// Appends the captured columns' values of change-table row `r`.
fn push_captured(out: &mut Vec<Value>, ci: &CaptureInstance, r: &[Value]) {
    out.extend((0..ci.captured.len()).map(|i| r.get(5 + i).cloned().unwrap_or(Value::Null)));
}

/// The rows in (__$start_lsn, __$seqval, __$operation) order, which the
/// result declares so that a reader's ORDER BY on them need not sort.
fn all_changes(
    ci: &CaptureInstance,
    rows: Vec<&[Value]>,
    option: &str,
    wanted: &RowsWanted<'_>,
) -> Option<TableFnRows> {
    let keep_old = match option {
        "all" => false,
        "all update old" => true,
        _ => return None,
    };
    let mut cols = vec![
        Column::new("__$start_lsn", DataType::Binary(10), false),
        Column::new("__$seqval", DataType::Binary(10), false),
        Column::new("__$operation", DataType::Int, false),
        Column::new(
            "__$update_mask",
            DataType::VarBinary(Length::Fixed(128)),
            true,
        ),
    ];
    cols.extend(captured_columns(ci));
    // Each output column's position in the change table, or None when
    // the query does not read it.
    let sources: Vec<Option<usize>> = [0, 2, 3, 4]
        .into_iter()
        .chain((0..ci.captured.len()).map(|i| 5 + i))
        .zip(&cols)
        .map(|(src, c)| (wanted.column)(&c.name).then_some(src))
        .collect();
    let out = rows
        .into_iter()
        .filter(|r| keep_old || op_of(r) != 3)
        .map(|r| {
            let mut row = Vec::with_capacity(sources.len() + wanted.spare);
            row.extend(
                sources
                    .iter()
                    .map(|src| src.and_then(|i| r.get(i)).cloned().unwrap_or(Value::Null)),
            );
            row
        })
        .collect();
    Some(TableFnRows {
        columns: cols,
        rows: out,
        ordered_by: vec![0, 1, 2],
    })
}

fn or_masks(a: &[u8], b: &[u8]) -> Vec<u8> {
    let len = a.len().max(b.len());
    (0..len)
        .map(|i| {
            let x = a
                .len()
                .checked_sub(len - i)
                .and_then(|j| a.get(j))
                .copied()
                .unwrap_or(0);
            let y = b
                .len()
                .checked_sub(len - i)
                .and_then(|j| b.get(j))
                .copied()
                .unwrap_or(0);
            x | y
        })
        .collect()
}

/// One source row's changes in the window, in order.
struct NetRow<'r> {
    first_op: i32,
    last: &'r [Value],
    mask: Vec<u8>,
}

fn net_changes(ci: &CaptureInstance, rows: Vec<&[Value]>, option: &str) -> Option<TableFnRows> {
    let (with_mask, merge) = match option {
        "all" => (false, false),
        "all with mask" => (true, false),
        "all with merge" => (false, true),
        _ => return None,
    };
    let key_positions: Vec<usize> = ci
        .index_columns
        .iter()
        .filter_map(|(_, cid)| ci.captured.iter().position(|c| c.column_id == *cid))
        .map(|p| 5 + p)
        .collect();
    let mut order: Vec<Vec<KeyPart>> = Vec::new();
    let mut by_key: HashMap<Vec<KeyPart>, NetRow> = HashMap::new();
    for r in rows.into_iter().filter(|r| op_of(r) != 3) {
        let key: Vec<KeyPart> = key_positions
            .iter()
            .map(|p| KeyPart::from_value(r.get(*p).unwrap_or(&Value::Null)))
            .collect();
        let op = op_of(r);
        let mask = match r.get(4) {
            Some(Value::Binary(b)) if op == 4 => b.clone(),
            _ => Vec::new(),
        };
        match by_key.get_mut(&key) {
            Some(n) => {
                n.mask = or_masks(&n.mask, &mask);
                n.last = r;
            }
            None => {
                order.push(key.clone());
                by_key.insert(
                    key,
                    NetRow {
                        first_op: op,
                        last: r,
                        mask,
                    },
                );
            }
        }
    }
    let mut cols = vec![
        Column::new("__$start_lsn", DataType::Binary(10), true),
        Column::new("__$operation", DataType::Int, true),
        Column::new(
            "__$update_mask",
            DataType::VarBinary(Length::Fixed(128)),
            true,
        ),
    ];
    cols.extend(captured_columns(ci));
    let mut out = Vec::new();
    for key in order {
        let Some(n) = by_key.remove(&key) else {
            continue;
        };
        // The row existed before the window unless its first change was
        // an insert.
        let existed = n.first_op != 2;
        let last_op = op_of(n.last);
        let op = match (last_op, existed) {
            (1, true) => 1,
            (1, false) => continue,
            (_, true) => 4,
            (_, false) => 2,
        };
        let op = if merge && op != 1 { 5 } else { op };
        let mask = if with_mask && op == 4 && !n.mask.is_empty() {
            Value::Binary(n.mask)
        } else {
            Value::Null
        };
        let mut o = Vec::with_capacity(3 + ci.captured.len());
        o.extend([
            n.last.first().cloned().unwrap_or(Value::Null),
            Value::Int(op),
            mask,
        ]);
        push_captured(&mut o, ci, n.last);
        out.push(o);
    }
    out.sort_by_key(|r| lsn_at(r, 0));
    Some(TableFnRows {
        columns: cols,
        rows: out,
        ordered_by: Vec::new(),
    })
}
