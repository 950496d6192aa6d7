//! Enabling and disabling change data capture:
//! sys.sp_cdc_enable_db / sys.sp_cdc_disable_db
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-enable-db-transact-sql>),
//! sys.sp_cdc_enable_table
//! (<https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sys-sp-cdc-enable-table-transact-sql>),
//! and sys.sp_cdc_disable_table. Reporting on them
//! (sys.sp_cdc_help_change_data_capture) is `help`'s.

use super::params::Args;
use super::{CaptureInstance, CapturedColumn, help, jobs};
use crate::sql::catalog::{ColumnMeta, Database, Table, TableMeta, same_name};
use crate::sql::error::{SqlError, SqlResult};
use crate::sql::executor::context::{Ctx, WriteCtx};
use crate::sql::procedures::{ProcResult, ProcedureRegistry};
use crate::sql::request::{CancelToken, Output, Param};
use crate::sql::security::{PrincipalKind, ROLE_DB_OWNER};
use crate::sql::session::Session;
use crate::sql::storage::TableData;
use crate::sql::types::{DataType, Length};

pub fn register(r: &mut ProcedureRegistry) {
    r.register("sp_cdc_enable_db", sp_cdc_enable_db);
    r.register("sp_cdc_disable_db", sp_cdc_disable_db);
    r.register("sp_cdc_enable_table", sp_cdc_enable_table);
    r.register("sp_cdc_disable_table", sp_cdc_disable_table);
    r.register("sp_cdc_help_change_data_capture", help::sp_cdc_help);
}

/// 22902: the database-level procedures need sysadmin.
fn require_sysadmin(w: &WriteCtx<'_>) -> SqlResult<()> {
    if w.info.is_sysadmin {
        return Ok(());
    }
    Err(SqlError::new(
        22902,
        "Caller is not authorized to initiate the requested action. Sysadmin privileges are required.",
    ))
}

/// 22904: the table-level procedures need db_owner.
pub(super) fn require_db_owner(ctx: &Ctx<'_>, db: &Database) -> SqlResult<()> {
    if ctx.info.is_sysadmin {
        return Ok(());
    }
    let user = ctx.user_in(db)?;
    if db.security.is_member(user, ROLE_DB_OWNER) {
        return Ok(());
    }
    Err(SqlError::new(
        22904,
        "Caller is not authorized to initiate the requested action. DBO privileges are required.",
    ))
}

/// 22901: the current database is not enabled.
pub(super) fn not_enabled(db: &Database) -> SqlError {
    SqlError::new(
        22901,
        format!(
            "The database '{}' is not enabled for Change Data Capture. Ensure that the correct database context is set and retry the operation. To report on the databases enabled for Change Data Capture, query the is_cdc_enabled column in the sys.databases catalog view.",
            db.name
        ),
    )
}

fn current_mut<'a>(w: &'a mut WriteCtx<'_>) -> SqlResult<&'a mut Database> {
    let id = w.info.db_id;
    w.state
        .database_by_id_mut(id)
        .ok_or_else(|| SqlError::new(911, "The current database no longer exists."))
}

fn sp_cdc_enable_db(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    Args::bind("sp_cdc_enable_db", &[], params)?;
    s.with_write(cancel, |w| {
        require_sysadmin(w)?;
        let db = current_mut(w)?;
        if matches!(db.id, 1..=4) {
            return Err(SqlError::new(
                22988,
                format!(
                    "Change data capture cannot be enabled on system database '{}'.",
                    db.name
                ),
            ));
        }
        if db.is_cdc_enabled {
            return Ok(());
        }
        if db.schema_by_name("cdc").is_some() || db.security.principal("cdc").is_some() {
            return Err(SqlError::new(
                22916,
                format!(
                    "Could not enable Change Data Capture for database '{}'. A database user or schema named 'cdc' already exists in the database.",
                    db.name
                ),
            ));
        }
        let user = db
            .security
            .add_principal("cdc", PrincipalKind::User, None)
            .unwrap_or(1);
        db.create_schema("cdc", user)?;
        db.is_cdc_enabled = true;
        db.cdc = super::CdcDatabase {
            next_sequence: db.log.next_sequence(),
            ..super::CdcDatabase::default()
        };
        Ok(())
    })?;
    Ok(ProcResult::default())
}

fn sp_cdc_disable_db(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    Args::bind("sp_cdc_disable_db", &[], params)?;
    s.with_write(cancel, |w| {
        require_sysadmin(w)?;
        let db = current_mut(w)?;
        if !db.is_cdc_enabled {
            return Ok(());
        }
        let names: Vec<String> = db.cdc.instances.iter().map(|i| i.name.clone()).collect();
        for n in names {
            drop_instance(db, &n);
        }
        let cdc_schema = db.schema_by_name("cdc").map(|sc| sc.id);
        db.tables
            .retain(|_, t| Some(t.meta.schema_id) != cdc_schema);
        db.schemas.retain(|sc| !same_name(&sc.name, "cdc"));
        db.security
            .principals
            .retain(|p| !same_name(&p.name, "cdc"));
        db.is_cdc_enabled = false;
        db.cdc = super::CdcDatabase::default();
        Ok(())
    })?;
    Ok(ProcResult::default())
}

