//! Errors of the SQL Server side. Messages name the server object or column
//! involved and never carry credentials.

use crate::domain::Lsn;

/// Why talking to SQL Server failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The TCP connection could not be opened.
    #[error("cannot connect to SQL Server at {address}: {source}")]
    Connect {
        /// `host:port`.
        address: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Connecting timed out.
    #[error("connecting to SQL Server at {address} timed out after {seconds} s")]
    ConnectTimeout {
        /// `host:port`.
        address: String,
        /// The timeout.
        seconds: u64,
    },
    /// SQL Server (or the TDS layer) returned an error.
    #[error("SQL Server: {context}: {source}")]
    Sql {
        /// What the engine was doing.
        context: String,
        /// tiberius' error.
        source: tiberius::error::Error,
    },
    /// The table is not captured, or the named capture instance is not its.
    #[error("{0}")]
    NotCaptured(String),
    /// A column named in `spec.source.columns` is not captured.
    #[error(
        "spec.source.columns: column {column} is not captured by capture instance {capture_instance} (captured: {captured})"
    )]
    UnknownColumn {
        /// The column asked for.
        column: String,
        /// The capture instance.
        capture_instance: String,
        /// The captured columns, comma-separated.
        captured: String,
    },
    /// A captured column has a type the bronze table cannot hold.
    #[error("column {column}: SQL Server type {sql_type} is not supported ({reason})")]
    UnsupportedType {
        /// The column.
        column: String,
        /// The SQL Server type name.
        sql_type: String,
        /// Why, and what to do.
        reason: String,
    },
    /// A value did not have the type the metadata announced. It names the
    /// column, the type and the row, never the value: the message travels
    /// into logs, `status.worker.message` and the pod's termination message.
    #[error(
        "column {column}: SQL Server sent a {found} value for type {sql_type} ({row}; the value is not shown)"
    )]
    UnexpectedValue {
        /// The column.
        column: String,
        /// The SQL Server type name.
        sql_type: String,
        /// What arrived instead: the wire type, never the value.
        found: String,
        /// Which row: its change-table key (`__$start_lsn`, `__$seqval`) or
        /// its place in a snapshot read; empty until the reader knows it.
        row: String,
    },
    /// A decimal value with more digits than bronze's column holds (the
    /// source column was widened): written, it would be cut or wrapped.
    #[error(
        "column {column}: SQL Server sent a value that decimal({precision},{scale}) cannot hold \
         exactly ({row}; the value is not shown); the source column's type was widened: \
         see docs/source-changes.md"
    )]
    DoesNotFit {
        /// The column.
        column: String,
        /// Digits bronze's column holds.
        precision: u8,
        /// Digits after the point.
        scale: u8,
        /// Which row, as for [`SourceError::UnexpectedValue`].
        row: String,
    },
    /// The read task failed; the task's own error says why. The stream
    /// that fed the writer carries this copy, with the task's verdict.
    #[error("{reason}")]
    ReadFailed {
        /// The task's error, in words.
        reason: String,
        /// Whether the task's error was transient.
        transient: bool,
    },
    /// A result lacked a value the query always returns.
    #[error("SQL Server: {0} returned no value")]
    Missing(String),
    /// An LSN from the server was not 10 bytes.
    #[error("SQL Server returned an invalid LSN for {context}")]
    BadLsn {
        /// What was read.
        context: String,
    },
    /// The server has no LSN yet (CDC capture never ran).
    #[error(
        "SQL Server CDC has no LSN yet for {0}: is the capture job running (sys.sp_cdc_start_job)?"
    )]
    NoLsn(String),
    /// Building Arrow arrays failed.
    #[error("converting rows to Arrow: {0}")]
    Arrow(#[from] deltalake::arrow::error::ArrowError),
    /// An LSN was out of range.
    #[error("LSN {0} has no successor")]
    LsnOverflow(Lsn),
}

impl SourceError {
    /// Names the row an [`SourceError::UnexpectedValue`] or
    /// [`SourceError::DoesNotFit`] came from; other
    /// errors are returned as they are.
    pub fn in_row(self, row: impl FnOnce() -> String) -> SourceError {
        match self {
            SourceError::UnexpectedValue {
                column,
                sql_type,
                found,
                ..
            } => SourceError::UnexpectedValue {
                column,
                sql_type,
                found,
                row: row(),
            },
            SourceError::DoesNotFit {
                column,
                precision,
                scale,
                ..
            } => SourceError::DoesNotFit {
                column,
                precision,
                scale,
                row: row(),
            },
            other => other,
        }
    }

    /// Wraps a tiberius error with what the engine was doing.
    pub fn sql(context: impl Into<String>) -> impl FnOnce(tiberius::error::Error) -> SourceError {
        let context = context.into();
        move |source| SourceError::Sql { context, source }
    }

