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
    /// A value did not have the type the metadata announced.
    #[error("column {column}: unexpected value {value} for type {sql_type}")]
    UnexpectedValue {
        /// The column.
        column: String,
        /// The SQL Server type name.
        sql_type: String,
        /// The value, shortened.
        value: String,
    },
    /// The read task failed; the task's own error says why.
    #[error("{0}")]
    ReadFailed(String),
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
    /// Wraps a tiberius error with what the engine was doing.
    pub fn sql(context: impl Into<String>) -> impl FnOnce(tiberius::error::Error) -> SourceError {
        let context = context.into();
        move |source| SourceError::Sql { context, source }
    }

    /// Whether retrying later may succeed (network trouble, deadlock,
    /// timeouts, server restarts), as opposed to a wrong spec or schema.
    pub fn is_transient(&self) -> bool {
        match self {
            // The capture job has not run yet: it will.
            SourceError::NoLsn(_) => true,
            SourceError::Connect { .. } | SourceError::ConnectTimeout { .. } => true,
            SourceError::Sql { source, .. } => match source {
                tiberius::error::Error::Io { .. } => true,
                tiberius::error::Error::Server(token) => {
                    // Deadlock victim, lock timeout, server busy or restarting,
                    // database in transition.
                    matches!(
                        token.code(),
                        1205 | 1222 | 40197 | 40501 | 40613 | 49918 | 49919 | 49920 | 4060 | 233
                    )
                }
                tiberius::error::Error::Tls(_) => false,
                _ => false,
            },
            _ => false,
        }
    }
}
