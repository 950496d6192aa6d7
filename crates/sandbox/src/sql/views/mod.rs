//! Catalog views: virtual tables computed from the catalog each time they
//! are read, so they are always current. A registry maps `schema.name` to
//! a view; later issues add `cdc.*` helpers and `sys.dm_*` views by
//! registering more [`ViewDef`]s.
//!
//! Columns and types follow the learn.microsoft.com pages of each view
//! (e.g. <https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-columns-transact-sql>),
//! restricted to the columns the sandbox can fill meaningfully.
//!
//! One file per family of views: `objects` (sys.databases, sys.tables,
//! sys.columns...), `principals`, `information_schema` and `dmv`
//! (sys.dm_*); the cdc.* views are registered by `cdc`.

use chrono::NaiveDateTime;

use super::catalog::{ColumnMeta, DEFAULT_COLLATION, Database, Table, same_name};
use super::error::SqlResult;
use super::executor::context::Ctx;
use super::expr::Typed;
use super::request::Column;
use super::types::{DataType, Length, Value};

mod dmv;
mod information_schema;
mod objects;
mod principals;

#[cfg(test)]
mod tests;

/// Rows of a view for one database (server-wide views ignore it).
pub type RowsFn = fn(&Ctx<'_>, &Database) -> SqlResult<Vec<Vec<Value>>>;

/// One virtual table.
pub struct ViewDef {
    pub schema: &'static str,
    pub name: &'static str,
    /// Negative, as SQL Server's system objects.
    pub object_id: i32,
    pub columns: fn() -> Vec<Column>,
    pub rows: RowsFn,
}

/// The views the engine knows, by schema and name.
pub struct ViewRegistry {
    views: Vec<ViewDef>,
}

impl ViewRegistry {
    pub fn empty() -> Self {
        Self { views: Vec::new() }
    }

    /// The registry with the sys and INFORMATION_SCHEMA views.
    pub fn with_catalog_views() -> Self {
        let mut r = Self::empty();
        let views = objects::views()
            .into_iter()
            .chain(principals::views())
            .chain(information_schema::views())
            .chain(dmv::dmv_views());
        for v in views {
            r.register(v);
        }
        r
    }

    pub fn register(&mut self, view: ViewDef) {
        self.views.push(view);
    }

    pub fn lookup(&self, schema: &str, name: &str) -> Option<&ViewDef> {
        self.views
            .iter()
            .find(|v| same_name(v.schema, schema) && same_name(v.name, name))
    }

    pub fn all(&self) -> impl Iterator<Item = &ViewDef> {
        self.views.iter()
    }
}

/// A table-valued function's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct TableFnRows {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Value>>,
    /// Columns the rows are in ascending order of, most significant first
    /// (see `Relation::ordered_by`); empty when unordered.
    pub ordered_by: Vec<usize>,
}

/// A table-valued function's result.
pub type TableFnResult = SqlResult<TableFnRows>;

/// What a query needs of a table function's rows.
pub struct RowsWanted<'w> {
    /// Which result columns, by name, the query reads: the function may
    /// return NULL in the others instead of copying values nobody sees.
    pub column: &'w dyn Fn(&str) -> bool,
    /// How many values a join will append to each row: allocating rows
    /// with that much room saves growing every one of them.
    pub spare: usize,
}

/// Resolves and runs a table-valued function `schema.name(args)` of a
/// database; `None` when the name is not one of its functions. Names can
/// be families (e.g. `cdc.fn_cdc_get_all_changes_<capture_instance>`), so a
/// resolver decides by looking at the catalog.
pub type TableFn =
    fn(&Ctx<'_>, &Database, &str, &str, &[Typed], &RowsWanted<'_>) -> Option<TableFnResult>;

/// The table-valued functions FROM can call, tried in order.
#[derive(Default)]
pub struct TableFunctionRegistry {
    resolvers: Vec<TableFn>,
}

impl TableFunctionRegistry {
    pub fn register(&mut self, f: TableFn) {
        self.resolvers.push(f);
    }

    /// Runs the first resolver that knows `schema.name`.
    pub fn call(
        &self,
        ctx: &Ctx<'_>,
        db: &Database,
        schema: &str,
        name: &str,
        args: &[Typed],
        wanted: &RowsWanted<'_>,
    ) -> Option<TableFnResult> {
        self.resolvers
            .iter()
            .find_map(|f| f(ctx, db, schema, name, args, wanted))
    }
}

/// Shorthands for view definitions.
pub fn col(name: &str, ty: DataType, nullable: bool) -> Column {
    Column::new(name, ty, nullable)
}

pub const SYSNAME: DataType = DataType::SYSNAME;
pub const BIT: DataType = DataType::Bit;
pub const INT: DataType = DataType::Int;
pub const TINYINT: DataType = DataType::TinyInt;
pub const SMALLINT: DataType = DataType::SmallInt;
pub const DATETIME: DataType = DataType::DateTime;

pub fn nvarchar(n: u16) -> DataType {
    DataType::NVarChar(Length::Fixed(n))
}

pub fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

pub fn i(v: i32) -> Value {
    Value::Int(v)
}

pub fn b(v: bool) -> Value {
    Value::Bit(v)
}

/// User tables of `db` the session may see (metadata visibility).
pub fn visible_tables<'a>(ctx: &Ctx<'_>, db: &'a Database) -> Vec<&'a Table> {
    let user = if ctx.info.is_sysadmin {
        Some(1)
    } else {
        ctx.user_in(db).ok()
    };
    db.tables
        .values()
        .filter(|t| {
            ctx.info.is_sysadmin
                || user.is_some_and(|u| {
                    db.security
                        .can_see_object(u, t.meta.schema_id, t.meta.object_id)
                })
        })
        .collect()
}

fn dt(d: NaiveDateTime) -> Value {
    Value::DateTime(d)
}

fn opt_s(v: Option<&str>) -> Value {
    v.map(s).unwrap_or(Value::Null)
}

/// sys.columns.collation_name of a table column: its COLLATE, else the
/// database's, for character columns; NULL for other types.
fn column_collation(c: &ColumnMeta, db: &Database) -> Value {
    if !c.ty.is_string() {
        return Value::Null;
    }
    match c.collation {
        Some(coll) => s(coll.name),
        None => s(&db.collation),
    }
}

fn collation_of(ty: &DataType) -> Value {
    if ty.is_string() {
        s(DEFAULT_COLLATION)
    } else {
        Value::Null
    }
}
