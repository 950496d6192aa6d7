//! The sys.fn_cdc_* scalar functions, reached through
//! `Scope::system_function` (names upper-cased, schema dropped):
//! fn_cdc_get_min_lsn / fn_cdc_get_max_lsn
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/sys-fn-cdc-get-max-lsn-transact-sql>),
//! fn_cdc_map_lsn_to_time, fn_cdc_map_time_to_lsn
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/sys-fn-cdc-map-time-to-lsn-transact-sql>),
//! fn_cdc_increment_lsn / fn_cdc_decrement_lsn, fn_cdc_get_column_ordinal,
//! fn_cdc_is_bit_set, fn_cdc_has_column_changed
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/sys-fn-cdc-has-column-changed-transact-sql>).

use chrono::NaiveDateTime;

use super::Lsn;
use super::capture::bit_set;
use crate::sql::catalog::{Database, same_name};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::executor::context::Ctx;
use crate::sql::expr::{self, Typed};
use crate::sql::types::{DataType, Value};

const LSN_TYPE: DataType = DataType::Binary(10);

fn lsn_value(l: Option<Lsn>) -> Typed {
    match l {
        Some(l) => Typed::new(Value::Binary(l.to_bytes()), LSN_TYPE),
        None => Typed::null(LSN_TYPE),
    }
}

/// An argument as an LSN; Ok(None) for NULL.
pub fn lsn_arg(v: Option<&Typed>) -> SqlResult<Option<Lsn>> {
    match v.map(|t| &t.value) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Binary(b)) => Ok(Lsn::from_bytes(b)),
        Some(_) => Err(SqlError::new(
            206,
            "Operand type clash: value is incompatible with binary(10)",
        )),
    }
}

fn text_arg(v: Option<&Typed>) -> Option<String> {
    match v.map(|t| &t.value) {
        Some(Value::String(s)) => Some(s.trim().to_string()),
        _ => None,
    }
}

fn int_arg(v: Option<&Typed>) -> Option<i64> {
    v.and_then(|t| expr::convert(t, DataType::BigInt).ok())
        .and_then(|v| match v {
            Value::BigInt(i) => Some(i),
            _ => None,
        })
}

fn arity(name: &str, args: &[Typed], n: usize) -> SqlResult<()> {
    if args.len() == n {
        return Ok(());
    }
    Err(SqlError::new(
        if args.len() < n { 313 } else { 8144 },
        if args.len() < n {
            format!("An insufficient number of arguments were supplied for the procedure or function sys.{}.", name.to_lowercase())
        } else {
            format!("Procedure or function sys.{} has too many arguments specified.", name.to_lowercase())
        },
    )
    .aborting_batch())
}

/// Mapped LSNs ordered by time: (tran_end_time, start_lsn).
fn mapping(db: &Database) -> impl Iterator<Item = (NaiveDateTime, Lsn)> + '_ {
    db.cdc
        .lsn_time_mapping
        .iter()
        .map(|m| (m.tran_end_time, m.start_lsn))
}

/// sys.fn_cdc_map_time_to_lsn with one of its four relational operators.
pub fn map_time_to_lsn(db: &Database, op: &str, t: NaiveDateTime) -> SqlResult<Option<Lsn>> {
    let op = op.to_lowercase();
    let found = match op.as_str() {
        "largest less than" => mapping(db).filter(|(e, _)| *e < t).map(|(_, l)| l).max(),
        "largest less than or equal" => mapping(db).filter(|(e, _)| *e <= t).map(|(_, l)| l).max(),
        "smallest greater than" => mapping(db).filter(|(e, _)| *e > t).map(|(_, l)| l).min(),
        "smallest greater than or equal" => {
            mapping(db).filter(|(e, _)| *e >= t).map(|(_, l)| l).min()
        }
        _ => {
            return Err(SqlError::new(
                22986,
                format!(
                    "The relational operator '{op}' is not valid. Valid operators are 'largest less than', 'largest less than or equal', 'smallest greater than' and 'smallest greater than or equal'."
                ),
            ));
        }
    };
    Ok(found)
}

/// The sys.fn_cdc_* function `name`, or None when it is not one.
pub fn call(ctx: &Ctx<'_>, name: &str, args: &[Typed]) -> Option<SqlResult<Typed>> {
    if !name.starts_with("FN_CDC_") {
        return None;
    }
    let db = match ctx.current_db() {
        Ok(d) => d,
        Err(e) => return Some(Err(e)),
    };
    Some(eval(ctx, db, name, args))
}