/// Removes a capture instance and its change table; clears
/// is_tracked_by_cdc when it was the table's last one.
pub fn drop_instance(db: &mut Database, name: &str) {
    let Some(pos) = db
        .cdc
        .instances
        .iter()
        .position(|i| same_name(&i.name, name))
    else {
        return;
    };
    let ci = db.cdc.instances.remove(pos);
    db.tables.remove(&ci.object_id);
    db.cdc.ddl_history.retain(|h| h.object_id != ci.object_id);
    if db.cdc.instances_of(ci.source_object_id).next().is_none()
        && let Some(t) = db.tables.get_mut(&ci.source_object_id)
    {
        t.meta.is_tracked_by_cdc = false;
    }
}

fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(|c| {
            c.trim()
                .trim_matches(|ch| ch == '[' || ch == ']')
                .to_string()
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// The change table's columns: metadata, captured columns, command id
/// (all captured columns nullable, as SQL Server creates them).
fn change_table_columns(captured: &[CapturedColumn]) -> Vec<ColumnMeta> {
    let col = |id: i32, name: &str, ty: DataType, nullable: bool| ColumnMeta {
        column_id: id,
        name: name.to_string(),
        ty,
        nullable,
        default: None,
        identity: false,
        computed: None,
        collation: None,
    };
    let mut cols = vec![
        col(1, "__$start_lsn", DataType::Binary(10), false),
        col(2, "__$end_lsn", DataType::Binary(10), true),
        col(3, "__$seqval", DataType::Binary(10), false),
        col(4, "__$operation", DataType::Int, false),
        col(
            5,
            "__$update_mask",
            DataType::VarBinary(Length::Fixed(128)),
            true,
        ),
    ];
    for c in captured {
        let mut column = col(cols.len() as i32 + 1, &c.name, c.ty, true);
        column.collation = c.collation;
        cols.push(column);
    }
    cols.push(col(
        cols.len() as i32 + 1,
        "__$command_id",
        DataType::Int,
        true,
    ));
    cols
}

fn sp_cdc_enable_table(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    out: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind(
        "sp_cdc_enable_table",
        &[
            "@source_schema",
            "@source_name",
            "@role_name",
            "@capture_instance",
            "@supports_net_changes",
            "@index_name",
            "@captured_column_list",
            "@filegroup_name",
            "@allow_partition_switch",
        ],
        params,
    )?;
    a.required("@source_schema")?;
    a.required("@source_name")?;
    a.required("@role_name")?;
    let schema = a.text("@source_schema").unwrap_or_default();
    let table_name = a.text("@source_name").unwrap_or_default();
    let role = a.text("@role_name").filter(|r| !r.is_empty());
    let net = a.int("@supports_net_changes");
    let index_name = a.text("@index_name");
    let columns = a.text("@captured_column_list").map(|l| split_list(&l));
    let filegroup = a.text("@filegroup_name");
    let wanted = a.text("@capture_instance");
    let created_jobs = s.with_write(cancel, |w| {
        let now = w.read().now_utc();
        let offset = w.shared.clock.offset().local_minus_utc();
        let object_id = w.state.allocate_object_id();
        {
            let ctx = w.read();
            let db = ctx.current_db()?;
            require_db_owner(&ctx, db)?;
        }
        let db = current_mut(w)?;
        if !db.is_cdc_enabled {
            return Err(not_enabled(db));
        }
        let missing = || {
            SqlError::new(
                22931,
                format!(
                    "Source table '{schema}.{table_name}' does not exist in the current database. Ensure that the correct database context is set. Specify a valid schema and table name for the database."
                ),
            )
        };
        let schema_id = db.schema_by_name(&schema).map(|sc| sc.id).ok_or_else(missing)?;
        if same_name(&schema, "cdc") {
            return Err(missing());
        }
        let source_id = db.table_id(schema_id, &table_name).ok_or_else(missing)?;
        let source = db.tables.get(&source_id).ok_or_else(missing)?.meta.clone();
        let ci_name = wanted
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{schema}_{}", source.name));
        if db.cdc.instances_of(source_id).count() >= 2 {
            return Err(SqlError::new(
                22962,
                format!(
                    "Two capture instances already exist for source table '{schema}.{}'. A table can have at most two capture instances. If the current tracking options are not appropriate, disable change tracking for the obsolete instance by using sys.sp_cdc_disable_table and retry the operation.",
                    source.name
                ),
            ));
        }
        if db.cdc.instance(&ci_name).is_some() {
            return Err(SqlError::new(
                22926,
                format!(
                    "Could not create a capture instance because the capture instance name '{ci_name}' already exists in the current database. Specify an explicit unique name for the parameter @capture_instance."
                ),
            ));
        }
        let pk = source.primary_key.clone();
        if let Some(ix) = &index_name
            && !pk.as_ref().is_some_and(|p| same_name(&p.name, ix))
        {
            return Err(SqlError::new(
                22930,
                format!(
                    "Could not locate index '{ix}' in source table '{schema}.{}'. Verify that the index exists and that it is a unique index.",
                    source.name
                ),
            ));
        }
        let supports_net = net.map(|n| n != 0).unwrap_or(pk.is_some());
        if supports_net && pk.is_none() {
            return Err(SqlError::new(
                22939,
                "The parameter @supports_net_changes is set to 1, but the source table does not have a primary key defined and no alternate unique index has been specified.",
            ));
        }
        let mut captured = Vec::new();
        for c in &source.columns {
            let keep = match &columns {
                None => true,
                Some(list) => list.iter().any(|n| same_name(n, &c.name)),
            };
            if keep {
                captured.push(CapturedColumn {
                    name: c.name.clone(),
                    column_id: c.column_id,
                    ty: c.ty,
                    ordinal: captured.len() as i32 + 1,
                    collation: c.collation,
                });
            }
        }
        if let Some(list) = &columns
            && let Some(bad) = list.iter().find(|n| source.column_index(n).is_none())
        {
            return Err(SqlError::new(
                22935,
                format!(
                    "Could not locate column '{bad}' in source table '{schema}.{}'. Verify that the column name is correct and retry the operation.",
                    source.name
                ),
            ));
        }
        let index_columns: Vec<(String, i32)> = pk
            .as_ref()
            .map(|p| {
                p.columns
                    .iter()
                    .filter_map(|i| source.columns.get(*i))
                    .map(|c| (c.name.clone(), c.column_id))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(role) = &role
            && db.security.principal(role).is_none()
        {
            db.security.add_principal(role, PrincipalKind::Role, None);
        }
        let cdc_schema = db.schema_by_name("cdc").map(|sc| sc.id).unwrap_or(0);
        let cols = change_table_columns(&captured);
        db.tables.insert(
            object_id,
            Table {
                meta: TableMeta {
                    object_id,
                    schema_id: cdc_schema,
                    name: format!("{ci_name}_CT"),
                    next_column_id: cols.len() as i32 + 1,
                    columns: cols,
                    primary_key: None,
                    identity: None,
                    create_date: now,
                    modify_date: now,
                    is_tracked_by_cdc: false,
                },
                data: TableData::default(),
                dirty_by: None,
            },
        );
        let start_lsn = db.log.lsns.begin_block();
        db.cdc.instances.push(CaptureInstance {
            name: ci_name,
            source_object_id: source_id,
            object_id,
            role_name: role.clone(),
            supports_net_changes: supports_net,
            index_name: if supports_net {
                pk.as_ref().map(|p| p.name.clone())
            } else {
                None
            },
            index_columns,
            captured,
            filegroup_name: filegroup.clone(),
            start_lsn,
            create_date: super::capture::local(now, offset),
        });
        if let Some(t) = db.tables.get_mut(&source_id) {
            t.meta.is_tracked_by_cdc = true;
        }
        Ok(jobs::ensure_jobs(db, now, offset))
    })?;
    if created_jobs {
        let name = s.database();
        for job in ["capture", "cleanup"] {
            out.push(Output::Message(
                // msdb's sp_start_job reports this as informational 14243.
                SqlError::new(
                    14243,
                    format!("Job 'cdc.{name}_{job}' started successfully."),
                )
                .with_class(0),
            ));
        }
    }
    Ok(ProcResult::default())
}

fn sp_cdc_disable_table(
    s: &mut Session,
    params: &[Param],
    cancel: &CancelToken,
    _: &mut Vec<Output>,
) -> SqlResult<ProcResult> {
    let a = Args::bind(
        "sp_cdc_disable_table",
        &["@source_schema", "@source_name", "@capture_instance"],
        params,
    )?;
    a.required("@source_schema")?;
    a.required("@source_name")?;
    a.required("@capture_instance")?;
    let schema = a.text("@source_schema").unwrap_or_default();
    let table_name = a.text("@source_name").unwrap_or_default();
    let wanted = a.text("@capture_instance").unwrap_or_default();
    s.with_write(cancel, |w| {
        {
            let ctx = w.read();
            let db = ctx.current_db()?;
            require_db_owner(&ctx, db)?;
        }
        let db = current_mut(w)?;
        if !db.is_cdc_enabled {
            return Err(not_enabled(db));
        }
        let source = db
            .schema_by_name(&schema)
            .and_then(|sc| db.table_id(sc.id, &table_name))
            .ok_or_else(|| {
                SqlError::new(
                    22931,
                    format!(
                        "Source table '{schema}.{table_name}' does not exist in the current database. Ensure that the correct database context is set. Specify a valid schema and table name for the database."
                    ),
                )
            })?;
        let names: Vec<String> = db
            .cdc
            .instances_of(source)
            .filter(|i| same_name(&wanted, "all") || same_name(&i.name, &wanted))
            .map(|i| i.name.clone())
            .collect();
        if names.is_empty() {
            return Err(SqlError::new(
                22932,
                format!(
                    "Could not locate capture instance '{wanted}' for source table '{schema}.{table_name}'. Verify the capture instance name and retry the operation."
                ),
            ));
        }
        for n in names {
            drop_instance(db, &n);
        }
        Ok(())
    })?;
    Ok(ProcResult::default())
}