    /// Whether retrying later may succeed (network trouble, deadlock,
    /// timeouts, a server or database failing over), as opposed to a
    /// wrong spec or schema.
    pub fn is_transient(&self) -> bool {
        match self {
            // The capture job has not run yet: it will.
            SourceError::NoLsn(_) => true,
            SourceError::Connect { .. } | SourceError::ConnectTimeout { .. } => true,
            SourceError::Sql { source, .. } => crate::retry::classify::sql_transient(source),
            SourceError::ReadFailed { transient, .. } => *transient,
            _ => false,
        }
    }

    /// SQL Server's number for the error, when the server raised it.
    pub fn server_code(&self) -> Option<u32> {
        match self {
            SourceError::Sql {
                source: tiberius::error::Error::Server(token),
                ..
            } => Some(token.code()),
            _ => None,
        }
    }

    /// Error 313 from a change function: the range starts below what CDC
    /// still keeps, because cleanup ran after the range was checked. The
    /// `onDataLoss` policy decides, as for any purged range.
    pub fn is_purged_range(&self) -> bool {
        self.server_code() == Some(PURGED_RANGE)
    }

    /// Whether SQL Server refused a statement because of one object it
    /// names: the object does not exist (208) or the login may not read it
    /// (229, or 230 for one of its columns). The statement's other objects
    /// may be fine, so a question asked of many tables at once is asked of
    /// them one by one, and only the broken table fails. A login, a
    /// connection or a server error is not one: it concerns every table.
    pub fn is_object_error(&self) -> bool {
        self.server_code().is_some_and(object_error_code)
    }
}

/// `Invalid object name '...'`: a table the statement names does not
/// exist (a change table dropped with its capture instance).
pub const INVALID_OBJECT: u32 = 208;

/// `The SELECT permission was denied on the object '...'`.
pub const OBJECT_PERMISSION_DENIED: u32 = 229;

/// `The SELECT permission was denied on the column '...' of the object '...'`.
pub const COLUMN_PERMISSION_DENIED: u32 = 230;

/// Whether SQL Server's error `code` names one object of the statement
/// ([`SourceError::is_object_error`]).
pub fn object_error_code(code: u32) -> bool {
    matches!(
        code,
        INVALID_OBJECT | OBJECT_PERMISSION_DENIED | COLUMN_PERMISSION_DENIED
    )
}

/// `An insufficient number of arguments were supplied for the procedure or
/// function cdc.fn_cdc_get_all_changes_...`: SQL Server's answer to a range
/// below the capture instance's low-water mark.
pub const PURGED_RANGE: u32 = 313;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::classify::sql_code_transient as transient_code;

    #[test]
    fn failovers_throttling_and_deadlocks_are_transient() {
        for code in [
            976, 978, 983, 1205, 10928, 10929, 40143, 40197, 40501, 40540, 40613,
        ] {
            assert!(transient_code(code), "{code}");
        }
        // A session killed by an administrator: a new connection works.
        assert!(transient_code(596));
        // Login failed, object not found, permission denied, purged range:
        // answers that retrying does not change.
        for code in [18456, 208, 229, 313] {
            assert!(!transient_code(code), "{code}");
        }
        let timeout = SourceError::ConnectTimeout {
            address: "db:1433".into(),
            seconds: 30,
        };
        assert!(timeout.is_transient());
        let io = SourceError::Sql {
            context: "reading changes".into(),
            source: tiberius::error::Error::Io {
                kind: std::io::ErrorKind::ConnectionReset,
                message: "reset".into(),
            },
        };
        assert!(io.is_transient());
        let redirect = SourceError::Sql {
            context: "login".into(),
            source: tiberius::error::Error::Routing {
                host: "replica".into(),
                port: 11000,
            },
        };
        assert!(redirect.is_transient());
        assert!(!SourceError::Missing("x".into()).is_transient());
        assert!(!SourceError::Missing("x".into()).is_purged_range());
    }

    #[test]
    fn changed_tables_object_errors_name_one_table_and_others_do_not() {
        for code in [208, 229, 230] {
            assert!(object_error_code(code), "{code}");
        }
        // Login failed, database unavailable, deadlock, purged range, a
        // server permission: not about one table of the statement.
        for code in [18456, 4060, 1205, 313, 300] {
            assert!(!object_error_code(code), "{code}");
        }
        let cut = SourceError::Sql {
            context: "which tables changed".into(),
            source: tiberius::error::Error::Io {
                kind: std::io::ErrorKind::ConnectionReset,
                message: "reset".into(),
            },
        };
        assert!(!cut.is_object_error());
        assert!(!SourceError::Missing("x".into()).is_object_error());
    }
}