fn eval(ctx: &Ctx<'_>, db: &Database, name: &str, args: &[Typed]) -> SqlResult<Typed> {
    match name {
        "FN_CDC_GET_MAX_LSN" => {
            arity(name, args, 0)?;
            Ok(lsn_value(db.cdc.max_lsn))
        }
        "FN_CDC_GET_MIN_LSN" => {
            arity(name, args, 1)?;
            let ci = text_arg(args.first()).unwrap_or_default();
            let l = db
                .cdc
                .instance(&ci)
                .filter(|i| super::changes::may_read(ctx, db, i).is_ok())
                .map(|i| i.start_lsn)
                .unwrap_or(Lsn::ZERO);
            Ok(lsn_value(Some(l)))
        }
        "FN_CDC_INCREMENT_LSN" | "FN_CDC_DECREMENT_LSN" => {
            arity(name, args, 1)?;
            let l = lsn_arg(args.first())?;
            Ok(lsn_value(l.map(|l| {
                if name == "FN_CDC_INCREMENT_LSN" {
                    l.increment()
                } else {
                    l.decrement()
                }
            })))
        }
        "FN_CDC_MAP_LSN_TO_TIME" => {
            arity(name, args, 1)?;
            let t = lsn_arg(args.first())?.and_then(|l| {
                mapping(db)
                    .filter(|(_, m)| *m <= l)
                    .max_by_key(|(_, m)| *m)
                    .map(|(t, _)| t)
            });
            Ok(match t {
                Some(t) => Typed::new(Value::DateTime(t), DataType::DateTime),
                None => Typed::null(DataType::DateTime),
            })
        }
        "FN_CDC_MAP_TIME_TO_LSN" => {
            arity(name, args, 2)?;
            let op = text_arg(args.first()).unwrap_or_default();
            let t = match args.get(1) {
                Some(t) if !t.value.is_null() => {
                    // tracking_time is a datetime parameter, compared with
                    // the datetime column tran_end_time.
                    match expr::convert(t, DataType::DateTime)? {
                        Value::DateTime(d) => Some(d),
                        _ => None,
                    }
                }
                _ => None,
            };
            match t {
                Some(t) => Ok(lsn_value(map_time_to_lsn(db, &op, t)?)),
                None => Ok(lsn_value(None)),
            }
        }
        "FN_CDC_GET_COLUMN_ORDINAL" => {
            arity(name, args, 2)?;
            let ci = text_arg(args.first()).unwrap_or_default();
            let col = text_arg(args.get(1)).unwrap_or_default();
            let ord = db
                .cdc
                .instance(&ci)
                .and_then(|i| i.captured.iter().find(|c| same_name(&c.name, &col)))
                .map(|c| c.ordinal);
            Ok(match ord {
                Some(o) => Typed::new(Value::Int(o), DataType::Int),
                None => Typed::new(Value::Int(-1), DataType::Int),
            })
        }
        "FN_CDC_IS_BIT_SET" => {
            arity(name, args, 2)?;
            let pos = int_arg(args.first());
            let mask = match args.get(1).map(|t| &t.value) {
                Some(Value::Binary(b)) => Some(b.clone()),
                _ => None,
            };
            Ok(match (pos, mask) {
                (Some(p), Some(m)) => Typed::new(Value::Bit(bit_set(&m, p.max(0) as usize)), DataType::Bit),
                _ => Typed::null(DataType::Bit),
            })
        }
        "FN_CDC_HAS_COLUMN_CHANGED" => {
            arity(name, args, 3)?;
            let ci = text_arg(args.first()).unwrap_or_default();
            let col = text_arg(args.get(1)).unwrap_or_default();
            let ord = db
                .cdc
                .instance(&ci)
                .and_then(|i| i.captured.iter().find(|c| same_name(&c.name, &col)))
                .map(|c| c.ordinal as usize);
            let mask = match args.get(2).map(|t| &t.value) {
                Some(Value::Binary(b)) => Some(b.clone()),
                _ => None,
            };
            Ok(match (ord, mask) {
                (Some(o), Some(m)) => Typed::new(Value::Bit(bit_set(&m, o)), DataType::Bit),
                _ => Typed::null(DataType::Bit),
            })
        }
        _ => Err(SqlError::new(
            4121,
            format!("Cannot find either column \"sys\" or the user-defined function or aggregate \"sys.{}\", or the name is ambiguous.", name.to_lowercase()),
        )
        .aborting_batch()),
    }
}
