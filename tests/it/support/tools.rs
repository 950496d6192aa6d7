//! The external programs some integration tests drive (moto, Azurite, the
//! test virtualenv's Python with DuckDB). `scripts/test` installs them and
//! exports their paths; a test whose tool is missing fails and says so,
//! unless `MSSQL_CDC_TEST_ALLOW_MISSING_TOOLS=1` lets it pass without
//! running.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

/// Set to `1` to let tests whose tool is missing pass without running.
pub const ALLOW_MISSING_VAR: &str = "MSSQL_CDC_TEST_ALLOW_MISSING_TOOLS";

/// An external program, found through an environment variable or at the
/// place `scripts/test` installs it in this checkout.
pub struct Tool {
    /// The variable `scripts/test` exports.
    pub var: &'static str,
    /// Where `scripts/test` installs it, relative to the repository root.
    pub default: &'static str,
    /// What it is, for messages.
    pub what: &'static str,
}

/// The test virtualenv's Python (duckdb, the offline delta extension, moto).
pub const PYTHON: Tool = Tool {
    var: "MSSQL_CDC_TEST_PYTHON",
    default: ".venv/bin/python",
    what: "the test virtualenv's Python",
};

/// moto's S3 server (`moto[server]` in the test virtualenv).
pub const MOTO: Tool = Tool {
    var: "MSSQL_CDC_TEST_MOTO",
    default: ".venv/bin/moto_server",
    what: "moto_server (S3 emulator)",
};

/// Azurite's Blob service (npm `azurite` in tests/node).
pub const AZURITE: Tool = Tool {
    var: "MSSQL_CDC_TEST_AZURITE",
    default: "tests/node/node_modules/.bin/azurite-blob",
    what: "azurite-blob (Azure Blob Storage emulator)",
};

/// Prometheus's `promtool` (Debian package `prometheus`), which checks
/// the chart's alerting rules.
pub const PROMTOOL: Tool = Tool {
    var: "MSSQL_CDC_TEST_PROMTOOL",
    default: "/usr/bin/promtool",
    what: "promtool (Prometheus's rule checker)",
};

impl Tool {
    /// The program's path. `None` only when it is missing and
    /// [`ALLOW_MISSING_VAR`] is set (the caller then returns early);
    /// otherwise a missing tool fails the test with what to do.
    pub fn find(&self) -> Option<PathBuf> {
        let (path, from) = match std::env::var_os(self.var) {
            Some(value) if !value.is_empty() => (PathBuf::from(value), self.var.to_string()),
            _ => (
                Path::new(env!("CARGO_MANIFEST_DIR")).join(self.default),
                format!("the default {} ({} is unset)", self.default, self.var),
            ),
        };
        if path.is_file() {
            return Some(path);
        }
        let message = format!(
            "{} not found at {} ({from}); run scripts/test, which installs it and sets {}",
            self.what,
            path.display(),
            self.var
        );
        if std::env::var(ALLOW_MISSING_VAR).is_ok_and(|v| v == "1") {
            eprintln!("skipped: {message} ({ALLOW_MISSING_VAR}=1)");
            return None;
        }
        panic!("{message}; or set {ALLOW_MISSING_VAR}=1 to let such tests pass without running");
    }
}

/// Runs the Python `script` (its text) with `args` and returns what it
/// printed; the caller judges the exit status. Fails the test when Python
/// cannot start or `timeout` passes (the process is then killed).
pub async fn run_python<I, A>(python: &Path, script: &str, args: I, timeout: Duration) -> Output
where
    I: IntoIterator<Item = A>,
    A: AsRef<OsStr>,
{
    let args: Vec<A> = args.into_iter().collect();
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    let mut command = tokio::process::Command::new(python);
    command
        .arg("-c")
        .arg(script)
        .args(&args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(timeout, command.output())
        .await
        .unwrap_or_else(|_| panic!("Python with {shown:?} took over {timeout:?}"))
        .unwrap_or_else(|e| panic!("{} starts: {e}", python.display()))
}

/// Runs this project's binary with `args` as a user would (no `RUST_LOG`,
/// so its default log filter applies) and `envs` set, and returns what it
/// printed; the caller judges the exit status. Fails the test when the
/// binary cannot start or `timeout` passes (it is then killed).
pub async fn run_mssql_cdc<I, A>(args: I, envs: &[(&str, &str)], timeout: Duration) -> Output
where
    I: IntoIterator<Item = A>,
    A: AsRef<OsStr>,
{
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-cdc"));
    command
        .args(args)
        .envs(envs.iter().copied())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(timeout, command.output())
        .await
        .unwrap_or_else(|_| panic!("mssql-cdc took over {timeout:?}"))
        .unwrap_or_else(|e| panic!("mssql-cdc starts: {e}"))
}
