//! The catalog: databases, schemas, tables and columns, with SQL Server's
//! case-insensitive name lookup. Row data lives next to each table's
//! metadata (`storage`), principals and permissions in `security`.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use sqlparser::ast::{Expr, Ident, ObjectName, ObjectNamePart};

use super::collation::{Collation, default_collation};
use super::error::{SqlError, SqlResult};
use super::security::DbSecurity;
use super::storage::TableData;
use super::transaction::TransactionLog;
use super::types::DataType;

/// The collation every database and character column reports.
pub const DEFAULT_COLLATION: &str = "SQL_Latin1_General_CP1_CI_AS";

/// Case-insensitive identifier equality (the default collation is CI).
/// ASCII names, nearly all of them, compare without allocating; others
/// as their full Unicode lower case.
pub fn same_name(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    a.to_lowercase() == b.to_lowercase()
}

/// Well-known schema ids, as SQL Server numbers them
/// (<https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/schemas-catalog-views-sys-schemas>).
pub const SCHEMA_DBO: i32 = 1;
pub const SCHEMA_GUEST: i32 = 2;
pub const SCHEMA_INFORMATION_SCHEMA: i32 = 3;
pub const SCHEMA_SYS: i32 = 4;

/// A schema of one database.
#[derive(Debug, Clone)]
pub struct Schema {
    pub id: i32,
    pub name: String,
    /// Owning database principal.
    pub principal_id: i32,
}

/// A computed column's expression and its text for sys.computed_columns.
#[derive(Debug, Clone)]
pub struct Computed {
    pub expr: Expr,
    pub definition: String,
}

/// One column of a user table.
#[derive(Debug, Clone)]
pub struct ColumnMeta {
    /// sys.columns.column_id: never reused after DROP COLUMN.
    pub column_id: i32,
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    pub default: Option<Expr>,
    pub identity: bool,
    pub computed: Option<Computed>,
    /// The collation given with COLLATE; `None` means the database's.
    pub collation: Option<Collation>,
}

impl ColumnMeta {
    /// The column's collation: its own, else the database default, for
    /// character types; `None` for other types.
    pub fn effective_collation(&self) -> Option<Collation> {
        if self.ty.is_string() {
            Some(self.collation.unwrap_or_else(default_collation))
        } else {
            None
        }
    }
}

/// IDENTITY(seed, increment) and the last value handed out. Values are
/// never given back on rollback, as in SQL Server
/// (<https://learn.microsoft.com/en-us/sql/t-sql/statements/create-table-transact-sql-identity-property>).
#[derive(Debug, Clone)]
pub struct IdentityState {
    pub column: usize,
    pub seed: i128,
    pub increment: i128,
    pub last: Option<i128>,
}

impl IdentityState {
    /// The next value; advances the counter.
    pub fn next_value(&mut self) -> i128 {
        let v = match self.last {
            None => self.seed,
            Some(l) => l + self.increment,
        };
        self.last = Some(v);
        v
    }
}

/// The clustered primary key: constraint name and column positions.
#[derive(Debug, Clone)]
pub struct PrimaryKey {
    pub name: String,
    pub columns: Vec<usize>,
    pub clustered: bool,
}

/// Metadata of one user table.
#[derive(Debug, Clone)]
pub struct TableMeta {
    pub object_id: i32,
    pub schema_id: i32,
    pub name: String,
    pub columns: Vec<ColumnMeta>,
    pub next_column_id: i32,
    pub primary_key: Option<PrimaryKey>,
    pub identity: Option<IdentityState>,
    pub create_date: NaiveDateTime,
    pub modify_date: NaiveDateTime,
    /// Set by the CDC issue; reported by sys.tables.
    pub is_tracked_by_cdc: bool,
}

impl TableMeta {
    /// Each column's own collation, by position (for row keys).
    pub fn collations(&self) -> Vec<Option<Collation>> {
        self.columns.iter().map(|c| c.collation).collect()
    }

    /// Position of a column by name (case-insensitive).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| same_name(&c.name, name))
    }
}

/// A user table: metadata, rows, and the session whose open transaction
/// changed it (readers in READ COMMITTED wait for that session).
#[derive(Debug, Clone)]
pub struct Table {
    pub meta: TableMeta,
    pub data: TableData,
    pub dirty_by: Option<u16>,
}

