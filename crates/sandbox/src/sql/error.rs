//! Errors as SQL Server reports them: a number, a state, a severity class.
//!
//! The TDS layer turns each into an ERROR token unchanged, so clients see the
//! same numbers they would see from SQL Server.

use std::fmt;

/// How far an error unwinds, following SQL Server's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// The statement fails; the batch goes on (e.g. 2627 duplicate key).
    Statement,
    /// The rest of the batch is skipped (e.g. 208 invalid object, 102 syntax).
    Batch,
    /// The connection is closed after the error is sent (severity 20+).
    Connection,
    /// The client sent ATTENTION: the request stops, and the protocol layer
    /// answers with its acknowledgement instead of this error.
    Cancelled,
}

/// One SQL Server error or informational message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SqlError {
    pub number: i32,
    pub state: u8,
    /// Severity; 10 and below are informational, 11-16 user errors.
    pub class: u8,
    pub message: String,
    /// Name of the procedure the error was raised in, if any.
    pub procedure: Option<String>,
    /// 1-based line in the batch.
    pub line: u32,
    pub abort: Abort,
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Msg {}, Level {}, State {}: {}",
            self.number, self.class, self.state, self.message
        )
    }
}

impl SqlError {
    /// A user error (class 16) that ends the statement only.
    pub fn new(number: i32, message: impl Into<String>) -> Self {
        Self {
            number,
            state: 1,
            class: 16,
            message: message.into(),
            procedure: None,
            line: 1,
            abort: Abort::Statement,
        }
    }

    pub fn with_state(mut self, state: u8) -> Self {
        self.state = state;
        self
    }

    pub fn with_class(mut self, class: u8) -> Self {
        self.class = class;
        self
    }

    pub fn with_line(mut self, line: u32) -> Self {
        self.line = line;
        self
    }

    pub fn with_procedure(mut self, procedure: impl Into<String>) -> Self {
        self.procedure = Some(procedure.into());
        self
    }

    pub fn aborting_batch(mut self) -> Self {
        self.abort = Abort::Batch;
        self
    }

    /// 102: the parser stopped at `near`.
    pub fn syntax(near: &str) -> Self {
        Self::new(102, format!("Incorrect syntax near '{near}'."))
            .with_class(15)
            .aborting_batch()
    }

    /// 208: a table or view that does not exist.
    pub fn invalid_object(name: &str) -> Self {
        Self::new(208, format!("Invalid object name '{name}'.")).aborting_batch()
    }

    /// 207: a column that does not exist.
    pub fn invalid_column(name: &str) -> Self {
        Self::new(207, format!("Invalid column name '{name}'.")).aborting_batch()
    }

    /// 137: a variable used before it was declared.
    pub fn undeclared_variable(name: &str) -> Self {
        Self::new(137, format!("Must declare the scalar variable \"{name}\"."))
            .with_class(15)
            .with_state(2)
            .aborting_batch()
    }

    /// 18456: login failed. The message never says why, as in SQL Server.
    pub fn login_failed(user: &str) -> Self {
        Self::new(18456, format!("Login failed for user '{user}'."))
            .with_class(14)
            .with_state(1)
    }

    /// 40000-range stand-in for T-SQL the sandbox does not implement: names
    /// the construct so nobody mistakes it for success.
    pub fn unsupported(construct: &str) -> Self {
        Self::new(
            40517,
            format!("Keyword or statement option '{construct}' is not supported in this version of SQL Server."),
        )
        .aborting_batch()
    }

    /// 245/8114-style conversion failures.
    pub fn conversion(number: i32, message: impl Into<String>) -> Self {
        Self::new(number, message).aborting_batch()
    }

    /// 8134.
    pub fn divide_by_zero() -> Self {
        Self::new(8134, "Divide by zero error encountered.")
    }

    /// The marker for work stopped because the client sent ATTENTION.
    pub fn cancelled() -> Self {
        let mut error = Self::new(0, "Query cancelled by the client.").with_class(0);
        error.abort = Abort::Cancelled;
        error
    }

    /// Errors SQL Server raises while binding names, before it reads a
    /// row: they must surface even when a table is empty.
    pub fn is_binding(&self) -> bool {
        matches!(
            self.number,
            137 | 174 | 189 | 195 | 207 | 208 | 209 | 2715 | 4104 | 4108 | 4121 | 8120
        )
    }

    pub fn is_cancelled(&self) -> bool {
        self.abort == Abort::Cancelled
    }
}

/// Shorthand for results that fail the SQL Server way.
pub type SqlResult<T> = Result<T, SqlError>;
