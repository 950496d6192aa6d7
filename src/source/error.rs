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
    /// A value larger than `spec.maxValueBytes`: SQL Server measured it
    /// and did not send it.
    #[error(
        "column {column}: a value of {bytes} bytes is larger than spec.maxValueBytes \
         ({limit}) ({row}; the value is not shown, and was not read)"
    )]
    ValueTooLarge {
        /// The column.
        column: String,
        /// The value's size (`DATALENGTH`).
        bytes: u64,
        /// The limit it passed.
        limit: u64,
        /// Which row: its change-table key or its place in a snapshot read.
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
    /// The database has no max LSN (`sys.fn_cdc_get_max_lsn` is NULL):
    /// capture never ran, so no table of it can be read.
    #[error(
        "SQL Server CDC has no max LSN for the database: capture has never run; is SQL Server \
         Agent running, and the capture job (sys.sp_cdc_start_job)?"
    )]
    NoMaxLsn,
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
            SourceError::NoLsn(_) | SourceError::NoMaxLsn => true,
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

    /// Whether the error concerns the whole source (every table of the
    /// database), and which way: the server unreachable, TLS refused, the
    /// login refused, the database closed, or no max LSN. `None`: it may
    /// concern one table, or one session only (a deadlock, a cut read
    /// that a new connection gets past, an object error), so the table
    /// that met it handles it alone. Decided by variant and SQL Server
    /// error number, never by message.
    pub fn outage(&self) -> Option<SourceOutage> {
        use tiberius::error::Error as E;
        match self {
            SourceError::Connect { .. } | SourceError::ConnectTimeout { .. } => {
                Some(SourceOutage::Unreachable)
            }
            SourceError::NoMaxLsn => Some(SourceOutage::NoMaxLsn),
            SourceError::Sql { source, .. } => match source {
                E::Io { .. } | E::Routing { .. } => Some(SourceOutage::Unreachable),
                E::Tls(_) => Some(SourceOutage::Tls),
                E::Server(token) => SourceOutage::of_server_error(token.code()),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Why no table of a source can be read: the scope of an error that is the
/// source's, not one table's ([`SourceError::outage`]). Its name is the
/// reason the source's status gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceOutage {
    /// The server cannot be reached: no TCP connection, a timeout, a
    /// connection cut, a redirect loop.
    Unreachable,
    /// The TLS handshake failed (certificate, `encrypt`, protocol).
    Tls,
    /// SQL Server refused the login (wrong password, unknown, disabled,
    /// locked or expired login).
    LoginFailed,
    /// The database cannot be opened: offline, restoring, failing over,
    /// or the login has no user in it.
    DatabaseUnavailable,
    /// CDC has no max LSN: capture has never run (SQL Server Agent or the
    /// capture job stopped since CDC was enabled).
    NoMaxLsn,
}

/// Login refused: failed (18456), untrusted domain (18452), disabled
/// (18470), locked out (18486), password expired (18487) or to change
/// (18488).
const LOGIN_REFUSED: [u32; 6] = [18456, 18452, 18470, 18486, 18487, 18488];

/// The database cannot be opened (4060), the login has no user in it
/// (916), or Always On / Azure SQL have it unavailable (976, 978, 983,
/// 40613).
const DATABASE_UNAVAILABLE: [u32; 6] = [4060, 916, 976, 978, 983, 40613];

impl SourceOutage {
    /// The outage SQL Server error `code` means, if it means one.
    pub fn of_server_error(code: u32) -> Option<Self> {
        if LOGIN_REFUSED.contains(&code) {
            Some(SourceOutage::LoginFailed)
        } else if DATABASE_UNAVAILABLE.contains(&code) {
            Some(SourceOutage::DatabaseUnavailable)
        } else {
            None
        }
    }

    /// The CamelCase name a status gives it.
    pub fn reason(self) -> &'static str {
        match self {
            SourceOutage::Unreachable => "SourceUnreachable",
            SourceOutage::Tls => "TlsFailed",
            SourceOutage::LoginFailed => "LoginFailed",
            SourceOutage::DatabaseUnavailable => "DatabaseUnavailable",
            SourceOutage::NoMaxLsn => "NoMaxLsn",
        }
    }

    /// What to check, in a few words.
    pub fn remedy(self) -> &'static str {
        match self {
            SourceOutage::Unreachable => {
                "check that SQL Server runs, the connection's host and port, and the network path"
            }
            SourceOutage::Tls => {
                "check the connection's encrypt and trustServerCertificate and the server's certificate"
            }
            SourceOutage::LoginFailed => {
                "check the connection's username and the password in its Secret, and that the login is enabled"
            }
            SourceOutage::DatabaseUnavailable => {
                "check that the database is online and that the login has a user in it"
            }
            SourceOutage::NoMaxLsn => {
                "start SQL Server Agent and the database's capture job (sys.sp_cdc_start_job)"
            }
        }
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
    fn errors_of_the_whole_source_are_told_from_errors_of_one_table() {
        let io = |kind| tiberius::error::Error::Io {
            kind,
            message: "said".into(),
        };
        let sql = |source| SourceError::Sql {
            context: "the max LSN".into(),
            source,
        };
        let cases = [
            (
                SourceError::Connect {
                    address: "db:1433".into(),
                    source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
                },
                Some(SourceOutage::Unreachable),
            ),
            (
                SourceError::ConnectTimeout {
                    address: "db:1433".into(),
                    seconds: 30,
                },
                Some(SourceOutage::Unreachable),
            ),
            (
                sql(io(std::io::ErrorKind::ConnectionReset)),
                Some(SourceOutage::Unreachable),
            ),
            (
                sql(tiberius::error::Error::Tls("bad certificate".into())),
                Some(SourceOutage::Tls),
            ),
            (SourceError::NoMaxLsn, Some(SourceOutage::NoMaxLsn)),
            // One table's: its change table gone or denied, its instance's
            // own LSN, its columns and types; one session's: a deadlock.
            (
                SourceError::NoLsn("capture instance dbo_orders".into()),
                None,
            ),
            (SourceError::NotCaptured("dbo.orders".into()), None),
            (
                SourceError::UnsupportedType {
                    column: "shape".into(),
                    sql_type: "geometry".into(),
                    reason: "spatial".into(),
                },
                None,
            ),
        ];
        // SQL Server's numbers: a refused login or a closed database is
        // the source's; a missing or denied object, a deadlock, a purged
        // range are one table's or one session's.
        for (code, outage) in [
            (18456, Some(SourceOutage::LoginFailed)),
            (18470, Some(SourceOutage::LoginFailed)),
            (18487, Some(SourceOutage::LoginFailed)),
            (4060, Some(SourceOutage::DatabaseUnavailable)),
            (976, Some(SourceOutage::DatabaseUnavailable)),
            (208, None),
            (229, None),
            (1205, None),
            (313, None),
            (596, None),
        ] {
            assert_eq!(SourceOutage::of_server_error(code), outage, "{code}");
        }
        for (error, outage) in cases {
            assert_eq!(error.outage(), outage, "{error}");
        }
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