/// One database.
#[derive(Debug)]
pub struct Database {
    pub id: i32,
    pub name: String,
    pub create_date: NaiveDateTime,
    pub collation: String,
    pub schemas: Vec<Schema>,
    pub tables: BTreeMap<i32, Table>,
    pub security: DbSecurity,
    /// Committed transactions that changed user tables, for CDC.
    pub log: TransactionLog,
    pub is_cdc_enabled: bool,
    /// Change data capture state (capture instances, mapping, jobs).
    pub cdc: super::cdc::CdcDatabase,
    next_schema_id: i32,
}

impl Database {
    /// A database with the fixed schemas and principals SQL Server creates.
    pub fn new(id: i32, name: &str, now: NaiveDateTime, owner_login: &str) -> Self {
        let schemas = vec![
            Schema {
                id: SCHEMA_DBO,
                name: "dbo".into(),
                principal_id: 1,
            },
            Schema {
                id: SCHEMA_GUEST,
                name: "guest".into(),
                principal_id: 2,
            },
            Schema {
                id: SCHEMA_INFORMATION_SCHEMA,
                name: "INFORMATION_SCHEMA".into(),
                principal_id: 3,
            },
            Schema {
                id: SCHEMA_SYS,
                name: "sys".into(),
                principal_id: 4,
            },
        ];
        Self {
            id,
            name: name.to_string(),
            create_date: now,
            collation: DEFAULT_COLLATION.to_string(),
            schemas,
            tables: BTreeMap::new(),
            security: DbSecurity::new(owner_login),
            log: TransactionLog::default(),
            is_cdc_enabled: false,
            cdc: super::cdc::CdcDatabase::default(),
            next_schema_id: 5,
        }
    }

    pub fn schema_by_name(&self, name: &str) -> Option<&Schema> {
        self.schemas.iter().find(|s| same_name(&s.name, name))
    }

    pub fn schema_name(&self, id: i32) -> Option<&str> {
        self.schemas
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.name.as_str())
    }

    /// CREATE SCHEMA; 2714 when it exists.
    pub fn create_schema(&mut self, name: &str, principal_id: i32) -> SqlResult<i32> {
        if self.schema_by_name(name).is_some() {
            return Err(SqlError::new(
                2714,
                format!("There is already an object named '{name}' in the database."),
            ));
        }
        let id = self.next_schema_id;
        self.next_schema_id += 1;
        self.schemas.push(Schema {
            id,
            name: name.to_string(),
            principal_id,
        });
        Ok(id)
    }

    /// The table `schema.name`, if any.
    pub fn table_id(&self, schema_id: i32, name: &str) -> Option<i32> {
        self.tables
            .values()
            .find(|t| t.meta.schema_id == schema_id && same_name(&t.meta.name, name))
            .map(|t| t.meta.object_id)
    }
}

/// A possibly qualified object name split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QualifiedName {
    pub database: Option<String>,
    pub schema: Option<String>,
    pub name: String,
}

impl QualifiedName {
    /// Splits `[db.][schema.]name`; 117 for more than three parts.
    pub fn from_object_name(name: &ObjectName) -> SqlResult<Self> {
        let parts: Vec<&Ident> = name
            .0
            .iter()
            .filter_map(|p| match p {
                ObjectNamePart::Identifier(i) => Some(i),
                _ => None,
            })
            .collect();
        if parts.len() != name.0.len() {
            return Err(SqlError::unsupported(&name.to_string()));
        }
        Self::from_idents(&parts, &name.to_string())
    }

    pub fn from_idents(parts: &[&Ident], text: &str) -> SqlResult<Self> {
        let s = |i: &Ident| i.value.clone();
        let nonempty = |i: &Ident| {
            if i.value.is_empty() {
                None
            } else {
                Some(i.value.clone())
            }
        };
        match parts {
            [n] => Ok(Self { database: None, schema: None, name: s(n) }),
            [sc, n] => Ok(Self { database: None, schema: nonempty(sc), name: s(n) }),
            [db, sc, n] => Ok(Self { database: nonempty(db), schema: nonempty(sc), name: s(n) }),
            _ => Err(SqlError::new(
                117,
                format!("The object name '{text}' contains more than the maximum number of prefixes. The maximum is 2."),
            )
            .aborting_batch()),
        }
    }

    /// The name as written, for error messages.
    pub fn display(&self) -> String {
        let mut out = String::new();
        if let Some(db) = &self.database {
            out.push_str(db);
            out.push('.');
        }
        if let Some(s) = &self.schema {
            out.push_str(s);
            out.push('.');
        } else if self.database.is_some() {
            out.push('.');
        }
        out.push_str(&self.name);
        out
    }
}
