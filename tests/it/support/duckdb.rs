//! DuckDB with its delta extension as an independent Delta reader: what a
//! user's query engine sees in our tables. Runs `py/duckdb_delta.py` with
//! the test virtualenv's Python; the extension is loaded offline from PyPI
//! packages (see that script).

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::tools;

/// How long one read may take (a cold start loads the extension).
const READ_TIMEOUT: Duration = Duration::from_secs(120);

const SCRIPT: &str = include_str!("py/duckdb_delta.py");

/// What DuckDB read from a table.
#[derive(Debug, Deserialize)]
pub struct DeltaRead {
    /// `count(*)` of the table.
    pub rows: u64,
    /// Each column with its DuckDB type (e.g. `DECIMAL(18,2)`, `TIMESTAMP`).
    pub columns: Vec<Column>,
    /// The rows of the query, if one was given; values JSON has no type for
    /// (decimals, timestamps) as text.
    pub query: Vec<Vec<serde_json::Value>>,
}

/// One column as DuckDB types it.
#[derive(Debug, Deserialize)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
}

impl DeltaRead {
    /// The DuckDB type of `name`; fails the test when there is no such column.
    pub fn column_type(&self, name: &str) -> &str {
        self.columns
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.ty.as_str())
            .unwrap_or_else(|| panic!("DuckDB sees no column {name}: {:?}", self.columns))
    }

    /// The column names in table order.
    pub fn column_names(&self) -> Vec<&str> {
        self.columns.iter().map(|c| c.name.as_str()).collect()
    }
}

/// Reads the Delta table in local directory `table`, the view `t`, and runs
/// `sql` on it when given. `None` when the test Python is missing and
/// missing tools are allowed.
pub async fn read_delta(table: &Path, sql: Option<&str>) -> Option<DeltaRead> {
    let python = tools::PYTHON.find()?;
    let mut args = vec![table.as_os_str()];
    args.extend(sql.map(OsStr::new));
    let output = tools::run_python(&python, SCRIPT, args, READ_TIMEOUT).await;
    assert!(
        output.status.success(),
        "DuckDB could not read {}: {}",
        table.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let read = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "DuckDB's answer is not the expected JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    Some(read)
}
